"""A cursor reply decoded with its batch left lazy (``decode_cursor_reply``, ``DocumentBatch``): the same
documents and fields as decoding it whole, under the compiled and the Python loops; whole decoding for any
other layout; malformed framing refused as ``decode`` refuses it, a malformed document when it is taken."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from mongio.bson import (
    SON,
    CodecOptions,
    Int64,
    InvalidBSON,
    ObjectId,
    RawBSONDocument,
    _decoder,
    decode,
    encode,
)
from mongio.bson.lazy_batch import DocumentBatch
from mongio.wire.cursor_reply import decode_cursor_reply

DOCUMENTS = [
    {"_id": ObjectId(), "text": "héllo", "n": i, "tags": ["a", "b"], "user": {"name": "x", "at": None}}
    for i in range(5)
]
TZ_AWARE = CodecOptions(tz_aware=True)


@pytest.fixture(params=[True, False], ids=["compiled", "python"])
def loops(request: pytest.FixtureRequest) -> Iterator[bool]:
    compiled = _decoder.use_speedups(request.param)
    if request.param and not compiled:
        pytest.skip("the compiled decoder loops are not built or are switched off")
    try:
        yield compiled
    finally:
        _decoder.use_speedups(True)


def reply(field: str = "firstBatch", documents: list[Any] = DOCUMENTS, **cursor_fields: Any) -> bytes:
    cursor = {field: documents, "id": Int64(42), "ns": "db.coll", **cursor_fields}
    return encode({"cursor": cursor, "ok": 1.0, "operationTime": datetime.datetime(2026, 1, 1)})


def materialized(document: dict[str, Any]) -> dict[str, Any]:
    """The reply with its cursor's lazy batch read out into a list, the rest as it is."""
    cursor = dict(document["cursor"])
    for field, value in cursor.items():
        if isinstance(value, DocumentBatch):
            cursor[field] = list(value)
    return {**document, "cursor": cursor}


@pytest.mark.parametrize("field", ["firstBatch", "nextBatch"])
@pytest.mark.parametrize("options", [CodecOptions(), TZ_AWARE], ids=["default", "tz_aware"])
def test_the_batch_is_lazy_and_the_reply_decodes_alike(loops: bool, field: str, options: CodecOptions) -> None:
    data = reply(field, postBatchResumeToken={"_data": "82"})
    for given in (data, bytearray(data), memoryview(data)):
        document = decode_cursor_reply(given, options)
        assert isinstance(document["cursor"][field], DocumentBatch)
        assert list(document) == ["cursor", "ok", "operationTime"]
        assert list(document["cursor"]) == [field, "id", "ns", "postBatchResumeToken"]
        assert materialized(document) == decode(data, options)
        assert document["operationTime"].tzinfo is (datetime.UTC if options.tz_aware else None)


def test_an_empty_batch_and_a_cursor_holding_only_its_batch(loops: bool) -> None:
    empty = decode_cursor_reply(reply(documents=[]), CodecOptions())
    batch = empty["cursor"]["firstBatch"]
    assert isinstance(batch, DocumentBatch)
    assert not batch and len(batch) == 0 and list(batch) == []
    alone = encode({"cursor": {"nextBatch": DOCUMENTS[:2]}, "ok": 1})
    assert materialized(decode_cursor_reply(alone, CodecOptions())) == decode(alone)


def test_documents_are_taken_in_order_one_at_a_time(loops: bool) -> None:
    batch = decode_cursor_reply(reply(), CodecOptions())["cursor"]["firstBatch"]
    assert len(batch) == 5
    assert batch.popleft() == DOCUMENTS[0]
    assert len(batch) == 4 and bool(batch)
    assert list(batch) == DOCUMENTS[1:]  # iterating does not take them
    assert len(batch) == 4
    assert [batch.popleft() for _ in range(4)] == DOCUMENTS[1:]
    assert not batch and len(batch) == 0
    with pytest.raises(IndexError):
        batch.popleft()


def test_documents_kept_by_the_program_have_the_rest_decoded_at_once(loops: bool) -> None:
    data = reply(documents=[{"n": n, "inner": {"list": [n]}} for n in range(6)])
    dropped = decode_cursor_reply(data, CodecOptions())["cursor"]["firstBatch"]
    kept = decode_cursor_reply(data, CodecOptions())["cursor"]["firstBatch"]
    taken: list[Any] = []
    for _ in range(3):
        # As in a loop: a variable names each document until the next is taken; one list keeps them too.
        dropped_document = dropped.popleft()
        assert dropped_document["n"] == len(taken)
        kept_document = kept.popleft()
        taken.append(kept_document)
    assert not dropped.kept  # still one at a time
    assert kept.kept  # the rest decoded at once when the second was taken
    assert len(kept) == len(dropped) == 3 and bool(kept)
    assert list(kept) == list(dropped) == [{"n": n, "inner": {"list": [n]}} for n in range(3, 6)]
    taken += [kept.popleft() for _ in range(3)]
    assert taken == [{"n": n, "inner": {"list": [n]}} for n in range(6)]
    assert not kept and len(kept) == 0
    with pytest.raises(IndexError):
        kept.popleft()


