"""The BSON value types: ObjectId, Binary (UUIDs, vectors), Regex, Code, DBRef, Timestamp, DatetimeMS, ..."""

from __future__ import annotations

import datetime
import os
import pickle
import re
import sys
import uuid
from typing import Any

import pytest

from mongio.bson import (
    SON,
    Binary,
    BinaryVector,
    BinaryVectorDtype,
    Code,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    DBPointer,
    DBRef,
    Int64,
    InvalidId,
    InvalidStringData,
    InvalidVector,
    MaxKey,
    MinKey,
    ObjectId,
    Regex,
    Symbol,
    Timestamp,
    Undefined,
    UuidRepresentation,
)
from mongio.bson import objectid as objectid_module

UTC = datetime.UTC

# --- ObjectId -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("00000000", datetime.datetime(1970, 1, 1, tzinfo=UTC)),
        ("7FFFFFFF", datetime.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)),
        ("80000000", datetime.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC)),
        ("FFFFFFFF", datetime.datetime(2106, 2, 7, 6, 28, 15, tzinfo=UTC)),
    ],
)
def test_objectid_timestamp_is_unsigned(prefix: str, expected: datetime.datetime) -> None:
    oid = ObjectId(prefix + "0000000000000000")
    assert oid.generation_time == expected


def test_objectid_layout_and_counter() -> None:
    before = int(datetime.datetime.now(UTC).timestamp())
    first, second = ObjectId(), ObjectId()
    after = int(datetime.datetime.now(UTC).timestamp())
    assert before <= int(first.generation_time.timestamp()) <= after
    # The 5 random bytes are the same within a process; the counter goes up by one.
    assert first.binary[4:9] == second.binary[4:9]
    assert (int.from_bytes(second.binary[9:], "big") - int.from_bytes(first.binary[9:], "big")) % (
        1 << 24
    ) == 1
    assert first < second and first != second


def test_objectid_counter_wraps_to_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    monkeypatch.setattr(objectid_module, "_counter", itertools.count(0xFFFFFF))
    last, wrapped = ObjectId(), ObjectId()
    assert last.binary[9:] == b"\xff\xff\xff"
    assert wrapped.binary[9:] == b"\x00\x00\x00"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_objectid_random_value_changes_after_fork() -> None:
    parent = ObjectId().binary[4:9]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process
        try:
            os.write(write_end, ObjectId().binary[4:9])
        finally:
            os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 5)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert len(child) == 5
    assert child != parent
    assert ObjectId().binary[4:9] == parent


def test_objectid_parsing_and_text() -> None:
    text = "0123456789abcdef01234567"
    oid = ObjectId(text)
    assert str(oid) == text
    assert repr(oid) == f"ObjectId('{text}')"
    assert ObjectId(oid.binary) == oid == ObjectId(oid)
    assert ObjectId(text.upper()) == oid
    assert hash(ObjectId(text)) == hash(oid)
    assert pickle.loads(pickle.dumps(oid)) == oid
    for bad in ["0123", "zz23456789abcdef01234567", b"short", 12]:
        with pytest.raises((InvalidId, TypeError)):
            ObjectId(bad)  # type: ignore[arg-type]
    assert ObjectId.is_valid(text)
    assert not ObjectId.is_valid("nothex" * 4)
    # 24 characters that bytes.fromhex would read as fewer than 12 bytes
    for padded in ["00112233445566778899aa  ", " 00112233445566778899aa ", "0011 2233 4455 6677 8899"]:
        assert not ObjectId.is_valid(padded)
        with pytest.raises(InvalidId, match="24 hex digits"):
            ObjectId(padded)
    assert not ObjectId.is_valid(None)
    assert not ObjectId.is_valid(12)


def test_objectid_from_datetime() -> None:
    when = datetime.datetime(2020, 5, 17, 10, 11, 12, tzinfo=UTC)
    oid = ObjectId.from_datetime(when)
    assert oid.generation_time == when
    assert oid.binary[4:] == b"\x00" * 8
    naive = ObjectId.from_datetime(datetime.datetime(2020, 5, 17, 10, 11, 12))
    assert naive == oid
    offset = datetime.timezone(datetime.timedelta(hours=2))
    assert ObjectId.from_datetime(when.astimezone(offset)) == oid


