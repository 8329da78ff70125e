"""PyMongo's ``bson`` values in mongio's encoder, and mongio's values in PyMongo's, byte for byte.

Documents are generated from a fixed seed: every PyMongo ``bson`` type (and mongio's), with random contents,
nested in documents, SONs, arrays and tuples, in Code scopes and DBRef ids. Each document must encode to
exactly the bytes ``bson.encode`` makes of it, in the compiled and the Python element loops alike. A value
that cannot be written as what its ``_type_marker`` says is refused naming its key path and type.
"""

from __future__ import annotations

import datetime
import random
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import bson
import bson.binary
import bson.code
import bson.codec_options
import bson.datetime_ms
import bson.dbref
import bson.decimal128
import bson.int64
import bson.max_key
import bson.min_key
import bson.objectid
import bson.raw_bson
import bson.regex
import bson.son
import bson.timestamp
import pytest

import mongio.bson as mb
from mongio.bson import InvalidDocument, _encoder, encode

DOCUMENTS_PER_RUN = 1500
SEED = 20261126

LOOPS = pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])


@pytest.fixture(autouse=True)
def _compiled_loops_afterwards() -> Iterator[None]:
    yield
    _encoder.use_speedups(True)


def _use_loops(compiled: bool) -> None:
    enabled = _encoder.use_speedups(compiled)
    if compiled and not enabled:
        pytest.skip("the compiled encoder loops are not built or are switched off")


def _forget_marked_types() -> None:
    """Drop the types the encoder remembered by marker, so the next document takes the first-sight path."""
    for kind in list(_encoder._ENCODERS):
        if kind not in _encoder.BUILT_IN_TYPES:
            del _encoder._ENCODERS[kind]


# --- random values -------------------------------------------------------------------------------------


def _text(rng: random.Random) -> str:
    return "".join(rng.choice("abcxyz .é\u4e2d$_") for _ in range(rng.randint(0, 8)))


def _key(rng: random.Random) -> str:
    # No top-level "_id": PyMongo's encode moves it first, mongio's keeps the order (a documented difference).
    return rng.choice(["a", "b", "name", "v", "x.y", "$k", "ключ", "z"]) + str(rng.randint(0, 9))


def _oid_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(12)


def _decimal_text(rng: random.Random) -> str:
    return rng.choice(
        ["0", "-0", "1.5", "-1E+10", "NaN", "Infinity", "-Infinity", "0.000001", "123456789.123"]
    )


def _regex_flags(rng: random.Random) -> int:
    flags = 0
    for flag in (re.IGNORECASE, re.LOCALE, re.MULTILINE, re.DOTALL, re.UNICODE, re.VERBOSE):
        if rng.random() < 0.4:
            flags |= flag
    return flags


def _millis(rng: random.Random) -> int:
    return rng.choice([0, -1, 1, rng.randint(-(2**63), 2**63 - 1), rng.randint(-(10**12), 10**13)])


def _uint32(rng: random.Random) -> int:
    return rng.choice([0, 1, 2**32 - 1, rng.randint(0, 2**32 - 1)])


def _int64(rng: random.Random) -> int:
    return rng.choice([0, 5, -5, 2**63 - 1, -(2**63), rng.randint(-(2**63), 2**63 - 1)])


def _subtype(rng: random.Random) -> int:
    return rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0xFF, rng.randint(0, 255)])


