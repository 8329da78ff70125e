"""Read concern: how recent and how durable the data a read sees must be."""

from __future__ import annotations

from typing import Any

from mongio.options.pymongo_classes import is_pymongo_read_concern

__all__ = ["DEFAULT_READ_CONCERN", "ReadConcern", "as_read_concern"]


class ReadConcern:
    """A read concern, named as in PyMongo: ``ReadConcern("majority")``.

    ``ReadConcern()`` (no level) is the server's default and is not sent. Any level string is accepted so
    that levels newer than this driver still work.
    """

    __slots__ = ("_level",)

    def __init__(self, level: str | None = None) -> None:
        if level is not None and not isinstance(level, str):
            raise TypeError(f"level must be a str or None, not {type(level).__name__}")
        self._level = level

    @property
    def level(self) -> str | None:
        """The read concern level, or ``None`` for the server's default."""
        return self._level

    @property
    def ok_for_legacy(self) -> bool:
        """Whether servers without read concern support would honour it (no level, or ``"local"``)."""
        return self._level is None or self._level == "local"

    @property
    def document(self) -> dict[str, Any]:
        """The ``readConcern`` document to send (empty for the server's default)."""
        return {} if self._level is None else {"level": self._level}

    @property
    def is_server_default(self) -> bool:
        """Whether this is the server's default read concern (no level given)."""
        return self._level is None

    def __eq__(self, other: object) -> bool:
        # PyMongo's ReadConcern too, both ways (its __eq__ answers NotImplemented for ours).
        if isinstance(other, ReadConcern) or is_pymongo_read_concern(other):
            theirs: Any = other
            return bool(theirs.level == self._level)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("ReadConcern", self._level))

    def __repr__(self) -> str:
        return "ReadConcern()" if self._level is None else f"ReadConcern({self._level!r})"


DEFAULT_READ_CONCERN = ReadConcern()


def as_read_concern(value: Any) -> ReadConcern:
    """``value`` as mongio's :class:`ReadConcern`: itself, or the same level read from another library's read
    concern (PyMongo's). Anything else raises ``TypeError``."""
    if isinstance(value, ReadConcern):
        return value
    level = getattr(value, "level", None)
    if type(value).__name__ == "ReadConcern" and (level is None or isinstance(level, str)):
        return ReadConcern(level)
    raise TypeError(f"read_concern must be a ReadConcern, not {type(value).__name__}")