# --- Binary and UUIDs ------------------------------------------------------------------------------------

THE_UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


@pytest.mark.parametrize(
    ("representation", "subtype", "hex_data"),
    [
        (UuidRepresentation.STANDARD, 4, "00112233445566778899AABBCCDDEEFF"),
        (UuidRepresentation.JAVA_LEGACY, 3, "7766554433221100FFEEDDCCBBAA9988"),
        (UuidRepresentation.CSHARP_LEGACY, 3, "33221100554477668899AABBCCDDEEFF"),
        (UuidRepresentation.PYTHON_LEGACY, 3, "00112233445566778899AABBCCDDEEFF"),
    ],
)
def test_uuid_explicit_encoding_and_decoding(
    representation: UuidRepresentation, subtype: int, hex_data: str
) -> None:
    binary = Binary.from_uuid(THE_UUID, representation)
    assert binary.subtype == subtype
    assert binary.hex().upper() == hex_data
    assert binary.as_uuid(representation) == THE_UUID
    # Reading needs the subtype the representation writes: 4 for STANDARD only, 3 for the legacy ones.
    refused = [
        r for r in UuidRepresentation if r == UuidRepresentation.UNSPECIFIED or (r == UuidRepresentation.STANDARD) != (subtype == 4)
    ]
    for other in refused:
        with pytest.raises(ValueError):
            binary.as_uuid(other)


def test_uuid_defaults_and_unspecified() -> None:
    binary = Binary.from_uuid(THE_UUID)
    assert binary.subtype == 4 and binary.as_uuid() == THE_UUID
    with pytest.raises(ValueError, match="UNSPECIFIED"):
        Binary.from_uuid(THE_UUID, UuidRepresentation.UNSPECIFIED)
    with pytest.raises(ValueError):
        binary.as_uuid(UuidRepresentation.UNSPECIFIED)
    legacy = Binary(bytes.fromhex("7766554433221100FFEEDDCCBBAA9988"), 3)
    with pytest.raises(ValueError):
        legacy.as_uuid()
    with pytest.raises(ValueError):
        Binary(b"short", 4).as_uuid()


def test_binary_equality_and_validation() -> None:
    assert Binary(b"abc", 0) != b"abc"
    assert Binary(b"abc", 0) != Binary(b"abc", 5)
    assert Binary(b"abc", 5) == Binary(b"abc", 5)
    assert hash(Binary(b"abc", 5)) == hash(Binary(b"abc", 5))
    assert pickle.loads(pickle.dumps(Binary(b"abc", 130))) == Binary(b"abc", 130)
    with pytest.raises(ValueError):
        Binary(b"x", 256)
    with pytest.raises(TypeError):
        Binary("text", 0)  # type: ignore[arg-type]


# --- Vectors ---------------------------------------------------------------------------------------------


def test_vector_round_trip_each_dtype() -> None:
    cases: list[tuple[list[float], BinaryVectorDtype, int]] = [
        ([1, -2, 127, -128], BinaryVectorDtype.INT8, 0),
        ([1.5, -0.25, float("inf")], BinaryVectorDtype.FLOAT32, 0),
        ([0b11110000, 0b10000000], BinaryVectorDtype.PACKED_BIT, 7),
    ]
    for values, dtype, padding in cases:
        binary = Binary.from_vector(values, dtype, padding)
        assert binary.subtype == 9
        assert binary[:2] == dtype.value + bytes([padding])
        assert binary.as_vector() == BinaryVector(values, dtype, padding)
        assert Binary.from_vector(BinaryVector(values, dtype, padding)) == binary


def test_vector_ignored_bits_must_be_zero() -> None:
    with pytest.raises(ValueError):
        Binary.from_vector([0b11111111], BinaryVectorDtype.PACKED_BIT, padding=7)
    with pytest.raises(InvalidVector):
        Binary(b"\x10\x07\xff", subtype=9).as_vector()


def test_vector_comparison() -> None:
    b1 = Binary(b"\x10\x07\x80", subtype=9)
    b3 = Binary.from_vector([0b10000000], BinaryVectorDtype.PACKED_BIT, padding=7)
    assert b1 == b3
    assert b1.as_vector() == b3.as_vector()
    assert BinaryVector([1], BinaryVectorDtype.INT8) != BinaryVector([1], BinaryVectorDtype.PACKED_BIT)
    assert BinaryVector([1], BinaryVectorDtype.PACKED_BIT, 0) != BinaryVector(
        [1], BinaryVectorDtype.PACKED_BIT, 1
    )


