"""Every BSON type the compiled loops decode and encode themselves, against the Python loops: per type, the
same values (of the same classes) from the same bytes and the same refusals of malformed bytes, under every
codec option that changes what a type decodes to; the same bytes and the same refusals when encoding,
including values that do not hold what their class promises (which the compiled loops leave to the Python
writers)."""

from __future__ import annotations

import datetime
import re
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mongio.bson import (
    SON,
    Binary,
    Code,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    DBRef,
    Decimal128,
    Int64,
    InvalidBSON,
    MaxKey,
    MinKey,
    ObjectId,
    RawBSONDocument,
    Regex,
    Timestamp,
    TypeDecoder,
    TypeEncoder,
    TypeRegistry,
    UuidRepresentation,
    _decoder,
    _encoder,
    decode,
    decode_all,
    encode,
)
from mongio.bson.datetime_ms import MAX_DATETIME_MS, MIN_DATETIME_MS
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from tests.support.bson_data import exact_shape

pytestmark = pytest.mark.skipif(
    not _decoder.speedups_available(), reason="the compiled loops are not built or are switched off"
)

_EAST = datetime.timezone(datetime.timedelta(hours=14))
_WEST = datetime.timezone(datetime.timedelta(hours=-12, minutes=-30))


class _DatetimeAsText(TypeDecoder):
    bson_type = datetime.datetime

    def transform_bson(self, value: Any) -> Any:
        return ("datetime", value.isoformat())


class _BinaryLength(TypeDecoder):
    bson_type = Binary

    def transform_bson(self, value: Any) -> Any:
        return ("binary", len(value), value.subtype)


def _decoding_options() -> list[CodecOptions]:
    options: list[CodecOptions] = []
    for conversion in DatetimeConversion:
        options.append(CodecOptions(datetime_conversion=conversion))
        for tzinfo in (None, datetime.UTC, _EAST, _WEST):
            options.append(CodecOptions(tz_aware=True, tzinfo=tzinfo, datetime_conversion=conversion))
    options += [CodecOptions(uuid_representation=representation) for representation in UuidRepresentation]
    options += [
        CodecOptions(document_class=SON),
        CodecOptions(document_class=RawBSONDocument),
        CodecOptions(unicode_decode_error_handler="replace"),
        CodecOptions(type_registry=TypeRegistry([_DatetimeAsText(), _BinaryLength()])),
    ]
    return options


DECODING_OPTIONS = _decoding_options()


def _outcome(data: bytes, options: CodecOptions, compiled: bool) -> Any:
    _decoder.use_speedups(compiled)
    try:
        documents = decode_all(data, options)
        return ("value", [exact_shape(_reveal(document)) for document in documents])
    except InvalidBSON:
        return ("InvalidBSON",)
    finally:
        _decoder.use_speedups(True)


