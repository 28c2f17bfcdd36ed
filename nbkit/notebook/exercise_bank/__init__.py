"""The lessons' exercises, one module per lesson (``lesson00`` ... ``lesson09``).

Each module builds its :class:`~nbkit.notebook.exercises.Exercise` objects and registers them with
:func:`~nbkit.notebook.exercises.register`; :mod:`nbkit.notebook.exercises` imports every module here the
first time an exercise is looked up, so a new lesson adds a module and nothing else. :mod:`.runs` holds the
small services the checks run to recompute their answers.
"""

__all__: list[str] = []
