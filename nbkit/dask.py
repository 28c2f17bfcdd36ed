"""Stream files as Dask DataFrames: ``nbkit.dask.read_stream`` (the ``scale`` extra).

``pip install -e '.[scale]'`` in a clone (or ``pip install 'nbkit-ruststream[scale]'``) brings Dask,
distributed and pyarrow; without them importing this module raises an ImportError that says so. How
partitions are cut, the index and divisions, and the json columns: :mod:`nbkit.scale.dask_reader`.

>>> import nbkit.dask
>>> ddf = nbkit.dask.read_stream("big.ss", partition_size="64MiB")      # doctest: +SKIP
>>> ddf.groupby("stream_key", observed=True).size().compute()           # doctest: +SKIP
"""

from __future__ import annotations

from nbkit.scale.dask_reader import plan, read_stream

__all__ = ["plan", "read_stream"]
