"""The BSON codec: encoding and decoding every type, refusals with their key paths, and the codec options."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import io
import re
import struct
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from mongio import bson
from mongio.bson import (
    SON,
    Binary,
    Code,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    DBPointer,
    DBRef,
    Decimal128,
    Int64,
    InvalidBSON,
    InvalidDocument,
    MaxKey,
    MinKey,
    ObjectId,
    RawBSONDocument,
    Regex,
    Symbol,
    Timestamp,
    TypeCodec,
    TypeDecoder,
    TypeEncoder,
    TypeRegistry,
    Undefined,
    UuidRepresentation,
    decode,
    decode_all,
    decode_file_iter,
    decode_iter,
    encode,
)
from mongio.bson._decoder import decode_framed, use_speedups
from tests.support.bson_data import CORPUS, CORPUS_OPTIONS, corpus_cases

UTC = datetime.UTC


def doc_bytes(*elements: bytes) -> bytes:
    body = b"".join(elements)
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


# --- encoding ---------------------------------------------------------------------------------------------


def test_encode_known_bytes() -> None:
    assert encode({}) == b"\x05\x00\x00\x00\x00"
    assert encode({"a": 1}) == doc_bytes(b"\x10a\x00\x01\x00\x00\x00")
    assert encode({"a": 2**31}) == doc_bytes(b"\x12a\x00" + struct.pack("<q", 2**31))
    assert encode({"a": Int64(1)}) == doc_bytes(b"\x12a\x00" + struct.pack("<q", 1))
    assert encode({"a": "é"}) == doc_bytes(b"\x02a\x00\x03\x00\x00\x00\xc3\xa9\x00")
    assert encode({"a": [True, None]}) == doc_bytes(b"\x04a\x00" + doc_bytes(b"\x080\x00\x01", b"\x0a1\x00"))
    assert encode({"a": b"\x01"}) == doc_bytes(b"\x05a\x00\x01\x00\x00\x00\x00\x01")
    assert encode({"a": Binary(b"\x01", 2)}) == doc_bytes(
        b"\x05a\x00\x05\x00\x00\x00\x02\x01\x00\x00\x00\x01"
    )
    assert encode({"a": Regex("x", "mi")}) == doc_bytes(b"\x0ba\x00x\x00im\x00")


def test_long_arrays_have_sequential_index_names() -> None:
    values = list(range(3000))
    data = encode({"a": values})
    assert decode(data) == {"a": values}
    body = b"".join(b"\x10" + str(i).encode() + b"\x00" + struct.pack("<i", i) for i in values)
    assert data == doc_bytes(b"\x04a\x00" + doc_bytes(body))


def test_encode_keeps_key_order() -> None:
    data = encode({"z": 1, "_id": 2, "a": 3})
    assert list(decode(data)) == ["z", "_id", "a"]


@pytest.mark.parametrize(
    ("document", "path", "reason"),
    [
        ({"a\x00b": 1}, "a\x00b", "NUL"),
        ({"outer": {"in\x00ner": 1}}, "outer.in\x00ner", "NUL"),
        ({"a": {"b": [1, {"c": 2**64}]}}, "a.b.1.c", "64 bits"),
        ({"a": [object()]}, "a.0", "cannot encode object of type object"),
        ({1: "x"}, "1", "str keys"),
        ({"a": {"b": {2.5}}}, "a.b", "cannot encode object of type set"),
        ({"r": Regex("x")}, None, None),
    ],
)
def test_encode_refusals_name_the_key_path(
    document: dict[Any, Any], path: str | None, reason: str | None
) -> None:
    if path is None:
        encode(document)
        return
    with pytest.raises(InvalidDocument) as info:
        encode(document)
    assert repr(path) in str(info.value)
    assert reason is not None and reason in str(info.value)


def test_encode_refuses_nul_in_regex_made_mutable() -> None:
    regex = Regex("ok")
    regex.pattern = "a\x00b"
    with pytest.raises(InvalidDocument, match=r"'r'.*NUL"):
        encode({"r": regex})
    with pytest.raises(InvalidDocument, match="NUL"):
        encode({"r": re.compile("a\x00b")})


def test_encode_refuses_lone_surrogates() -> None:
    with pytest.raises(InvalidDocument, match="'s'"):
        encode({"s": "\ud800"})
    with pytest.raises(InvalidDocument):
        encode({"\ud800": 1})


def test_encode_check_keys() -> None:
    assert decode(encode({"$set": {"a.b": 1}}))
    with pytest.raises(InvalidDocument, match=r"'\$set'"):
        encode({"$set": 1}, check_keys=True)
    with pytest.raises(InvalidDocument, match=r"'x.a\.b'"):
        encode({"x": {"a.b": 1}}, check_keys=True)
    # A DBRef's own $-names are not user keys.
    encode({"r": DBRef("c", 1)}, check_keys=True)


def test_encode_size_limit() -> None:
    big = {"s": "x" * (16 * 1024 * 1024)}
    with pytest.raises(InvalidDocument, match="over the"):
        encode(big)
    assert len(encode(big, max_size=None)) > 16 * 1024 * 1024
    with pytest.raises(InvalidDocument):
        encode({"s": "x" * 100}, max_size=64)
    assert len(encode({"s": "x" * 100}, max_size=200)) == 4 + 1 + 2 + 4 + 101 + 1


def test_encode_circular_and_deep_documents_raise_invalid_document() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(InvalidDocument, match="nested too deeply"):
        encode(loop)


def test_encode_needs_a_mapping() -> None:
    with pytest.raises(TypeError):
        encode([1, 2])  # type: ignore[arg-type]


def test_encode_subclasses_and_other_mappings() -> None:
    class Color(enum.IntEnum):
        RED = 7

    class Name(str):
        pass

    ordered = collections.OrderedDict([("b", 1), ("a", 2)])
    data = encode({"c": Color.RED, "n": Name("x"), "o": ordered, "t": (1, 2), "g": (i for i in range(2))})
    assert decode(data) == {"c": 7, "n": "x", "o": {"b": 1, "a": 2}, "t": [1, 2], "g": [0, 1]}


def test_encode_datetimes() -> None:
    naive = datetime.datetime(2020, 1, 2, 3, 4, 5, 678999)
    aware = naive.replace(tzinfo=datetime.timezone(datetime.timedelta(hours=-5)))
    millis = struct.unpack("<q", encode({"d": naive})[7:15])[0]
    assert millis == 1577934245678  # microseconds are truncated to milliseconds
    assert struct.unpack("<q", encode({"d": aware})[7:15])[0] == millis + 5 * 3600 * 1000
    before_epoch = datetime.datetime(1969, 12, 31, 23, 59, 59, 999500)
    assert struct.unpack("<q", encode({"d": before_epoch})[7:15])[0] == -1


# --- every type round-trips -----------------------------------------------------------------------------


def test_every_type_round_trips() -> None:
    oid = ObjectId()
    document = {
        "double": -0.5,
        "string": "ünïcode",
        "doc": {"x": {"y": []}},
        "array": [1, "two", [3.0]],
        "bytes": b"\x00\xff",
        "binary": Binary(b"fn", 1),
        "old": Binary(b"old", 2),
        "user": Binary(b"u", 200),
        "undefined": Undefined(),
        "oid": oid,
        "bool": False,
        "date": datetime.datetime(2000, 1, 1, 12, 0, 0, 123000),
        "null": None,
        "regex": Regex("^a", "ix"),
        "pointer": DBPointer("db.coll", oid),
        "code": Code("f()"),
        "symbol": Symbol("sym"),
        "scoped": Code("g(x)", {"x": 1}),
        "int32": -(2**31),
        "ts": Timestamp(4000000000, 4000000000),
        "int64": Int64(2**62),
        "decimal": Decimal128("1.10"),
        "min": MinKey(),
        "max": MaxKey(),
        "dbref": DBRef("coll", oid, "db", extra=1),
    }
    decoded = decode(encode(document))
    assert decoded == document
    for key, value in document.items():
        assert type(decoded[key]) is type(value), key
    assert encode(decoded) == encode(document)


def test_python_regex_encodes_as_bson_regex() -> None:
    decoded = decode(encode({"r": re.compile("a.b", re.I | re.S)}))
    assert decoded["r"] == Regex("a.b", "is")
    assert decode(encode({"r": re.compile("x")}))["r"] == Regex("x", "")


def test_regex_options_are_written_sorted_and_read_as_given() -> None:
    data = doc_bytes(b"\x0ba\x00abc\x00mix\x00")
    value = decode(data)["a"]
    assert value.flags == "mix"
    assert encode({"a": value}) == doc_bytes(b"\x0ba\x00abc\x00imx\x00")


# --- decoding errors ------------------------------------------------------------------------------------

MALFORMED = [
    b"",
    b"\x05\x00\x00",
    b"\x05\x00\x00\x00",
    b"\x06\x00\x00\x00\x00",
    b"\x05\x00\x00\x00\x01",
    b"\x05\x00\x00\x00\x00\x00",  # trailing byte
    doc_bytes(b"\x08b\x00\x02"),  # boolean 2
    doc_bytes(b"\x02s\x00\x05\x00\x00\x00abc\x00"),  # string length overruns
    doc_bytes(b"\x02s\x00\x00\x00\x00\x00"),  # zero string length
    doc_bytes(b"\x02s\x00\x02\x00\x00\x00\xff\x00"),  # bad UTF-8
    doc_bytes(b"\x03d\x00\x06\x00\x00\x00\x00"),  # embedded length overruns the parent
    doc_bytes(b"\x10i\x00\x01\x00"),  # truncated int32
    doc_bytes(b"\x20i\x00"),  # unknown type
    doc_bytes(b"\x10i"),  # key without its NUL
    doc_bytes(b"\x09d\x00" + struct.pack("<q", 2**62)),  # out of datetime's range
    doc_bytes(b"\x05b\x00\xff\xff\xff\xff\x00"),  # negative binary length
    doc_bytes(b"\x05b\x00\x05\x00\x00\x00\x02\x02\x00\x00\x00\x01"),  # old binary inner length wrong
    doc_bytes(
        b"\x0fc\x00\x0d\x00\x00\x00\x01\x00\x00\x00\x00\x05\x00\x00\x00\x00"
    ),  # code-with-scope too short
]


@pytest.mark.parametrize("data", MALFORMED)
def test_malformed_input_raises_invalid_bson(data: bytes) -> None:
    with pytest.raises(InvalidBSON):
        decode(data)


def test_is_valid() -> None:
    assert bson.is_valid(encode({"a": [1, {"b": "c"}]}))
    assert not bson.is_valid(MALFORMED[7])
    assert not bson.is_valid(encode({}) + b"\x00")


def test_decode_error_messages_are_specific() -> None:
    with pytest.raises(InvalidBSON, match="follow the BSON document"):
        decode(b"\x05\x00\x00\x00\x00\x00")
    with pytest.raises(InvalidBSON, match=r"'b'.*not 0 or 1"):
        decode(doc_bytes(b"\x08b\x00\x02"))
    with pytest.raises(InvalidBSON, match="DATETIME_AUTO"):
        decode(doc_bytes(b"\x09d\x00" + struct.pack("<q", 2**62)))


def test_absurd_nesting_raises_invalid_bson() -> None:
    depth = 5000
    data = b"\x00"
    for _ in range(depth):
        data = doc_bytes(b"\x03a\x00" + data) if len(data) > 1 else doc_bytes()
    with pytest.raises(InvalidBSON, match="nested too deeply"):
        decode(data)


def test_decode_accepts_buffers_and_refuses_other_types() -> None:
    data = encode({"a": 1})
    assert decode(bytearray(data)) == decode(memoryview(data)) == {"a": 1}
    with pytest.raises(TypeError):
        decode("text")  # type: ignore[arg-type]


def test_unicode_decode_error_handler() -> None:
    data = doc_bytes(b"\x02s\x00\x03\x00\x00\x00a\xff\x00")
    with pytest.raises(InvalidBSON):
        decode(data)
    assert decode(data, CodecOptions(unicode_decode_error_handler="replace")) == {"s": "a\ufffd"}
    assert decode(data, CodecOptions(unicode_decode_error_handler="ignore")) == {"s": "a"}


def test_decode_all_and_iter() -> None:
    docs = [{"a": i} for i in range(3)]
    data = b"".join(encode(d) for d in docs)
    assert decode_all(data) == docs
    assert list(decode_iter(data)) == docs
    assert decode_all(b"") == []
    assert list(decode_file_iter(io.BytesIO(data))) == docs
    iterator = decode_iter(data + b"\x01")
    assert next(iterator) == docs[0]
    with pytest.raises(InvalidBSON):
        list(iterator)
    with pytest.raises(InvalidBSON):
        list(decode_file_iter(io.BytesIO(data[:-1])))


# --- DBRef decoding ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "is_dbref"),
    [
        ({"$ref": "c", "$id": 1}, True),
        ({"$ref": "c", "$id": 1, "$db": "d", "x": 2}, True),
        ({"$ref": "c"}, False),
        ({"$ref": 1, "$id": 1}, False),
        ({"$ref": "c", "$id": 1, "$db": 1}, False),
        ({"$ref": "c", "$id": 1, "$db": None}, False),
        ({"$id": 1}, False),
    ],
)
def test_dbref_decoding(document: dict[str, Any], is_dbref: bool) -> None:
    data = encode({"r": document})
    value = decode(data)["r"]
    assert isinstance(value, DBRef) is is_dbref
    assert encode({"r": value}) == data


# --- options ----------------------------------------------------------------------------------------------

THE_UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


@pytest.mark.parametrize(
    ("representation", "subtype", "hex_data"),
    [
        (UuidRepresentation.JAVA_LEGACY, 3, "7766554433221100ffeeddccbbaa9988"),
        (UuidRepresentation.CSHARP_LEGACY, 3, "33221100554477668899aabbccddeeff"),
        (UuidRepresentation.PYTHON_LEGACY, 3, "00112233445566778899aabbccddeeff"),
        (UuidRepresentation.STANDARD, 4, "00112233445566778899aabbccddeeff"),
    ],
)
def test_implicit_uuid_encoding(representation: UuidRepresentation, subtype: int, hex_data: str) -> None:
    options = CodecOptions(uuid_representation=representation)
    stored = decode(encode({"_id": THE_UUID}, codec_options=options))["_id"]
    assert stored == Binary(bytes.fromhex(hex_data), subtype)


def test_implicit_uuid_encoding_refused_when_unspecified() -> None:
    with pytest.raises(InvalidDocument, match=r"'_id'.*UNSPECIFIED"):
        encode({"_id": THE_UUID})


@pytest.mark.parametrize(
    ("representation", "native_field"),
    [
        (UuidRepresentation.JAVA_LEGACY, "legacy"),
        (UuidRepresentation.CSHARP_LEGACY, "legacy"),
        (UuidRepresentation.PYTHON_LEGACY, "legacy"),
        (UuidRepresentation.STANDARD, "standard"),
        (UuidRepresentation.UNSPECIFIED, None),
    ],
)
def test_implicit_uuid_decoding(representation: UuidRepresentation, native_field: str | None) -> None:
    legacy_representation = (
        representation if representation != UuidRepresentation.STANDARD else UuidRepresentation.PYTHON_LEGACY
    )
    if legacy_representation == UuidRepresentation.UNSPECIFIED:
        legacy_representation = UuidRepresentation.PYTHON_LEGACY
    document = {
        "standard": Binary.from_uuid(THE_UUID, UuidRepresentation.STANDARD),
        "legacy": Binary.from_uuid(THE_UUID, legacy_representation),
    }
    decoded = decode(encode(document), CodecOptions(uuid_representation=representation))
    for field, value in document.items():
        if field == native_field:
            assert decoded[field] == THE_UUID
        else:
            assert decoded[field] == value and isinstance(decoded[field], Binary)


@pytest.mark.parametrize(
    ("millis", "conversion", "expected"),
    [
        (0, DatetimeConversion.DATETIME, datetime.datetime(1970, 1, 1)),
        (-1, DatetimeConversion.DATETIME, datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)),
        (2**62, DatetimeConversion.DATETIME_AUTO, DatetimeMS(2**62)),
        (1000, DatetimeConversion.DATETIME_AUTO, datetime.datetime(1970, 1, 1, 0, 0, 1)),
        (1000, DatetimeConversion.DATETIME_MS, DatetimeMS(1000)),
        (2**62, DatetimeConversion.DATETIME_CLAMP, datetime.datetime(9999, 12, 31, 23, 59, 59, 999000)),
        (-(2**62), DatetimeConversion.DATETIME_CLAMP, datetime.datetime(1, 1, 1)),
    ],
)
def test_datetime_conversion(millis: int, conversion: DatetimeConversion, expected: Any) -> None:
    data = doc_bytes(b"\x09d\x00" + struct.pack("<q", millis))
    value = decode(data, CodecOptions(datetime_conversion=conversion))["d"]
    assert value == expected and type(value) is type(expected)
    assert encode({"d": value}) == data or conversion == DatetimeConversion.DATETIME_CLAMP


def test_tz_aware_and_tzinfo() -> None:
    data = encode({"d": datetime.datetime(2020, 6, 1, 12, 0)})
    aware = decode(data, CodecOptions(tz_aware=True))["d"]
    assert aware.tzinfo is not None and aware.utcoffset() == datetime.timedelta(0)
    zone = datetime.timezone(datetime.timedelta(hours=3), "plus3")
    local = decode(data, CodecOptions(tz_aware=True, tzinfo=zone))["d"]
    assert local.tzinfo is zone and local.hour == 15
    assert encode({"d": local}) == data
    naive = decode(data)["d"]
    assert naive.tzinfo is None and naive.hour == 12


def test_tzinfo_near_the_end_of_time_under_auto() -> None:
    data = doc_bytes(b"\x09d\x00" + struct.pack("<q", 253402300799999))
    zone = datetime.timezone(datetime.timedelta(hours=5))
    options = CodecOptions(tz_aware=True, tzinfo=zone, datetime_conversion=DatetimeConversion.DATETIME_AUTO)
    assert decode(data, options)["d"] == DatetimeMS(253402300799999)
    with pytest.raises(InvalidBSON):
        decode(data, CodecOptions(tz_aware=True, tzinfo=zone))


def test_document_class() -> None:
    data = encode({"a": {"b": [{"c": 1}]}})
    son = decode(data, CodecOptions(document_class=SON))
    assert type(son) is SON and type(son["a"]) is SON and type(son["a"]["b"][0]) is SON
    ordered = decode(data, CodecOptions(document_class=collections.OrderedDict))
    assert type(ordered["a"]) is collections.OrderedDict


class DecimalCodec(TypeCodec):
    @property
    def python_type(self) -> Any:
        return decimal.Decimal

    @property
    def bson_type(self) -> Any:
        return Decimal128

    def transform_python(self, value: Any) -> Any:
        return Decimal128(value)

    def transform_bson(self, value: Any) -> Any:
        return value.to_decimal()


def test_type_registry_codec() -> None:
    options = CodecOptions(type_registry=TypeRegistry([DecimalCodec()]))
    value = decimal.Decimal("1.25")
    data = encode({"d": value, "l": [value]}, codec_options=options)
    assert decode(data) == {"d": Decimal128("1.25"), "l": [Decimal128("1.25")]}
    assert decode(data, options) == {"d": value, "l": [value]}
    raw = decode(data, options.with_options(document_class=RawBSONDocument))
    assert raw["d"] == value
    with pytest.raises(InvalidDocument, match="'d'"):
        encode({"d": value})


def test_type_registry_fallback_encoder_runs_once() -> None:
    calls: list[Any] = []

    def fallback(value: Any) -> Any:
        calls.append(value)
        return str(value) if isinstance(value, complex) else value

    options = CodecOptions(type_registry=TypeRegistry(fallback_encoder=fallback))
    assert decode(encode({"c": 1j}, codec_options=options)) == {"c": "1j"}
    with pytest.raises(InvalidDocument, match="'s'"):
        encode({"s": {1}}, codec_options=options)
    assert len(calls) == 2


def test_type_registry_refuses_built_in_types_and_non_codecs() -> None:
    class IntEncoder(TypeEncoder):
        python_type = int

        def transform_python(self, value: Any) -> Any:
            return str(value)

    with pytest.raises(TypeError, match="built-in"):
        TypeRegistry([IntEncoder()])
    with pytest.raises(TypeError):
        TypeRegistry([object()])  # type: ignore[list-item]


def test_type_decoder_applies_to_nested_values() -> None:
    class StrUpper(TypeDecoder):
        bson_type = str

        def transform_bson(self, value: Any) -> Any:
            return value.upper()

    options = CodecOptions(type_registry=TypeRegistry([StrUpper()]))
    assert decode(encode({"a": "x", "b": {"c": ["y"]}}), options) == {"a": "X", "b": {"c": ["Y"]}}


def test_type_decoder_errors_are_not_disguised_as_invalid_bson() -> None:
    class Failing(TypeDecoder):
        bson_type = int

        def transform_bson(self, value: Any) -> Any:
            raise TypeError("application bug")

    with pytest.raises(TypeError, match="application bug"):
        decode(encode({"a": 1}), CodecOptions(type_registry=TypeRegistry([Failing()])))


# --- RawBSONDocument --------------------------------------------------------------------------------------


def test_raw_document_reads_lazily_and_reencodes_bytes() -> None:
    data = encode({"a": 1, "bad": "x", "sub": {"b": [1, {"c": 2}]}})
    # Break the UTF-8 of "bad"'s value only: other fields stay readable.
    broken = data.replace(b"\x02\x00\x00\x00x\x00", b"\x02\x00\x00\x00\xff\x00")
    raw = RawBSONDocument(broken)
    assert raw["a"] == 1
    assert list(raw) == ["a", "bad", "sub"] and len(raw) == 3 and "sub" in raw
    with pytest.raises(InvalidBSON):
        raw["bad"]
    sub = raw["sub"]
    assert isinstance(sub, RawBSONDocument) and isinstance(sub["b"][1], RawBSONDocument)
    assert sub["b"][1]["c"] == 2
    assert encode(raw) == broken
    assert encode({"wrapped": raw}) == doc_bytes(b"\x03wrapped\x00" + broken)
    with pytest.raises(KeyError):
        raw["missing"]


def test_raw_document_validates_outer_length() -> None:
    for data in [b"", b"\x06\x00\x00\x00\x00", b"\x05\x00\x00\x00\x01"]:
        with pytest.raises(InvalidBSON):
            RawBSONDocument(data)
    with pytest.raises(TypeError):
        RawBSONDocument(encode({}), CodecOptions())


def test_raw_document_class_in_decode() -> None:
    data = encode({"x": {"y": 1}})
    options = CodecOptions(document_class=RawBSONDocument)
    raw = decode(data, options)
    assert isinstance(raw, RawBSONDocument) and raw.raw == data
    assert decode_all(data + data, options)[1].raw == data
    assert dict(raw["x"]) == {"y": 1}
    assert raw == RawBSONDocument(data)


def test_raw_document_index_rejects_overrunning_elements() -> None:
    raw = RawBSONDocument(doc_bytes(b"\x02s\x00\x50\x00\x00\x00abc\x00"))
    with pytest.raises(InvalidBSON):
        len(raw)


# --- the BSON corpus bytes ------------------------------------------------------------------------------


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the specifications checkout is not beside the repository")
def test_corpus_bson_round_trips_and_decode_errors() -> None:
    failures = []
    count = 0
    for file, kind, case in corpus_cases():
        count += 1
        try:
            if kind == "valid":
                canonical = bytes.fromhex(case["canonical_bson"])
                assert encode(decode(canonical, CORPUS_OPTIONS), codec_options=CORPUS_OPTIONS) == canonical
                if "degenerate_bson" in case:
                    degenerate = bytes.fromhex(case["degenerate_bson"])
                    assert (
                        encode(decode(degenerate, CORPUS_OPTIONS), codec_options=CORPUS_OPTIONS) == canonical
                    )
                raw = RawBSONDocument(canonical, CORPUS_OPTIONS.with_options(document_class=RawBSONDocument))
                assert encode(raw) == canonical
            else:
                with pytest.raises(InvalidBSON):
                    decode(bytes.fromhex(case["bson"]), CORPUS_OPTIONS)
        except AssertionError as exc:
            failures.append(f"{file} {kind}: {case['description']}: {exc}")
    assert count > 300
    assert not failures, "\n".join(failures)


def test_encode_into_appends_what_encode_makes() -> None:
    from mongio.bson._encoder import encode_into

    documents: list[Mapping[str, Any]] = [
        {"i": Int64(7), "b": Binary(b"\x01\x02", 4), "old": Binary(b"xy", 2), "h": b"\x00" * 3},
        {"t": Timestamp(5, 6), "o": ObjectId("0123456789ab0123456789ab"), "n": {"x": [1, "s", None]}},
        SON([("z", 1), ("a", 2)]),
    ]
    for document in documents:
        buf = bytearray(b"head")
        encode_into(buf, document)
        assert bytes(buf) == b"head" + bson.encode(document)
    with pytest.raises(InvalidDocument, match=r"'a\.b'"):
        encode_into(bytearray(), {"a": {"b": object()}})
    with pytest.raises(TypeError):
        encode_into(bytearray(), [("a", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize(
    "options",
    [CodecOptions(), CodecOptions(tz_aware=True), CodecOptions(document_class=RawBSONDocument)],
    ids=["default", "tz_aware", "raw"],
)
def test_decode_framed_decodes_a_checked_view_as_decode_does(compiled: bool, options: CodecOptions) -> None:
    document = {"a": 1, "b": [1, {"c": "é"}], "d": datetime.datetime(2026, 1, 1), "e": None}
    data = bson.encode(document)
    buffer = bytearray(b"head" + data + b"tail")
    view = memoryview(buffer)[4 : 4 + len(data)]
    unterminated = bytearray(data)
    unterminated[-1] = 1
    bad_string = bytearray(data)
    bad_string[data.index(b"\xc3\xa9")] = 0xFF
    try:
        use_speedups(compiled)
        for _ in range(2):  # before and after the options' decoding context is cached
            assert decode_framed(view, options) == bson.decode(data, options)
        with pytest.raises(InvalidBSON) as whole:
            bson.decode(bytes(unterminated), options)
        with pytest.raises(InvalidBSON) as framed:
            decode_framed(memoryview(unterminated), options)
        assert str(framed.value) == str(whole.value)
        if options.document_class is not RawBSONDocument:  # a raw document reads its strings when asked
            with pytest.raises(InvalidBSON) as whole:
                bson.decode(bytes(bad_string), options)
            with pytest.raises(InvalidBSON) as framed:
                decode_framed(memoryview(bad_string), options)
            assert str(framed.value) == str(whole.value)
    finally:
        use_speedups(True)
