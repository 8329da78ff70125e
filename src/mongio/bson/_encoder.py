"""The pure-Python BSON encoder: Python mappings to BSON bytes.

Everything is written into one ``bytearray``; an embedded document reserves its 4 length bytes and patches
them when it is finished, so no bytes are copied per nesting level. The hottest types (str, int, float,
bool, None, dict, list) are handled inline in the element loops, dispatched on the exact type; everything
else goes through one function per type found in ``_ENCODERS``. Errors carry the path of keys down to the
offending value.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import re
import struct
import types
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, cast

from mongio.bson._compiled import load_speedups
from mongio.bson._limits import MAX_NESTING
from mongio.bson._type_marker import type_marker as _type_marker
from mongio.bson.binary import OLD_BINARY_SUBTYPE, Binary, UuidRepresentation
from mongio.bson.code import Code
from mongio.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.bson.datetime_ms import DatetimeMS, datetime_to_millis
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.errors import InvalidDocument
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId, generation_state
from mongio.bson.raw import RawBSONDocument
from mongio.bson.regex import Regex, flags_to_letters
from mongio.bson.timestamp import Timestamp

__all__ = ["BUILT_IN_TYPES", "KNOWN_TYPE_MARKERS", "MAX_BSON_SIZE", "encode", "encode_into"]

MAX_BSON_SIZE: Final = 16 * 1024 * 1024
"""The default largest document :func:`encode` produces (a server's ``maxBsonObjectSize``)."""

_PACK_INT32: Final = struct.Struct("<i").pack
_PACK_INT64: Final = struct.Struct("<q").pack
_PACK_DOUBLE: Final = struct.Struct("<d").pack
_PACK_TIMESTAMP: Final = struct.Struct("<II").pack
_PACK_INTO_INT32: Final = struct.Struct("<i").pack_into

_SUBTYPE_BYTES: Final = [bytes((subtype,)) for subtype in range(256)]
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_RAW_MARKER: Final = RawBSONDocument._type_marker

# Array keys "0\x00", "1\x00", ... made once; grown on demand for longer arrays.
_INDEX_KEYS: list[bytes] = [str(i).encode() + b"\x00" for i in range(1024)]


# Encoded names of keys already seen (validated: no NUL, valid Unicode). Field names repeat across
# documents, and a dict lookup on a str (whose hash is cached) is far cheaper than encoding it again. Bounded,
# so documents keyed by ever-new strings cannot grow it without limit.
_KEY_NAMES: dict[str, bytes] = {}
_KEY_NAMES_LIMIT: Final = 8192


class _Refused(Exception):
    """Internal: a value cannot be encoded. Each enclosing document adds its key on the way out, so the
    public error can name the full path."""

    def __init__(self, reason: str, key: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = [] if key is None else [key]


class _Context:
    """What the encoder needs from the codec options, looked up once per options object."""

    __slots__ = ("encoder_map", "fallback", "options", "uuid_representation")

    def __init__(self, options: CodecOptions) -> None:
        registry = options.type_registry
        self.options = options
        self.uuid_representation = options.uuid_representation
        self.encoder_map: dict[Any, Callable[[Any], Any]] = dict(registry._encoder_map)
        self.fallback = registry._fallback_encoder


def _context(options: CodecOptions) -> _Context:
    cache = options._cache
    context = cache.get("encode")
    if context is None:
        context = cache["encode"] = _Context(options)
    return context


def _index_keys(count: int) -> list[bytes]:
    global _INDEX_KEYS
    keys = _INDEX_KEYS
    if count > len(keys):
        # A new list replaces the old one rather than extending it in place, so a thread reading the old
        # list never sees it half grown.
        keys = keys + [str(i).encode() + b"\x00" for i in range(len(keys), count)]
        _INDEX_KEYS = keys
    return keys


def _check_key(key: str) -> None:
    if key.startswith("$"):
        raise _Refused("key names must not start with '$'")
    if "." in key:
        raise _Refused("key names must not contain '.'")


def _name(key: Any, check_keys: bool) -> bytes:
    """The element name bytes with their NUL terminator, or :class:`_Refused`."""
    if not isinstance(key, str):
        raise _Refused(f"documents must have only str keys, found a {type(key).__name__} key")
    if "\x00" in key:
        raise _Refused("key names cannot contain a NUL character")
    if check_keys:
        _check_key(key)
    try:
        name = key.encode() + b"\x00"
    except UnicodeEncodeError:
        raise _Refused("the key is not valid Unicode (lone surrogate)") from None
    if type(key) is str and len(_KEY_NAMES) < _KEY_NAMES_LIMIT:
        _KEY_NAMES[key] = name
    return name


# Raised beyond MAX_NESTING, as the compiled loops raise it; the entry points make it an InvalidDocument.
_NESTED_TOO_DEEPLY: Final = "a document nested too deeply to encode"


def _write_document(buf: bytearray, doc: Any, ctx: _Context, check_keys: bool, depth: int = 0) -> None:
    """Append ``doc`` (any mapping) as a BSON document; ``depth`` is how deep it nests (0: outermost), refused
    beyond ``MAX_NESTING`` as the compiled loops refuse it. The dicts and lists inside are counted; a container
    another function of ``_ENCODERS`` writes (a Code's scope, a DBRef, another mapping or sequence) counts from 0
    again in these loops, and the recursion limit bounds it."""
    if depth > MAX_NESTING:
        raise RecursionError(_NESTED_TOO_DEEPLY)
    if type(doc) is not dict and _type_marker(doc) == _RAW_MARKER:
        buf += _marked_raw_bytes(doc)
        return
    start = len(buf)
    buf += b"\x00\x00\x00\x00"
    encoders = _ENCODERS
    key: Any = None
    try:
        for key, value in doc.items():
            name = _KEY_NAMES.get(key) if type(key) is str else None
            if name is None:
                name = _name(key, check_keys)
            elif check_keys:
                _check_key(key)
            t = type(value)
            if t is str:
                data = value.encode()
                buf += b"\x02"
                buf += name
                buf += _PACK_INT32(len(data) + 1)
                buf += data
                buf += b"\x00"
            elif t is int:
                if _INT32_MIN <= value <= _INT32_MAX:
                    buf += b"\x10"
                    buf += name
                    buf += _PACK_INT32(value)
                else:
                    buf += b"\x12"
                    buf += name
                    buf += _pack_int64(value)
            elif t is float:
                buf += b"\x01"
                buf += name
                buf += _PACK_DOUBLE(value)
            elif t is dict:
                buf += b"\x03"
                buf += name
                _write_document(buf, value, ctx, check_keys, depth + 1)
            elif t is list:
                buf += b"\x04"
                buf += name
                _write_array(buf, value, ctx, check_keys, depth + 1)
            elif t is bool:
                buf += b"\x08"
                buf += name
                buf += b"\x01" if value else b"\x00"
            elif value is None:
                buf += b"\x0a"
                buf += name
            elif t is Int64:
                buf += b"\x12"
                buf += name
                buf += _pack_int64(value)
            elif t is ObjectId:
                buf += b"\x07"
                buf += name
                buf += value.binary
            elif t is Binary and value.subtype != OLD_BINARY_SUBTYPE:
                buf += b"\x05"
                buf += name
                buf += _PACK_INT32(len(value))
                buf += _SUBTYPE_BYTES[value.subtype]
                buf += value
            elif t is bytes:
                buf += b"\x05"
                buf += name
                buf += _PACK_INT32(len(value))
                buf += b"\x00"
                buf += value
            elif t is Timestamp:
                _write_timestamp(buf, name, value, ctx, check_keys)
            else:
                writer = encoders.get(t)
                if writer is not None:
                    writer(buf, name, value, ctx, check_keys)
                else:
                    _write_other(buf, name, value, ctx, check_keys)
    except _Refused as refused:
        refused.path.append(key if isinstance(key, str) else repr(key))
        raise
    except UnicodeEncodeError:
        raise _Refused("strings must be valid Unicode (found a lone surrogate)", str(key)) from None
    buf += b"\x00"
    _PACK_INTO_INT32(buf, start, len(buf) - start)


def _write_array(buf: bytearray, values: Iterable[Any], ctx: _Context, check_keys: bool, depth: int = 0) -> None:
    """Append a list, tuple or generator as a BSON array (a document keyed "0", "1", ...); ``depth`` as for
    :func:`_write_document`."""
    if depth > MAX_NESTING:
        raise RecursionError(_NESTED_TOO_DEEPLY)
    if not isinstance(values, (list, tuple)):
        values = list(values)
    keys = _index_keys(len(values))
    start = len(buf)
    buf += b"\x00\x00\x00\x00"
    encoders = _ENCODERS
    index = 0
    try:
        for index, value in enumerate(values):
            name = keys[index]
            t = type(value)
            if t is str:
                data = value.encode()
                buf += b"\x02"
                buf += name
                buf += _PACK_INT32(len(data) + 1)
                buf += data
                buf += b"\x00"
            elif t is int:
                if _INT32_MIN <= value <= _INT32_MAX:
                    buf += b"\x10"
                    buf += name
                    buf += _PACK_INT32(value)
                else:
                    buf += b"\x12"
                    buf += name
                    buf += _pack_int64(value)
            elif t is float:
                buf += b"\x01"
                buf += name
                buf += _PACK_DOUBLE(value)
            elif t is dict:
                buf += b"\x03"
                buf += name
                _write_document(buf, value, ctx, check_keys, depth + 1)
            elif t is list:
                buf += b"\x04"
                buf += name
                _write_array(buf, value, ctx, check_keys, depth + 1)
            elif t is bool:
                buf += b"\x08"
                buf += name
                buf += b"\x01" if value else b"\x00"
            elif value is None:
                buf += b"\x0a"
                buf += name
            else:
                writer = encoders.get(t)
                if writer is not None:
                    writer(buf, name, value, ctx, check_keys)
                else:
                    _write_other(buf, name, value, ctx, check_keys)
    except _Refused as refused:
        refused.path.append(str(index))
        raise
    except UnicodeEncodeError:
        raise _Refused("strings must be valid Unicode (found a lone surrogate)", str(index)) from None
    buf += b"\x00"
    _PACK_INTO_INT32(buf, start, len(buf) - start)


def _pack_int64(value: int) -> bytes:
    if _INT64_MIN <= value <= _INT64_MAX:
        return _PACK_INT64(value)
    raise _Refused(f"BSON integers are at most 64 bits; {value} does not fit")


def _write_other(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    """Every type but the hottest few: built-in types by exact type, then values marked with a known
    ``_type_marker`` (PyMongo's types), then custom encoders, then subclasses of built-in types (never for a
    marked value), then the fallback encoder."""
    writer = _ENCODERS.get(type(value))
    if writer is not None:
        writer(buf, name, value, ctx, check_keys)
        return
    marker = _type_marker(value)
    if marker is not None and marker in _MARKED_WRITERS:
        _marked_writer(value, marker)(buf, name, value, ctx, check_keys)
        return
    if ctx.encoder_map:
        transform = ctx.encoder_map.get(type(value))
        if transform is not None:
            _write_value_no_custom(buf, name, transform(value), ctx, check_keys)
            return
    if marker is None and _write_subclass(buf, name, value, ctx, check_keys):
        return
    if ctx.fallback is not None:
        _write_value_no_custom(buf, name, ctx.fallback(value), ctx, check_keys)
        return
    if marker is not None:
        _marked_writer(value, marker)  # refuses: the marker is unknown
    raise _Refused(f"cannot encode object of type {type(value).__name__}: {value!r}")


def _write_value_no_custom(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    """Encode the result of a custom encoder or the fallback: built-in types only, so a transform that
    returns its own input type cannot loop."""
    writer = _ENCODERS.get(type(value))
    if writer is not None:
        writer(buf, name, value, ctx, check_keys)
        return
    marker = _type_marker(value)
    if marker is not None:
        _marked_writer(value, marker)(buf, name, value, ctx, check_keys)
    elif not _write_subclass(buf, name, value, ctx, check_keys):
        raise _Refused(
            f"cannot encode object of type {type(value).__name__} (returned by a custom encoder): {value!r}"
        )


def _write_subclass(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> bool:
    for base, writer in _SUBCLASS_ENCODERS:
        if isinstance(value, base):
            writer(buf, name, value, ctx, check_keys)
            return True
    return False


def _write_str(buf: bytearray, name: bytes, value: str, ctx: _Context, check_keys: bool) -> None:
    data = value.encode()
    buf += b"\x02"
    buf += name
    buf += _PACK_INT32(len(data) + 1)
    buf += data
    buf += b"\x00"


def _write_int(buf: bytearray, name: bytes, value: int, ctx: _Context, check_keys: bool) -> None:
    if _INT32_MIN <= value <= _INT32_MAX:
        buf += b"\x10"
        buf += name
        buf += _PACK_INT32(value)
    else:
        buf += b"\x12"
        buf += name
        buf += _pack_int64(value)


def _write_int64(buf: bytearray, name: bytes, value: int, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x12"
    buf += name
    buf += _pack_int64(value)


def _write_float(buf: bytearray, name: bytes, value: float, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x01"
    buf += name
    buf += _PACK_DOUBLE(value)


def _write_bool(buf: bytearray, name: bytes, value: bool, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x08"
    buf += name
    buf += b"\x01" if value else b"\x00"


def _write_none(buf: bytearray, name: bytes, value: None, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x0a"
    buf += name


def _write_mapping(
    buf: bytearray, name: bytes, value: Mapping[str, Any], ctx: _Context, check_keys: bool
) -> None:
    buf += b"\x03"
    buf += name
    _write_document(buf, value, ctx, check_keys)


def _write_list(buf: bytearray, name: bytes, value: Iterable[Any], ctx: _Context, check_keys: bool) -> None:
    buf += b"\x04"
    buf += name
    _write_array(buf, value, ctx, check_keys)


def _write_binary_data(buf: bytearray, name: bytes, data: bytes, subtype: int) -> None:
    buf += b"\x05"
    buf += name
    if subtype == OLD_BINARY_SUBTYPE:
        # The old binary subtype repeats the length inside the payload.
        buf += _PACK_INT32(len(data) + 4)
        buf += b"\x02"
        buf += _PACK_INT32(len(data))
    else:
        buf += _PACK_INT32(len(data))
        buf += subtype.to_bytes(1, "little")
    buf += data


def _write_bytes(buf: bytearray, name: bytes, value: bytes, ctx: _Context, check_keys: bool) -> None:
    _write_binary_data(buf, name, value, 0)


def _write_binary(buf: bytearray, name: bytes, value: Binary, ctx: _Context, check_keys: bool) -> None:
    _write_binary_data(buf, name, value, value.subtype)


def _write_uuid(buf: bytearray, name: bytes, value: uuid.UUID, ctx: _Context, check_keys: bool) -> None:
    representation = ctx.uuid_representation
    if representation == UuidRepresentation.UNSPECIFIED:
        raise _Refused(
            "cannot encode a native uuid.UUID with UuidRepresentation.UNSPECIFIED: set uuid_representation "
            "(STANDARD for new applications) in the codec options or the uuidRepresentation URI option, "
            "or store Binary.from_uuid(value, UuidRepresentation.STANDARD)"
        )
    binary = Binary.from_uuid(value, representation)
    _write_binary_data(buf, name, binary, binary.subtype)


def _write_objectid(buf: bytearray, name: bytes, value: ObjectId, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x07"
    buf += name
    buf += value.binary


def _write_datetime(
    buf: bytearray, name: bytes, value: datetime.datetime, ctx: _Context, check_keys: bool
) -> None:
    buf += b"\x09"
    buf += name
    buf += _PACK_INT64(datetime_to_millis(value))


def _write_datetime_ms(
    buf: bytearray, name: bytes, value: DatetimeMS, ctx: _Context, check_keys: bool
) -> None:
    buf += b"\x09"
    buf += name
    buf += _pack_int64(int(value))


def _write_regex_parts(buf: bytearray, name: bytes, pattern: str, flags: str) -> None:
    if "\x00" in pattern:
        raise _Refused("a regular expression pattern cannot contain a NUL character")
    if "\x00" in flags:
        raise _Refused("regular expression options cannot contain a NUL character")
    buf += b"\x0b"
    buf += name
    buf += pattern.encode()
    buf += b"\x00"
    # BSON requires the option letters in alphabetical order.
    buf += "".join(sorted(flags)).encode()
    buf += b"\x00"


def _write_regex(buf: bytearray, name: bytes, value: Regex, ctx: _Context, check_keys: bool) -> None:
    _write_regex_parts(buf, name, value.pattern, value.flags)


def _write_pattern(
    buf: bytearray, name: bytes, value: re.Pattern[Any], ctx: _Context, check_keys: bool
) -> None:
    pattern = value.pattern
    flags = value.flags
    if isinstance(pattern, bytes):
        pattern = pattern.decode("utf-8")
    else:
        # re.UNICODE is implied for every str pattern, so it says nothing the user chose.
        flags &= ~re.UNICODE
    _write_regex_parts(buf, name, pattern, flags_to_letters(flags))


def _write_dbpointer(buf: bytearray, name: bytes, value: DBPointer, ctx: _Context, check_keys: bool) -> None:
    data = value.namespace.encode()
    buf += b"\x0c"
    buf += name
    buf += _PACK_INT32(len(data) + 1)
    buf += data
    buf += b"\x00"
    buf += value.id.binary


def _write_code(buf: bytearray, name: bytes, value: Code, ctx: _Context, check_keys: bool) -> None:
    data = value.encode()
    scope = value.scope
    if scope is None:
        buf += b"\x0d"
        buf += name
        buf += _PACK_INT32(len(data) + 1)
        buf += data
        buf += b"\x00"
        return
    buf += b"\x0f"
    buf += name
    start = len(buf)
    buf += b"\x00\x00\x00\x00"
    buf += _PACK_INT32(len(data) + 1)
    buf += data
    buf += b"\x00"
    _write_document(buf, scope, ctx, False)
    _PACK_INTO_INT32(buf, start, len(buf) - start)


def _write_symbol(buf: bytearray, name: bytes, value: Symbol, ctx: _Context, check_keys: bool) -> None:
    data = value.encode()
    buf += b"\x0e"
    buf += name
    buf += _PACK_INT32(len(data) + 1)
    buf += data
    buf += b"\x00"


def _write_timestamp(buf: bytearray, name: bytes, value: Timestamp, ctx: _Context, check_keys: bool) -> None:
    try:
        packed = _PACK_TIMESTAMP(value.inc, value.time)
    except struct.error:
        # Only a Timestamp whose internals were tampered with: its constructor checks both fields.
        raise _Refused(f"a Timestamp holds two unsigned 32-bit ints, not {value.time!r} and {value.inc!r}") from None
    buf += b"\x11"
    buf += name
    buf += packed


def _write_decimal128(
    buf: bytearray, name: bytes, value: Decimal128, ctx: _Context, check_keys: bool
) -> None:
    data = value.bid
    if type(data) is not bytes or len(data) != 16:
        # Only a Decimal128 whose internals were tampered with: writing it would make malformed BSON.
        raise _Refused(f"a Decimal128 holds 16 bytes, this one holds {data!r}")
    buf += b"\x13"
    buf += name
    buf += data


def _write_minkey(buf: bytearray, name: bytes, value: MinKey, ctx: _Context, check_keys: bool) -> None:
    buf += b"\xff"
    buf += name


def _write_maxkey(buf: bytearray, name: bytes, value: MaxKey, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x7f"
    buf += name


def _write_undefined(buf: bytearray, name: bytes, value: Undefined, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x06"
    buf += name


def _write_dbref(buf: bytearray, name: bytes, value: DBRef, ctx: _Context, check_keys: bool) -> None:
    buf += b"\x03"
    buf += name
    # The $-prefixed names are the point of a DBRef, so check_keys does not apply to them.
    _write_document(buf, value.as_doc(), ctx, False)


_Writer = Callable[[bytearray, bytes, Any, _Context, bool], None]

_ENCODERS: Final[dict[type, _Writer]] = {
    str: _write_str,
    int: _write_int,
    float: _write_float,
    bool: _write_bool,
    type(None): _write_none,
    dict: _write_mapping,
    list: _write_list,
    tuple: _write_list,
    types.GeneratorType: _write_list,
    bytes: _write_bytes,
    Binary: _write_binary,
    uuid.UUID: _write_uuid,
    ObjectId: _write_objectid,
    datetime.datetime: _write_datetime,
    DatetimeMS: _write_datetime_ms,
    Regex: _write_regex,
    re.Pattern: _write_pattern,
    DBPointer: _write_dbpointer,
    Code: _write_code,
    Symbol: _write_symbol,
    Int64: _write_int64,
    Timestamp: _write_timestamp,
    Decimal128: _write_decimal128,
    MinKey: _write_minkey,
    MaxKey: _write_maxkey,
    Undefined: _write_undefined,
    DBRef: _write_dbref,
    RawBSONDocument: _write_mapping,
}

# Values from other BSON libraries. PyMongo's ``bson`` types (and mongio's own, which follow the same
# convention) say which BSON type they are with an int class attribute ``_type_marker``. Such a value is
# written from the attributes that marker promises, before any look at its base classes: PyMongo's Binary,
# Code and Int64 are bytes, str and int subclasses, and writing them as those would silently change the
# stored type. Nothing here imports another library; each attribute is checked, and a value that does not
# hold what its marker promises (or whose marker is unknown) is refused rather than written as something else.

_MARKED_TYPES_LIMIT: Final = 256
"""How many types found by marker are remembered in ``_ENCODERS`` (so a program minting classes cannot
grow it without limit)."""


def _marked_attribute(value: Any, attribute: str, kind: str) -> Any:
    try:
        return getattr(value, attribute)
    except AttributeError:
        raise _Refused(
            f"{_type_name(value)} is marked as a BSON {kind} (_type_marker) but has no {attribute!r} attribute"
        ) from None


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def _marked_mismatch(value: Any, kind: str, what: str) -> _Refused:
    return _Refused(f"{_type_name(value)} is marked as a BSON {kind} (_type_marker) but {what}")


def _marked_bytes(value: Any, attribute: str, kind: str, size: int) -> bytes:
    data = _marked_attribute(value, attribute, kind)
    if not isinstance(data, bytes) or len(data) != size:
        raise _marked_mismatch(value, kind, f"its {attribute!r} is not {size} bytes: {data!r}")
    return data


def _marked_uint32(value: Any, attribute: str, kind: str) -> int:
    number = _marked_attribute(value, attribute, kind)
    if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number <= 0xFFFFFFFF:
        raise _marked_mismatch(value, kind, f"its {attribute!r} is not an unsigned 32-bit int: {number!r}")
    return number


def _write_marked_binary(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    subtype = _marked_attribute(value, "subtype", "binary")
    if not isinstance(subtype, int) or isinstance(subtype, bool) or not 0 <= subtype <= 255:
        raise _marked_mismatch(value, "binary", f"its subtype is not an int from 0 to 255: {subtype!r}")
    if not isinstance(value, bytes):
        raise _marked_mismatch(value, "binary", "it is not bytes")
    _write_binary_data(buf, name, value, subtype)


def _write_marked_objectid(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    data = _marked_bytes(value, "binary", "ObjectId", 12)
    buf += b"\x07"
    buf += name
    buf += data


def _write_marked_datetime(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    try:
        millis = int(value)
    except (TypeError, ValueError):
        raise _marked_mismatch(value, "datetime", "int() of it does not give its milliseconds") from None
    buf += b"\x09"
    buf += name
    buf += _pack_int64(millis)


def _write_marked_regex(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    pattern = _marked_attribute(value, "pattern", "regular expression")
    flags = _marked_attribute(value, "flags", "regular expression")
    if isinstance(pattern, bytes):
        try:
            pattern = pattern.decode("utf-8")
        except UnicodeDecodeError:
            raise _marked_mismatch(value, "regular expression", "its pattern is not UTF-8") from None
    if not isinstance(pattern, str):
        raise _marked_mismatch(value, "regular expression", f"its pattern is not a str: {pattern!r}")
    if isinstance(flags, int):
        # An int of ``re`` flags (PyMongo's form); bits with no BSON option letter are dropped, as PyMongo does.
        flags = flags_to_letters(flags)
    elif not isinstance(flags, str):
        raise _marked_mismatch(value, "regular expression", f"its flags are not an int or a str: {flags!r}")
    _write_regex_parts(buf, name, pattern, flags)


def _write_marked_code(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    scope = _marked_attribute(value, "scope", "JavaScript code")
    if not isinstance(value, str):
        raise _marked_mismatch(value, "JavaScript code", "it is not a str")
    if scope is not None and not isinstance(scope, Mapping):
        raise _marked_mismatch(value, "JavaScript code", f"its scope is not a mapping: {scope!r}")
    _write_code(buf, name, cast(Code, value), ctx, check_keys)


def _write_marked_timestamp(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    time = _marked_uint32(value, "time", "timestamp")
    inc = _marked_uint32(value, "inc", "timestamp")
    buf += b"\x11"
    buf += name
    buf += _PACK_TIMESTAMP(inc, time)


def _write_marked_int64(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    if not isinstance(value, int):
        raise _marked_mismatch(value, "int64", "it is not an int")
    _write_int64(buf, name, value, ctx, check_keys)


def _write_marked_decimal128(
    buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool
) -> None:
    data = _marked_bytes(value, "bid", "Decimal128", 16)
    buf += b"\x13"
    buf += name
    buf += data


def _write_marked_dbref(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    as_doc = _marked_attribute(value, "as_doc", "DBRef")
    doc = as_doc() if callable(as_doc) else None
    if not isinstance(doc, Mapping):
        raise _marked_mismatch(value, "DBRef", "its as_doc() does not return a mapping")
    buf += b"\x03"
    buf += name
    # The $-prefixed names are the point of a DBRef, so check_keys does not apply to them.
    _write_document(buf, doc, ctx, False)


def _marked_raw_bytes(value: Any) -> bytes:
    """The BSON bytes of a document marked as raw, checked to be one whole document."""
    if isinstance(value, RawBSONDocument):
        return value.raw  # checked when it was made
    data = _marked_attribute(value, "raw", "raw document")
    if (
        not isinstance(data, bytes)
        or len(data) < 5
        or int.from_bytes(data[:4], "little", signed=True) != len(data)
        or data[-1] != 0
    ):
        raise _marked_mismatch(value, "raw document", "its 'raw' is not one whole BSON document")
    return data


def _write_marked_raw(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    data = _marked_raw_bytes(value)
    buf += b"\x03"
    buf += name
    buf += data


def _write_marked_dbpointer(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    namespace = _marked_attribute(value, "namespace", "DBPointer")
    oid = _marked_attribute(value, "id", "DBPointer")
    if not isinstance(namespace, str):
        raise _marked_mismatch(value, "DBPointer", f"its namespace is not a str: {namespace!r}")
    if getattr(oid, "_type_marker", None) != 7:
        raise _marked_mismatch(value, "DBPointer", f"its id is not an ObjectId: {oid!r}")
    data = namespace.encode()
    oid_bytes = _marked_bytes(oid, "binary", "ObjectId", 12)
    buf += b"\x0c"
    buf += name
    buf += _PACK_INT32(len(data) + 1)
    buf += data
    buf += b"\x00"
    buf += oid_bytes


def _write_marked_symbol(buf: bytearray, name: bytes, value: Any, ctx: _Context, check_keys: bool) -> None:
    if not isinstance(value, str):
        raise _marked_mismatch(value, "symbol", "it is not a str")
    _write_symbol(buf, name, cast(Symbol, value), ctx, check_keys)


# Marker -> writer. 6, 12 and 14 are mongio's deprecated types (Undefined, DBPointer, Symbol), which PyMongo
# does not have; the rest are PyMongo's numbering, which mongio's types share.
_MARKED_WRITERS: Final[dict[int, _Writer]] = {
    5: _write_marked_binary,
    6: _write_undefined,
    7: _write_marked_objectid,
    9: _write_marked_datetime,
    11: _write_marked_regex,
    12: _write_marked_dbpointer,
    13: _write_marked_code,
    14: _write_marked_symbol,
    17: _write_marked_timestamp,
    18: _write_marked_int64,
    19: _write_marked_decimal128,
    100: _write_marked_dbref,
    101: _write_marked_raw,
    127: _write_maxkey,
    255: _write_minkey,
}


KNOWN_TYPE_MARKERS: Final = frozenset(_MARKED_WRITERS)
"""The ``_type_marker`` values the encoder writes itself (so no custom type encoder may take them over)."""


def _marked_writer(value: Any, marker: int) -> _Writer:
    """The writer for a marked value, remembered for its type; unknown markers are refused."""
    writer = _MARKED_WRITERS.get(marker)
    if writer is None:
        raise _Refused(
            f"cannot encode object of type {_type_name(value)}: its _type_marker {marker} is not a BSON type "
            f"this encoder knows, so it is not written as anything else: {value!r}"
        )
    if len(_ENCODERS) < len(BUILT_IN_TYPES) + _MARKED_TYPES_LIMIT:
        # The next value of this type is found by the exact-type lookup, in either element loop.
        _ENCODERS[type(value)] = writer
    return writer


# For subclasses of the types above (an IntEnum, a SON, an OrderedDict, ...), most specific first: a
# subclass of Int64 must stay an int64 and a Code or Symbol must not become a plain string.
_SUBCLASS_ENCODERS: Final[tuple[tuple[type | tuple[type, ...], _Writer], ...]] = (
    (bool, _write_bool),
    (Int64, _write_int64),
    (int, _write_int),
    (float, _write_float),
    (Code, _write_code),
    (Symbol, _write_symbol),
    (str, _write_str),
    (Binary, _write_binary),
    (bytes, _write_bytes),
    (Mapping, _write_mapping),
    ((list, tuple), _write_list),
    (uuid.UUID, _write_uuid),
    (ObjectId, _write_objectid),
    (datetime.datetime, _write_datetime),
    (DatetimeMS, _write_datetime_ms),
    (Regex, _write_regex),
    (DBPointer, _write_dbpointer),
    (Timestamp, _write_timestamp),
    (Decimal128, _write_decimal128),
    (MinKey, _write_minkey),
    (MaxKey, _write_maxkey),
    (Undefined, _write_undefined),
    (DBRef, _write_dbref),
)

BUILT_IN_TYPES: Final[tuple[type, ...]] = tuple(_ENCODERS)
"""The types the encoder handles itself; custom type encoders cannot take them (or their subclasses) over."""


def encode(
    document: Mapping[str, Any],
    check_keys: bool = False,
    codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    *,
    max_size: int | None = MAX_BSON_SIZE,
) -> bytes:
    """Encode a mapping as BSON bytes.

    Raises :class:`~mongio.bson.errors.InvalidDocument` naming the key path (e.g. ``'a.b.0'``) and the
    reason when a value is not BSON: a non-str key or one containing NUL, an int beyond 64 bits, a type
    nothing can encode (after the type registry and its fallback encoder), a document nested too deeply (or
    containing itself), or a result over ``max_size`` bytes (16 MiB by default, the usual server
    ``maxBsonObjectSize``; None for no limit). With ``check_keys``, keys starting with ``$`` or containing
    ``.`` are refused too.
    """
    if type(document) is not dict and not isinstance(document, Mapping):
        raise TypeError(f"encode takes a mapping, not {type(document).__name__}")
    if type(document) is not dict and _type_marker(document) == _RAW_MARKER:
        try:
            data = _marked_raw_bytes(document)
        except _Refused as refused:
            raise InvalidDocument(f"cannot encode the document: {refused.reason}") from None
    else:
        buf = bytearray()
        _append_document(buf, document, _context(codec_options), check_keys)
        data = bytes(buf)
    if max_size is not None and len(data) > max_size:
        raise InvalidDocument(f"the BSON document is {len(data)} bytes, over the {max_size}-byte limit")
    return data


def encode_into(
    buf: bytearray, document: Mapping[str, Any], codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS
) -> None:
    """Append ``document`` as BSON to ``buf``, as :func:`encode` would make it but with no size limit (the
    caller checks what it appended) and no intermediate ``bytes``. On error ``buf`` holds a partial
    document: the caller discards it."""
    if type(document) is not dict and not isinstance(document, Mapping):
        raise TypeError(f"encode takes a mapping, not {type(document).__name__}")
    try:
        context = codec_options._cache["encode"]  # a lookup, not _context's call: every command is encoded here
    except KeyError:
        context = _context(codec_options)
    _append_document(buf, document, context, False)


def pack_inserts(
    documents: list[Any], codec_options: CodecOptions, encode_one: Callable[[Any], tuple[bytes, Any]]
) -> tuple[bytearray, list[int], list[Any]]:
    """An insert's documents encoded back to back in one buffer: returns it, where each document ends in it,
    and each document's ``_id``. A dict without ``_id`` gets a new ObjectId, written first and stored in the
    dict. With the compiled loops the whole list is one pass; ``encode_one`` (one document's BSON and ``_id``)
    does the rest: documents that are not dicts, and every document without the compiled loops or when the
    options make ids of another class."""
    buf = bytearray()
    if _SPEEDUPS is not None and _write_document is not _python_write_document and codec_options._packs_inserts():
        try:
            ends, ids = _SPEEDUPS.write_inserts(buf, documents, _context(codec_options), generation_state(), encode_one)
        except (_Refused, RecursionError) as refused:
            raise _invalid_document(refused) from None
        return buf, ends, ids
    ends = []
    ids = []
    for document in documents:
        encoded, _id = encode_one(document)
        buf += encoded
        ends.append(len(buf))
        ids.append(_id)
    return buf, ends, ids


def encode_insert_document(
    document: Any, codec_options: CodecOptions, encode_one: Callable[[Any], tuple[bytes, Any]]
) -> tuple[bytes | bytearray, Any]:
    """One insert's document, encoded as :func:`pack_inserts` encodes each of its list: returns its BSON and
    its ``_id``. For ``insert_one``, which needs neither the list of ends nor the list of ids."""
    if _SPEEDUPS is not None and _write_document is not _python_write_document and codec_options._packs_inserts():
        buf = bytearray()
        try:
            _id = _SPEEDUPS.write_insert(_context(codec_options), generation_state(), encode_one, buf, document)
        except (_Refused, RecursionError) as refused:
            raise _invalid_document(refused) from None
        return buf, _id
    return encode_one(document)


def insert_appender(
    codec_options: CodecOptions, encode_one: Callable[[Any], tuple[bytes, Any]]
) -> Callable[[bytearray, Any], Any]:
    """A function that appends one document of an insert to a buffer, as :func:`pack_inserts` does each of
    its list, and returns the document's ``_id``: for callers that write other bytes between the documents.
    Call it inside :func:`refusals_as_invalid_document`."""
    if _SPEEDUPS is not None and _write_document is not _python_write_document and codec_options._packs_inserts():
        return functools.partial(_SPEEDUPS.write_insert, _context(codec_options), generation_state(), encode_one)

    def append(buf: bytearray, document: Any) -> Any:
        encoded, _id = encode_one(document)
        buf += encoded
        return _id

    return append


@contextlib.contextmanager
def refusals_as_invalid_document() -> Iterator[None]:
    """Turn a document the compiled loops refused (or one nested too deeply) into ``InvalidDocument``."""
    try:
        yield
    except (_Refused, RecursionError) as refused:
        raise _invalid_document(refused) from None


def _append_document(buf: bytearray, document: Mapping[str, Any], ctx: _Context, check_keys: bool) -> None:
    try:
        _write_document(buf, document, ctx, check_keys)
    except (_Refused, RecursionError) as refused:
        raise _invalid_document(refused) from None


def _invalid_document(refused: _Refused | RecursionError) -> InvalidDocument:
    """The error for a document a writer refused (naming the key path), or nested too deeply to write."""
    if isinstance(refused, _Refused):
        path = ".".join(reversed(refused.path))
        return InvalidDocument(f"cannot encode key {path!r}: {refused.reason}")
    return InvalidDocument("cannot encode the document: it is nested too deeply, or contains itself")


# The compiled element loops (``_speedups.c``), when the extension was built, replace the two Python loops
# above; every other function here reaches them through these module globals. They write every BSON type
# themselves as the writers above do, and hand back to those writers what they do not write exactly (subclasses,
# other mappings and sequences, values that do not hold what their class promises, the fallback encoder), so
# both paths make the same bytes and the same refusals. MONGIO_NO_SPEEDUPS=1 keeps Python's.
_python_write_document: Final = _write_document
_python_write_array: Final = _write_array


_SPEEDUPS: Final = load_speedups()
if _SPEEDUPS is not None:
    _SPEEDUPS.configure_encoder(
        _Refused,
        _python_write_document,
        _python_write_array,
        _ENCODERS,
        _write_other,
        _name,
        _check_key,
        _pack_int64,
        Int64,
        _write_objectid,
        _write_marked_objectid,
        _write_marked_int64,
    )
    # The classes whose values the compiled loops write themselves, as the writers above write them.
    _SPEEDUPS.configure_types(
        {
            "Binary": Binary,
            "UUID": uuid.UUID,
            "Regex": Regex,
            "Code": Code,
            "Symbol": Symbol,
            "DBPointer": DBPointer,
            "Decimal128": Decimal128,
            "DatetimeMS": DatetimeMS,
            "ObjectId": ObjectId,
            "Timestamp": Timestamp,
            "MinKey()": MinKey(),
            "MaxKey()": MaxKey(),
            "Undefined()": Undefined(),
            "DBRef": DBRef,
            "RawBSONDocument": RawBSONDocument,
            "write_value_no_custom": _write_value_no_custom,
            "re.Pattern": re.Pattern,
            "write_marked_binary": _write_marked_binary,
            "write_marked_datetime": _write_marked_datetime,
            "write_marked_regex": _write_marked_regex,
            "write_marked_code": _write_marked_code,
            "write_marked_timestamp": _write_marked_timestamp,
            "write_marked_decimal128": _write_marked_decimal128,
            "write_marked_raw": _write_marked_raw,
            "write_minkey": _write_minkey,
            "write_maxkey": _write_maxkey,
            "write_undefined": _write_undefined,
        }
    )


def use_speedups(enabled: bool) -> bool:
    """Encode with the compiled loops (when built) or with the Python ones; return whether compiled are on.

    For tests and benchmarks that compare the two paths; applications have no reason to call it.
    """
    global _write_document, _write_array
    if enabled and _SPEEDUPS is not None:
        _write_document = _SPEEDUPS.write_document
        _write_array = _SPEEDUPS.write_array
        return True
    _write_document = _python_write_document
    _write_array = _python_write_array
    return False


use_speedups(True)
