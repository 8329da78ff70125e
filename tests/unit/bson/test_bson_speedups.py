"""The compiled element loops against the Python ones. Decoding: the same bytes give the same values, of the
same types, and the same malformed bytes are refused, under every codec option the decoder has. Encoding:
the same documents give the same bytes, and the same values are refused with the same key path and reason."""

from __future__ import annotations

import collections
import datetime
import gc
import json
import os
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mongio.bson import (
    SON,
    Binary,
    CodecOptions,
    DatetimeConversion,
    Int64,
    InvalidBSON,
    InvalidDocument,
    ObjectId,
    RawBSONDocument,
    TypeDecoder,
    TypeEncoder,
    TypeRegistry,
    UuidRepresentation,
    _decoder,
    _encoder,
    decode,
    decode_all,
    encode,
    has_c,
)
from tests.support.bson_data import (
    CORPUS,
    CORPUS_OPTIONS,
    corpus_cases,
    documents,
    exact_shape,
    garbage_elements,
)

needs_speedups = pytest.mark.skipif(
    not _decoder.speedups_available(), reason="the compiled decoder loops are not built or are switched off"
)


class _Celsius(TypeDecoder):
    bson_type = float

    def transform_bson(self, value: Any) -> Any:
        return ("celsius", value)


OPTIONS = [
    CodecOptions(),
    CodecOptions(tz_aware=True, datetime_conversion=DatetimeConversion.DATETIME_AUTO),
    CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS),
    CodecOptions(document_class=SON),
    CodecOptions(document_class=collections.OrderedDict),
    CodecOptions(document_class=RawBSONDocument),
    CodecOptions(unicode_decode_error_handler="replace"),
    CodecOptions(uuid_representation=UuidRepresentation.STANDARD),
    CodecOptions(type_registry=TypeRegistry([_Celsius()])),
]


def _outcome(decode_call: Callable[[], Any], compiled: bool) -> Any:
    _decoder.use_speedups(compiled)
    try:
        return ("value", exact_shape(decode_call()))
    except InvalidBSON:
        return ("InvalidBSON",)
    finally:
        _decoder.use_speedups(True)


def _agree(data: bytes, options: CodecOptions) -> None:
    for call in (lambda: decode(data, options), lambda: decode_all(data, options)):
        assert _outcome(call, compiled=True) == _outcome(call, compiled=False)


@pytest.fixture(autouse=True)
def _compiled_loops_afterwards() -> Iterator[None]:
    yield
    _decoder.use_speedups(True)
    _encoder.use_speedups(True)


def _encoded(document: Any, compiled: bool, **options: Any) -> Any:
    _encoder.use_speedups(compiled)
    try:
        return ("bytes", encode(document, **options))
    except InvalidDocument as refused:
        return ("InvalidDocument", str(refused))
    finally:
        _encoder.use_speedups(True)


def _encode_agrees(document: Any, **options: Any) -> Any:
    compiled = _encoded(document, True, **options)
    assert compiled == _encoded(document, False, **options)
    return compiled


@pytest.mark.skipif(bool(os.environ.get("MONGIO_NO_SPEEDUPS")), reason="MONGIO_NO_SPEEDUPS is set")
def test_the_extension_is_built_and_in_use() -> None:
    # The build marks the extension optional (a machine without a C compiler still installs), so a broken
    # C build would otherwise go unnoticed: here it fails.
    assert _decoder.speedups_available()
    assert _decoder.use_speedups(True)
    assert _decoder._read_document is not _decoder._python_read_document
    assert not _decoder.use_speedups(False)
    assert _decoder._read_document is _decoder._python_read_document
    assert not has_c()
    _decoder.use_speedups(True)
    assert has_c()
    assert _encoder.use_speedups(True)
    assert _encoder._write_document is not _encoder._python_write_document
    assert not _encoder.use_speedups(False)
    assert _encoder._write_document is _encoder._python_write_document


@pytest.mark.slow
@needs_speedups
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.sampled_from(OPTIONS))
def test_documents_decode_alike(document: dict[str, Any], options: CodecOptions) -> None:
    _agree(encode(document), options)


@needs_speedups
@settings(max_examples=500)
@given(garbage_elements, st.sampled_from(OPTIONS))
def test_element_shaped_garbage_is_treated_alike(body: bytes, options: CodecOptions) -> None:
    _agree(struct.pack("<i", len(body) + 5) + body + b"\x00", options)


