"""Result types: PyMongo's attribute names, and InvalidOperation for what an unacknowledged write cannot know."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.errors import InvalidOperation
from mongio.operations import (
    BulkWriteResult,
    ClientBulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)


def test_insert_results_know_their_ids_even_unacknowledged() -> None:
    assert InsertOneResult(1, False).inserted_id == 1
    assert InsertManyResult([1, 2], False).inserted_ids == [1, 2]
    assert InsertOneResult(1, True).acknowledged


@pytest.mark.parametrize(
    ("result", "names"),
    [
        (UpdateResult({}, False), ["matched_count", "modified_count", "upserted_id", "did_upsert"]),
        (DeleteResult({}, False), ["deleted_count"]),
        (
            BulkWriteResult({}, False),
            [
                "inserted_count",
                "matched_count",
                "modified_count",
                "deleted_count",
                "upserted_count",
                "upserted_ids",
            ],
        ),
        (
            ClientBulkWriteResult({}, False, False),
            [
                "inserted_count",
                "matched_count",
                "modified_count",
                "deleted_count",
                "upserted_count",
                "insert_results",
            ],
        ),
    ],
)
def test_unacknowledged_fields_raise(result: Any, names: list[str]) -> None:
    assert result.acknowledged is False
    for name in names:
        with pytest.raises(InvalidOperation, match=name):
            getattr(result, name)


def test_update_result_upsert_with_null_id_is_still_an_upsert() -> None:
    result = UpdateResult({"n": 1, "nModified": 0, "upserted": None}, True)
    assert result.did_upsert and result.upserted_id is None and result.matched_count == 0
    plain = UpdateResult({"n": 2, "nModified": 1}, True)
    assert not plain.did_upsert and plain.matched_count == 2 and plain.modified_count == 1


def test_bulk_write_result_counts_and_upserted_ids() -> None:
    result = BulkWriteResult(
        {
            "nInserted": 1,
            "nMatched": 2,
            "nModified": 3,
            "nRemoved": 4,
            "nUpserted": 1,
            "upserted": [{"index": 7, "_id": "x"}],
        },
        True,
    )
    assert (result.inserted_count, result.matched_count, result.modified_count) == (1, 2, 3)
    assert (result.deleted_count, result.upserted_count, result.upserted_ids) == (4, 1, {7: "x"})
    assert result.bulk_api_result["nRemoved"] == 4


def test_client_bulk_verbose_maps() -> None:
    verbose = ClientBulkWriteResult(
        {
            "nInserted": 1,
            "insertResults": {0: InsertOneResult(5, True)},
            "updateResults": {},
            "deleteResults": {},
        },
        True,
        True,
    )
    assert verbose.has_verbose_results and verbose.insert_results[0].inserted_id == 5
    assert verbose.update_results == {} and verbose.delete_results == {}
    summary = ClientBulkWriteResult({"nDeleted": 2}, True, False)
    assert summary.deleted_count == 2
    for name in ("insert_results", "update_results", "delete_results"):
        with pytest.raises(InvalidOperation, match="verbose"):
            getattr(summary, name)