def _reveal(value: Any) -> Any:
    """What a decoded value holds beyond its repr: a Code's scope, a DBRef's fields, a datetime's zone."""
    if isinstance(value, RawBSONDocument):
        # Its bytes, its options and what reading it gives (each field decoded on access).
        return ("raw", value.raw, repr(value.codec_options), [(k, _reveal(v)) for k, v in value.items()])
    if isinstance(value, dict):
        return type(value)((key, _reveal(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_reveal(item) for item in value]
    if isinstance(value, Code):
        return ("Code", str(value), _reveal(value.scope))
    if isinstance(value, DBRef):
        return ("DBRef", value.collection, _reveal(value.id), value.database, _reveal(value.as_doc()))
    if isinstance(value, datetime.datetime):
        return ("datetime", value.isoformat(), repr(value.tzinfo))
    if isinstance(value, Binary):
        return ("Binary", bytes(value), value.subtype)
    if isinstance(value, uuid.UUID):
        return ("UUID", value.bytes, value.is_safe)
    return value


def _element(kind: int, payload: bytes, name: bytes = b"v") -> bytes:
    body = bytes([kind]) + name + b"\x00" + payload
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def _string(text: bytes) -> bytes:
    return struct.pack("<i", len(text) + 1) + text + b"\x00"


def _in_array(document: bytes) -> bytes:
    """The element of ``document`` moved into an array, so the array loop decodes it too."""
    body = b"\x04a\x00" + document[:4] + b"0" + document[6:]
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


_SCOPE = encode({"x": 1, "ref": {"$ref": "c", "$id": 2}})


def _code_with_scope(code: bytes, scope: bytes) -> bytes:
    inner = _string(code) + scope
    return struct.pack("<i", len(inner) + 4) + inner


_MILLIS = [
    0,
    1,
    -1,
    -999,
    1_600_000_000_123,
    MIN_DATETIME_MS,
    MAX_DATETIME_MS,
    MIN_DATETIME_MS - 1,
    MAX_DATETIME_MS + 1,
    MIN_DATETIME_MS + 3_600_000,
    MAX_DATETIME_MS - 3_600_000,
    -(2**63),
    2**63 - 1,
]
_UUID_BYTES = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff").bytes

# Per type: well-formed elements (as whole documents) and malformed ones.
DECODE_CASES: dict[str, list[bytes]] = {
    "datetime": [_element(0x09, struct.pack("<q", millis)) for millis in _MILLIS]
    + [_element(0x09, b"\x00" * 7)],
    "binary": [
        _element(0x05, struct.pack("<i", len(payload)) + bytes([subtype]) + payload)
        for subtype in (0, 1, 3, 4, 5, 6, 7, 8, 0x80, 0xFF)
        for payload in (b"", _UUID_BYTES[:15], _UUID_BYTES, _UUID_BYTES + b"!")
    ]
    + [
        _element(0x05, struct.pack("<i", 7) + b"\x02" + struct.pack("<i", 3) + b"abc"),
        _element(0x05, struct.pack("<i", 7) + b"\x02" + struct.pack("<i", 4) + b"abc"),
        _element(0x05, struct.pack("<i", 2) + b"\x02" + b"ab"),
        _element(0x05, struct.pack("<i", 3) + b"\x02" + b"\xff\xff\xff"),
        _element(0x05, struct.pack("<i", -1) + b"\x00"),
        _element(0x05, struct.pack("<i", 100) + b"\x00abc"),
        _element(0x05, b"\x01\x00"),
    ],
    "regex": [
        _element(0x0B, pattern + b"\x00" + flags + b"\x00")
        for pattern, flags in ((b"", b""), (b"^a.*b$", b"imsux"), (b"caf\xc3\xa9", b"x"), (b"\xff", b"i"))
    ]
    + [_element(0x0B, b"abc"), _element(0x0B, b"abc\x00i")],
    "code": [_element(0x0D, _string(text)) for text in (b"", b"function() {}", b"\xe2\x98\x83", b"\xff")]
    + [_element(0x0D, struct.pack("<i", 0)), _element(0x0D, struct.pack("<i", 50) + b"x\x00")],
    "code with scope": [
        _element(0x0F, _code_with_scope(b"f()", _SCOPE)),
        _element(0x0F, _code_with_scope(b"", encode({}))),
        _element(0x0F, _code_with_scope(b"g", encode({"nested": {"deep": [1, {"$ref": 1}]}}))),
        _element(0x0F, struct.pack("<i", 13) + _string(b"a") + b"\x05\x00\x00"),
        _element(0x0F, _code_with_scope(b"f", _SCOPE)[:-1] + b"\x01"),
        _element(0x0F, struct.pack("<i", 30) + _string(b"f") + encode({})),
        _element(0x0F, struct.pack("<i", 14) + _string(b"f") + struct.pack("<i", 6) + b"\x00\x00"),
    ],
    "symbol": [_element(0x0E, _string(text)) for text in (b"", b"sym", b"\xc3\xa9")]
    + [_element(0x0E, struct.pack("<i", -5))],
    "dbpointer": [
        _element(0x0C, _string(b"db.coll") + bytes(range(12))),
        _element(0x0C, _string(b"") + b"\xff" * 12),
        _element(0x0C, _string(b"db.coll") + bytes(range(11))),
    ],
    "decimal128": [_element(0x13, Decimal128(text).bid) for text in ("0", "-1.5E-300", "NaN", "-Infinity")]
    + [_element(0x13, b"\x00" * 15)],
    "min/max key and undefined": [_element(0xFF, b""), _element(0x7F, b""), _element(0x06, b"")],
    "timestamp": [_element(0x11, struct.pack("<II", inc, time)) for inc, time in ((0, 0), (1, 2**32 - 1))]
    + [_element(0x11, b"\x00" * 7)],
    "objectid": [_element(0x07, bytes(range(12))), _element(0x07, bytes(range(11)))],
    "int64": [_element(0x12, struct.pack("<q", number)) for number in (0, -1, 2**63 - 1, -(2**63), 2**31)]
    + [_element(0x12, b"\x00" * 7)],
    "dbref": [
        encode({"r": {"$ref": "c", "$id": 1}}),
        encode({"r": {"$ref": "c", "$id": 1, "$db": "d", "extra": [1], "more": {"$ref": "x", "$id": 2}}}),
        encode({"r": {"a": 1, "$id": 1, "$ref": "c"}}),
        encode({"r": {"$ref": 1, "$id": 1}}),
        encode({"r": {"$ref": "c"}}),
        encode({"r": {"$ref": "c", "$id": 1, "$db": 5}}),
        encode({"r": [{"$ref": "c", "$id": None}]}),
    ],
}


def _decode_cases() -> Iterator[Any]:
    for kind, documents in DECODE_CASES.items():
        for index, document in enumerate(documents):
            for variant, data in (("document", document), ("array", _in_array(document))):
                yield pytest.param(kind, data, id=f"{kind}-{index}-{variant}")


@pytest.mark.parametrize(("kind", "data"), list(_decode_cases()))
def test_each_type_decodes_alike_under_every_option(kind: str, data: bytes) -> None:
    outcomes = set()
    for options in DECODING_OPTIONS:
        compiled = _outcome(data, options, compiled=True)
        assert compiled == _outcome(data, options, compiled=False), (kind, options)
        outcomes.add(compiled[0])
    assert outcomes  # every option was tried


def test_the_option_matrix_changes_what_datetimes_and_uuids_become() -> None:
    # The matrix above is only worth something if its options lead to different values.
    far = _element(0x09, struct.pack("<q", MAX_DATETIME_MS + 1))
    kinds = {
        type(decode(far, options)["v"]).__name__
        for options in DECODING_OPTIONS[:25]
        if _decodes(far, options)
    }
    assert kinds == {"datetime", "DatetimeMS"}
    legacy = _element(0x05, struct.pack("<i", 16) + b"\x03" + _UUID_BYTES)
    found = {
        decode(legacy, CodecOptions(uuid_representation=representation))["v"]
        for representation in (
            UuidRepresentation.PYTHON_LEGACY,
            UuidRepresentation.JAVA_LEGACY,
            UuidRepresentation.CSHARP_LEGACY,
        )
    }
    assert len(found) == 3 and all(type(value) is uuid.UUID for value in found)
    assert (
        decode(_element(0x09, struct.pack("<q", 0)), CodecOptions(tz_aware=True, tzinfo=_EAST))["v"].hour
        == 14
    )


def test_an_old_binary_too_short_for_its_inner_length_is_refused_by_both() -> None:
    # Three bytes cannot hold subtype 2's inner length, even when they read as the "-1" that 3 - 4 makes.
    data = _element(0x05, struct.pack("<i", 3) + b"\x02" + b"\xff\xff\xff")
    for compiled in (True, False):
        _decoder.use_speedups(compiled)
        with pytest.raises(InvalidBSON):
            decode(data)


def _decodes(data: bytes, options: CodecOptions) -> bool:
    try:
        decode(data, options)
    except InvalidBSON:
        return False
    return True


class _Hollow:
    """Stands in for a value whose attributes were tampered with."""


def _tampered(cls: type, **slots: Any) -> Any:
    value: Any = object.__new__(cls)
    for name, item in slots.items():
        object.__setattr__(value, name, item)
    return value


def _encoding_values() -> dict[str, list[Any]]:
    aware = datetime.datetime(2020, 2, 29, 23, 59, 59, 999999, tzinfo=_EAST)
    return {
        "datetime": [
            datetime.datetime(1970, 1, 1),
            datetime.datetime(1969, 12, 31, 23, 59, 59, 999999),
            datetime.datetime.min,
            datetime.datetime.max,
            datetime.datetime(1, 1, 1, tzinfo=datetime.UTC),
            aware,
            aware.replace(tzinfo=_WEST),
            datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=_WEST),
            DatetimeMS(-(2**63)),
            DatetimeMS(2**63 - 1),
        ],
        "binary": [
            b"",
            b"\x00\xff",
            Binary(b""),
            Binary(b"abc", 2),
            Binary(b"xyz", 0x80),
            Binary(_UUID_BYTES, 4),
            Binary(b"q", 0),
            Binary(b"q", 255),
        ],
        "uuid": [uuid.UUID(bytes=_UUID_BYTES), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)],
        "regex": [
            Regex("a.b", "xsmi"),
            Regex("", ""),
            Regex("é", "u"),
            Regex("x", 2),
            re.compile("ab", re.I),
            re.compile(b"ab"),
            re.compile("a.b c", re.I | re.M | re.S | re.X),
            re.compile("x", re.ASCII),
            re.compile("nul\x00inside"),
            re.compile(b"\xff"),
            re.compile(b"x", re.L),
            _tampered(Regex, pattern=b"bytes", flags="i"),
            _tampered(Regex, pattern="a\x00b", flags=""),
            _tampered(Regex, pattern="p", flags="é"),
            _tampered(Regex, pattern="p", flags=3),
            _tampered(Regex, pattern="p"),
        ],
        "code": [
            Code(""),
            Code("f()"),
            Code("g", {"x": 1}),
            Code("h", SON([("$bad", 1)])),
            Code("s\ud800"),
            Code("k", {"n": {"deep": [Regex("r", "")]}}),
            Code("scope", {"o": object()}),
        ],
        "symbol": [Symbol(""), Symbol("sym"), Symbol("lone \udc00")],
        "dbpointer": [
            DBPointer("db.c", ObjectId(b"\x01" * 12)),
            _tampered(DBPointer, _DBPointer__namespace=1, _DBPointer__id=ObjectId(b"\x01" * 12)),
        ],
        "decimal128": [Decimal128("1.5"), Decimal128("-NaN"), _tampered(Decimal128, _bid=b"short")],
        "timestamp": [
            Timestamp(0, 0),
            Timestamp(2**32 - 1, 2**32 - 1),
            _tampered(Timestamp, _Timestamp__time=-1, _Timestamp__inc=0),
            _tampered(Timestamp, _Timestamp__time=True, _Timestamp__inc=0),
        ],
        "min/max key and undefined": [MinKey(), MaxKey(), Undefined()],
        "dbref": [
            DBRef("c", 1),
            DBRef("c", ObjectId(b"\x02" * 12), "db", {"x": [1]}),
            DBRef("c", {"$in": [1]}, extra=1),
        ],
        "raw document": [RawBSONDocument(encode({"a": 1})), RawBSONDocument(encode({}))],
        "objectid and int64": [ObjectId(b"\x03" * 12), Int64(2**63 - 1), Int64(-(2**63))],
    }


