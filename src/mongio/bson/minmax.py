"""The BSON MinKey and MaxKey types, which compare below and above every other BSON value on the server."""

from __future__ import annotations

from typing import Any

from mongio.bson._type_marker import type_marker

__all__ = ["MaxKey", "MinKey"]


class MinKey:
    """The BSON MinKey (type 0xFF). All instances are equal and sort below everything else."""

    __slots__ = ()

    _type_marker = 255

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MinKey) or type_marker(other) == 255

    def __hash__(self) -> int:
        return hash(self._type_marker)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __le__(self, other: Any) -> bool:
        return True

    def __lt__(self, other: Any) -> bool:
        return not (isinstance(other, MinKey) or type_marker(other) == 255)

    def __ge__(self, other: Any) -> bool:
        return isinstance(other, MinKey) or type_marker(other) == 255

    def __gt__(self, other: Any) -> bool:
        return False

    def __repr__(self) -> str:
        return "MinKey()"


class MaxKey:
    """The BSON MaxKey (type 0x7F). All instances are equal and sort above everything else."""

    __slots__ = ()

    _type_marker = 127

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MaxKey) or type_marker(other) == 127

    def __hash__(self) -> int:
        return hash(self._type_marker)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __le__(self, other: Any) -> bool:
        return isinstance(other, MaxKey) or type_marker(other) == 127

    def __lt__(self, other: Any) -> bool:
        return False

    def __ge__(self, other: Any) -> bool:
        return True

    def __gt__(self, other: Any) -> bool:
        return not (isinstance(other, MaxKey) or type_marker(other) == 127)

    def __repr__(self) -> str:
        return "MaxKey()"
