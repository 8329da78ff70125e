"""Python values to Extended JSON: the JSON-ready form (dicts, lists, str, int, float, bool, None) of a value."""

from __future__ import annotations

import base64
import datetime
import math
import re
import types
import uuid
from collections.abc import Mapping
from typing import Any, Final

from mongio.bson._json_options import DatetimeRepresentation, JSONMode, JSONOptions
from mongio.bson.binary import Binary, UuidRepresentation
from mongio.bson.code import Code
from mongio.bson.datetime_ms import DatetimeMS, datetime_to_millis
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.errors import InvalidDocument
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp

__all__ = ["format_double", "to_json"]

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1

# The last millisecond of year 9999: relaxed format writes ISO-8601 strings only from the epoch to here.
_MAX_ISO_MILLIS: Final = 253402300799999

_EPOCH: Final = datetime.datetime(1970, 1, 1)

_UNKNOWN: Final = object()


def format_double(value: float) -> str:
    """The ``$numberDouble`` string of a float: the shortest text that reads back as the same double, with an
    upper-case exponent carrying its sign (``1.0``, ``-0.0``, ``1.2345678921232E+18``, ``Infinity``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}E{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def _date(millis: int, options: JSONOptions) -> dict[str, Any]:
    representation = options.datetime_representation
    if representation == DatetimeRepresentation.LEGACY:
        return {"$date": millis}
    if representation == DatetimeRepresentation.ISO8601 and 0 <= millis <= _MAX_ISO_MILLIS:
        moment = _EPOCH + datetime.timedelta(milliseconds=millis)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        fraction = millis % 1000
        if fraction:
            text += f".{fraction:03d}"
        return {"$date": text + "Z"}
    return {"$date": {"$numberLong": str(millis)}}


def _binary(data: bytes, subtype: int, options: JSONOptions) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode("ascii")
    if options.json_mode == JSONMode.LEGACY:
        return {"$binary": encoded, "$type": f"{subtype:02x}"}
    return {"$binary": {"base64": encoded, "subType": f"{subtype:02x}"}}


def _uuid(value: uuid.UUID, options: JSONOptions) -> dict[str, Any]:
    if not options.strict_uuid:
        return {"$uuid": str(value)}
    if options.uuid_representation == UuidRepresentation.UNSPECIFIED:
        raise ValueError(
            "cannot write a uuid.UUID with uuid_representation=UNSPECIFIED: set uuid_representation "
            "(STANDARD for new data) in the JSONOptions, or pass Binary.from_uuid(value, representation)"
        )
    stored = Binary.from_uuid(value, options.uuid_representation)
    return _binary(bytes(stored), stored.subtype, options)


def _regex(pattern: str, flags: str, options: JSONOptions) -> dict[str, Any]:
    letters = "".join(sorted(flags))
    if options.json_mode == JSONMode.LEGACY:
        return {"$regex": pattern, "$options": letters}
    return {"$regularExpression": {"pattern": pattern, "options": letters}}


def _int(value: int, options: JSONOptions) -> Any:
    if options.json_mode == JSONMode.CANONICAL:
        if _INT32_MIN <= value <= _INT32_MAX:
            return {"$numberInt": str(int(value))}
        if _INT64_MIN <= value <= _INT64_MAX:
            return {"$numberLong": str(int(value))}
        raise InvalidDocument(f"the int {value} does not fit a BSON int64, so it has no Extended JSON form")
    return int(value)


def _float(value: float, options: JSONOptions) -> Any:
    if options.json_mode == JSONMode.CANONICAL or (
        options.json_mode == JSONMode.RELAXED and not math.isfinite(value)
    ):
        return {"$numberDouble": format_double(value)}
    return float(value)


def _document(value: Mapping[Any, Any], options: JSONOptions) -> dict[Any, Any]:
    return {key: to_json(item, options) for key, item in value.items()}


def _known(value: Any, options: JSONOptions) -> Any:
    """The JSON-ready form of a value of a type the codec knows, or ``_UNKNOWN``."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        if isinstance(value, Code):
            code: dict[str, Any] = {"$code": str(value)}
            if value.scope is not None:
                code["$scope"] = _document(value.scope, options)
            return code
        if isinstance(value, Symbol):
            return {"$symbol": str(value)}
        return str(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, Int64):
        if options.strict_number_long:
            return {"$numberLong": str(int(value))}
        return int(value)
    if isinstance(value, int):
        return _int(value, options)
    if isinstance(value, float):
        return _float(value, options)
    if isinstance(value, Mapping):
        return _document(value, options)
    if isinstance(value, (list, tuple, types.GeneratorType)):
        return [to_json(item, options) for item in value]
    if isinstance(value, ObjectId):
        return {"$oid": str(value)}
    if isinstance(value, datetime.datetime):
        return _date(datetime_to_millis(value), options)
    if isinstance(value, DatetimeMS):
        return _date(int(value), options)
    if isinstance(value, Binary):
        return _binary(bytes(value), value.subtype, options)
    if isinstance(value, bytes):
        return _binary(value, 0, options)
    if isinstance(value, uuid.UUID):
        return _uuid(value, options)
    if isinstance(value, Decimal128):
        return {"$numberDecimal": str(value)}
    if isinstance(value, Regex):
        return _regex(value.pattern, value.flags, options)
    if isinstance(value, re.Pattern):
        native = Regex.from_native(value)
        return _regex(native.pattern, native.flags, options)
    if isinstance(value, Timestamp):
        return {"$timestamp": {"t": value.time, "i": value.inc}}
    if isinstance(value, DBRef):
        return _document(value.as_doc(), options)
    if isinstance(value, DBPointer):
        return {"$dbPointer": {"$ref": value.namespace, "$id": {"$oid": str(value.id)}}}
    if isinstance(value, MinKey):
        return {"$minKey": 1}
    if isinstance(value, MaxKey):
        return {"$maxKey": 1}
    if isinstance(value, Undefined):
        return {"$undefined": True}
    return _UNKNOWN


def to_json(value: Any, options: JSONOptions) -> Any:
    """The JSON-ready form of ``value`` (and of everything inside it) in the format ``options`` choose.

    Custom types go through the type registry's encoders, then its fallback encoder, as in BSON encoding.
    Raises TypeError for a value of no BSON type, ValueError for a ``uuid.UUID`` with no representation
    chosen and InvalidDocument for an int too large for BSON in canonical format.
    """
    registry = options.type_registry
    transform = registry._encoder_map.get(type(value)) if registry._encoder_map else None
    if transform is not None:
        value = transform(value)
    converted = _known(value, options)
    if converted is _UNKNOWN and transform is None and registry.fallback_encoder is not None:
        converted = _known(registry.fallback_encoder(value), options)
    if converted is _UNKNOWN:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable as Extended JSON")
    return converted
