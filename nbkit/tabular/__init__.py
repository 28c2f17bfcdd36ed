"""Messages as rows: the typed DataFrame every reader of stream files and pipe captures builds, and what is
worked out from those rows.

A layer of its own, between the runtime and the notebook (wire -> transport -> runtime -> tabular ->
notebook -> scale/cli), so that ``read_stream`` / ``read_pipe`` (:mod:`nbkit.tabular.frames`), the Dask
reader and the Parquet export (:mod:`nbkit.scale`) share one schema and one builder through public names:

- :mod:`nbkit.tabular.builder`: :data:`FRAME_COLUMNS`, :data:`PAYLOAD_MODES`, :class:`FrameBuilder`
  (columns in, the typed frame out), :func:`payload_separator` (how a reader should lay out the
  payload buffer for a mode) and :func:`in_window` (the time filter);
- :mod:`nbkit.tabular.modes`: the ``payload=`` modes as objects (:func:`~nbkit.tabular.modes.payload_mode`):
  each one's row values, ``payload`` column and dtype, Arrow column and Parquet conversion;
- :mod:`nbkit.tabular.payloads`: payload decoding per mode and the ``payload.<field>`` columns of JSON
  payloads (:func:`expand_json`, :func:`json_values`, :func:`json_field_columns`, :func:`with_fields`), the
  JSON text column of ``payload="json"`` (:func:`json_text_column`), the Arrow binary column of ``payload="bytes"``
  (:func:`bytes_column`, :data:`BYTES_DTYPE`);
- :mod:`nbkit.tabular.selection`: :class:`Selection` / :func:`selection`, the read options checked once;
- :mod:`nbkit.tabular.frames`: the readers themselves (``read_stream``, ``read_arrow``, ``read_pipe``,
  ``concat_frames``), imported from :mod:`nbkit`;
- :mod:`nbkit.tabular.lineage`: each message's history from a messages frame alone (``lineage``,
  ``messages_table``, ``summarize``);
- :mod:`nbkit.tabular.events`: the events frame (``events_frame``, imported from :mod:`nbkit`), its columns
  and dtypes the events schema's (:data:`nbkit.runtime.events.EVENT_SCHEMA`);
- :mod:`nbkit.tabular.timeline_steps`: the steps frame ``nbkit.plot.timeline`` draws (one row per delivery,
  in lanes), read from an events frame or a lineage frame; imported by its module name, not re-exported here.

Data only: drawing and widgets are in :mod:`nbkit.notebook`.

Importing it loads pandas (the package ``nbkit`` itself does not).
"""

from __future__ import annotations

from nbkit.tabular.builder import FRAME_COLUMNS, PAYLOAD_MODES, FrameBuilder, PayloadMode, in_window, payload_separator
from nbkit.tabular.payloads import (
    BYTES_DTYPE,
    bytes_column,
    expand_json,
    json_field_columns,
    json_text_column,
    json_value,
    json_values,
    with_fields,
)
from nbkit.tabular.selection import Selection, selection

__all__ = [
    "BYTES_DTYPE",
    "FRAME_COLUMNS",
    "PAYLOAD_MODES",
    "FrameBuilder",
    "PayloadMode",
    "Selection",
    "bytes_column",
    "expand_json",
    "in_window",
    "json_field_columns",
    "json_text_column",
    "json_value",
    "json_values",
    "payload_separator",
    "selection",
    "with_fields",
]
