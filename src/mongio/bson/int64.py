"""The BSON 64-bit integer type."""

from __future__ import annotations

__all__ = ["Int64"]


class Int64(int):
    """An ``int`` that always encodes as a BSON int64 (type 0x12).

    A plain ``int`` encodes as int32 when it fits and as int64 otherwise; decoding a BSON int64 returns an
    :class:`Int64`, so a document read from the server is written back with the same field types.
    """

    __slots__ = ()

    _type_marker = 18

    def __repr__(self) -> str:
        return f"Int64({int(self)})"

    # The digits, as for an int (and PyMongo's Int64): repr alone names the class.
    __str__ = int.__repr__

    def __getstate__(self) -> int:
        return int(self)

    def __setstate__(self, state: int) -> None:
        pass
