"""Write concern: how many members, and how durably, must acknowledge a write."""

from __future__ import annotations

from typing import Any

from mongio.errors import ConfigurationError
from mongio.options.pymongo_classes import is_pymongo_write_concern

__all__ = ["DEFAULT_WRITE_CONCERN", "WriteConcern", "as_write_concern"]


class WriteConcern:
    """A write concern, named as in PyMongo: ``WriteConcern(w="majority", wtimeout=1000, j=True)``.

    ``w`` is a member count (0 for unacknowledged) or a tag set name such as ``"majority"``; ``wtimeout`` is
    in milliseconds; ``j`` waits for the journal; ``fsync`` (deprecated) is treated as ``j``. With no
    arguments it is the server's default and nothing is sent.
    """

    __slots__ = ("_acknowledged", "_document")

    def __init__(
        self,
        w: int | str | None = None,
        wtimeout: int | None = None,
        j: bool | None = None,
        fsync: bool | None = None,
    ) -> None:
        document: dict[str, Any] = {}
        if w is not None:
            if isinstance(w, bool) or not isinstance(w, (int, str)):
                raise ConfigurationError(f"write concern w must be an int or a str, not {w!r}")
            if isinstance(w, int) and w < 0:
                raise ConfigurationError(f"write concern w must be zero or positive, not {w}")
            document["w"] = w
        if wtimeout is not None:
            if isinstance(wtimeout, bool) or not isinstance(wtimeout, int):
                raise ConfigurationError(
                    f"write concern wtimeout must be an int (milliseconds), not {wtimeout!r}"
                )
            if wtimeout < 0:
                raise ConfigurationError(f"write concern wtimeout must be zero or positive, not {wtimeout}")
            document["wtimeout"] = wtimeout
        if j is not None:
            if not isinstance(j, bool):
                raise ConfigurationError(f"write concern j must be True or False, not {j!r}")
            document["j"] = j
        if fsync is not None:
            if not isinstance(fsync, bool):
                raise ConfigurationError(f"write concern fsync must be True or False, not {fsync!r}")
            document["fsync"] = fsync
        if w == 0 and (j is True or fsync is True):
            raise ConfigurationError(f"w=0 (unacknowledged) cannot be used with {'j' if j else 'fsync'}=True")
        self._document = document
        self._acknowledged = w != 0

    @property
    def document(self) -> dict[str, Any]:
        """The ``writeConcern`` document to send (a copy)."""
        return dict(self._document)

    @property
    def acknowledged(self) -> bool:
        """False only for ``w=0`` without ``j``/``fsync``: the application then learns of no errors."""
        return self._acknowledged

    @property
    def is_server_default(self) -> bool:
        """Whether this is the server's default write concern (nothing given)."""
        return not self._document

    @property
    def w(self) -> int | str | None:
        """The ``w`` option (a count or a tag set name such as ``"majority"``), or ``None``."""
        value = self._document.get("w")
        return value if isinstance(value, (int, str)) else None

    @property
    def wtimeout(self) -> int | None:
        """The ``wtimeout`` option in milliseconds, or ``None``."""
        value = self._document.get("wtimeout")
        return value if isinstance(value, int) else None

    @property
    def j(self) -> bool | None:
        """The ``j`` (journal) option, or ``None``."""
        value = self._document.get("j")
        return value if isinstance(value, bool) else None

    def __eq__(self, other: object) -> bool:
        # PyMongo's WriteConcern too: its own __eq__ answers NotImplemented for ours, so Python asks this one
        # and the two compare equal both ways, by their documents as PyMongo compares its own.
        if isinstance(other, WriteConcern) or is_pymongo_write_concern(other):
            theirs: Any = other
            return bool(theirs.document == self._document)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._document.items())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{key}={value!r}" for key, value in self._document.items())
        return f"WriteConcern({inner})"


DEFAULT_WRITE_CONCERN = WriteConcern()


def as_write_concern(value: Any) -> WriteConcern:
    """``value`` as mongio's :class:`WriteConcern`: itself, or the same settings read from another library's
    write concern (PyMongo's, whose ``document`` holds the same fields). Anything else raises ``TypeError``."""
    if isinstance(value, WriteConcern):
        return value
    document = getattr(value, "document", None)
    if type(value).__name__ == "WriteConcern" and isinstance(document, dict):
        return WriteConcern(**document)
    raise TypeError(f"write_concern must be a WriteConcern, not {type(value).__name__}")
