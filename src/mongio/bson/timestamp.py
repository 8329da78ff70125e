"""The BSON Timestamp: an internal MongoDB type (oplog and cluster times), not a date."""

from __future__ import annotations

import calendar
import datetime
from typing import Final

from mongio.bson._type_marker import type_marker
from mongio.bson.tz_util import utc

__all__ = ["UPPERBOUND", "Timestamp", "as_timestamp", "utc"]

_UINT32_LIMIT = 1 << 32
UPPERBOUND: Final = _UINT32_LIMIT
"""One more than the largest ``time`` or ``inc`` a timestamp holds."""


class Timestamp:
    """A BSON timestamp (type 0x11): ``time`` seconds since the epoch and an ordinal ``inc``, both uint32.

    ``time`` may be given as a ``datetime`` (naive means UTC). Timestamps order by ``(time, inc)``. For dates,
    store a ``datetime`` instead: that is BSON's UTC datetime type.
    """

    __slots__ = ("__inc", "__time")

    _type_marker = 17

    def __init__(self, time: int | datetime.datetime, inc: int) -> None:
        if isinstance(time, datetime.datetime):
            offset = time.utcoffset()
            if offset is not None:
                time = time - offset
            time = int(calendar.timegm(time.timetuple()))
        if not isinstance(time, int) or isinstance(time, bool):
            raise TypeError(f"Timestamp time must be an int or a datetime, not {type(time).__name__}")
        if not isinstance(inc, int) or isinstance(inc, bool):
            raise TypeError(f"Timestamp inc must be an int, not {type(inc).__name__}")
        if not 0 <= time < _UINT32_LIMIT:
            raise ValueError(f"Timestamp time must fit an unsigned 32-bit integer, got {time}")
        if not 0 <= inc < _UINT32_LIMIT:
            raise ValueError(f"Timestamp inc must fit an unsigned 32-bit integer, got {inc}")
        self.__time = int(time)
        self.__inc = int(inc)

    @classmethod
    def _from_decoded(cls, time: int, inc: int) -> Timestamp:
        # The decoder's fast path: two uint32 fields read from BSON need no checking.
        timestamp = cls.__new__(cls)
        timestamp.__time = time
        timestamp.__inc = inc
        return timestamp

    @property
    def time(self) -> int:
        """Seconds since the Unix epoch."""
        return self.__time

    @property
    def inc(self) -> int:
        """The ordinal among operations in the same second."""
        return self.__inc

    def as_datetime(self) -> datetime.datetime:
        """``time`` as an aware UTC ``datetime``."""
        return datetime.datetime.fromtimestamp(self.__time, datetime.UTC)

    def _key(self) -> tuple[int, int]:
        return (self.__time, self.__inc)

    # Each comparison takes two of mongio's own timestamps first, without a call: every reply's $clusterTime
    # is compared with the client's.

    def __eq__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return (self.__time, self.__inc) == (other.__time, other.__inc)
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() == key

    def __hash__(self) -> int:
        # PyMongo's formula, so equal timestamps of either library are one dict key.
        return hash(self.__time) ^ hash(self.__inc)

    def __ne__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return (self.__time, self.__inc) != (other.__time, other.__inc)
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() != key

    def __lt__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return (self.__time, self.__inc) < (other.__time, other.__inc)
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() < key

    def __le__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return (self.__time, self.__inc) <= (other.__time, other.__inc)
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() <= key

    def __gt__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return (self.__time, self.__inc) > (other.__time, other.__inc)
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() > key

    def __ge__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return (self.__time, self.__inc) >= (other.__time, other.__inc)
        key = _key_of(other)
        if key is None:
            return NotImplemented
        return self._key() >= key

    def __repr__(self) -> str:
        return f"Timestamp({self.__time}, {self.__inc})"


def _key_of(value: object) -> tuple[int, int] | None:
    """``(time, inc)`` of a Timestamp of mongio or of another library following the ``_type_marker``
    convention (PyMongo's), or None for anything else."""
    if isinstance(value, Timestamp):
        return value._key()
    if type_marker(value) == Timestamp._type_marker:
        time, inc = getattr(value, "time", None), getattr(value, "inc", None)
        if isinstance(time, int) and isinstance(inc, int):
            return (time, inc)
    return None


def as_timestamp(value: object) -> Timestamp | None:
    """``value`` as mongio's :class:`Timestamp`: itself, or the same time and increment read from another BSON
    library's timestamp (PyMongo's, as a PyMongo-typed client decodes them); None for anything else."""
    if isinstance(value, Timestamp):
        return value
    key = _key_of(value)
    return None if key is None else Timestamp(*key)