def _pymongo_leaves(rng: random.Random, depth: int, library: str) -> list[Callable[[], Any]]:
    return [
        lambda: bson.objectid.ObjectId(_oid_bytes(rng)),
        lambda: bson.objectid.ObjectId(),
        lambda: bson.binary.Binary(rng.randbytes(rng.randint(0, 20)), _subtype(rng)),
        lambda: bson.binary.Binary.from_uuid(uuid.UUID(bytes=rng.randbytes(16))),
        lambda: bson.binary.Binary.from_uuid(
            uuid.UUID(bytes=rng.randbytes(16)), bson.binary.UuidRepresentation.JAVA_LEGACY
        ),
        lambda: bson.code.Code(_text(rng)),
        lambda: bson.code.Code(_text(rng), _document(rng, depth + 1, library)),
        lambda: bson.int64.Int64(_int64(rng)),
        lambda: bson.decimal128.Decimal128(_decimal_text(rng)),
        lambda: bson.regex.Regex(_text(rng), _regex_flags(rng)),
        lambda: bson.regex.Regex(_text(rng), "".join(rng.sample("imsux", rng.randint(0, 4)))),
        lambda: bson.timestamp.Timestamp(_uint32(rng), _uint32(rng)),
        lambda: bson.dbref.DBRef(_text(rng), _value(rng, depth + 1, library)),
        lambda: bson.dbref.DBRef(
            _text(rng), bson.objectid.ObjectId(), _text(rng), extra=_value(rng, depth + 1, library)
        ),
        lambda: bson.min_key.MinKey(),
        lambda: bson.max_key.MaxKey(),
        lambda: bson.datetime_ms.DatetimeMS(_millis(rng)),
        lambda: bson.raw_bson.RawBSONDocument(bson.encode(_document(rng, depth + 1, "pymongo"))),
    ]


def _mongio_leaves(rng: random.Random, depth: int, library: str, regex: bool) -> list[Callable[[], Any]]:
    leaves = [
        lambda: mb.ObjectId(_oid_bytes(rng)),
        lambda: mb.Binary(rng.randbytes(rng.randint(0, 20)), _subtype(rng)),
        lambda: mb.Code(_text(rng)),
        lambda: mb.Code(_text(rng), _document(rng, depth + 1, library)),
        lambda: mb.Int64(_int64(rng)),
        lambda: mb.Decimal128(_decimal_text(rng)),
        lambda: mb.Timestamp(_uint32(rng), _uint32(rng)),
        lambda: mb.DBRef(_text(rng), _value(rng, depth + 1, library)),
        lambda: mb.DBRef(_text(rng), mb.ObjectId(), _text(rng), extra=_value(rng, depth + 1, library)),
        lambda: mb.MinKey(),
        lambda: mb.MaxKey(),
        lambda: mb.DatetimeMS(_millis(rng)),
        lambda: mb.RawBSONDocument(encode(_document(rng, depth + 1, "mongio-no-regex"))),
    ]
    if regex:
        leaves.append(lambda: mb.Regex(_text(rng), "".join(rng.sample("ilmsux", rng.randint(0, 4)))))
    return leaves


def _plain_leaves(rng: random.Random) -> list[Callable[[], Any]]:
    return [
        lambda: _text(rng),
        lambda: rng.randint(-(2**40), 2**40),
        lambda: rng.random() * 1e6,
        lambda: rng.random() < 0.5,
        lambda: None,
        lambda: rng.randbytes(rng.randint(0, 6)),
        lambda: datetime.datetime(2000, 1, 1) + datetime.timedelta(milliseconds=rng.randint(0, 10**12)),
    ]


def _value(rng: random.Random, depth: int, library: str) -> Any:
    """One value made by ``library``: "pymongo", "mongio" (every mongio type), "mongio-no-regex" (what
    PyMongo's encoder can write) or "mixed" (PyMongo and mongio values side by side)."""
    if depth < 4 and rng.random() < 0.25:
        containers: list[Callable[[], Any]] = [
            lambda: _document(rng, depth + 1, library),
            lambda: [_value(rng, depth + 1, library) for _ in range(rng.randint(0, 4))],
            lambda: tuple(_value(rng, depth + 1, library) for _ in range(rng.randint(0, 3))),
            lambda: bson.son.SON(_document(rng, depth + 1, library)),
        ]
        return rng.choice(containers)()
    leaves = _plain_leaves(rng)
    if depth >= 4:
        return rng.choice(leaves)()
    if library in ("pymongo", "mixed"):
        leaves += _pymongo_leaves(rng, depth, library)
    if library != "pymongo":
        leaves += _mongio_leaves(rng, depth, library, regex=library == "mongio")
    return rng.choice(leaves)()


def _document(rng: random.Random, depth: int, library: str) -> dict[str, Any]:
    return {_key(rng): _value(rng, depth, library) for _ in range(rng.randint(0, 5))}


