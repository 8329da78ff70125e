"""Property tests: documents of every supported type round-trip, and no input makes the decoder raise
anything but InvalidBSON."""

from __future__ import annotations

import datetime
import struct
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mongio.bson import (
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
    MaxKey,
    MinKey,
    ObjectId,
    RawBSONDocument,
    Regex,
    Symbol,
    Timestamp,
    Undefined,
    decode,
    decode_all,
    encode,
)

# Unicode category Cs (lone surrogates): strings holding one cannot be encoded as UTF-8.
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)

# Keys: any Unicode without NUL or surrogates. A leading "$" is left out so that no generated document
# happens to have the DBRef shape (which decodes to a DBRef, by design).
keys = st.text(st.characters(exclude_categories=SURROGATES, exclude_characters="\x00"), max_size=8).filter(
    lambda key: not key.startswith("$")
)
texts = st.text(st.characters(exclude_categories=SURROGATES), max_size=20)
cstrings = st.text(st.characters(exclude_categories=SURROGATES, exclude_characters="\x00"), max_size=10)
uint32 = st.integers(0, 2**32 - 1)

datetimes = st.datetimes(
    min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31, 23, 59, 59)
).map(
    # BSON keeps milliseconds.
    lambda value: value.replace(microsecond=value.microsecond // 1000 * 1000)
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.floats(allow_nan=False),
    st.sampled_from([-0.0, float("inf"), float("-inf")]),
    texts,
    st.binary(max_size=20),
    st.builds(Binary, st.binary(max_size=20), st.integers(1, 255)),
    st.binary(min_size=12, max_size=12).map(ObjectId),
    datetimes,
    st.builds(Regex, cstrings, st.sets(st.sampled_from("ilmsux")).map(lambda flags: "".join(sorted(flags)))),
    st.builds(Code, texts),
    st.builds(Timestamp, uint32, uint32),
    st.binary(min_size=16, max_size=16).map(Decimal128.from_bid),
    st.just(MinKey()),
    st.just(MaxKey()),
    st.builds(Symbol, texts),
    st.just(Undefined()),
    st.builds(DBPointer, texts, st.binary(min_size=12, max_size=12).map(ObjectId)),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    documents = st.dictionaries(keys, children, max_size=5)
    return st.one_of(
        st.lists(children, max_size=5),
        documents,
        st.builds(Code, texts, documents),
        st.builds(DBRef, cstrings, children, st.none() | cstrings),
    )


values = st.recursive(scalars, _containers, max_leaves=25)
documents = st.dictionaries(keys, values, max_size=8)

ALL_OPTIONS = [
    CodecOptions(),
    CodecOptions(tz_aware=True, datetime_conversion=DatetimeConversion.DATETIME_AUTO),
    CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS),
    CodecOptions(document_class=RawBSONDocument),
    CodecOptions(unicode_decode_error_handler="replace"),
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_documents_round_trip(document: dict[str, Any]) -> None:
    data = encode(document)
    decoded = decode(data)
    assert decoded == document
    assert encode(decoded) == data
    raw = decode(data, CodecOptions(document_class=RawBSONDocument))
    assert encode(raw) == data
    assert encode({key: raw[key] for key in raw}) == data


# The milliseconds of datetime.min and of datetime.max's last millisecond.
_FIRST_MS = -62135596800000
_LAST_MS = 253402300799999


@settings(max_examples=300)
@given(
    st.integers(-(2**63), 2**63 - 1)
    | st.integers(_FIRST_MS - 2, _FIRST_MS + 2)
    | st.integers(_LAST_MS - 2, _LAST_MS + 2),
    st.sampled_from(list(DatetimeConversion)),
    st.booleans(),
)
def test_any_bson_datetime_survives_auto_and_ms(
    millis: int, conversion: DatetimeConversion, aware: bool
) -> None:
    data = encode({"d": DatetimeMS(millis)})
    options = CodecOptions(tz_aware=aware, datetime_conversion=conversion)
    try:
        value = decode(data, options)["d"]
    except InvalidBSON:
        # Only the plain DATETIME conversion refuses, and only outside datetime's range.
        assert conversion == DatetimeConversion.DATETIME
        assert not _FIRST_MS <= millis <= _LAST_MS
        return
    if conversion == DatetimeConversion.DATETIME_CLAMP:
        clamped = max(min(millis, _LAST_MS), _FIRST_MS)
        assert encode({"d": value}) == encode({"d": DatetimeMS(clamped)})
    else:
        assert encode({"d": value}) == data
    if conversion == DatetimeConversion.DATETIME_MS:
        assert value == DatetimeMS(millis)


def _touch(value: Any) -> None:
    """Read every field of (possibly raw, possibly nested) decoded values."""
    if isinstance(value, RawBSONDocument):
        for key in value:
            _touch(value[key])
    elif isinstance(value, dict):
        for item in value.values():
            _touch(item)
    elif isinstance(value, list):
        for item in value:
            _touch(item)


def _decode_only_invalid_bson(data: bytes) -> None:
    for options in ALL_OPTIONS:
        try:
            _touch(decode(data, options))
        except InvalidBSON:
            pass
        try:
            for doc in decode_all(data, options):
                _touch(doc)
        except InvalidBSON:
            pass


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_random_bytes_raise_only_invalid_bson(data: bytes) -> None:
    _decode_only_invalid_bson(data)


@settings(max_examples=500)
@given(st.binary(max_size=60))
def test_random_bodies_with_a_correct_length_raise_only_invalid_bson(body: bytes) -> None:
    # A correct outer length and terminator get the decoder past its first checks into the elements.
    _decode_only_invalid_bson(struct.pack("<i", len(body) + 5) + body + b"\x00")


# Element-shaped garbage: a real type byte and a terminated name, then arbitrary value bytes. This reaches
# each type's value reader far more often than uniformly random bytes do.
_TYPE_BYTES = [*range(0x01, 0x14), 0x7F, 0xFF, 0x00, 0x20]
garbage_elements = st.lists(
    st.tuples(
        st.sampled_from(_TYPE_BYTES),
        st.binary(max_size=3).filter(lambda k: b"\x00" not in k),
        st.binary(max_size=24),
    ).map(lambda parts: bytes([parts[0]]) + parts[1] + b"\x00" + parts[2]),
    max_size=4,
).map(b"".join)


@settings(max_examples=1000)
@given(garbage_elements)
def test_element_shaped_garbage_raises_only_invalid_bson(body: bytes) -> None:
    _decode_only_invalid_bson(struct.pack("<i", len(body) + 5) + body + b"\x00")


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.data())
def test_mutated_documents_raise_only_invalid_bson(document: dict[str, Any], data: st.DataObject) -> None:
    encoded = bytearray(encode(document))
    for _ in range(data.draw(st.integers(1, 4))):
        operation = data.draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        position = data.draw(st.integers(0, max(0, len(encoded) - 1)))
        if operation == "flip" and encoded:
            encoded[position] ^= 1 << data.draw(st.integers(0, 7))
        elif operation == "set" and encoded:
            encoded[position] = data.draw(st.integers(0, 255))
        elif operation == "truncate":
            del encoded[position:]
        elif operation == "insert":
            encoded[position:position] = data.draw(st.binary(min_size=1, max_size=4))
        elif operation == "delete" and encoded:
            del encoded[position]
    if len(encoded) >= 4 and data.draw(st.booleans()):
        # Keep the outer length consistent so the damage is found inside the document.
        encoded[:4] = struct.pack("<i", len(encoded))
    _decode_only_invalid_bson(bytes(encoded))