def test_clear_drops_what_is_left(loops: bool) -> None:
    batch = decode_cursor_reply(reply(), CodecOptions())["cursor"]["firstBatch"]
    batch.popleft()
    batch.clear()
    assert not batch and list(batch) == []
    with pytest.raises(IndexError):
        batch.popleft()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(encode({"ok": 1.0, "cursor": {"firstBatch": DOCUMENTS, "id": 0}}), id="cursor-not-first"),
        pytest.param(encode({"cursor": {"id": 0, "firstBatch": DOCUMENTS}, "ok": 1}), id="batch-not-first"),
        pytest.param(encode({"cursor": {"firstBatch": [1, "two", DOCUMENTS[0]], "id": 0}}), id="not-documents"),
        pytest.param(encode({"cursor": {"otherBatch": DOCUMENTS, "id": 0}}), id="other-name"),
        pytest.param(encode({"cursor": {"firstBatch": {"0": DOCUMENTS[0]}}}), id="batch-a-document"),
        pytest.param(encode({"cursor": 5, "ok": 1}), id="cursor-not-a-document"),
        pytest.param(encode({"ok": 0, "errmsg": "no"}), id="no-cursor"),
    ],
)
def test_other_layouts_are_decoded_whole(loops: bool, data: bytes) -> None:
    # A DocumentBatch equals no list: equality alone says every batch was decoded.
    assert decode_cursor_reply(data, CodecOptions()) == decode(data)


@pytest.mark.parametrize("document_class", [SON, RawBSONDocument])
def test_a_document_class_other_than_dict_is_decoded_whole(loops: bool, document_class: type) -> None:
    options = CodecOptions(document_class=document_class)
    data = reply()
    document = decode_cursor_reply(data, options)
    assert type(document) is document_class
    assert document == decode(data, options)


def _set_int32(data: bytearray, position: int, value: int) -> None:
    struct.pack_into("<i", data, position, value)


# Where the pieces of ``reply()`` lie: the top-level length, then "\x03cursor\x00" (8 bytes), the cursor's length
# at 12, "\x04firstBatch\x00" (12 bytes) at 16, the array's length at 28, its first element at 32 ("\x03" "0\x00")
# and the first document's length at 35.
CURSOR_LENGTH, ARRAY_LENGTH, FIRST_DOCUMENT_LENGTH = 12, 28, 35


@pytest.mark.parametrize(
    ("position", "delta"),
    [
        (0, 1),  # the reply's length
        (CURSOR_LENGTH, 200),  # the cursor runs past the reply
        (ARRAY_LENGTH, 4000),  # the array runs past the cursor
        (ARRAY_LENGTH, -1),  # the array ends one byte early
        (FIRST_DOCUMENT_LENGTH, 3000),  # a document runs past the array
        (FIRST_DOCUMENT_LENGTH, -2),  # a document's last byte is not its terminator
    ],
)
def test_bad_framing_is_refused_as_decode_refuses_it(loops: bool, position: int, delta: int) -> None:
    data = bytearray(reply())
    assert data[4:12] == b"\x03cursor\x00" and data[16:28] == b"\x04firstBatch\x00" and data[32:35] == b"\x030\x00"
    _set_int32(data, position, struct.unpack_from("<i", data, position)[0] + delta)
    with pytest.raises(InvalidBSON) as whole:
        decode(bytes(data))
    with pytest.raises(InvalidBSON) as lazy:
        decode_cursor_reply(bytes(data), CodecOptions())
    assert str(lazy.value) == str(whole.value)


def test_a_malformed_document_is_refused_when_it_is_taken(loops: bool) -> None:
    good, bad = encode({"s": "ok"}), bytearray(encode({"s": "xx"}))
    bad[-3] = 0xFF  # a string byte that is not UTF-8: the framing stays right
    array = b"".join(
        kind_and_key + document
        for kind_and_key, document in [(b"\x030\x00", good), (b"\x031\x00", bytes(bad)), (b"\x032\x00", good)]
    )
    array = struct.pack("<i", len(array) + 5) + array + b"\x00"
    cursor = b"\x04firstBatch\x00" + array + b"\x10id\x00\x00\x00\x00\x00"
    cursor = struct.pack("<i", len(cursor) + 5) + cursor + b"\x00"
    body = b"\x03cursor\x00" + cursor + b"\x01ok\x00" + struct.pack("<d", 1.0)
    data = struct.pack("<i", len(body) + 5) + body + b"\x00"
    with pytest.raises(InvalidBSON):
        decode(data)
    document = decode_cursor_reply(data, CodecOptions())
    assert document["ok"] == 1.0 and document["cursor"]["id"] == 0
    batch = document["cursor"]["firstBatch"]
    assert batch.popleft() == {"s": "ok"}
    with pytest.raises(InvalidBSON):
        batch.popleft()
    assert batch.popleft() == {"s": "ok"}
    # Kept, the first document has the rest decoded at once, the bad one with it.
    batch = decode_cursor_reply(data, CodecOptions())["cursor"]["firstBatch"]
    first = batch.popleft()
    kept = [first]
    with pytest.raises(InvalidBSON):
        batch.popleft()
    assert kept == [{"s": "ok"}] and batch.kept
    with pytest.raises(InvalidBSON):
        list(batch)


def test_a_batch_must_be_an_array_of_documents() -> None:
    assert DocumentBatch.of(encode({"0": 1}), None) is None
    assert DocumentBatch.of(b"\x05\x00\x00\x00", None) is None  # no terminator
    empty = DocumentBatch.of(b"\x05\x00\x00\x00\x00", None)
    assert empty is not None and len(empty) == 0
