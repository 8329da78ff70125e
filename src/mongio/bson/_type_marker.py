"""The ``_type_marker`` convention: a BSON value type says which BSON type it is with an int class
attribute (PyMongo's numbering, which mongio's types share: ObjectId 7, Binary 5, DatetimeMS 9, Regex 11,
Code 13, Timestamp 17, Int64 18, Decimal128 19, DBRef 100, RawBSONDocument 101, MaxKey 127, MinKey 255).

The encoder writes marked values of other libraries (PyMongo's ``bson``) by it, and mongio's types compare
equal to other libraries' values of the same BSON type and value by it, without importing those libraries.
"""

from __future__ import annotations

__all__ = ["type_marker"]


def type_marker(value: object) -> int | None:
    """``value``'s ``_type_marker`` when it is an int, else None (an object whose ``__getattr__`` answers
    every name with something else is not taken for a marked value)."""
    marker = getattr(value, "_type_marker", None)
    return marker if type(marker) is int else None