def _documents(library: str) -> Iterator[dict[str, Any]]:
    rng = random.Random(f"{SEED}-{library}")
    for _ in range(DOCUMENTS_PER_RUN):
        yield _document(rng, 0, library)


# --- mongio's encoder writes PyMongo's values exactly ----------------------------------------------------


@LOOPS
@pytest.mark.parametrize("library", ["pymongo", "mixed"])
def test_pymongo_values_encode_to_pymongos_bytes(compiled: bool, library: str) -> None:
    _use_loops(compiled)
    _forget_marked_types()
    tested = 0
    for document in _documents(library):
        assert encode(document) == bson.encode(document), document
        tested += 1
    assert tested == DOCUMENTS_PER_RUN


@LOOPS
def test_every_pymongo_type_is_written_as_its_own_bson_type(compiled: bool) -> None:
    # The values that used to fall through to their base classes, each checked against the BSON type byte.
    _use_loops(compiled)
    _forget_marked_types()
    cases = {
        "binary_user": (bson.binary.Binary(b"\x01\x02", 0x80), 0x05),
        "uuid": (bson.binary.Binary.from_uuid(uuid.UUID(int=7)), 0x05),
        "code": (bson.code.Code("f()"), 0x0D),
        "code_scope": (bson.code.Code("f()", {"a": 1}), 0x0F),
        "int64": (bson.int64.Int64(5), 0x12),
        "oid": (bson.objectid.ObjectId(), 0x07),
        "dec": (bson.decimal128.Decimal128("1.1"), 0x13),
        "regex": (bson.regex.Regex("a", re.I), 0x0B),
        "ts": (bson.timestamp.Timestamp(1, 2), 0x11),
        "ref": (bson.dbref.DBRef("c", 1), 0x03),
        "min": (bson.min_key.MinKey(), 0xFF),
        "max": (bson.max_key.MaxKey(), 0x7F),
        "dtms": (bson.datetime_ms.DatetimeMS(1), 0x09),
        "raw": (bson.raw_bson.RawBSONDocument(bson.encode({"a": 1})), 0x03),
    }
    options: bson.codec_options.CodecOptions[dict[str, Any]] = bson.codec_options.CodecOptions(
        datetime_conversion=bson.codec_options.DatetimeConversion.DATETIME_MS,
    )
    for _ in range(2):  # the first sight of each type, then the remembered type
        for key, (value, type_byte) in cases.items():
            data = encode({key: value})
            assert data[4] == type_byte, key
            assert data == bson.encode({key: value}), key
            if key != "raw":  # a raw document decodes to a dict here; its bytes are compared above
                assert bson.decode(data, options)[key] == value, key


@LOOPS
def test_a_pymongo_raw_document_is_copied_at_the_top_level_and_inside(compiled: bool) -> None:
    _use_loops(compiled)
    raw = bson.raw_bson.RawBSONDocument(bson.encode({"a": bson.int64.Int64(1), "b": [1, 2]}))
    assert encode(raw) == raw.raw
    assert encode({"r": raw, "l": [raw]}) == bson.encode({"r": raw, "l": [raw]})
    assert mb.BSON.encode(raw) == raw.raw


class _UnknownMarker:
    _type_marker = 42


class _ObjectIdWithoutBinary:
    _type_marker = 7


class _ShortObjectId:
    _type_marker = 7
    binary = b"short"


class _BinaryNotBytes:
    _type_marker = 5
    subtype = 0


class _BadSubtype(bytes):
    _type_marker = 5
    subtype = 300


class _UnknownMarkerInt(int):
    _type_marker = 250


class _UnknownMarkerStr(str):
    _type_marker = 3


class _BadTimestamp:
    _type_marker = 17
    time = -1
    inc = 0


class _Int64NotInt:
    _type_marker = 18


class _BadRaw:
    _type_marker = 101
    raw = b"\x07\x00\x00\x00\x00"


class _NotAMarker:
    """Answers every attribute, as some proxies do: a non-int ``_type_marker`` is no marker."""

    def __getattr__(self, name: str) -> Any:
        return object()


