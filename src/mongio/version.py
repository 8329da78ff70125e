"""The package version, in the forms PyMongo's top-level package gives it, and whether the C extensions are
in use (PyMongo's ``has_c``)."""

from __future__ import annotations

import re

from mongio.bson._compiled import load_speedups

__all__ = ["__version__", "get_version_string", "has_c", "version", "version_tuple"]

__version__ = "0.1.0.dev0"
version = __version__


def _version_tuple(text: str) -> tuple[int | str, ...]:
    """``"4.20.1"`` -> ``(4, 20, 1)``; anything after the third number is kept as a string
    (``"0.1.0.dev0"`` -> ``(0, 1, 0, ".dev0")``), as PyMongo does."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(.*)", text)
    if match is None:
        return tuple(int(part) for part in text.split("."))
    parts: list[int | str] = [int(match[1]), int(match[2]), int(match[3])]
    if match[4]:
        parts.append(match[4])
    return tuple(parts)


version_tuple = _version_tuple(__version__)


def get_version_string() -> str:
    """The version, as a string."""
    return __version__


def has_c() -> bool:
    """Whether the C extensions (the BSON codec's loops, a connection's round trip) are in use."""
    return load_speedups() is not None and load_speedups("mongio.connection._speedups") is not None
