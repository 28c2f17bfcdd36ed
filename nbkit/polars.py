"""Stream files as lazy polars frames: ``nbkit.polars.scan_stream`` (polars comes with the ``arrow`` extra).

``pip install -e '.[arrow]'`` in a clone (or ``pip install 'nbkit-ruststream[arrow]'``) brings pyarrow and
polars; without polars, ``scan_stream`` raises an ImportError that says so. What a query's filter and column
choice save: :mod:`nbkit.tabular.polars_scan`.

>>> import polars as pl
>>> from nbkit.polars import scan_stream
>>> lf = scan_stream("big.ss")                                                  # doctest: +SKIP
>>> lf.filter(pl.col("stream_key") == "orders").select("seq", "payload").collect()  # doctest: +SKIP
"""

from __future__ import annotations

from nbkit.tabular.polars_scan import scan_stream

__all__ = ["scan_stream"]