ENCODING_VALUES = _encoding_values()
ENCODING_OPTIONS: list[dict[str, Any]] = [
    {},
    {"check_keys": True},
    *(
        {"codec_options": CodecOptions(uuid_representation=representation)}
        for representation in UuidRepresentation
    ),
]


def _encoded(document: Any, compiled: bool, **options: Any) -> Any:
    _encoder.use_speedups(compiled)
    try:
        return ("bytes", encode(document, **options))
    except Exception as error:  # a tampered value may raise anything; both loops must raise the same
        return (type(error).__name__, str(error))
    finally:
        _encoder.use_speedups(True)


def _encode_agrees(document: Any, **options: Any) -> Any:
    compiled = _encoded(document, True, **options)
    assert compiled == _encoded(document, False, **options)
    return compiled


def _encode_cases() -> Iterator[Any]:
    for kind, values in ENCODING_VALUES.items():
        for index, value in enumerate(values):
            yield pytest.param(value, id=f"{kind}-{index}")


@pytest.mark.parametrize("value", list(_encode_cases()))
def test_each_type_encodes_alike_under_every_option(value: Any) -> None:
    for options in ENCODING_OPTIONS:
        for document in ({"v": value}, {"a": [value, {"in": value}]}):
            _encode_agrees(document, **options)


