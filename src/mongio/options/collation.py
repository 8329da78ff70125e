"""Collations: how strings compare and sort, as the server's ``collation`` document.

:class:`Collation` and the constant holders take PyMongo's names and arguments (``pymongo.collation``);
every method that accepts a collation takes either a :class:`Collation` or the document itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "Collation",
    "CollationAlternate",
    "CollationCaseFirst",
    "CollationMaxVariable",
    "CollationStrength",
]


class CollationStrength:
    """The levels of comparison (``strength``)."""

    PRIMARY = 1
    """Base characters only."""
    SECONDARY = 2
    """Base characters and diacritics."""
    TERTIARY = 3
    """Base characters, diacritics and case (the server's default)."""
    QUATERNARY = 4
    """Also tells apart ignorable characters when ``alternate`` is ``shifted``."""
    IDENTICAL = 5
    """Also compares code points as a tie breaker."""


class CollationAlternate:
    """Whether whitespace and punctuation count as base characters (``alternate``)."""

    NON_IGNORABLE = "non-ignorable"
    SHIFTED = "shifted"


class CollationMaxVariable:
    """Which characters ``alternate: shifted`` ignores (``maxVariable``)."""

    PUNCT = "punct"
    SPACE = "space"


class CollationCaseFirst:
    """Whether upper or lower case sorts first (``caseFirst``)."""

    UPPER = "upper"
    LOWER = "lower"
    OFF = "off"


# The settings that must be booleans when given.
_BOOLEAN_SETTINGS = ("caseLevel", "numericOrdering", "normalization", "backwards")


class Collation:
    """A collation for a locale (``"en_US"``, ``"fr"``, ``"simple"``...); every other setting is left to the
    server unless given. Unknown keyword arguments go into the document as they are, for settings newer
    than this class. ``document`` is what is sent."""

    __slots__ = ("__document",)

    def __init__(
        self,
        locale: str,
        caseLevel: bool | None = None,
        caseFirst: str | None = None,
        strength: int | None = None,
        numericOrdering: bool | None = None,
        alternate: str | None = None,
        maxVariable: str | None = None,
        normalization: bool | None = None,
        backwards: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(locale, str):
            raise TypeError(f"Collation locale must be a str, not {type(locale).__name__}")
        settings: dict[str, Any] = {
            "caseLevel": caseLevel,
            "caseFirst": caseFirst,
            "strength": strength,
            "numericOrdering": numericOrdering,
            "alternate": alternate,
            "maxVariable": maxVariable,
            "normalization": normalization,
            "backwards": backwards,
        }
        for name in _BOOLEAN_SETTINGS:
            if settings[name] is not None and not isinstance(settings[name], bool):
                raise TypeError(f"Collation {name} must be True or False, not {settings[name]!r}")
        if strength is not None and (isinstance(strength, bool) or not isinstance(strength, int)):
            raise TypeError(f"Collation strength must be an int, not {strength!r}")
        document: dict[str, Any] = {"locale": locale}
        document.update((name, value) for name, value in settings.items() if value is not None)
        document.update(kwargs)
        self.__document = document

    @property
    def document(self) -> dict[str, Any]:
        """The ``collation`` document (a copy)."""
        return dict(self.__document)

    def __repr__(self) -> str:
        settings = ", ".join(f"{name}={value!r}" for name, value in self.__document.items())
        return f"Collation({settings})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Collation):
            return self.__document == other.__document
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self.__document.items())))


def collation_document(value: Collation | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The document to send for a collation given as a :class:`Collation` (or any object with a
    ``document``, as PyMongo's is) or as a mapping."""
    if value is None or isinstance(value, Mapping):
        return value
    document = getattr(value, "document", None)
    if isinstance(document, Mapping):
        return document
    raise TypeError(f"collation must be a Collation or a mapping, not {type(value).__name__}")
