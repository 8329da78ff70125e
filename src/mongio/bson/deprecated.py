"""Deprecated BSON types kept so that every document round-trips: DBPointer (0x0C), Symbol (0x0E), Undefined (0x06).

New data should not use them; they decode to these classes so that re-encoding writes the same bytes.
"""

from __future__ import annotations

from typing import Any

from mongio.bson.objectid import ObjectId

__all__ = ["DBPointer", "Symbol", "Undefined"]


class DBPointer:
    """The deprecated DBPointer (0x0C): a namespace string and an ObjectId. Prefer DBRef."""

    __slots__ = ("__id", "__namespace")

    _type_marker = 12

    def __init__(self, namespace: str, id: ObjectId) -> None:
        if not isinstance(namespace, str):
            raise TypeError(f"DBPointer namespace must be a str, not {type(namespace).__name__}")
        if not isinstance(id, ObjectId):
            raise TypeError(f"DBPointer id must be an ObjectId, not {type(id).__name__}")
        self.__namespace = namespace
        self.__id = id

    @property
    def namespace(self) -> str:
        """The ``database.collection`` the pointer refers to."""
        return self.__namespace

    @property
    def id(self) -> ObjectId:
        """The referenced document's ObjectId."""
        return self.__id

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBPointer):
            return (self.__namespace, self.__id) == (other.namespace, other.id)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.__namespace, self.__id))

    def __getstate__(self) -> tuple[str, ObjectId]:
        return (self.__namespace, self.__id)

    def __setstate__(self, state: tuple[str, ObjectId]) -> None:
        self.__namespace, self.__id = state

    def __repr__(self) -> str:
        return f"DBPointer({self.__namespace!r}, {self.__id!r})"


class Symbol(str):
    """The deprecated BSON symbol (0x0E): a string that re-encodes as a symbol."""

    __slots__ = ()

    _type_marker = 14

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"

    def __eq__(self, other: object) -> bool:
        # Not equal to the same text as a plain str: the two encode differently.
        return isinstance(other, Symbol) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


class Undefined:
    """The deprecated BSON undefined value (0x06). All instances are equal."""

    __slots__ = ()

    _type_marker = 6

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Undefined)

    def __hash__(self) -> int:
        return hash(Undefined)

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "Undefined()"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Undefined, ())
