"""DBRef: a conventional embedded document ``{"$ref": collection, "$id": id, "$db": database, ...}``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.bson._type_marker import type_marker
from mongio.bson.son import SON

__all__ = ["DBRef"]


class DBRef:
    """A reference to a document in another collection (and optionally another database).

    Encodes as ``$ref``, ``$id``, then ``$db`` when set, then any extra fields in their order. Decoding turns
    an embedded document with a string ``$ref``, an ``$id`` and (if present) a string ``$db`` into a
    :class:`DBRef`; any other document, however similar, stays a document. Extra fields are readable as
    attributes and through :meth:`as_doc`.
    """

    __slots__ = ("__collection", "__database", "__id", "__kwargs")

    _type_marker = 100

    def __init__(
        self,
        collection: str,
        id: Any,
        database: str | None = None,
        _extra: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(collection, str):
            raise TypeError(f"DBRef collection must be a str, not {type(collection).__name__}")
        if database is not None and not isinstance(database, str):
            raise TypeError(f"DBRef database must be a str or None, not {type(database).__name__}")
        self.__collection = collection
        self.__id = id
        self.__database = database
        extra: dict[str, Any] = dict(_extra) if _extra else {}
        extra.update(kwargs)
        self.__kwargs = extra

    @property
    def collection(self) -> str:
        """The referenced collection's name (``$ref``)."""
        return self.__collection

    @property
    def id(self) -> Any:
        """The referenced document's ``_id`` (``$id``)."""
        return self.__id

    @property
    def database(self) -> str | None:
        """The referenced database's name (``$db``), or None for the referring document's database."""
        return self.__database

    @property
    def extra(self) -> dict[str, Any]:
        """Fields beyond ``$ref``, ``$id`` and ``$db``, in their order."""
        return dict(self.__kwargs)

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__kwargs[key]
        except KeyError:
            raise AttributeError(key) from None

    def as_doc(self) -> SON[str, Any]:
        """The document this reference encodes as, fields in the DBRef specification's order."""
        doc: SON[str, Any] = SON([("$ref", self.__collection), ("$id", self.__id)])
        if self.__database is not None:
            doc["$db"] = self.__database
        doc.update(self.__kwargs)
        return doc

    def __getstate__(self) -> tuple[str, Any, str | None, dict[str, Any]]:
        return (self.__collection, self.__id, self.__database, self.__kwargs)

    def __setstate__(self, state: tuple[str, Any, str | None, dict[str, Any]]) -> None:
        self.__collection, self.__id, self.__database, self.__kwargs = state

    def _key(self) -> tuple[Any, ...]:
        return (self.__collection, self.__id, self.__database, self.__kwargs)

    def __eq__(self, other: object) -> bool:
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() == key

    def __ne__(self, other: object) -> bool:
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() != key

    def __hash__(self) -> int:
        # PyMongo's formula, so equal references of either library are one dict key.
        return hash((self.__collection, self.__id, self.__database, tuple(sorted(self.__kwargs.items()))))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.__kwargs.items())
        database = f", {self.__database!r}" if self.__database is not None else ""
        return f"DBRef({self.__collection!r}, {self.__id!r}{database}{extra})"


def _key_of(value: object) -> tuple[Any, ...] | None:
    """``(collection, id, database, extra fields)`` of a DBRef of mongio or of another library following
    the ``_type_marker`` convention (PyMongo's, whose extra fields are read from its public ``as_doc()``), or
    None for anything else."""
    if isinstance(value, DBRef):
        return value._key()
    if type_marker(value) != DBRef._type_marker:
        return None
    as_doc = getattr(value, "as_doc", None)
    doc = as_doc() if callable(as_doc) else None
    if not isinstance(doc, Mapping):
        return None
    extra = {k: v for k, v in doc.items() if k not in ("$ref", "$id", "$db")}
    return (
        getattr(value, "collection", None),
        getattr(value, "id", None),
        getattr(value, "database", None),
        extra,
    )
