"""Scale-out: stream files as Dask DataFrames (:mod:`nbkit.dask`) and Parquet export (:mod:`.parquet`).

Dask, distributed and pyarrow are the optional extra ``scale``: ``pip install -e '.[scale]'`` in a clone,
or ``pip install 'nbkit-ruststream[scale]'`` (:data:`DISTRIBUTION`: the name this project is published
under; the import name stays ``nbkit``). This package imports none of them itself; :func:`require`
imports one and, when it is missing, raises an ImportError whose message is :func:`install_hint`.

- :mod:`nbkit.scale.partitions`: pure (pandas + nbkit): beacon-aligned byte ranges, one range read
  into ``nbkit.read_stream``'s typed frame.
- :mod:`nbkit.scale.dask_reader`: ``read_stream`` returning a ``dask.dataframe.DataFrame``.
- :mod:`nbkit.scale.heap`: a Dask worker process's heap set up once (glibc's mmap threshold), so that
  reading partitions reuses memory instead of faulting in fresh pages.
- :mod:`nbkit.scale.parquet`: ``to_parquet`` / ``read_parquet``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from nbkit.errors import DISTRIBUTION, MissingExtraError, install_hint

__all__ = ["DISTRIBUTION", "EXTRA", "install_hint", "require"]

#: The optional extra that brings Dask, distributed and pyarrow.
EXTRA = "scale"


def require(module: str, *, feature: str) -> ModuleType:
    """Import ``module`` or raise a MissingExtraError (an ImportError) saying which extra to install for ``feature``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{feature} needs {top!r}, which is not installed; install nbkit's optional extra {EXTRA!r} "
            f"(Dask, distributed and pyarrow): {install_hint(EXTRA)}"
        ) from exc