@pytest.mark.parametrize(
    "data",
    [b"\x27\x00\x00\x00\x80", b"\x03\x01\x01", b"\x10\x08\x01", b"\x10\x01", b"\x55\x00", b"\x03"],
)
def test_vector_decoding_validation(data: bytes) -> None:
    with pytest.raises(InvalidVector):
        Binary(data, 9).as_vector()


def test_as_vector_needs_subtype_9() -> None:
    with pytest.raises(InvalidVector):
        Binary(b"\x03\x00\x01", 0).as_vector()


def test_float32_overflow_is_refused() -> None:
    with pytest.raises(InvalidVector):
        Binary.from_vector([1e300], BinaryVectorDtype.FLOAT32)


# --- Regex, Code, DBRef and the rest ----------------------------------------------------------------------


def test_regex_flags() -> None:
    assert Regex("a", re.I | re.M | re.X).flags == "imx"
    assert Regex("a", "mi").flags == "mi"
    compiled = Regex("^a.b$", "ims").try_compile()
    assert compiled.flags & re.I and compiled.flags & re.M and compiled.flags & re.S
    native = Regex.from_native(re.compile("x", re.I))
    assert native == Regex("x", "i")
    assert pickle.loads(pickle.dumps(Regex("p", "i"))) == Regex("p", "i")


@pytest.mark.parametrize(("pattern", "flags"), [("a\x00b", ""), ("ab", "i\x00")])
def test_regex_refuses_nul(pattern: str, flags: str) -> None:
    with pytest.raises(InvalidStringData):
        Regex(pattern, flags)


def test_code_scope_merging() -> None:
    plain = Code("f()")
    assert plain.scope is None and str(plain) == "f()" and isinstance(plain, str)
    assert plain != "f()"  # code is not equal to a string with the same text: they encode differently
    scoped = Code("f(x)", {"x": 1}, y=2)
    assert scoped.scope == {"x": 1, "y": 2}
    assert Code(scoped, z=3).scope == {"x": 1, "y": 2, "z": 3}
    assert Code("f()", {}) != Code("f()")
    assert pickle.loads(pickle.dumps(scoped)) == scoped


def test_dbref_fields_and_document() -> None:
    ref = DBRef("coll", 5, "db", extra_field="x")
    assert (ref.collection, ref.id, ref.database, ref.extra_field) == ("coll", 5, "db", "x")
    assert list(ref.as_doc().items()) == [("$ref", "coll"), ("$id", 5), ("$db", "db"), ("extra_field", "x")]
    assert list(DBRef("c", 1).as_doc()) == ["$ref", "$id"]
    assert ref == DBRef("coll", 5, "db", extra_field="x") != DBRef("coll", 5, "db")
    assert pickle.loads(pickle.dumps(ref)) == ref
    with pytest.raises(TypeError):
        DBRef(1, 2)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        _ = ref.missing


def test_timestamp() -> None:
    ts = Timestamp(10, 2)
    assert (ts.time, ts.inc) == (10, 2)
    assert Timestamp(10, 1) < ts < Timestamp(11, 0)
    assert Timestamp(datetime.datetime(1970, 1, 1, 0, 0, 10, tzinfo=UTC), 2) == ts
    assert ts.as_datetime() == datetime.datetime(1970, 1, 1, 0, 0, 10, tzinfo=UTC)
    for bad in [(-1, 0), (0, 1 << 32), (1 << 32, 0)]:
        with pytest.raises(ValueError):
            Timestamp(*bad)


def test_timestamp_comparisons_order_by_time_then_inc_for_own_and_derived_timestamps() -> None:
    class Derived(Timestamp):
        pass

    pairs = [((5, 9), (6, 0)), ((6, 1), (6, 2)), ((7, 3), (7, 3)), ((8, 0), (7, 99))]
    for (left_time, left_inc), (right_time, right_inc) in pairs:
        expected = (left_time, left_inc)
        other = (right_time, right_inc)
        for right in (Timestamp(right_time, right_inc), Derived(right_time, right_inc)):
            left = Timestamp(left_time, left_inc)
            assert (left == right) is (expected == other)
            assert (left != right) is (expected != other)
            assert (left < right) is (expected < other)
            assert (left <= right) is (expected <= other)
            assert (left > right) is (expected > other)
            assert (left >= right) is (expected >= other)
    assert Timestamp(1, 1) != (1, 1)
    with pytest.raises(TypeError):
        _ = Timestamp(1, 1) < (1, 2)


