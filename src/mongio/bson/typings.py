"""Type aliases for annotations, under the module name and names PyMongo's ``bson.typings`` has."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar, Union

if TYPE_CHECKING:
    from array import array
    from mmap import mmap

    from mongio.bson.raw import RawBSONDocument

__all__: list[str] = []

_DocumentOut = Union[MutableMapping[str, Any], "RawBSONDocument"]
"""What decoding can return: a mutable mapping of the document class, or a raw document."""

_DocumentType = TypeVar("_DocumentType", bound=Mapping[str, Any])
"""A document class, as a type variable."""

_DocumentTypeArg = TypeVar("_DocumentTypeArg", bound=Mapping[str, Any])
"""A second document class type variable, for functions that take one and return another."""

_ReadableBuffer = Union[bytes, memoryview, "mmap", "array"]  # type: ignore[type-arg]
"""Buffers the decoder reads."""
