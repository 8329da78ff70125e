"""BSON regular expressions (type 0x0B): a pattern and its option letters, kept as MongoDB reads them."""

from __future__ import annotations

import re
from typing import Any, Final

from mongio.bson._type_marker import type_marker
from mongio.bson.errors import InvalidStringData

__all__ = ["Regex", "str_flags_to_int"]

# The BSON option letters that have a Python ``re`` counterpart. MongoDB also knows others (e.g. "u"),
# which are kept as letters but have no flag here.
_FLAG_LETTERS: Final = (
    (re.IGNORECASE, "i"),
    (re.LOCALE, "l"),
    (re.MULTILINE, "m"),
    (re.DOTALL, "s"),
    (re.UNICODE, "u"),
    (re.VERBOSE, "x"),
)


def flags_to_letters(flags: int) -> str:
    """BSON option letters for an int of ``re`` flags, in alphabetical order."""
    return "".join(letter for flag, letter in _FLAG_LETTERS if flags & flag)


def str_flags_to_int(str_flags: str) -> int:
    """An int of ``re`` flags for BSON option letters (letters without a Python flag are ignored)."""
    return _letters_to_flags(str_flags)


def _letters_to_flags(letters: str) -> int:
    flags = 0
    for flag, letter in _FLAG_LETTERS:
        if letter in letters:
            flags |= flag
    return flags


class Regex:
    """A BSON regular expression, which may use syntax Python's ``re`` does not accept.

    ``flags`` holds the BSON option letters exactly as given or decoded (an int of ``re`` flags is converted
    to letters); encoding writes them sorted, as BSON requires. A NUL character in the pattern or the options
    raises :class:`~mongio.bson.errors.InvalidStringData`, since BSON stores both as C strings.
    """

    __slots__ = ("flags", "pattern")

    _type_marker = 11

    pattern: str
    flags: str

    def __init__(self, pattern: str | bytes, flags: str | int = 0) -> None:
        if isinstance(pattern, bytes):
            pattern = pattern.decode("utf-8")
        if not isinstance(pattern, str):
            raise TypeError(f"Regex pattern must be a str, not {type(pattern).__name__}")
        if isinstance(flags, int) and not isinstance(flags, bool):
            flags = flags_to_letters(flags)
        elif not isinstance(flags, str):
            raise TypeError(
                f"Regex flags must be a str of option letters or an int, not {type(flags).__name__}"
            )
        if "\x00" in pattern:
            raise InvalidStringData(
                f"a regular expression pattern cannot contain a NUL character: {pattern!r}"
            )
        if "\x00" in flags:
            raise InvalidStringData(f"regular expression options cannot contain a NUL character: {flags!r}")
        self.pattern = pattern
        self.flags = flags

    @classmethod
    def from_native(cls, regex: re.Pattern[Any]) -> Regex:
        """A :class:`Regex` from a compiled Python pattern (its flags become option letters)."""
        if not isinstance(regex, re.Pattern):
            raise TypeError(f"from_native takes a compiled re.Pattern, not {type(regex).__name__}")
        pattern = regex.pattern
        # str patterns always carry re.UNICODE implicitly; it is not something the user asked for.
        flags = regex.flags & ~re.UNICODE if isinstance(pattern, str) else regex.flags
        return cls(pattern, flags)

    def try_compile(self) -> re.Pattern[str]:
        """Compile with Python's ``re``; raises ``re.error`` for syntax Python does not support."""
        return re.compile(self.pattern, _letters_to_flags(self.flags))

    def __getstate__(self) -> tuple[str, str]:
        return (self.pattern, self.flags)

    def __setstate__(self, state: tuple[str, str]) -> None:
        self.pattern, self.flags = state

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Regex):
            return self.pattern == other.pattern and self.flags == other.flags
        if type_marker(other) == Regex._type_marker:
            # Another library's regex (PyMongo's, whose flags are an int of ``re`` flags): equal when the
            # pattern and the set of option letters are.
            flags = getattr(other, "flags", None)
            letters = flags_to_letters(flags) if isinstance(flags, int) else flags
            return (
                isinstance(letters, str)
                and self.pattern == getattr(other, "pattern", None)
                and sorted(self.flags) == sorted(letters)
            )
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r}, {self.flags!r})"