@pytest.mark.slow
@needs_speedups
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.data())
def test_mutated_documents_are_treated_alike(document: dict[str, Any], data: st.DataObject) -> None:
    encoded = bytearray(encode(document))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, max(0, len(encoded) - 1)))
        if encoded and data.draw(st.booleans()):
            encoded[position] = data.draw(st.integers(0, 255))
        else:
            del encoded[position : position + data.draw(st.integers(1, 8))]
    _agree(bytes(encoded), data.draw(st.sampled_from(OPTIONS)))


@needs_speedups
@pytest.mark.skipif(not CORPUS.is_dir(), reason="the specifications checkout is not beside the repository")
def test_corpus_decodes_alike() -> None:
    checked = 0
    for _file, kind, case in corpus_cases():
        data = bytes.fromhex(case["canonical_bson"] if kind == "valid" else case["bson"])
        for options in (CORPUS_OPTIONS, *OPTIONS):
            _agree(data, options)
        checked += 1
    assert checked > 300


@needs_speedups
def test_hot_types_decode_to_the_python_types() -> None:
    oid = ObjectId()
    document = {
        "s": "naïve ☃",
        "i": -(2**31),
        "l": Int64(2**62),
        "d": -0.5,
        "b": [True, False],
        "o": oid,
        "n": None,
        "nested": {"deep": [{"x": 1}, [2, "3"]]},
        "bin": Binary(b"\x00\x01", 0x80),
        "when": datetime.datetime(2020, 5, 17, 12, 0, 0, 123000),
    }
    decoded = decode(encode(document))
    assert decoded == document
    assert type(decoded["l"]) is Int64
    assert type(decoded["o"]) is ObjectId
    assert type(decoded["i"]) is int


@needs_speedups
def test_dbref_shaped_documents_become_dbrefs_in_both() -> None:
    data = encode({"a": {"$ref": "coll", "$id": 5}, "b": [{"$ref": "c", "$id": 1, "$db": "d"}], "c": {"$ref": 1}})
    _agree(data, CodecOptions())
    decoded = decode(data)
    assert type(decoded["a"]).__name__ == "DBRef"
    assert type(decoded["b"][0]).__name__ == "DBRef"
    assert decoded["c"] == {"$ref": 1}


@needs_speedups
def test_absurd_nesting_is_refused_by_both() -> None:
    document = encode({})
    for _ in range(5000):
        body = b"\x03a\x00" + document
        document = struct.pack("<i", len(body) + 5) + body + b"\x00"
    for compiled in (True, False):
        _decoder.use_speedups(compiled)
        with pytest.raises(InvalidBSON):
            decode(document)


@needs_speedups
def test_bad_utf8_is_refused_or_replaced_alike() -> None:
    data = bytearray(encode({"key": "value"}))
    data[data.index(b"value")] = 0xFF
    _agree(bytes(data), CodecOptions())
    _agree(bytes(data), CodecOptions(unicode_decode_error_handler="replace"))
    assert decode(bytes(data), CodecOptions(unicode_decode_error_handler="replace"))["key"] == "\ufffdalue"


@needs_speedups
def test_names_and_strings_of_every_length_decode_alike_whatever_their_bytes() -> None:
    # The compiled loops read names and strings a word (8 bytes) at a time: every length across a word's
    # edges, a non-ASCII character at each position (the word with it must go to the full decoder), bad
    # UTF-8 in each word, and a name as the very last element (too near the buffer's end for a whole word).
    for length in range(42):
        for position in (None, *range(length)):
            text = "n" * length if position is None else "n" * position + "é" + "n" * (length - position - 1)
            for document in ({text: text}, {"a": 1, text: None}, {text: [text, text]}):
                data = encode(document)
                assert decode(data) == document
                _agree(data, CodecOptions())
        if length:
            truncated = bytearray(encode({"k" * length: "v" * length}))
            truncated[truncated.index(b"v" * length) + length - 1] = 0xC3  # a 2-byte sequence cut short
            _agree(bytes(truncated), CodecOptions())
            _agree(bytes(truncated), CodecOptions(unicode_decode_error_handler="replace"))


@needs_speedups
def test_names_sharing_a_cache_slot_stay_apart() -> None:
    # More distinct names than the compiled name cache has slots (many of the same length, differing only in
    # their last bytes): collisions must never hand back another name, and a name seen again after being
    # evicted must still decode to itself.
    names = [f"field{number}" for number in range(10_000)]
    document = dict.fromkeys(names, 1)
    for _ in range(2):
        assert list(decode(encode(document))) == names


