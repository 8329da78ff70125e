"""BSON JavaScript code (type 0x0D), optionally with a scope document (type 0x0F)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.bson._type_marker import type_marker

__all__ = ["Code"]


class Code(str):
    """JavaScript code, a ``str`` with an optional ``scope`` mapping of variables.

    Without a scope it encodes as BSON code (0x0D); with one (even empty) as code with scope (0x0F).
    Keyword arguments are merged into the scope.
    """

    _type_marker = 13
    __scope: Mapping[str, Any] | None

    def __new__(cls, code: str | bytes, scope: Mapping[str, Any] | None = None, **kwargs: Any) -> Code:
        if isinstance(code, bytes):
            code = code.decode("utf-8")
        if not isinstance(code, str):
            raise TypeError(f"Code takes a str, not {type(code).__name__}")
        self = str.__new__(cls, code)
        if scope is not None and not isinstance(scope, Mapping):
            raise TypeError(f"Code scope must be a mapping, not {type(scope).__name__}")
        inherited = code.scope if isinstance(code, Code) else None
        if inherited is None and not kwargs:
            # Kept as given, so a decoded scope stays an instance of the decoder's document_class.
            self.__scope = scope
        else:
            self.__scope = {**(inherited or {}), **(scope or {}), **kwargs}
        return self

    @classmethod
    def _from_decoded(cls, code: str, scope: Mapping[str, Any] | None) -> Code:
        # The decoder's fast path: both parts come straight from BSON, so there is nothing to check or merge.
        self = str.__new__(cls, code)
        self.__scope = scope
        return self

    @property
    def scope(self) -> Mapping[str, Any] | None:
        """The scope mapping, or None for plain code."""
        return self.__scope

    def __getnewargs__(self) -> tuple[str, Mapping[str, Any] | None]:  # type: ignore[override]
        return str(self), self.__scope

    def __repr__(self) -> str:
        return f"Code({str.__repr__(self)}, {self.__scope!r})"

    def __eq__(self, other: object) -> bool:
        # Another library's code (PyMongo's) with the same text and scope is the same BSON value.
        if isinstance(other, Code) or (isinstance(other, str) and type_marker(other) == 13):
            return (self.__scope, str(self)) == (getattr(other, "scope", None), str(other))
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__
