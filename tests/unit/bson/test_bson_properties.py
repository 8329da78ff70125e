"""Property tests: documents of every supported type round-trip, and no input makes the decoder raise
anything but InvalidBSON."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mongio.bson import (
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    InvalidBSON,
    RawBSONDocument,
    decode,
    decode_all,
    encode,
)
from tests.support.bson_data import (
    documents,
    garbage_elements,
)

ALL_OPTIONS = [
    CodecOptions(),
    CodecOptions(tz_aware=True, datetime_conversion=DatetimeConversion.DATETIME_AUTO),
    CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS),
    CodecOptions(document_class=RawBSONDocument),
    CodecOptions(unicode_decode_error_handler="replace"),
]


@pytest.mark.slow
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


@pytest.mark.slow
@settings(max_examples=1000)
@given(garbage_elements)
def test_element_shaped_garbage_raises_only_invalid_bson(body: bytes) -> None:
    _decode_only_invalid_bson(struct.pack("<i", len(body) + 5) + body + b"\x00")


@pytest.mark.slow
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
