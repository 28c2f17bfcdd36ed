"""Stream files as Dask DataFrames: ``nbkit.dask.read_stream`` (the ``scale`` extra).

``pip install -e '.[scale]'`` in a clone (or ``pip install 'nbkit-ruststream[scale]'``) brings Dask,
distributed and pyarrow; without them importing this module raises an ImportError that says so. How
partitions are cut, the index and divisions, and the json columns: :mod:`nbkit.scale.dask_reader`.

>>> import nbkit.dask
>>> ddf = nbkit.dask.read_stream("big.ss", blocksize="64MiB")           # doctest: +SKIP
>>> logs = nbkit.dask.read_stream("logs/*.ss", include_path_column=True)  # doctest: +SKIP
>>> ddf.groupby("stream_key", observed=True).size().compute()           # doctest: +SKIP
>>> nbkit.plot.dashboard(nbkit.dask.message_counts(ddf))                # doctest: +SKIP

:func:`message_counts` counts the messages on the workers, so a dashboard of a file larger than memory
brings back only the counts.
"""

from __future__ import annotations

from nbkit.scale.counts import message_counts
from nbkit.scale.dask_reader import plan, read_stream

__all__ = ["message_counts", "plan", "read_stream"]
