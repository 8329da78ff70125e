"""The pure-Python BSON decoder: BSON bytes to Python documents.

The input is read in place from one ``bytes`` object. Every length is checked against the end of the
enclosing document before it is trusted, so malformed input raises :class:`InvalidBSON` and never reads
into a neighbouring document. The hottest element types are decoded inline in the two element loops (one
for documents, one for arrays, which skip their keys); the rest go through one function per type in
``_READERS``. Low-level failures (a short buffer under ``struct``, a missing NUL, bad UTF-8, too deep a
nesting) are turned into :class:`InvalidBSON` once, at the public entry points.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import IO, Any, Final

from mongio.bson._compiled import load_speedups
from mongio.bson._limits import MAX_NESTING, NESTED_TOO_DEEPLY
from mongio.bson.binary import OLD_BINARY_SUBTYPE, OLD_UUID_SUBTYPE, UUID_SUBTYPE, Binary, UuidRepresentation
from mongio.bson.code import Code
from mongio.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.bson.datetime_ms import (
    EPOCH_AWARE,
    EPOCH_NAIVE,
    MAX_DATETIME_MS,
    MIN_DATETIME_MS,
    DatetimeConversion,
    DatetimeMS,
    millis_to_datetime,
)
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.errors import InvalidBSON
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.raw import RawBSONDocument
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp

__all__ = ["decode", "decode_all", "decode_element", "decode_file_iter", "decode_iter", "index_elements"]

_UNPACK_INT32: Final = struct.Struct("<i").unpack_from
_UNPACK_INT64: Final = struct.Struct("<q").unpack_from
_UNPACK_DOUBLE: Final = struct.Struct("<d").unpack_from
_UNPACK_TIMESTAMP: Final = struct.Struct("<II").unpack_from

_TIMEDELTA: Final = datetime.timedelta
_OBJECTID_FROM_BYTES: Final = ObjectId._from_bytes
_TIMESTAMP: Final = Timestamp._from_decoded
_CODE: Final = Code._from_decoded
_MIN_KEY: Final = MinKey()
_MAX_KEY: Final = MaxKey()
_UNDEFINED: Final = Undefined()

# Failures of the low-level reads that mean the input is malformed: struct.error (too few bytes),
# ValueError (a missing NUL, bad UTF-8), IndexError, OverflowError (a datetime out of range),
# RecursionError (absurd nesting), KeyError (an unknown element type). Anything else (say, a TypeError from
# a custom type decoder) is the application's and propagates unchanged.
_MALFORMED: Final = (struct.error, ValueError, IndexError, OverflowError, RecursionError, KeyError)

# The decoding context: the options unpacked once per CodecOptions into a tuple the loops unpack in one step.
# (the options raw documents are made with, document_class, is_dict, is_raw, utf8 decoding function, decoder_map or None, datetime_mode,
#  tz_aware, tzinfo, datetime_conversion, uuid_representation, hot type factories or None)
_Utf8 = Callable[[bytes], str]
_Context = tuple[
    CodecOptions,
    Any,
    bool,
    bool,
    _Utf8,
    "dict[Any, Callable[[Any], Any]] | None",
    int,
    bool,
    Any,
    int,
    int,
    "tuple[Any, Any, Any] | None",
]

# How a UTC datetime is built: the common cases avoid the general conversion function.
_DATETIME_NAIVE: Final = 0
_DATETIME_UTC: Final = 1
_DATETIME_GENERAL: Final = 2


def _utf8_decoder(handler: str) -> _Utf8:
    if handler == "strict":
        # The argument-free call is markedly cheaper than passing the codec and handler names.
        return bytes.decode
    return lambda raw: raw.decode("utf-8", handler)


def _context(options: CodecOptions) -> _Context:
    cache = options._cache
    ctx = cache.get("decode")
    if ctx is None:
        document_class = options.document_class
        is_raw = getattr(document_class, "_type_marker", None) == 101
        decoder_map = options._decoder_transforms() or None
        conversion = options.datetime_conversion
        tzinfo = options._decoding_tzinfo()
        if conversion in (DatetimeConversion.DATETIME, DatetimeConversion.DATETIME_AUTO):
            if not options.tz_aware:
                mode = _DATETIME_NAIVE
            elif tzinfo is None or tzinfo is datetime.UTC:
                mode = _DATETIME_UTC
            else:
                mode = _DATETIME_GENERAL
        else:
            mode = _DATETIME_GENERAL
        ctx = cache["decode"] = (
            options._raw_document_options(),
            document_class,
            document_class is dict,
            is_raw,
            _utf8_decoder(options.unicode_decode_error_handler),
            decoder_map,
            mode,
            options.tz_aware,
            tzinfo,
            int(conversion),
            int(options.uuid_representation),
            options._hot_type_factories(),
        )
    return ctx


def _malformed(what: str) -> InvalidBSON:
    return InvalidBSON(what)


def _read_document(data: bytes, pos: int, end: int, ctx: _Context, depth: int = 0) -> Any:
    """Decode the elements from ``pos`` up to ``end`` (the index of the document's trailing NUL); ``depth`` is
    how deep the document nests (0: an outermost one), refused beyond ``MAX_NESTING``."""
    if depth > MAX_NESTING:
        raise InvalidBSON(NESTED_TOO_DEEPLY)
    _options, document_class, is_dict, is_raw, utf8, decoder_map = ctx[:6]
    doc = {} if is_dict else document_class()
    find = data.find
    unpack_int32 = _UNPACK_INT32
    while pos < end:
        kind = data[pos]
        key_end = find(b"\x00", pos + 1, end)
        if key_end < 0:
            raise _malformed("an element name is missing its NUL terminator")
        key = utf8(data[pos + 1 : key_end])
        pos = key_end + 1
        value: Any
        # The order of these tests follows how common each type is.
        if kind == 2:
            size = unpack_int32(data, pos)[0]
            pos += 4
            value_end = pos + size - 1
            if size < 1 or value_end >= end or data[value_end]:
                raise _malformed(f"bad string length {size} for key {key!r}")
            value = utf8(data[pos:value_end])
            pos = value_end + 1
        elif kind == 16:
            if pos + 4 > end:
                raise _malformed(f"int32 for key {key!r} runs past the end of its document")
            value = unpack_int32(data, pos)[0]
            pos += 4
        elif kind == 3:
            size = unpack_int32(data, pos)[0]
            value_end = pos + size - 1
            if size < 5 or value_end >= end or data[value_end]:
                raise _malformed(f"bad embedded document length {size} for key {key!r}")
            if is_raw:
                value = document_class(data[pos : value_end + 1], ctx[0])
            else:
                value = _read_document(data, pos + 4, value_end, ctx, depth + 1)
                if "$ref" in value:
                    value = _to_dbref(value)
            pos = value_end + 1
        elif kind == 1:
            if pos + 8 > end:
                raise _malformed(f"double for key {key!r} runs past the end of its document")
            value = _UNPACK_DOUBLE(data, pos)[0]
            pos += 8
        elif kind == 4:
            size = unpack_int32(data, pos)[0]
            value_end = pos + size - 1
            if size < 5 or value_end >= end or data[value_end]:
                raise _malformed(f"bad array length {size} for key {key!r}")
            value = _read_array(data, pos + 4, value_end, ctx, depth + 1)
            pos = value_end + 1
        elif kind == 8:
            if pos >= end:
                raise _malformed(f"boolean for key {key!r} runs past the end of its document")
            byte = data[pos]
            if byte > 1:
                raise _malformed(f"boolean for key {key!r} is {byte}, not 0 or 1")
            value = byte == 1
            pos += 1
        elif kind == 18:
            if pos + 8 > end:
                raise _malformed(f"int64 for key {key!r} runs past the end of its document")
            value = Int64(_UNPACK_INT64(data, pos)[0])
            pos += 8
        elif kind == 7:
            if pos + 12 > end:
                raise _malformed(f"ObjectId for key {key!r} runs past the end of its document")
            value = _OBJECTID_FROM_BYTES(data[pos : pos + 12])
            pos += 12
        elif kind == 10:
            value = None
        elif kind == 17:
            # Every reply carries two ($clusterTime and operationTime).
            if pos + 8 > end:
                raise _malformed(f"timestamp for key {key!r} runs past the end of its document")
            inc, time = _UNPACK_TIMESTAMP(data, pos)
            value = _TIMESTAMP(time, inc)
            pos += 8
        elif kind == 15:
            value, pos = _r_code_with_scope(data, pos, end, ctx, depth + 1)  # its scope nests one level deeper
        else:
            reader = _READERS.get(kind)
            if reader is None:
                raise _malformed(f"unknown BSON type 0x{kind:02x} for key {key!r}")
            value, pos = reader(data, pos, end, ctx)
        if decoder_map is not None:
            transform = decoder_map.get(type(value))
            if transform is not None:
                value = transform(value)
        doc[key] = value
    return doc


def _read_array(data: bytes, pos: int, end: int, ctx: _Context, depth: int = 0) -> list[Any]:
    """Decode an array's elements, ignoring their keys (degenerate keys are accepted); ``depth`` as for
    :func:`_read_document`."""
    if depth > MAX_NESTING:
        raise InvalidBSON(NESTED_TOO_DEEPLY)
    _options, document_class, _is_dict, is_raw, utf8, decoder_map = ctx[:6]
    items: list[Any] = []
    append = items.append
    find = data.find
    unpack_int32 = _UNPACK_INT32
    while pos < end:
        kind = data[pos]
        key_end = find(b"\x00", pos + 1, end)
        if key_end < 0:
            raise _malformed("an array index is missing its NUL terminator")
        pos = key_end + 1
        value: Any
        if kind == 2:
            size = unpack_int32(data, pos)[0]
            pos += 4
            value_end = pos + size - 1
            if size < 1 or value_end >= end or data[value_end]:
                raise _malformed(f"bad string length {size} in an array")
            value = utf8(data[pos:value_end])
            pos = value_end + 1
        elif kind == 16:
            if pos + 4 > end:
                raise _malformed("int32 runs past the end of its array")
            value = unpack_int32(data, pos)[0]
            pos += 4
        elif kind == 3:
            size = unpack_int32(data, pos)[0]
            value_end = pos + size - 1
            if size < 5 or value_end >= end or data[value_end]:
                raise _malformed(f"bad embedded document length {size} in an array")
            if is_raw:
                value = document_class(data[pos : value_end + 1], ctx[0])
            else:
                value = _read_document(data, pos + 4, value_end, ctx, depth + 1)
                if "$ref" in value:
                    value = _to_dbref(value)
            pos = value_end + 1
        elif kind == 1:
            if pos + 8 > end:
                raise _malformed("double runs past the end of its array")
            value = _UNPACK_DOUBLE(data, pos)[0]
            pos += 8
        elif kind == 4:
            size = unpack_int32(data, pos)[0]
            value_end = pos + size - 1
            if size < 5 or value_end >= end or data[value_end]:
                raise _malformed(f"bad array length {size} in an array")
            value = _read_array(data, pos + 4, value_end, ctx, depth + 1)
            pos = value_end + 1
        elif kind == 8:
            if pos >= end:
                raise _malformed("boolean runs past the end of its array")
            byte = data[pos]
            if byte > 1:
                raise _malformed(f"boolean in an array is {byte}, not 0 or 1")
            value = byte == 1
            pos += 1
        elif kind == 18:
            if pos + 8 > end:
                raise _malformed("int64 runs past the end of its array")
            value = Int64(_UNPACK_INT64(data, pos)[0])
            pos += 8
        elif kind == 7:
            if pos + 12 > end:
                raise _malformed("ObjectId runs past the end of its array")
            value = _OBJECTID_FROM_BYTES(data[pos : pos + 12])
            pos += 12
        elif kind == 10:
            value = None
        elif kind == 15:
            value, pos = _r_code_with_scope(data, pos, end, ctx, depth + 1)  # its scope nests one level deeper
        else:
            reader = _READERS.get(kind)
            if reader is None:
                raise _malformed(f"unknown BSON type 0x{kind:02x} in an array")
            value, pos = reader(data, pos, end, ctx)
        if decoder_map is not None:
            transform = decoder_map.get(type(value))
            if transform is not None:
                value = transform(value)
        append(value)
    return items


def _to_dbref(doc: Any) -> Any:
    """A DBRef when the document has the DBRef shape (string $ref, an $id, string $db if any), else ``doc``."""
    ref = doc["$ref"]
    if not isinstance(ref, str) or "$id" not in doc:
        return doc
    database = doc.get("$db")
    if "$db" in doc and not isinstance(database, str):
        return doc
    extra = {k: v for k, v in doc.items() if k not in ("$ref", "$id", "$db")}
    return DBRef(ref, doc["$id"], database, extra)


def _read_string(data: bytes, pos: int, end: int, utf8: _Utf8) -> tuple[str, int]:
    size = _UNPACK_INT32(data, pos)[0]
    pos += 4
    value_end = pos + size - 1
    if size < 1 or value_end >= end or data[value_end]:
        raise _malformed(f"bad string length {size}")
    return utf8(data[pos:value_end]), value_end + 1


def _read_cstring(data: bytes, pos: int, end: int, utf8: _Utf8) -> tuple[str, int]:
    stop = data.find(b"\x00", pos, end)
    if stop < 0:
        raise _malformed("a C string is missing its NUL terminator")
    return utf8(data[pos:stop]), stop + 1


# Readers for every type: (data, position of the value, end of the enclosing document, context) ->
# (value, position after the value). The element loops inline the common types and use these for the rest;
# the hot types are here too so a single value can be decoded on its own.


def _r_double(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 8 > end:
        raise _malformed("a double runs past the end of its document")
    return _UNPACK_DOUBLE(data, pos)[0], pos + 8


def _r_string(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    return _read_string(data, pos, end, ctx[4])


def _r_document(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    size = _UNPACK_INT32(data, pos)[0]
    value_end = pos + size - 1
    if size < 5 or value_end >= end or data[value_end]:
        raise _malformed(f"bad embedded document length {size}")
    if ctx[3]:
        return ctx[1](data[pos : value_end + 1], ctx[0]), value_end + 1
    value = _read_document(data, pos + 4, value_end, ctx)
    if "$ref" in value:
        value = _to_dbref(value)
    return value, value_end + 1


def _r_array(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    size = _UNPACK_INT32(data, pos)[0]
    value_end = pos + size - 1
    if size < 5 or value_end >= end or data[value_end]:
        raise _malformed(f"bad array length {size}")
    return _read_array(data, pos + 4, value_end, ctx), value_end + 1


def _r_binary(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    size = _UNPACK_INT32(data, pos)[0]
    start = pos + 5
    stop = start + size
    if size < 0 or stop > end:
        raise _malformed(f"bad binary length {size}")
    subtype = data[pos + 4]
    if subtype == OLD_BINARY_SUBTYPE:
        # The payload starts with its own length: fewer than 4 bytes cannot hold it.
        inner = _UNPACK_INT32(data, start)[0] if size >= 4 else -1
        if size < 4 or inner != size - 4:
            raise _malformed(f"binary subtype 2 has inner length {inner}, expected {size - 4}")
        start += 4
    payload = data[start:stop]
    if subtype == 0:
        return payload, stop
    if subtype in (UUID_SUBTYPE, OLD_UUID_SUBTYPE) and len(payload) == 16:
        representation = ctx[10]
        if subtype == UUID_SUBTYPE:
            if representation == UuidRepresentation.STANDARD:
                return uuid.UUID(bytes=payload), stop
        elif representation not in (UuidRepresentation.UNSPECIFIED, UuidRepresentation.STANDARD):
            return Binary(payload, OLD_UUID_SUBTYPE).as_uuid(representation), stop
    return Binary(payload, subtype), stop


def _r_undefined(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    return _UNDEFINED, pos


def _r_objectid(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 12 > end:
        raise _malformed("an ObjectId runs past the end of its document")
    return _OBJECTID_FROM_BYTES(data[pos : pos + 12]), pos + 12


def _r_bool(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos >= end:
        raise _malformed("a boolean runs past the end of its document")
    byte = data[pos]
    if byte > 1:
        raise _malformed(f"a boolean is {byte}, not 0 or 1")
    return byte == 1, pos + 1


def _r_datetime(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 8 > end:
        raise _malformed("a datetime runs past the end of its document")
    millis = _UNPACK_INT64(data, pos)[0]
    mode = ctx[6]
    if mode != _DATETIME_GENERAL and MIN_DATETIME_MS <= millis <= MAX_DATETIME_MS:
        # timedelta(days, seconds, microseconds, milliseconds): positional is cheaper than the keyword.
        if mode == _DATETIME_NAIVE:
            return EPOCH_NAIVE + _TIMEDELTA(0, 0, 0, millis), pos + 8
        return EPOCH_AWARE + _TIMEDELTA(0, 0, 0, millis), pos + 8
    return millis_to_datetime(millis, ctx[9], ctx[7], ctx[8]), pos + 8


def _r_null(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    return None, pos


def _r_regex(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    utf8 = ctx[4]
    pattern, pos = _read_cstring(data, pos, end, utf8)
    flags, pos = _read_cstring(data, pos, end, utf8)
    return Regex(pattern, flags), pos


def _r_dbpointer(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    namespace, pos = _read_string(data, pos, end, ctx[4])
    if pos + 12 > end:
        raise _malformed("a DBPointer's ObjectId runs past the end of its document")
    return DBPointer(namespace, _OBJECTID_FROM_BYTES(data[pos : pos + 12])), pos + 12


def _r_code(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    code, pos = _read_string(data, pos, end, ctx[4])
    return _CODE(code, None), pos


def _r_symbol(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    text, pos = _read_string(data, pos, end, ctx[4])
    return Symbol(text), pos


def _r_code_with_scope(data: bytes, pos: int, end: int, ctx: _Context, depth: int = 0) -> tuple[Any, int]:
    total = _UNPACK_INT32(data, pos)[0]
    stop = pos + total
    # int32 total + (int32 length, at least a NUL) + a scope of at least 5 bytes.
    if total < 14 or stop > end:
        raise _malformed(f"bad code with scope length {total}")
    code, scope_start = _read_string(data, pos + 4, stop, ctx[4])
    scope_size = _UNPACK_INT32(data, scope_start)[0]
    scope_end = scope_start + scope_size - 1
    if scope_size < 5 or scope_end + 1 != stop or data[scope_end]:
        raise _malformed(
            f"code with scope: the scope's length {scope_size} does not fill the declared length"
        )
    if ctx[3]:
        scope = ctx[1](data[scope_start:stop], ctx[0])
    else:
        scope = _read_document(data, scope_start + 4, scope_end, ctx, depth)
    return _CODE(code, scope), stop


def _r_int32(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 4 > end:
        raise _malformed("an int32 runs past the end of its document")
    return _UNPACK_INT32(data, pos)[0], pos + 4


def _r_timestamp(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 8 > end:
        raise _malformed("a timestamp runs past the end of its document")
    inc, time = _UNPACK_TIMESTAMP(data, pos)
    return _TIMESTAMP(time, inc), pos + 8


def _r_int64(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 8 > end:
        raise _malformed("an int64 runs past the end of its document")
    return Int64(_UNPACK_INT64(data, pos)[0]), pos + 8


def _r_decimal128(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    if pos + 16 > end:
        raise _malformed("a decimal128 runs past the end of its document")
    return Decimal128.from_bid(data[pos : pos + 16]), pos + 16


def _r_min_key(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    return _MIN_KEY, pos


def _r_max_key(data: bytes, pos: int, end: int, ctx: _Context) -> tuple[Any, int]:
    return _MAX_KEY, pos


_Reader = Callable[[bytes, int, int, _Context], tuple[Any, int]]

_READERS: Final[dict[int, _Reader]] = {
    0x01: _r_double,
    0x02: _r_string,
    0x03: _r_document,
    0x04: _r_array,
    0x05: _r_binary,
    0x06: _r_undefined,
    0x07: _r_objectid,
    0x08: _r_bool,
    0x09: _r_datetime,
    0x0A: _r_null,
    0x0B: _r_regex,
    0x0C: _r_dbpointer,
    0x0D: _r_code,
    0x0E: _r_symbol,
    0x0F: _r_code_with_scope,
    0x10: _r_int32,
    0x11: _r_timestamp,
    0x12: _r_int64,
    0x13: _r_decimal128,
    0xFF: _r_min_key,
    0x7F: _r_max_key,
}


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"BSON data must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _check_outer(data: bytes, pos: int, available: int) -> int:
    """Validate the document starting at ``pos``; return the index of its trailing NUL."""
    if available < 5:
        raise _malformed(f"a BSON document needs at least 5 bytes, {available} remain")
    size: int = _UNPACK_INT32(data, pos)[0]
    if size < 5:
        raise _malformed(f"bad BSON document length {size}")
    if size > available:
        raise _malformed(f"the BSON document's length field says {size} bytes but only {available} remain")
    end = pos + size - 1
    if data[end]:
        raise _malformed("the BSON document does not end with a NUL byte")
    return end


def _read_top(data: bytes, pos: int, end: int, ctx: _Context) -> Any:
    if ctx[3]:
        return ctx[1](data[pos : end + 1], ctx[0])
    return _read_document(data, pos + 4, end, ctx)


def decode(data: bytes | bytearray | memoryview, codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> Any:
    """Decode one BSON document into an instance of ``codec_options.document_class``.

    Raises :class:`~mongio.bson.errors.InvalidBSON` for anything malformed: wrong lengths, missing
    terminators, trailing bytes, bad UTF-8 (unless ``unicode_decode_error_handler`` says otherwise), a
    boolean other than 0 or 1, an unknown type, or a datetime outside ``datetime``'s range under
    ``DatetimeConversion.DATETIME``.
    """
    try:
        ctx = codec_options._cache["decode"]  # a lookup rather than a call: decode runs once per reply
    except KeyError:
        ctx = _context(codec_options)
    buffer: bytes
    kind = type(data)
    if kind is bytes:
        buffer = data  # type: ignore[assignment]
    elif (
        not ctx[3]
        and _read_document is not _python_read_document
        and (kind is bytearray or (kind is memoryview and data.format == "B" and data.c_contiguous))  # type: ignore[union-attr]
    ):
        # The compiled loops read a bytearray, or a memoryview of plain contiguous bytes (a connection's
        # receive buffer), where it lies, as they read bytes: a large reply is not copied out of it. (Typed as
        # bytes without typing.cast, a call per decoded reply.)
        buffer = data  # type: ignore[assignment]
    else:
        buffer = _as_bytes(data)
    size = len(buffer)
    try:
        if size >= 5 and _UNPACK_INT32(buffer, 0)[0] == size and not buffer[size - 1]:
            end = size - 1  # the usual case, without the call that says what is wrong otherwise
        else:
            end = _check_outer(buffer, 0, size)
            if end != size - 1:
                raise _malformed(f"{size - end - 1} bytes follow the BSON document")
        if ctx[3]:
            return ctx[1](buffer, ctx[0])
        return _read_document(buffer, 4, end, ctx)
    except InvalidBSON:
        raise
    except _MALFORMED as exc:
        raise InvalidBSON(_describe(exc)) from exc


def decode_framed(view: memoryview, codec_options: CodecOptions) -> Any:
    """:func:`decode` for a view of plain contiguous bytes (a connection's receive buffer) whose length field
    the caller has checked against ``len(view)``: read where it lies, without decode's checks of the input's
    type and length (a reply decoded per operation). Raises :class:`~mongio.bson.errors.InvalidBSON` as
    :func:`decode` does."""
    ctx = codec_options._cache.get("decode")
    end = len(view) - 1
    if ctx is None or ctx[3] or _read_document is _python_read_document or view[end]:
        return decode(view, codec_options)
    # read_span's body inline: this runs once per operation, and the call would be one more frame.
    try:
        return _read_document(view, 4, end, ctx)  # type: ignore[arg-type]
    except InvalidBSON:
        raise
    except _MALFORMED as exc:
        raise InvalidBSON(_describe(exc)) from exc


def read_span(data: bytes, pos: int, end: int, ctx: _Context, array: bool = False) -> Any:
    """The elements from ``pos`` to ``end`` (the index of the enclosing document's or array's trailing NUL,
    which the caller has checked), read as a document (``array``: as a list) with the loops in use and the
    decoding context ``ctx`` (``_context``); :class:`~mongio.bson.errors.InvalidBSON` for anything malformed.
    ``data`` is ``bytes`` for the Python loops; the compiled ones also read a view of contiguous bytes."""
    try:
        return (_read_array if array else _read_document)(data, pos, end, ctx)
    except InvalidBSON:
        raise
    except _MALFORMED as exc:
        raise InvalidBSON(_describe(exc)) from exc


def decode_all(
    data: bytes | bytearray | memoryview, codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS
) -> list[Any]:
    """Decode a concatenation of BSON documents into a list."""
    return list(decode_iter(data, codec_options))


def decode_iter(
    data: bytes | bytearray | memoryview, codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS
) -> Iterator[Any]:
    """Yield the documents of a concatenation of BSON documents one at a time."""
    data = _as_bytes(data)
    ctx = _context(codec_options)
    pos = 0
    total = len(data)
    while pos < total:
        try:
            end = _check_outer(data, pos, total - pos)
            doc = _read_top(data, pos, end, ctx)
        except InvalidBSON:
            raise
        except _MALFORMED as exc:
            raise InvalidBSON(_describe(exc)) from exc
        pos = end + 1
        yield doc


def decode_file_iter(file: IO[bytes], codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> Iterator[Any]:
    """Yield the documents of a binary file of concatenated BSON documents, reading one at a time."""
    while True:
        head = file.read(4)
        if not head:
            return
        if len(head) != 4:
            raise InvalidBSON("the file ends inside a document's length field")
        size = int.from_bytes(head, "little", signed=True)
        if size < 5:
            raise InvalidBSON(f"bad BSON document length {size}")
        rest = file.read(size - 4)
        if len(rest) != size - 4:
            raise InvalidBSON("the file ends inside a document")
        yield decode(head + rest, codec_options)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the BSON document is nested too deeply to decode"
    if isinstance(exc, struct.error):
        return "the BSON data ends before a value does"
    if isinstance(exc, UnicodeDecodeError):
        return f"a string is not valid UTF-8: {exc}"
    return f"malformed BSON: {exc}"


# Bytes a value of a fixed-size type takes, for indexing a document without decoding it.
_FIXED_SIZES: Final = {
    0x01: 8,
    0x06: 0,
    0x07: 12,
    0x08: 1,
    0x09: 8,
    0x0A: 0,
    0x10: 4,
    0x11: 8,
    0x12: 8,
    0x13: 16,
    0x7F: 0,
    0xFF: 0,
}


def _value_end(data: bytes, kind: int, pos: int, end: int) -> int:
    fixed = _FIXED_SIZES.get(kind)
    if fixed is not None:
        stop = pos + fixed
    elif kind in (0x02, 0x0D, 0x0E):
        stop = pos + 4 + _UNPACK_INT32(data, pos)[0]
    elif kind in (0x03, 0x04, 0x0F):
        stop = pos + _UNPACK_INT32(data, pos)[0]
    elif kind == 0x05:
        stop = pos + 5 + _UNPACK_INT32(data, pos)[0]
    elif kind == 0x0C:
        stop = pos + 4 + _UNPACK_INT32(data, pos)[0] + 12
    elif kind == 0x0B:
        stop = data.index(b"\x00", data.index(b"\x00", pos, end) + 1, end) + 1
    else:
        raise _malformed(f"unknown BSON type 0x{kind:02x}")
    if stop < pos or stop > end:
        raise _malformed(f"a value of type 0x{kind:02x} runs past the end of its document")
    return stop


def index_elements(data: bytes, codec_options: CodecOptions) -> dict[str, tuple[int, int]]:
    """Map each top-level key of a complete document to its element's (start, stop) byte offsets, without
    decoding values. Used by :class:`~mongio.bson.raw.RawBSONDocument`."""
    utf8 = _utf8_decoder(codec_options.unicode_decode_error_handler)
    index: dict[str, tuple[int, int]] = {}
    end = len(data) - 1
    pos = 4
    try:
        while pos < end:
            kind = data[pos]
            key, value_pos = _read_cstring(data, pos + 1, end, utf8)
            stop = _value_end(data, kind, value_pos, end)
            index[key] = (pos, stop)
            pos = stop
    except InvalidBSON:
        raise
    except _MALFORMED as exc:
        raise InvalidBSON(_describe(exc)) from exc
    return index


def decode_element(data: bytes, start: int, stop: int, codec_options: CodecOptions) -> Any:
    """Decode the value of the one element at ``data[start:stop]``."""
    ctx = _context(codec_options)
    kind = data[start]
    try:
        value_pos = data.index(b"\x00", start + 1, stop) + 1
        value, pos = _READERS[kind](data, value_pos, stop, ctx)
        if pos != stop:
            raise _malformed(f"a value of type 0x{kind:02x} does not fill its element")
        decoder_map = ctx[5]
        if decoder_map is not None:
            transform = decoder_map.get(type(value))
            if transform is not None:
                value = transform(value)
        return value
    except InvalidBSON:
        raise
    except _MALFORMED as exc:
        raise InvalidBSON(_describe(exc)) from exc


# The compiled element loops (``_speedups.c``), when the extension was built, replace the two Python loops
# above; every other function here reaches them through these module globals. They keep the loops'
# contract exactly and decode every type themselves as the readers of ``_READERS`` do (the differential tests
# hold them to it), so both paths decode the same bytes to the same values and reject the same malformed
# input. MONGIO_NO_SPEEDUPS=1 keeps Python's.
_python_read_document: Final = _read_document
_python_read_array: Final = _read_array


_SPEEDUPS: Final = load_speedups()
if _SPEEDUPS is not None:
    _SPEEDUPS.configure(InvalidBSON, _READERS, _OBJECTID_FROM_BYTES, _TIMESTAMP, Int64, _to_dbref, bytes.decode)
    # What the compiled loops build the other types from: they make each value as the readers above do.
    _SPEEDUPS.configure_types(
        {
            "Binary": Binary,
            "UUID": uuid.UUID,
            "SafeUUID.unknown": uuid.SafeUUID.unknown,
            "Regex": Regex,
            "Code": Code,
            "Symbol": Symbol,
            "DBPointer": DBPointer,
            "Decimal128": Decimal128,
            "DatetimeMS": DatetimeMS,
            "ObjectId": ObjectId,
            "Timestamp": Timestamp,
            "MinKey()": _MIN_KEY,
            "MaxKey()": _MAX_KEY,
            "Undefined()": _UNDEFINED,
            "millis_to_datetime": millis_to_datetime,
            "DBRef": DBRef,
            "RawBSONDocument": RawBSONDocument,
        }
    )


def use_speedups(enabled: bool) -> bool:
    """Decode with the compiled loops (when built) or with the Python ones; return whether compiled are on.

    For tests and benchmarks that compare the two paths; applications have no reason to call it.
    """
    global _read_document, _read_array
    if enabled and _SPEEDUPS is not None:
        _read_document = _SPEEDUPS.read_document
        _read_array = _SPEEDUPS.read_array
        return True
    _read_document = _python_read_document
    _read_array = _python_read_array
    return False


def compiled_in_use() -> bool:
    """Whether the compiled loops are the ones in use (they also read views of contiguous bytes, where the
    Python ones read ``bytes``)."""
    return _read_document is not _python_read_document


def speedups_available() -> bool:
    """Whether the compiled decoder loops were built and can be switched on."""
    return _SPEEDUPS is not None


use_speedups(True)
