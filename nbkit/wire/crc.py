"""CRC-16/CDMA2000 at C speed (fastcrc), for payload checksums and beacons' running checksums.

fastcrc rather than a table in Python: the checksum is computed for every frame read or written, and
fastcrc's call costs ~0.1 µs for a 200-byte payload (bench/README.md)."""

from __future__ import annotations

from fastcrc import crc16 as _crc16

__all__ = ["CRC_INIT", "crc16"]

CRC_INIT = 0xFFFF

#: ``crc16(data)`` -> the CRC-16/CDMA2000 of ``data`` (poly 0xC867, init 0xFFFF, no reflection);
#: ``data`` is any bytes-like object.
crc16 = _crc16.cdma2000
