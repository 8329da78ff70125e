"""BSON UTC datetimes (type 0x09) beyond ``datetime``'s range: :class:`DatetimeMS` and :class:`DatetimeConversion`.

BSON stores a signed 64-bit count of milliseconds since the Unix epoch, which reaches far past the years
1 to 9999 that ``datetime.datetime`` can hold. :class:`DatetimeConversion` chooses what decoding returns.
"""

from __future__ import annotations

import datetime
import enum
from typing import TYPE_CHECKING, Final, cast

from mongio.bson._type_marker import type_marker
from mongio.bson.errors import InvalidBSON
from mongio.bson.tz_util import utc

if TYPE_CHECKING:
    # Re-exported for the checker: at runtime ``__getattr__`` below offers it, as PyMongo's module does.
    from mongio.bson.codec_options import CodecOptions as CodecOptions

__all__ = ["DatetimeConversion", "DatetimeMS", "InvalidBSON", "utc"]

EPOCH_AWARE: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
EPOCH_NAIVE: Final = datetime.datetime(1970, 1, 1)
ONE_MILLISECOND: Final = datetime.timedelta(milliseconds=1)

# The milliseconds of datetime.min and of the last millisecond of datetime.max, in UTC.
MIN_DATETIME_MS: Final = (datetime.datetime.min - EPOCH_NAIVE) // ONE_MILLISECOND
MAX_DATETIME_MS: Final = (datetime.datetime.max - EPOCH_NAIVE) // ONE_MILLISECOND
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


class DatetimeConversion(enum.IntEnum):
    """What a decoded BSON datetime becomes.

    ``DATETIME`` (the default): a ``datetime``, raising :class:`~mongio.bson.errors.InvalidBSON` when the
    value is outside its range. ``DATETIME_CLAMP``: a ``datetime``, clamped to ``datetime.min``/``max``.
    ``DATETIME_MS``: always a :class:`DatetimeMS`. ``DATETIME_AUTO``: a ``datetime`` when it fits, otherwise
    a :class:`DatetimeMS`.
    """

    DATETIME = 1
    DATETIME_CLAMP = 2
    DATETIME_MS = 3
    DATETIME_AUTO = 4


def datetime_to_millis(value: datetime.datetime) -> int:
    """Milliseconds since the epoch, rounding down; a naive ``datetime`` is taken as UTC."""
    if value.tzinfo is not None and value.utcoffset() is not None:
        return (value - EPOCH_AWARE) // ONE_MILLISECOND
    return (value.replace(tzinfo=None) - EPOCH_NAIVE) // ONE_MILLISECOND


class DatetimeMS:
    """A BSON datetime as its raw signed 64-bit millisecond count, able to hold any stored value."""

    __slots__ = ("_value",)

    _type_marker = 9

    def __init__(self, value: int | datetime.datetime) -> None:
        if isinstance(value, datetime.datetime):
            value = datetime_to_millis(value)
        elif not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"DatetimeMS takes an int or a datetime, not {type(value).__name__}")
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise OverflowError(f"{value} milliseconds do not fit a BSON datetime (a signed 64-bit integer)")
        self._value = int(value)

    def as_datetime(self, codec_options: CodecOptions | None = None) -> datetime.datetime:
        """This value as a ``datetime``: naive UTC by default, or as ``codec_options`` say (``tz_aware``,
        ``tzinfo``; ``DATETIME_CLAMP`` clamps). Raises ``OverflowError`` outside ``datetime``'s range."""
        tz_aware = codec_options.tz_aware if codec_options is not None else False
        tzinfo = codec_options.tzinfo if codec_options is not None else None
        conversion = DatetimeConversion.DATETIME
        if (
            codec_options is not None
            and codec_options.datetime_conversion == DatetimeConversion.DATETIME_CLAMP
        ):
            conversion = DatetimeConversion.DATETIME_CLAMP
        # Under DATETIME and DATETIME_CLAMP the conversion always gives a datetime (or raises).
        return cast(datetime.datetime, millis_to_datetime(self._value, conversion, tz_aware, tzinfo))

    def __int__(self) -> int:
        return self._value

    def __index__(self) -> int:
        return self._value

    def __eq__(self, other: object) -> bool:
        millis = _millis_of(other)
        if millis is None:
            return NotImplemented
        return self._value == millis

    def __ne__(self, other: object) -> bool:
        millis = _millis_of(other)
        if millis is None:
            return NotImplemented
        return self._value != millis

    def __lt__(self, other: object) -> bool:
        millis = _millis_of(other)
        if millis is None:
            return NotImplemented
        return self._value < millis

    def __le__(self, other: object) -> bool:
        millis = _millis_of(other)
        if millis is None:
            return NotImplemented
        return self._value <= millis

    def __gt__(self, other: object) -> bool:
        millis = _millis_of(other)
        if millis is None:
            return NotImplemented
        return self._value > millis

    def __ge__(self, other: object) -> bool:
        millis = _millis_of(other)
        if millis is None:
            return NotImplemented
        return self._value >= millis

    def __hash__(self) -> int:
        # As PyMongo's DatetimeMS hashes, so equal values of either library are one dict key.
        return hash(self._value)

    def __repr__(self) -> str:
        return f"DatetimeMS({self._value})"

    def __getstate__(self) -> int:
        return self._value

    def __setstate__(self, state: int) -> None:
        self._value = state


