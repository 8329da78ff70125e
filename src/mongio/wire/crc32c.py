"""CRC-32C (Castagnoli), the checksum an OP_MSG may end with.

Servers only add it on connections between cluster members, never to drivers in practice, so this plain table
implementation is only ever run on the rare message that carries one; the driver never sends checksums.
"""

from __future__ import annotations

__all__ = ["crc32c"]

_POLYNOMIAL = 0x82F63B78  # the reflected Castagnoli polynomial


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The CRC-32C of ``data``; pass a previous result as ``crc`` to continue over several pieces."""
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
