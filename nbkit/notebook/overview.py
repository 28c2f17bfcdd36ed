"""One overview of a stream file per stream key: originals, retry copies, dead letters and the time range.

The table ``nbkit info`` prints, as a DataFrame (:func:`overview`), built from the one summary of a file
(:func:`nbkit.transport.file_info.summarize`): the time range is by value, with records whose header
fields look damaged left out, and ``attrs`` carry the file's damage and suspect records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pandas as pd

from nbkit.transport.file_info import summarize as summarize_file

__all__ = ["overview"]


def overview(path: str | os.PathLike, *, dead_letter_keys: Iterable[str] | None = None) -> pd.DataFrame:
    """Per stream key: messages, originals, retry copies, dead letters, sequence and time range.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file (read once, damage skipped).
    dead_letter_keys : iterable of str, optional
        The declared dead-letter keys (default: keys named like one, such as ``orders.dead``).

    Returns
    -------
    DataFrame
        One row per (stream key, shard), in order of first appearance: ``stream_key``, ``shard_id``,
        ``messages``, ``originals``, ``retry_copies``, ``dead_letters``, ``first_seq``, ``last_seq``,
        ``earliest``, ``latest`` (UTC) and ``suspect`` (records whose header fields look damaged).
        ``attrs["damaged"]`` lists the damaged regions with what each key lost there,
        ``attrs["suspect"]`` the suspect records, ``attrs["time_range"]`` the file's time range.

    See Also
    --------
    nbkit.read_stream : The messages themselves.
    nbkit.lineage : One history per message, copies linked to what they copy.

    Examples
    --------
    >>> from nbkit import StreamWriter, overview
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"{}", timestamp_ms=1_700_000_000_000)
    ...     _ = writer.write("orders.dead", b"{}", timestamp_ms=1_700_000_001_000)
    >>> overview("orders.ss")[["stream_key", "originals", "retry_copies", "dead_letters"]]
        stream_key  originals  retry_copies  dead_letters
    0       orders          1             0             0
    1  orders.dead          0             0             1
    """
    summary = summarize_file(path, dead_letter_keys=dead_letter_keys)
    rows = [
        {
            "stream_key": st.stream_key,
            "shard_id": st.shard_id,
            "messages": st.count,
            "originals": st.originals,
            "retry_copies": st.retry_copies,
            "dead_letters": st.dead_letters,
            "first_seq": st.first_seq,
            "last_seq": st.last_seq,
            "earliest": pd.Timestamp(st.first_timestamp_ms, unit="ms", tz="UTC"),
            "latest": pd.Timestamp(st.last_timestamp_ms, unit="ms", tz="UTC"),
            "suspect": st.suspect,
        }
        for st in summary.streams
    ]
    frame = pd.DataFrame(rows, columns=list(_COLUMNS))
    for name, dtype in _COLUMNS.items():
        if dtype is not None:
            frame[name] = frame[name].astype(dtype)
    doc = summary.to_dict()
    frame.attrs.update(damaged=doc["damaged"], suspect=doc["suspect"], time_range=doc["time_range"])
    return frame


#: The columns in order, each with the dtype it is given after the frame is built (None: as built).
_COLUMNS: dict[str, str | None] = {
    "stream_key": None,
    "shard_id": "Int64",
    "messages": "Int64",
    "originals": "Int64",
    "retry_copies": "Int64",
    "dead_letters": "Int64",
    "first_seq": "Int64",
    "last_seq": "Int64",
    "earliest": None,
    "latest": None,
    "suspect": "Int64",
}