def test_the_compiled_encoder_writes_each_type_as_bson_says() -> None:
    # The differential test above compares the two loops; this pins what both write for a few values.
    assert encode({"d": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999)}) == _element(
        0x09, struct.pack("<q", -1), b"d"
    )
    assert encode({"r": Regex("p", "xi")}) == _element(0x0B, b"p\x00ix\x00", b"r")
    assert encode({"c": Code("f", {})}) == _element(0x0F, _code_with_scope(b"f", encode({})), b"c")
    assert encode({"b": Binary(b"ab", 2)}) == _element(
        0x05, struct.pack("<i", 6) + b"\x02" + struct.pack("<i", 2) + b"ab", b"b"
    )
    standard = CodecOptions(uuid_representation=UuidRepresentation.STANDARD)
    assert encode({"u": uuid.UUID(bytes=_UUID_BYTES)}, codec_options=standard) == _element(
        0x05, struct.pack("<i", 16) + b"\x04" + _UUID_BYTES, b"u"
    )


def test_values_that_break_their_class_promise_are_refused_not_rewritten() -> None:
    for value in (_tampered(Decimal128, _bid=b"short"), _tampered(Regex, pattern="a\x00b", flags="")):
        kind, _ = _encode_agrees({"v": value})
        assert kind == "InvalidDocument"