def test_datetime_ms() -> None:
    assert int(DatetimeMS(datetime.datetime(1970, 1, 1, 0, 0, 1, 999999))) == 1999
    assert int(DatetimeMS(datetime.datetime(1969, 12, 31, 23, 59, 59, 999999))) == -1
    assert DatetimeMS(5) < DatetimeMS(6)
    assert DatetimeMS(1500).as_datetime() == datetime.datetime(1970, 1, 1, 0, 0, 1, 500000)
    zone = datetime.timezone(datetime.timedelta(hours=1))
    local = DatetimeMS(1500).as_datetime(CodecOptions(tz_aware=True, tzinfo=zone))
    assert local.tzinfo is zone and local == datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    with pytest.raises(OverflowError):
        DatetimeMS(2**62).as_datetime()
    clamp = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_CLAMP)
    assert DatetimeMS(2**62).as_datetime(clamp) == datetime.datetime(9999, 12, 31, 23, 59, 59, 999000)
    with pytest.raises(OverflowError):
        DatetimeMS(2**63)
    assert int(DatetimeConversion.DATETIME_AUTO) == 4


def test_min_max_keys_order_against_anything() -> None:
    assert MinKey() == MinKey() and MaxKey() == MaxKey() and MinKey() != MaxKey()
    assert MinKey() < 0 < MaxKey()
    assert sorted([MaxKey(), MinKey()], key=lambda k: isinstance(k, MaxKey)) == [MinKey(), MaxKey()]


def test_deprecated_types() -> None:
    oid = ObjectId()
    assert DBPointer("db.c", oid) == DBPointer("db.c", oid)
    assert Symbol("x") != "x" and Symbol("x") == Symbol("x")
    assert Undefined() == Undefined() and not Undefined()
    assert Int64(5) == 5 and repr(Int64(5)) == "Int64(5)"
    assert str(Int64(5)) == f"{Int64(5)}" == "5"  # as for an int, and PyMongo's Int64


def test_son_keeps_order_in_equality() -> None:
    assert SON([("a", 1), ("b", 2)]) != SON([("b", 2), ("a", 1)])
    assert SON([("a", 1), ("b", 2)]) == {"b": 2, "a": 1}
    assert SON([("a", SON([("b", [SON(c=1)])]))]).to_dict() == {"a": {"b": [{"c": 1}]}}
    assert type(SON[str, Any](a=SON(b=1)).to_dict()["a"]) is dict
    assert repr(SON([("a", 1)])) == "SON([('a', 1)])"


# --- CodecOptions ---------------------------------------------------------------------------------------


def test_codec_options_are_immutable_values() -> None:
    options = CodecOptions(tz_aware=True, tzinfo=UTC)
    with pytest.raises(AttributeError):
        options.tz_aware = False
    changed = options.with_options(uuid_representation=UuidRepresentation.STANDARD)
    assert changed.uuid_representation == UuidRepresentation.STANDARD
    assert changed.tz_aware and options.uuid_representation == UuidRepresentation.UNSPECIFIED
    assert options == CodecOptions(tz_aware=True, tzinfo=UTC)
    assert hash(options) == hash(CodecOptions(tz_aware=True, tzinfo=UTC))
    assert pickle.loads(pickle.dumps(changed)) == changed
    with pytest.raises(TypeError):
        options.with_options(bogus=1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"document_class": list},
        {"tzinfo": UTC},
        {"uuid_representation": 99},
        {"datetime_conversion": 9},
        {"tz_aware": "yes"},
        {"type_registry": object()},
    ],
)
def test_codec_options_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises((TypeError, ValueError)):
        CodecOptions(**kwargs)  # type: ignore[arg-type]


def test_module_exports_are_importable() -> None:
    import mongio.bson as bson

    missing = [name for name in bson.__all__ if not hasattr(bson, name)]
    assert not missing
    assert "mongio.bson" in sys.modules
