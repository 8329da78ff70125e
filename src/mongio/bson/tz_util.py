"""Fixed-offset time zones, under the module name PyMongo's ``bson.tz_util`` has.

New code can use ``datetime.timezone``; :class:`FixedOffset` and :data:`utc` exist so code written against
PyMongo ports unchanged.
"""

from __future__ import annotations

import datetime
from typing import Final

__all__ = ["ZERO", "FixedOffset", "utc"]

ZERO: Final = datetime.timedelta(0)


class FixedOffset(datetime.tzinfo):
    """A time zone ``offset`` east of UTC (a ``timedelta``, or a number of minutes) named ``name``."""

    def __init__(self, offset: float | datetime.timedelta, name: str) -> None:
        self.__offset = (
            offset if isinstance(offset, datetime.timedelta) else datetime.timedelta(minutes=offset)
        )
        self.__name = name

    def __getinitargs__(self) -> tuple[datetime.timedelta, str]:
        # tzinfo pickles and copies through these (tzinfo.__reduce__ calls them).
        return self.__offset, self.__name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__offset!r}, {self.__name!r})"

    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return self.__offset

    def tzname(self, dt: datetime.datetime | None) -> str:
        return self.__name

    def dst(self, dt: datetime.datetime | None) -> datetime.timedelta:
        return ZERO


utc: Final = FixedOffset(0, "UTC")
"""UTC as a :class:`FixedOffset` (``datetime.UTC`` works the same wherever a tzinfo is taken)."""
