"""The compiled loops leave ObjectId, Int64, Timestamp and DatetimeMS values untracked by the cyclic collector
(they can close no reference cycle). These tests hold that they are, that they still behave as tracked ones do
(equality, hashing, pickling, copying, freeing), and that the containers around them stay tracked."""

from __future__ import annotations

import copy
import gc
import pickle
import tracemalloc
from typing import Any

import pytest

from mongio.bson import (
    DEFAULT_CODEC_OPTIONS,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    Int64,
    ObjectId,
    Regex,
    Timestamp,
    _decoder,
    decode,
    encode,
)
from mongio.bson._encoder import pack_inserts

pytestmark = pytest.mark.skipif(
    not _decoder.speedups_available(), reason="the compiled loops are not built or are switched off"
)

_MS = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)


def _atomic_values() -> dict[str, Any]:
    return {
        "oid": ObjectId(),
        "long": Int64(-(2**40) - 3),
        "small_long": Int64(0),
        "ts": Timestamp(1_700_000_000, 7),
        "ms": DatetimeMS(2**62),
    }


def test_decoded_atomic_values_are_untracked_and_containers_are_not() -> None:
    given = _atomic_values() | {"list": [1, 2], "nested": {"list": []}, "regex": Regex("a", "i")}
    decoded = decode(encode(given), _MS)
    for name in _atomic_values():
        assert not gc.is_tracked(decoded[name]), name
    # Containers stay tracked (a list can come to hold its own parent), and so do classes with public slots.
    assert gc.is_tracked(decoded["list"]) and gc.is_tracked(decoded["nested"]["list"])
    assert gc.is_tracked(decoded["regex"])
    assert gc.is_tracked(decoded)


def test_untracked_values_equal_hash_and_round_trip_as_the_originals() -> None:
    given = _atomic_values()
    decoded = decode(encode(given), _MS)
    assert decoded == given
    for name, value in given.items():
        twin = decoded[name]
        assert type(twin) is type(value)
        assert hash(twin) == hash(value)
        assert pickle.loads(pickle.dumps(twin)) == value
        assert copy.deepcopy(twin) == value and copy.copy(twin) == value
    assert encode(decoded) == encode(given)


def test_untracked_values_are_freed_with_their_documents() -> None:
    raw = encode({"values": [_atomic_values() for _ in range(50)]})
    decode(raw, _MS)
    tracemalloc.start()
    try:
        for _ in range(20):
            decode(raw, _MS)
        settled, _ = tracemalloc.get_traced_memory()
        for _ in range(500):
            decode(raw, _MS)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 500 decodes of 250 values each: a leak of one value per decode would be some 25 KiB.
    assert after - settled < 8 * 1024


def test_ids_generated_by_the_compiled_insert_are_untracked() -> None:
    documents: list[dict[str, Any]] = [{"n": n} for n in range(3)]
    _, _, ids = pack_inserts(documents, DEFAULT_CODEC_OPTIONS, lambda doc: (encode(doc), doc.get("_id")))
    assert [doc["_id"] for doc in documents] == ids
    assert all(isinstance(i, ObjectId) and not gc.is_tracked(i) for i in ids)
