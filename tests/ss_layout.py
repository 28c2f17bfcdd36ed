"""A reference layout of ``.ss`` files written from the spec (§3-§6) without nbkit's writer.

Comparing it with :class:`StreamWriter` output checks the writer, and it can lay out intervals the
writer refuses (128, 300, ...) to exercise the reader. Shared by tests/conftest.py and the
reliability fuzzers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from nbkit.wire.crc import crc16

#: (stream_key, shard_id, seq, timestamp_ms, payload)
Msg = tuple[str, int, int, int, bytes]


def running_update(running: int, payload_crc: int) -> int:
    """Feed one message's payload CRC (as 2 big-endian bytes) into a stream's running checksum (§6)."""
    return crc16(payload_crc.to_bytes(2, "big"), running)


def _num_markers(interval: int) -> int:
    return 0 if interval < 7 else min(255, (interval - 7) // 282) // 2


def layout_ss(file_name: str, created_at_ms: int, interval: int, messages: Iterable[Msg]) -> bytes:
    """Lay out a whole ``.ss`` file the way the spec says a fresh upstream writer does (any I >= 128)."""
    name = file_name.encode()
    head = b"Ss\x01" + bytes([len(name)]) + name + struct.pack(">QI", created_at_ms, interval)
    out = bytearray(head + bytes(127 - len(head)) + b"\r")
    streams: dict[tuple[str, int], list[int]] = {}  # -> [seq, ts, running]
    beacon_count = 0

    def beacon(remaining: int) -> bytes:
        nonlocal beacon_count
        order = sorted(streams, key=lambda ks: (ks[0].encode(), ks[1]))
        take = min(len(order), _num_markers(interval))
        parts = [b"\r", struct.pack(">IB", remaining, take)]
        for j in range(take):
            key, shard = order[(beacon_count + j) % len(order)]
            seq, ts, running = streams[(key, shard)]
            parts += [bytes([len(key)]), key.encode(), struct.pack(">QQQH", shard, seq, ts, running)]
        beacon_count += take
        return b"".join(parts) + b"\r"

    if len(out) % interval == 0:
        out += beacon(0)
    for key, shard, seq, ts, payload in messages:
        crc = crc16(payload)
        frame = (
            bytes([len(key)])
            + key.encode()
            + struct.pack(">QQQI", shard, seq, ts, len(payload))
            + payload
            + struct.pack(">H", crc)
            + b"\r"
        )
        st = streams.setdefault((key, shard), [seq, ts, 0xFFFF])
        st[0], st[1], st[2] = max(st[0], seq), max(st[1], ts), running_update(st[2], crc)
        pos = 0
        while pos < len(frame):
            take = min(len(frame) - pos, interval - len(out) % interval)
            out += frame[pos : pos + take]
            pos += take
            if len(out) % interval == 0:
                out += beacon(len(frame) - pos)
    return bytes(out)