@needs_speedups
def test_the_loops_refuse_bounds_outside_the_data() -> None:
    speedups = _decoder._SPEEDUPS
    ctx = _decoder._context(CodecOptions())
    data = encode({"a": 1})
    for pos, end in ((-1, len(data) - 1), (4, len(data)), (6, 5)):
        with pytest.raises(InvalidBSON):
            speedups.read_document(data, pos, end, ctx)
    # Any contiguous buffer is read in place, as bytes are; what is not a buffer is refused.
    assert speedups.read_document(bytearray(data), 4, len(data) - 1, ctx) == {"a": 1}
    assert speedups.read_document(memoryview(b"xx" + data)[2:], 4, len(data) - 1, ctx) == {"a": 1}
    with pytest.raises(InvalidBSON):
        speedups.read_document(memoryview(data)[:-1], 4, len(data) - 1, ctx)
    with pytest.raises(TypeError):
        speedups.read_document("not bytes", 4, len(data) - 1, ctx)


def test_decode_reads_a_view_of_a_receive_buffer_in_place_and_copies_what_it_keeps() -> None:
    from mongio.bson import Binary, RawBSONDocument

    document = {"s": "text", "b": Binary(b"\x01\x02", 0x80), "raw": {"x": 1}, "n": [1, {"y": 2}]}
    buffer = bytearray(b"\xff" * 3 + encode(document) + b"\xee")
    view = memoryview(buffer)[3:-1]
    assert decode(view) == document
    raw_nested = decode(view, CodecOptions(document_class=RawBSONDocument))
    buffer[3:] = b"\x00" * (len(buffer) - 3)  # the buffer is reused: what was decoded must not change
    assert raw_nested["s"] == "text" and dict(raw_nested["raw"]) == {"x": 1}


class _CollectorState(TypeDecoder):
    bson_type = float

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def transform_bson(self, value: Any) -> Any:
        self.seen.append(gc.isenabled())
        return value


def test_decoding_leaves_the_cyclic_collector_as_it_found_it() -> None:
    data = encode({"batch": [{"n": i, "tags": [i], "sub": {"x": float(i)}} for i in range(2000)]})
    assert gc.isenabled()
    assert len(decode(data)["batch"]) == 2000
    assert gc.isenabled()
    gc.disable()
    try:
        decode(data)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_type_decoders_run_with_the_cyclic_collector_on() -> None:
    # The collector waits for the end of a decode only while no application code can run.
    watcher = _CollectorState()
    decode(encode({"a": [1.5, {"b": 2.5}]}), CodecOptions(type_registry=TypeRegistry([watcher])))
    assert watcher.seen == [True, True]