def _typed_options() -> list[CodecOptions]:
    from mongio.pymongo_types import typed_codec_options

    return [
        typed_codec_options(CodecOptions()),
        typed_codec_options(
            CodecOptions(tz_aware=True, datetime_conversion=DatetimeConversion.DATETIME_AUTO)
        ),
        typed_codec_options(CodecOptions(uuid_representation=UuidRepresentation.STANDARD)),
    ]


@pytest.mark.parametrize(("kind", "data"), list(_decode_cases()))
def test_each_type_decodes_alike_to_pymongo_classes(kind: str, data: bytes) -> None:
    pytest.importorskip("bson")
    for options in _typed_options():
        compiled = _outcome(data, options, compiled=True)
        assert compiled == _outcome(data, options, compiled=False), (kind, options)


class _Custom:
    def __init__(self, result: Any) -> None:
        self.result = result


class _Marked:
    _type_marker = 7
    binary = b"\x05" * 12


class _CustomEncoder(TypeEncoder):
    python_type = _Custom

    def transform_python(self, value: Any) -> Any:
        if isinstance(value.result, Exception):
            raise value.result
        return value.result


class _IntSubclass(int):
    pass


REGISTRY_RESULTS = [
    {"t": 1},
    [1, "two"],
    (3, 4),
    "text",
    2**40,
    _IntSubclass(5),
    Regex("r", "i"),
    Binary(b"b", 0x81),
    datetime.datetime(2000, 1, 1),
    _Marked(),
    _Custom(1),
    object(),
    {"nested": _Custom({"deeper": 1})},
    2**70,
    ValueError("transform failed"),
]


@pytest.mark.parametrize(
    "result", REGISTRY_RESULTS, ids=[type(result).__name__ for result in REGISTRY_RESULTS]
)
def test_custom_encoders_results_are_written_alike(result: Any) -> None:
    fallback = TypeRegistry(
        [_CustomEncoder()], fallback_encoder=lambda value: ("fallback", repr(type(value)))
    )
    for registry in (TypeRegistry([_CustomEncoder()]), fallback):
        options = CodecOptions(type_registry=registry)
        for document in ({"v": _Custom(result)}, {"a": [_Custom(result)], "d": {"in": _Custom(result)}}):
            _encode_agrees(document, codec_options=options)
            _encode_agrees(document, codec_options=options, check_keys=True)


class _FakeMarked:
    """A value of another library marked as a BSON type (by a subclass made in ``_fake``)."""

    def __repr__(self) -> str:
        return f"_FakeMarked({self.__dict__})"


def _fake(marker: int, **attributes: Any) -> Any:
    # A class per value: the encoder remembers the writer of a marked type by its type.
    cls = type(f"_Marked{marker}", (_FakeMarked,), {"_type_marker": marker})
    value: Any = object.__new__(cls)
    for name, item in attributes.items():
        setattr(value, name, item)
    return value


def _pymongo_values() -> list[Any]:
    bson = pytest.importorskip("bson")
    from bson.raw_bson import RawBSONDocument as PyMongoRaw

    oid = bson.ObjectId(b"\x04" * 12)
    return [
        oid,
        bson.Int64(-5),
        bson.Binary(b"\x00\x01", 0x80),
        bson.Binary(b"old", 2),
        bson.Binary(_UUID_BYTES, 4),
        bson.Code("f()"),
        bson.Code("g()", {"x": [1]}),
        bson.Regex("a.b", "mi"),
        bson.Regex("a.b", re.I | re.U | re.X),
        bson.Timestamp(5, 6),
        bson.Decimal128("1.25"),
        bson.DatetimeMS(2**62),
        bson.DatetimeMS(-1),
        bson.MinKey(),
        bson.MaxKey(),
        bson.DBRef("c", oid, "db", extra=1),
        PyMongoRaw(bson.encode({"r": [1, {"s": "t"}]})),
        _fake(5, subtype=True),
        _fake(5, subtype=300),
        _fake(9),
        _fake(11, pattern=b"\xff", flags="i"),
        _fake(11, pattern="p", flags=True),
        _fake(11, pattern="p", flags=1.5),
        _fake(13, scope=None),
        _fake(17, time=-1, inc=0),
        _fake(17, time=1),
        _fake(19, bid=b"short"),
        _fake(101, raw=b"\x05\x00\x00\x00\x01"),
        _fake(101, raw=b"\x05\x00\x00\x00\x00"),
        _fake(42),
    ]


def test_other_libraries_values_encode_alike() -> None:
    for value in _pymongo_values():
        for options in ENCODING_OPTIONS:
            for document in ({"v": value}, {"a": [value, {"in": value}]}):
                _encode_agrees(document, **options)