def _millis_of(value: object) -> int | None:
    """The milliseconds of a DatetimeMS of mongio or of another library following the ``_type_marker``
    convention (PyMongo's, which converts with ``int()``), or None for anything else."""
    if isinstance(value, DatetimeMS):
        return value._value
    if type_marker(value) == DatetimeMS._type_marker:
        try:
            millis: int = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return None
        return millis
    return None


class DatetimeRangeError(OverflowError):
    """A decoded BSON datetime that ``datetime`` cannot hold under ``DatetimeConversion.DATETIME``."""


def millis_to_datetime(
    millis: int,
    conversion: int,
    tz_aware: bool,
    tzinfo: datetime.tzinfo | None,
) -> datetime.datetime | DatetimeMS:
    """The decoded value of a BSON datetime under the given options (the decoder's slow path)."""
    if conversion == DatetimeConversion.DATETIME_MS:
        return DatetimeMS(millis)
    if conversion == DatetimeConversion.DATETIME_CLAMP:
        millis = min(max(millis, MIN_DATETIME_MS), MAX_DATETIME_MS)
    elif not MIN_DATETIME_MS <= millis <= MAX_DATETIME_MS:
        if conversion == DatetimeConversion.DATETIME_AUTO:
            return DatetimeMS(millis)
        raise DatetimeRangeError(
            f"the datetime {millis} ms is outside datetime's range (years 1 to 9999); decode with "
            "datetime_conversion=DATETIME_AUTO, DATETIME_MS or DATETIME_CLAMP"
        )
    if not tz_aware:
        return EPOCH_NAIVE + datetime.timedelta(milliseconds=millis)
    value = EPOCH_AWARE + datetime.timedelta(milliseconds=millis)
    if tzinfo is not None and tzinfo is not datetime.UTC:
        try:
            value = value.astimezone(tzinfo)
        except OverflowError:
            # Near datetime.min/max a zone offset can step outside the range even though UTC fits.
            if conversion == DatetimeConversion.DATETIME_AUTO:
                return DatetimeMS(millis)
            if conversion == DatetimeConversion.DATETIME_CLAMP:
                return (datetime.datetime.min if millis < 0 else datetime.datetime.max).replace(tzinfo=tzinfo)
            raise DatetimeRangeError(
                f"the datetime {millis} ms is outside datetime's range in {tzinfo}"
            ) from None
    return value


def __getattr__(name: str) -> object:
    # PyMongo's bson.datetime_ms also offers the codec options it uses; they are imported here only when
    # asked for, since mongio.bson.codec_options itself imports this module.
    if name in ("CodecOptions", "DEFAULT_CODEC_OPTIONS"):
        from mongio.bson import codec_options

        return getattr(codec_options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
