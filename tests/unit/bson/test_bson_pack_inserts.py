"""An insert's documents encoded in one pass (``pack_inserts``): the compiled pass against the Python one."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any

import pytest

from mongio.bson import DEFAULT_CODEC_OPTIONS, ObjectId, RawBSONDocument, decode, encode
from mongio.bson._encoder import _SPEEDUPS, encode_insert_document, pack_inserts, use_speedups
from mongio.bson.objectid import generation_state
from mongio.errors import InvalidDocument
from mongio.operations.base import encode_insert

pytestmark = pytest.mark.skipif(_SPEEDUPS is None, reason="the compiled BSON loops are not built")


def encode_one(document: Any) -> tuple[bytes, Any]:
    return encode_insert(document, DEFAULT_CODEC_OPTIONS)


def documents() -> list[Any]:
    return [
        {"a": 1, "nested": {"b": [1, 2.5, "x"]}},
        {"_id": 7, "a": "has an id"},
        OrderedDict([("c", True)]),
        RawBSONDocument(encode({"_id": "raw", "d": None})),
        {},
        {"z": b"bytes", "_id": ObjectId("5f0c0a0b0c0d0e0f10111213")},
    ]


def split(data: bytearray, ends: list[int]) -> list[dict[str, Any]]:
    starts = [0, *ends[:-1]]
    return [decode(bytes(data[start:end])) for start, end in zip(starts, ends, strict=True)]


def test_compiled_pass_makes_what_the_python_pass_makes() -> None:
    compiled_input, python_input = documents(), documents()
    generated = [i for i, document in enumerate(compiled_input) if "_id" not in document]
    compiled = pack_inserts(compiled_input, DEFAULT_CODEC_OPTIONS, encode_one)
    try:
        use_speedups(False)
        python = pack_inserts(python_input, DEFAULT_CODEC_OPTIONS, encode_one)
    finally:
        use_speedups(True)
    compiled_docs, python_docs = split(*compiled[:2]), split(*python[:2])
    assert generated == [0, 2, 4]
    # Generated ids differ from pass to pass; everything else, the order of the fields included, is the same.
    for index in generated:
        assert isinstance(compiled_docs[index]["_id"], ObjectId)
        compiled_docs[index]["_id"] = python_docs[index]["_id"] = None
    assert [list(doc.items()) for doc in compiled_docs] == [list(doc.items()) for doc in python_docs]
    assert compiled[2][1] == 7 and compiled[2][3] == "raw"


def test_generated_ids_go_first_into_the_bson_and_the_callers_dict() -> None:
    given: list[dict[str, Any]] = [{"a": 1}, {"b": 2}]
    data, ends, ids = pack_inserts(given, DEFAULT_CODEC_OPTIONS, encode_one)
    decoded = split(data, ends)
    for document, sent, _id in zip(given, decoded, ids, strict=True):
        assert isinstance(_id, ObjectId)
        assert next(iter(sent)) == "_id" and sent["_id"] == _id
        assert document["_id"] is _id


def test_generated_ids_share_the_process_counter_with_objectid() -> None:
    before = ObjectId()
    _, _, ids = pack_inserts([{}, {}], DEFAULT_CODEC_OPTIONS, encode_one)
    after = ObjectId()
    counters = [int.from_bytes(oid.binary[9:], "big") for oid in (before, *ids, after)]
    assert [(b - a) % (1 << 24) for a, b in itertools.pairwise(counters)] == [1, 1, 1]
    assert all(oid.binary[4:9] == generation_state()[0] for oid in ids)


def test_an_unencodable_value_names_its_key_and_leaves_no_id_on_that_document() -> None:
    given: list[Any] = [{"fine": 1}, {"bad": {"inner": object()}}]
    with pytest.raises(InvalidDocument, match=r"bad\.inner"):
        pack_inserts(given, DEFAULT_CODEC_OPTIONS, encode_one)
    assert "_id" not in given[1]


def test_a_document_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(TypeError, match="document must be a mapping"):
        pack_inserts([{"a": 1}, ["not", "a", "document"]], DEFAULT_CODEC_OPTIONS, encode_one)


def test_one_document_is_encoded_as_the_compiled_and_python_passes_encode_it_in_a_list() -> None:
    """``insert_one``'s encoding (``encode_insert_document``) gives what ``pack_inserts`` gives for a list of
    that one document, compiled or not: same bytes up to the generated id, same ``_id``, same id stored."""
    for index, _ in enumerate(documents()):
        outputs = []
        for compiled in (True, False):
            use_speedups(compiled)
            try:
                alone, listed = documents()[index], documents()[index]
                data, _id = encode_insert_document(alone, DEFAULT_CODEC_OPTIONS, encode_one)
                packed, _, ids = pack_inserts([listed], DEFAULT_CODEC_OPTIONS, encode_one)
            finally:
                use_speedups(True)
            sent, expected = decode(bytes(data)), decode(bytes(packed))
            assert list(sent) == list(expected)
            if "_id" not in documents()[index]:
                assert isinstance(_id, ObjectId) and _id != ids[0]
                assert sent["_id"] == _id and alone["_id"] is _id and next(iter(sent)) == "_id"
                sent["_id"] = expected["_id"] = _id = ids[0] = None
            assert sent == expected and _id == ids[0]
            outputs.append(list(sent.items()))
        assert outputs[0] == outputs[1]


def test_one_unencodable_document_names_its_key_and_gets_no_id() -> None:
    given: dict[str, Any] = {"bad": [object()]}
    with pytest.raises(InvalidDocument, match=r"bad\.0"):
        encode_insert_document(given, DEFAULT_CODEC_OPTIONS, encode_one)
    assert "_id" not in given
    with pytest.raises(TypeError, match="document must be a mapping"):
        encode_insert_document(["not", "a", "document"], DEFAULT_CODEC_OPTIONS, encode_one)