REFUSED = [
    (_UnknownMarker(), "_type_marker 42"),
    (_ObjectIdWithoutBinary(), "no 'binary' attribute"),
    (_ShortObjectId(), "is not 12 bytes"),
    (_BinaryNotBytes(), "it is not bytes"),
    (_BadSubtype(b"x"), "subtype is not an int from 0 to 255"),
    (_UnknownMarkerInt(3), "_type_marker 250"),
    (_UnknownMarkerStr("s"), "_type_marker 3"),
    (_BadTimestamp(), "'time' is not an unsigned 32-bit int"),
    (_BadRaw(), "not one whole BSON document"),
    (_Int64NotInt(), "marked as a BSON int64 (_type_marker) but it is not an int"),
    (_NotAMarker(), "cannot encode object of type _NotAMarker"),
]


@LOOPS
@pytest.mark.parametrize(("value", "reason"), REFUSED, ids=[type(v).__name__ for v, _ in REFUSED])
def test_a_value_not_holding_what_its_marker_says_is_refused_naming_path_and_type(
    compiled: bool, value: Any, reason: str
) -> None:
    _use_loops(compiled)
    for _ in range(2):
        with pytest.raises(InvalidDocument) as refused:
            encode({"outer": {"list": [1, value]}})
        message = str(refused.value)
        assert "'outer.list.1'" in message
        assert type(value).__name__ in message
        assert reason in message


class _WideInt64(int):
    _type_marker = 18


@LOOPS
def test_a_marked_int64_beyond_64_bits_is_refused_not_truncated(compiled: bool) -> None:
    _use_loops(compiled)
    assert encode({"v": _WideInt64(-(2**63))}) == bson.encode({"v": bson.int64.Int64(-(2**63))})
    for _ in range(2):
        with pytest.raises(InvalidDocument, match=r"'v\.0'.*at most 64 bits"):
            encode({"v": [_WideInt64(2**64)]})


@LOOPS
def test_an_unknown_marker_may_still_be_handled_by_the_type_registry_or_fallback(compiled: bool) -> None:
    _use_loops(compiled)
    registry = mb.TypeRegistry(fallback_encoder=lambda value: "fallback")
    data = encode({"v": _UnknownMarkerInt(3)}, codec_options=mb.CodecOptions(type_registry=registry))
    assert mb.decode(data) == {"v": "fallback"}


class _ObjectIdToText(mb.TypeEncoder):
    python_type = bson.objectid.ObjectId

    def transform_python(self, value: Any) -> Any:
        return str(value)


def test_a_type_encoder_cannot_take_over_a_type_written_by_its_marker() -> None:
    # As for mongio's own types: the encoder writes it, so the codec would silently never be called.
    with pytest.raises(TypeError, match="_type_marker 7"):
        mb.TypeRegistry([_ObjectIdToText()])


# --- PyMongo's encoder writes mongio's values exactly ----------------------------------------------------


@LOOPS
def test_mongio_values_encode_to_the_same_bytes_through_pymongo(compiled: bool) -> None:
    _use_loops(compiled)
    tested = 0
    for document in _documents("mongio-no-regex"):
        assert bson.encode(document) == encode(document), document
        tested += 1
    assert tested == DOCUMENTS_PER_RUN


@LOOPS
def test_mongio_values_with_regex_encode_alike_in_mongio(compiled: bool) -> None:
    # mongio's Regex keeps option letters, which PyMongo's encoder cannot read (see the differences file);
    # mongio's encoder writes the same bytes for them in both loops.
    _use_loops(compiled)
    for document in _documents("mongio"):
        data = encode(document)
        options = mb.CodecOptions(datetime_conversion=mb.DatetimeConversion.DATETIME_AUTO)
        assert encode(mb.decode(data, options)) == data
        _encoder.use_speedups(not compiled)
        assert encode(document) == data
        _encoder.use_speedups(compiled)


def test_pymongo_cannot_encode_a_mongio_regex() -> None:
    # Recorded in compat/differences.yaml: mongio's Regex.flags is a str of option letters.
    with pytest.raises(TypeError):
        bson.encode({"r": mb.Regex("a", "i")})
    assert encode({"r": mb.Regex("a", "i")}) == bson.encode({"r": bson.regex.Regex("a", re.I)})
