"""SON: an ordered ``dict`` subclass kept for code ported from other drivers.

Plain ``dict`` keeps insertion order, so new code does not need :class:`SON`; it exists so that code written
against PyMongo's ``bson.son.SON`` (for example command documents whose first key matters) ports unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["SON"]

_K = TypeVar("_K")
_V = TypeVar("_V")


class SON(dict[_K, _V]):
    """A ``dict`` whose equality with another :class:`SON` also compares key order."""

    def __init__(self, data: Mapping[_K, _V] | Iterable[tuple[_K, _V]] | None = None, **kwargs: Any) -> None:
        super().__init__()
        if data is not None:
            self.update(data)
        self.update(kwargs)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return "SON([{}])".format(", ".join(f"({k!r}, {v!r})" for k, v in self.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SON):
            return len(self) == len(other) and list(self.items()) == list(other.items())
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def copy(self) -> SON[_K, _V]:
        """A shallow copy, as a SON in the same key order."""
        return SON(self)

    def to_dict(self) -> dict[_K, Any]:
        """A plain ``dict`` copy, converting nested SON instances (also inside lists) recursively."""

        def convert(value: Any) -> Any:
            if isinstance(value, SON):
                return {k: convert(v) for k, v in value.items()}
            if isinstance(value, list):
                return [convert(v) for v in value]
            return value

        return {k: convert(v) for k, v in self.items()}
