"""The format's bounds and names that both twins of the wire code use, in a module with no imports.

The compiled core (``nbkit.wire._speedups``, ``nbkit.transport._writer``) is imported while
:mod:`nbkit.wire.ssformat` and :mod:`nbkit.wire.envelope` are still loading (:mod:`nbkit.wire.core` picks
the twins), so the constants both need live here, once; those modules re-export them.
"""

from __future__ import annotations

__all__ = ["MAX_PAYLOAD", "MAX_TIMESTAMP_MS", "SEQUENCE_HEADER"]

#: Largest timestamp the Rust reader accepts: 9999-12-31T23:59:59.999Z in ms.
MAX_TIMESTAMP_MS = 253_402_300_799_999
#: Largest payload a frame holds: its size field is 32 bits.
MAX_PAYLOAD = (1 << 32) - 1
#: The header the transport adds to every delivery: the message's sequence number in its stream.
SEQUENCE_HEADER = "stream-sequence"
