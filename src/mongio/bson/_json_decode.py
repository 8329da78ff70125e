"""Extended JSON to Python values: recognising type wrapper objects and refusing malformed ones.

Objects are interpreted bottom-up: by the time an object is looked at, its values are already converted (so a
``$date``'s ``{"$numberLong": ...}`` has become an :class:`~mongio.bson.int64.Int64` and a ``$dbPointer``'s
``{"$ref": ..., "$id": ...}`` a :class:`~mongio.bson.dbref.DBRef`). The same interpretation serves
:func:`~mongio.bson.json_util.loads` and the ``json`` hooks ported code passes to ``json.loads``.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from mongio.bson._json_options import JSONMode, JSONOptions
from mongio.bson.binary import OLD_UUID_SUBTYPE, UUID_SUBTYPE, Binary, UuidRepresentation
from mongio.bson.code import Code
from mongio.bson.datetime_ms import EPOCH_AWARE, ONE_MILLISECOND, millis_to_datetime
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.errors import BSONError, InvalidExtendedJSON
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp

__all__ = ["interpret", "parse", "wrap_raw"]

Pairs = list[tuple[str, Any]]

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_UINT32_LIMIT: Final = 1 << 32

# [0-9] rather than \d: Python's \d (and int()) also accept digits of other scripts.
_INTEGER: Final = re.compile(r"-?[0-9]+\Z")
_DOUBLE: Final = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_SPECIAL_DOUBLES: Final = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
_OBJECT_ID: Final = re.compile(r"[0-9a-fA-F]{24}\Z")
_SUBTYPE: Final = re.compile(r"[0-9a-fA-F]{1,2}\Z")
_UUID: Final = re.compile(
    r"(?:urn:uuid:)?(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-fA-F]{32})\Z",
    re.IGNORECASE,
)
_ISO_DATE: Final = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<fraction>[0-9]+))?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<hours>[0-9]{2})(?::?(?P<minutes>[0-9]{2}))?)?\Z"
)

# The keys that make an object a type wrapper, and the further keys each wrapper may have.
_COMPANIONS: Final[dict[str, frozenset[str]]] = {
    "$oid": frozenset(),
    "$symbol": frozenset(),
    "$numberInt": frozenset(),
    "$numberLong": frozenset(),
    "$numberDouble": frozenset(),
    "$numberDecimal": frozenset(),
    "$binary": frozenset({"$type"}),
    "$uuid": frozenset(),
    "$code": frozenset({"$scope"}),
    "$timestamp": frozenset(),
    "$regularExpression": frozenset(),
    "$regex": frozenset({"$options"}),
    "$dbPointer": frozenset(),
    "$date": frozenset(),
    "$minKey": frozenset(),
    "$maxKey": frozenset(),
    "$undefined": frozenset(),
}


class _Object(list[tuple[str, Any]]):
    """A JSON object as ``json`` parsed it: its pairs in order, duplicates kept."""

    __slots__ = ()


def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        text = json.dumps({k: "..." for k in value})
    elif value is None or type(value) in (bool, int, float, str):
        text = json.dumps(value)
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Wrapper:
    """One type wrapper being read: its name, its values by key, and where it is, for error messages."""

    __slots__ = ("name", "options", "path", "values")

    def __init__(self, name: str, values: dict[str, Any], options: JSONOptions, path: str) -> None:
        self.name = name
        self.values = values
        self.options = options
        self.path = path

    def error(self, problem: str) -> InvalidExtendedJSON:
        where = f" at '{self.path}'" if self.path else ""
        return InvalidExtendedJSON(f"Bad {self.name}{where}: {problem}")

    @property
    def value(self) -> Any:
        return self.values[self.name]

    def string(self, key: str | None = None, container: Mapping[str, Any] | None = None) -> str:
        value = (container if container is not None else self.values)[key or self.name]
        if type(value) is not str:
            raise self.error(f"{key or self.name} must be a string, got {_shown(value)}")
        return value

    def fields(self, required: tuple[str, ...]) -> Mapping[str, Any]:
        """The wrapper's value as an object with exactly the ``required`` keys."""
        value = self.value
        if not isinstance(value, Mapping):
            raise self.error(
                f"the value must be an object with keys {', '.join(required)}, got {_shown(value)}"
            )
        missing = [key for key in required if key not in value]
        extra = [key for key in value if key not in required]
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(missing)}")
            if extra:
                problems.append(f"unexpected {', '.join(map(repr, extra))}")
            raise self.error(
                f"the value must have exactly the keys {', '.join(required)} ({'; '.join(problems)})"
            )
        return value