def test_the_switch_can_be_turned_off_from_the_environment() -> None:
    import subprocess
    import sys

    code = "from mongio.bson import _decoder; print(_decoder._read_document is _decoder._python_read_document)"
    env = {**os.environ, "MONGIO_NO_SPEEDUPS": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(result.stdout.strip().lower()) is True


class _Celsius2:
    def __init__(self, degrees: float) -> None:
        self.degrees = degrees


class _CelsiusEncoder(TypeEncoder):
    python_type = _Celsius2

    def transform_python(self, value: Any) -> Any:
        return {"celsius": value.degrees}


@pytest.mark.slow
@needs_speedups
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_documents_encode_alike(document: dict[str, Any]) -> None:
    kind, _ = _encode_agrees(document)
    assert kind == "bytes"
    _encode_agrees(document, check_keys=True)


@needs_speedups
@pytest.mark.parametrize(
    "document",
    [
        {1: "non-str key"},
        {"a": {"b\x00c": 1}},
        {"a": [1, {"b": 2**64}]},
        {"a": [0, 1, -(2**63) - 1]},
        {"a": {"deep": [2**63]}},
        {"s": "lone \ud800 surrogate"},
        {"list": ["ok", "\udfff"]},
        {"k\ud800": 1},
        {"obj": object()},
        {"nested": {"set": {1, 2}}},
        {"$dollar": 1, "a.b": 2},
        {"x": {"$in": [1]}},
    ],
)
def test_refusals_name_the_same_path_and_reason(document: dict[Any, Any]) -> None:
    _encode_agrees(document)
    _encode_agrees(document, check_keys=True)


@needs_speedups
def test_containers_and_types_outside_the_loops_encode_alike() -> None:
    document = {
        "son": SON([("z", 1), ("a", [1, 2])]),
        "ordered": collections.OrderedDict(b=2, a=1),
        "tuple": (1, "two", 3.0, None, True),
        "raw": RawBSONDocument(encode({"r": 1})),
        "bytes": b"\x00\x01",
        "binary": Binary(b"x", 0x80),
        "oid": ObjectId(),
        "when": datetime.datetime(2021, 1, 2, 3, 4, 5, 6000),
        "big": Int64(-5),
        "int_subclass": True,
        "list_of_tuples": [(1, 2), [3, (4,)]],
        "empty": {},
        "empty_list": [],
        "unicode": "ü€𝄞",
        "int_edges": [2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, -(2**63)],
        "floats": [0.0, -0.0, 1.5, float("inf"), float("nan")],
    }
    kind, _ = _encode_agrees(document)
    assert kind == "bytes"
    # a generator is used up by one encoding: each path gets its own
    assert _encoded({"g": (n for n in range(3))}, True) == _encoded({"g": (n for n in range(3))}, False)


@needs_speedups
def test_type_registry_encoders_run_in_both() -> None:
    options = CodecOptions(type_registry=TypeRegistry([_CelsiusEncoder()]))
    document = {"t": _Celsius2(21.5), "ts": [_Celsius2(1.0)]}
    kind, data = _encode_agrees(document, codec_options=options)
    assert kind == "bytes"
    assert decode(data) == {"t": {"celsius": 21.5}, "ts": [{"celsius": 1.0}]}
    fallback = CodecOptions(type_registry=TypeRegistry(fallback_encoder=lambda value: repr(type(value).__name__)))
    assert _encode_agrees({"o": object()}, codec_options=fallback)[0] == "bytes"


@needs_speedups
def test_circular_and_deep_documents_are_refused_alike() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    assert _encode_agrees(circular)[0] == "InvalidDocument"
    looped: list[Any] = []
    looped.append(looped)
    assert _encode_agrees({"l": looped})[0] == "InvalidDocument"
    deep: dict[str, Any] = {}
    for _ in range(3000):
        deep = {"d": deep}
    assert _encode_agrees(deep)[0] == "InvalidDocument"


@needs_speedups
def test_a_dict_changed_by_a_custom_encoder_is_refused() -> None:
    document: dict[str, Any] = {}

    class _Grower(TypeEncoder):
        python_type = _Celsius2

        def transform_python(self, value: Any) -> Any:
            document["added"] = 1
            return 0

    options = CodecOptions(type_registry=TypeRegistry([_Grower()]))
    document["g"] = _Celsius2(0)
    with pytest.raises(RuntimeError):
        encode(document, codec_options=options)


@needs_speedups
def test_the_encoder_loops_need_a_bytearray() -> None:
    with pytest.raises(TypeError):
        _encoder._SPEEDUPS.write_document(b"", {}, _encoder._context(CodecOptions()), False)


@pytest.mark.slow
@needs_speedups
def test_hostile_nesting_is_refused_even_under_a_raised_recursion_limit() -> None:
    # Run apart: were the C stack exhausted, the interpreter would die, and that must fail this test only.
    import subprocess
    import sys

    code = """
import struct, sys
from mongio.bson import InvalidBSON, InvalidDocument, decode, encode
sys.setrecursionlimit(1_000_000)
data = encode({})
for _ in range(50_000):
    body = b"\\\\x03a\\\\x00" + data
    data = struct.pack("<i", len(body) + 5) + body + b"\\\\x00"
try:
    decode(data)
except InvalidBSON:
    print("decode refused")
deep = {}
for _ in range(50_000):
    deep = {"d": deep}
try:
    encode(deep)
except InvalidDocument:
    print("encode refused")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[:2] == ["decode refused", "encode refused"]


@needs_speedups
def test_an_unknown_type_is_refused_naming_its_key_in_both() -> None:
    data = struct.pack("<i", 13) + b"\x20odd\x00" + b"\x00" * 3 + b"\x00"
    for compiled in (True, False):
        _decoder.use_speedups(compiled)
        with pytest.raises(InvalidBSON) as refused:
            decode(data)
        assert "unknown BSON type" in str(refused.value)
        assert "0x20" in str(refused.value) and "'odd'" in str(refused.value)
