"""The scan of a batch's framing (``document_array_offsets``): the compiled scan against the Python reference
on well-formed arrays of documents and on every kind of broken framing, byte by byte."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mongio.bson import Int64, ObjectId, _decoder, encode, lazy_batch
from mongio.bson.codec_options import DEFAULT_CODEC_OPTIONS
from mongio.bson.lazy_batch import DocumentBatch, _compiled_offsets, _python_document_array_offsets

pytestmark = pytest.mark.skipif(
    _compiled_offsets is None, reason="the compiled decoder loops are not built or are switched off"
)

DOCUMENTS: list[dict[str, Any]] = [
    {},
    {"_id": ObjectId(), "n": Int64(7), "s": "héllo"},
    {"inner": {"list": [1, 2, {"deep": None}]}, "b": b"\x00\x01"},
    {"x": "y" * 300},
]


def array_of(documents: list[Any]) -> bytes:
    """A BSON array's bytes: a document whose keys are "0", "1", ... is framed as the array is."""
    return encode({str(index): document for index, document in enumerate(documents)})


def both(data: bytes) -> Any:
    assert _compiled_offsets is not None
    compiled = _compiled_offsets(data)
    assert compiled == _python_document_array_offsets(data), data
    return compiled


def test_a_well_formed_array_gives_each_element_and_its_document() -> None:
    data = array_of(DOCUMENTS * 30)  # element names of one, two and three digits
    offsets = both(data)
    assert offsets is not None
    elements, starts = offsets
    assert len(elements) == len(starts) == 120
    for index, (element, start) in enumerate(zip(elements, starts, strict=True)):
        assert data[element] == 0x03
        assert data[element + 1 : start] == str(index).encode() + b"\x00"
        size = struct.unpack_from("<i", data, start)[0]
        assert data[start : start + size] == encode(DOCUMENTS[index % len(DOCUMENTS)])
    assert starts[-1] + struct.unpack_from("<i", data, starts[-1])[0] == len(data) - 1


def test_an_empty_array_has_no_elements() -> None:
    assert both(b"\x05\x00\x00\x00\x00") == ([], [])


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x05\x00\x00\x00", id="no-terminator"),
        pytest.param(b"\x06\x00\x00\x00\x00", id="length-too-long"),
        pytest.param(b"\x05\x00\x00\x00\x00\x00", id="length-too-short"),
        pytest.param(b"\x05\x00\x00\x00\x01", id="last-byte-not-nul"),
        pytest.param(encode({"0": 1}), id="not-a-document"),
        pytest.param(encode({"0": {}, "1": "two"}), id="second-not-a-document"),
        pytest.param(b"\x08\x00\x00\x00\x030\x00\x00", id="no-room-for-the-document"),
        pytest.param(b"\x07\x00\x00\x00\x0300", id="name-without-nul"),
    ],
)
def test_broken_framing_is_refused_alike(data: bytes) -> None:
    assert both(data) is None
    assert DocumentBatch.of(data, None) is None


@pytest.mark.parametrize("delta", [-2, -1, 1, 2, 1 << 30, -(1 << 31)])
def test_each_length_field_changed_is_refused_alike(delta: int) -> None:
    data = array_of(DOCUMENTS)
    _elements, starts = both(data)
    for position in [0, *starts]:
        broken = bytearray(data)
        value = (struct.unpack_from("<i", broken, position)[0] + delta + (1 << 31)) % (1 << 32) - (1 << 31)
        struct.pack_into("<i", broken, position, value)
        assert both(bytes(broken)) is None


def test_every_single_byte_change_agrees() -> None:
    data = array_of(DOCUMENTS[:3])
    rng = random.Random(16)
    refused = 0
    for position in range(len(data)):
        for value in {0, 3, 0xFF, rng.randrange(256)} - {data[position]}:
            changed = bytearray(data)
            changed[position] = value
            refused += both(bytes(changed)) is None
    # Most changes inside the documents leave the framing alone; changes to the framing are refused.
    assert 0 < refused < len(data) * 4


def test_every_truncation_and_extension_agrees() -> None:
    data = array_of(DOCUMENTS[:3])
    for end in range(len(data) + 1):
        assert both(data[:end]) is None or end == len(data)
    assert both(data + b"\x00") is None


def test_other_buffers_are_read_and_other_objects_refused() -> None:
    data = array_of(DOCUMENTS)
    assert _compiled_offsets is not None
    assert _compiled_offsets(bytearray(data)) == _compiled_offsets(memoryview(data)) == both(data)
    with pytest.raises(TypeError):
        _compiled_offsets("not bytes")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.lists(st.integers(0, 3), max_size=6))
def test_generated_bytes_agree(tail: bytes, picks: list[int]) -> None:
    data = array_of([DOCUMENTS[pick] for pick in picks])
    both(data)
    both(data[:-1] + tail)
    framed = struct.pack("<i", len(tail) + 5) + tail + b"\x00"
    both(framed)


def test_the_batch_scans_with_the_loops_the_decoder_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    data = array_of(DOCUMENTS)
    scanned: list[bytes] = []

    def recording(given: bytes) -> Any:
        scanned.append(given)
        return both(given)

    monkeypatch.setattr(lazy_batch, "_compiled_offsets", recording)
    try:
        for compiled in (True, False):
            _decoder.use_speedups(compiled)
            batch = DocumentBatch.of(data, _decoder._context(DEFAULT_CODEC_OPTIONS))
            assert batch is not None
            assert list(batch) == DOCUMENTS
            assert len(scanned) == 1  # the compiled scan, once, and only while the compiled loops are on
    finally:
        _decoder.use_speedups(True)