def _binary_value(data: bytes, subtype: int, options: JSONOptions) -> Any:
    """What BSON decoding gives for this binary under ``options`` (bytes, a uuid.UUID or a Binary)."""
    if subtype == 0:
        return data
    if subtype in (UUID_SUBTYPE, OLD_UUID_SUBTYPE) and len(data) == 16:
        representation = options.uuid_representation
        if subtype == UUID_SUBTYPE:
            if representation == UuidRepresentation.STANDARD:
                return uuid.UUID(bytes=data)
        elif representation not in (UuidRepresentation.UNSPECIFIED, UuidRepresentation.STANDARD):
            return Binary(data, OLD_UUID_SUBTYPE).as_uuid(representation)
    return Binary(data, subtype)


def _base64(wrapper: _Wrapper, text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise wrapper.error(f"{_shown(text)} is not padded base64") from None


def _subtype(wrapper: _Wrapper, key: str, text: str) -> int:
    if not _SUBTYPE.match(text):
        raise wrapper.error(f"{key} must be one or two hex digits, got {_shown(text)}")
    return int(text, 16)


def _read_binary(wrapper: _Wrapper) -> Any:
    if "$type" in wrapper.values:
        # The legacy form {"$binary": <base64>, "$type": <hex>}.
        data = _base64(wrapper, wrapper.string())
        subtype = _subtype(wrapper, "$type", wrapper.string("$type"))
    else:
        if type(wrapper.value) is str:
            raise wrapper.error(
                'a base64 string needs a $type beside it (or use {"base64": ..., "subType": ...})'
            )
        fields = wrapper.fields(("base64", "subType"))
        data = _base64(wrapper, wrapper.string("base64", fields))
        subtype = _subtype(wrapper, "subType", wrapper.string("subType", fields))
    return _binary_value(data, subtype, wrapper.options)


def _read_uuid(wrapper: _Wrapper) -> Any:
    text = wrapper.string()
    if not _UUID.match(text):
        raise wrapper.error(f"{_shown(text)} is not a UUID (32 hex digits, optionally as 8-4-4-4-12)")
    return _binary_value(uuid.UUID(text).bytes, UUID_SUBTYPE, wrapper.options)


def _read_integer(wrapper: _Wrapper, low: int, high: int, kind: str) -> int:
    text = wrapper.string()
    if not _INTEGER.match(text):
        raise wrapper.error(f"{_shown(text)} is not a decimal integer")
    value = int(text)
    if not low <= value <= high:
        raise wrapper.error(f"{value} does not fit a {kind}")
    return value


def _read_number_long(wrapper: _Wrapper) -> Int64:
    value = wrapper.value
    if wrapper.options.json_mode == JSONMode.LEGACY and type(value) is int:
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise wrapper.error(f"{value} does not fit a 64-bit integer")
        return Int64(value)
    if type(value) is int:
        raise wrapper.error(
            f"the value must be a string, got the number {value} (load with LEGACY_JSON_OPTIONS to accept "
            "the legacy number form)"
        )
    return Int64(_read_integer(wrapper, _INT64_MIN, _INT64_MAX, "64-bit integer"))


def _read_double(wrapper: _Wrapper) -> float:
    text = wrapper.string()
    special = _SPECIAL_DOUBLES.get(text)
    if special is not None:
        return special
    if not _DOUBLE.match(text):
        raise wrapper.error(f"{_shown(text)} is not a decimal number, Infinity, -Infinity or NaN")
    value = float(text)
    if math.isinf(value):
        raise wrapper.error(f"{_shown(text)} is out of the range of a double")
    return value


def _read_decimal(wrapper: _Wrapper) -> Decimal128:
    text = wrapper.string()
    try:
        return Decimal128(text)
    except (BSONError, ValueError) as exc:
        raise wrapper.error(str(exc)) from exc


def _read_code(wrapper: _Wrapper) -> Code:
    code = wrapper.string()
    if "$scope" not in wrapper.values:
        return Code(code)
    scope = wrapper.values["$scope"]
    if isinstance(scope, DBRef):
        scope = scope.as_doc()
    if not isinstance(scope, Mapping):
        raise wrapper.error(f"$scope must be an object, got {_shown(scope)}")
    return Code(code, scope)


def _read_timestamp(wrapper: _Wrapper) -> Timestamp:
    fields = wrapper.fields(("t", "i"))
    parts = []
    for key in ("t", "i"):
        part = fields[key]
        if type(part) is not int:
            raise wrapper.error(f"{key} must be an integer, got {_shown(part)}")
        if not 0 <= part < _UINT32_LIMIT:
            raise wrapper.error(f"{key} must fit an unsigned 32-bit integer, got {part}")
        parts.append(part)
    return Timestamp(parts[0], parts[1])


def _regex(wrapper: _Wrapper, pattern: str, flags: str) -> Regex:
    try:
        return Regex(pattern, flags)
    except BSONError as exc:
        raise wrapper.error(str(exc)) from exc


def _read_regular_expression(wrapper: _Wrapper) -> Regex:
    fields = wrapper.fields(("pattern", "options"))
    return _regex(wrapper, wrapper.string("pattern", fields), wrapper.string("options", fields))


def _read_legacy_regex(wrapper: _Wrapper) -> Regex:
    flags = wrapper.string("$options") if "$options" in wrapper.values else ""
    return _regex(wrapper, wrapper.string(), flags)


def _read_db_pointer(wrapper: _Wrapper) -> DBPointer:
    value = wrapper.value
    if isinstance(value, DBRef):
        if value.database is not None or value.extra:
            extra = ["$db"] if value.database is not None else []
            raise wrapper.error(
                f"the value must have exactly the keys $ref, $id (unexpected {', '.join(extra + list(value.extra))})"
            )
        namespace, oid = value.collection, value.id
    else:
        fields = wrapper.fields(("$ref", "$id"))
        namespace, oid = wrapper.string("$ref", fields), fields["$id"]
    if not isinstance(oid, ObjectId):
        raise wrapper.error(f'$id must be an ObjectId ({{"$oid": ...}}), got {_shown(oid)}')
    return DBPointer(namespace, oid)


def _iso_millis(wrapper: _Wrapper, text: str) -> int:
    match = _ISO_DATE.match(text)
    if match is None:
        raise wrapper.error(f"{_shown(text)} is not an ISO-8601 date-time (YYYY-MM-DDTHH:MM:SS[.fff]Z)")
    try:
        zone = datetime.UTC
        if match["sign"]:
            if int(match["minutes"] or 0) > 59:
                raise ValueError(f"the UTC offset's minutes must be 00 to 59, got {match['minutes']}")
            offset = datetime.timedelta(hours=int(match["hours"]), minutes=int(match["minutes"] or 0))
            zone = datetime.timezone(-offset if match["sign"] == "-" else offset)
        moment = datetime.datetime.fromisoformat(f"{match['date']}T{match['time']}").replace(tzinfo=zone)
    except ValueError as exc:
        raise wrapper.error(f"{_shown(text)} is not a valid date-time: {exc}") from None
    fraction = (match["fraction"] or "")[:3].ljust(3, "0")
    return (moment - EPOCH_AWARE) // ONE_MILLISECOND + int(fraction)


def _read_date(wrapper: _Wrapper) -> Any:
    value = wrapper.value
    if type(value) is str:
        millis = _iso_millis(wrapper, value)
    elif type(value) is Int64:
        millis = int(value)
    elif type(value) is int and wrapper.options.json_mode == JSONMode.LEGACY:
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise wrapper.error(f"{value} milliseconds do not fit a BSON datetime")
        millis = value
    elif type(value) is int:
        raise wrapper.error(
            f'the value must be an ISO-8601 string or {{"$numberLong": ...}}, got the number {value} (load '
            "with LEGACY_JSON_OPTIONS to accept the legacy number form)"
        )
    else:
        raise wrapper.error(
            f'the value must be an ISO-8601 string or {{"$numberLong": "<milliseconds>"}}, got {_shown(value)}'
        )
    options = wrapper.options
    try:
        return millis_to_datetime(millis, options.datetime_conversion, options.tz_aware, options.tzinfo)
    except OverflowError as exc:
        raise wrapper.error(str(exc)) from None


def _read_key(wrapper: _Wrapper) -> MinKey | MaxKey:
    value = wrapper.value
    if type(value) is not int or value != 1:
        raise wrapper.error(f"the value must be 1, got {_shown(value)}")
    return MinKey() if wrapper.name == "$minKey" else MaxKey()


def _read_undefined(wrapper: _Wrapper) -> Undefined:
    if wrapper.value is not True:
        raise wrapper.error(f"the value must be true, got {_shown(wrapper.value)}")
    return Undefined()


def _read_object_id(wrapper: _Wrapper) -> ObjectId:
    text = wrapper.string()
    if not _OBJECT_ID.match(text):
        raise wrapper.error(f"{_shown(text)} is not 24 hex digits")
    return ObjectId(text)


_READERS: Final[dict[str, Callable[[_Wrapper], Any]]] = {
    "$oid": _read_object_id,
    "$symbol": lambda wrapper: Symbol(wrapper.string()),
    "$numberInt": lambda wrapper: _read_integer(wrapper, _INT32_MIN, _INT32_MAX, "32-bit integer"),
    "$numberLong": _read_number_long,
    "$numberDouble": _read_double,
    "$numberDecimal": _read_decimal,
    "$binary": _read_binary,
    "$uuid": _read_uuid,
    "$code": _read_code,
    "$timestamp": _read_timestamp,
    "$regularExpression": _read_regular_expression,
    "$regex": _read_legacy_regex,
    "$dbPointer": _read_db_pointer,
    "$date": _read_date,
    "$minKey": _read_key,
    "$maxKey": _read_key,
    "$undefined": _read_undefined,
}


def _read_wrapper(name: str, pairs: Pairs, options: JSONOptions, path: str) -> Any:
    values = dict(pairs)
    wrapper = _Wrapper(name, values, options, path)
    if len(values) != len(pairs):
        raise wrapper.error("a key appears more than once")
    allowed = _COMPANIONS[name]
    extra = [key for key in values if key != name and key not in allowed]
    if extra:
        raise wrapper.error(f"unexpected key(s) {', '.join(map(repr, extra))} beside {name}")
    return _READERS[name](wrapper)


def _wrapper_key(pairs: Pairs) -> str | None:
    for key, value in pairs:
        # {"$regex": <not a string>} is the $regex query operator, not a legacy regular expression.
        if key in _COMPANIONS and (key != "$regex" or type(value) is str):
            return key
    return None


def _new_document(pairs: Pairs, options: JSONOptions) -> Any:
    document_class = options.document_class
    if document_class is dict or getattr(document_class, "_type_marker", None) == 101:
        return dict(pairs)
    document = document_class()
    for key, value in pairs:
        document[key] = value
    return document


def _as_dbref(pairs: Pairs) -> DBRef | None:
    values = dict(pairs)
    ref = values.get("$ref")
    if type(ref) is not str or "$id" not in values:
        return None
    database = values.get("$db")
    if "$db" in values and type(database) is not str:
        return None
    extra = {key: value for key, value in values.items() if key not in ("$ref", "$id", "$db")}
    return DBRef(ref, values["$id"], database, extra)


def interpret(pairs: Pairs, options: JSONOptions, *, top_level: bool = False, path: str = "") -> Any:
    """The value of one JSON object whose values are already converted: a type wrapper's value, a
    :class:`~mongio.bson.dbref.DBRef`, or a document of ``options.document_class`` (a ``dict`` when that
    is RawBSONDocument; see :func:`wrap_raw`).

    The top-level object is a document unless it is a well-formed type wrapper (so that a single value
    written by ``dumps`` reads back), and never a DBRef; a malformed wrapper anywhere else raises
    :class:`~mongio.bson.errors.InvalidExtendedJSON`.
    """
    name = _wrapper_key(pairs)
    if name is not None:
        if not top_level:
            return _read_wrapper(name, pairs, options, path)
        try:
            return _read_wrapper(name, pairs, options, path)
        except InvalidExtendedJSON:
            return _new_document(pairs, options)
    if not top_level and any(key == "$ref" for key, _ in pairs):
        dbref = _as_dbref(pairs)
        if dbref is not None:
            return dbref
    return _new_document(pairs, options)


def wrap_raw(value: Any, options: JSONOptions) -> Any:
    """With RawBSONDocument as the document class, ``value`` (a document, or a list of them) as raw BSON."""
    document_class: Any = options.document_class
    if getattr(document_class, "_type_marker", None) != 101:
        return value
    from mongio.bson._encoder import encode

    codec_options = options.codec_options()
    if type(value) is dict:
        return document_class(encode(value, codec_options=codec_options), codec_options)
    if type(value) is list:
        return [wrap_raw(item, options) for item in value]
    return value


def _parse_int(text: str) -> int | float:
    value = int(text)
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    # The Extended JSON specification: an integer no BSON integer type holds is read as a double.
    return float(text)


def _walk(value: Any, options: JSONOptions, path: str, decoders: dict[Any, Callable[[Any], Any]]) -> Any:
    kind = type(value)
    if kind is _Object:
        prefix = f"{path}." if path else ""
        pairs = [(key, _walk(item, options, prefix + key, decoders)) for key, item in value]
        value = interpret(pairs, options, path=path)
    elif kind is list:
        prefix = f"{path}." if path else ""
        value = [_walk(item, options, f"{prefix}{index}", decoders) for index, item in enumerate(value)]
    if decoders:
        transform = decoders.get(type(value))
        if transform is not None:
            value = transform(value)
    return value


def parse(
    text: str | bytes | bytearray, options: JSONOptions, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``json.loads`` the text, then read its type wrappers under ``options``."""
    kwargs.setdefault("parse_int", _parse_int)
    raw = json.loads(text, *args, object_pairs_hook=_Object, **kwargs)
    decoders = options.type_registry._decoder_map
    if type(raw) is _Object:
        prefix_pairs = [(key, _walk(item, options, key, decoders)) for key, item in raw]
        result = interpret(prefix_pairs, options, top_level=True)
    else:
        result = _walk(raw, options, "", decoders)
    return wrap_raw(result, options)
