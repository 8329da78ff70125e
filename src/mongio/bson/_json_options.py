"""The options of the Extended JSON codec: :class:`JSONOptions` and its two enums."""

from __future__ import annotations

import datetime
import enum
from typing import Any

from mongio.bson.codec_options import CodecOptions

__all__ = ["DatetimeRepresentation", "JSONMode", "JSONOptions"]


class JSONMode(enum.IntEnum):
    """Which Extended JSON format :func:`~mongio.bson.json_util.dumps` writes.

    ``RELAXED`` (the default) writes plain JSON numbers and ISO-8601 dates where no type information is
    lost beyond the numeric type; ``CANONICAL`` wraps every value so that it reads back as the same BSON
    type; ``LEGACY`` writes the format older drivers and mongoexport produced (and lets
    :func:`~mongio.bson.json_util.loads` accept their number-valued ``$date`` and ``$numberLong``).
    """

    LEGACY = 0
    RELAXED = 1
    CANONICAL = 2


class DatetimeRepresentation(enum.IntEnum):
    """How datetimes are written: ``LEGACY`` as ``{"$date": <ms>}``, ``NUMBERLONG`` as
    ``{"$date": {"$numberLong": "<ms>"}}``, ``ISO8601`` as ``{"$date": "<ISO-8601>"}`` for dates from 1970
    to 9999 (others as ``NUMBERLONG``)."""

    LEGACY = 0
    NUMBERLONG = 1
    ISO8601 = 2


_JSON_FIELDS = ("strict_number_long", "datetime_representation", "strict_uuid", "json_mode")


class JSONOptions(CodecOptions):
    """:class:`~mongio.bson.codec_options.CodecOptions` plus the Extended JSON settings.

    - ``json_mode``: a :class:`JSONMode`, the format written (default ``RELAXED``).
    - ``strict_number_long``: write :class:`~mongio.bson.int64.Int64` as ``{"$numberLong": ...}``
      (always in ``CANONICAL``, never in ``RELAXED``, off by default in ``LEGACY``).
    - ``datetime_representation``: a :class:`DatetimeRepresentation` (``ISO8601`` in ``RELAXED``,
      ``NUMBERLONG`` in ``CANONICAL``, ``LEGACY`` by default in ``LEGACY``).
    - ``strict_uuid``: write ``uuid.UUID`` as ``$binary`` in ``uuid_representation`` (always in
      ``RELAXED`` and ``CANONICAL``); off, it is written as ``{"$uuid": "<text>"}`` (``LEGACY`` default).

    ``RELAXED`` and ``CANONICAL`` fix the three dependent settings; asking for another value raises
    ``ValueError``. The codec options (``tz_aware``, ``tzinfo``, ``uuid_representation``,
    ``datetime_conversion``, ``document_class``, ``type_registry``) apply to what
    :func:`~mongio.bson.json_util.loads` returns; ``tz_aware`` without a ``tzinfo`` means UTC.
    """

    __slots__ = ("_given", "datetime_representation", "json_mode", "strict_number_long", "strict_uuid")

    _FIELDS = (*CodecOptions._FIELDS, *_JSON_FIELDS)

    json_mode: JSONMode
    strict_number_long: bool
    datetime_representation: DatetimeRepresentation
    strict_uuid: bool
    _given: dict[str, Any]

    def __init__(
        self,
        strict_number_long: bool | None = None,
        datetime_representation: int | None = None,
        strict_uuid: bool | None = None,
        json_mode: int = JSONMode.RELAXED,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("tz_aware") and kwargs.get("tzinfo") is None:
            kwargs["tzinfo"] = datetime.UTC
        super().__init__(*args, **kwargs)
        try:
            mode = JSONMode(json_mode)
        except ValueError:
            raise ValueError(f"json_mode must be a JSONMode value, not {json_mode!r}") from None
        representation: DatetimeRepresentation | None = None
        if datetime_representation is not None:
            try:
                representation = DatetimeRepresentation(datetime_representation)
            except ValueError:
                raise ValueError(
                    f"datetime_representation must be a DatetimeRepresentation value, not "
                    f"{datetime_representation!r}"
                ) from None
        if mode is JSONMode.LEGACY:
            long_ = bool(strict_number_long) if strict_number_long is not None else False
            dates = representation if representation is not None else DatetimeRepresentation.LEGACY
            uuids = bool(strict_uuid) if strict_uuid is not None else False
        else:
            relaxed = mode is JSONMode.RELAXED
            long_ = not relaxed
            dates = DatetimeRepresentation.ISO8601 if relaxed else DatetimeRepresentation.NUMBERLONG
            uuids = True
            for name, given, fixed in (
                ("strict_number_long", strict_number_long, long_),
                ("datetime_representation", representation, dates),
                ("strict_uuid", strict_uuid, uuids),
            ):
                if given is not None and given != fixed:
                    raise ValueError(
                        f"{name}={given!r} cannot be used with JSONMode.{mode.name}, which always uses "
                        f"{name}={fixed!r}; use JSONMode.LEGACY to choose it"
                    )
        setter = object.__setattr__
        setter(self, "json_mode", mode)
        setter(self, "strict_number_long", long_)
        setter(self, "datetime_representation", dates)
        setter(self, "strict_uuid", uuids)
        # The dependent settings as given (None: derived from json_mode), so that with_options(json_mode=...)
        # derives them afresh instead of carrying another mode's values into a mode that forbids them.
        setter(
            self,
            "_given",
            {
                "strict_number_long": strict_number_long,
                "datetime_representation": datetime_representation,
                "strict_uuid": strict_uuid,
            },
        )

    def with_options(self, **kwargs: Any) -> JSONOptions:
        """A copy with the given options changed; settings derived from ``json_mode`` follow a new mode."""
        unknown = set(kwargs) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"unknown option(s) for {type(self).__name__}: {', '.join(sorted(unknown))}")
        arguments = {name: getattr(self, name) for name in CodecOptions._FIELDS}
        arguments["json_mode"] = self.json_mode
        arguments.update(self._given)
        arguments.update(kwargs)
        return type(self)(**arguments)
