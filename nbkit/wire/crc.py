"""CRC-16/CDMA2000 at C speed (anycrc), for payload checksums and beacons' running checksums."""

from __future__ import annotations

import anycrc

_MODEL = anycrc.Model("CRC16-CDMA2000")
CRC_INIT = 0xFFFF

#: ``crc16(data)`` -> the CRC-16/CDMA2000 of ``data`` (poly 0xC867, init 0xFFFF, no reflection).
crc16 = _MODEL.calc


def running_update(running: int, payload_crc: int) -> int:
    """Feed one message's payload CRC (as 2 big-endian bytes) into a stream's running checksum."""
    return _MODEL.calc(payload_crc.to_bytes(2, "big"), running)
