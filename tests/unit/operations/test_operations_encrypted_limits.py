"""Write batches under automatic encryption (``EncryptedWriteLimits``): cut once their statements pass the
split size before encryption, a statement larger than that still sent alone, the connection's own limits
still in force; collection bulk writes and client ``bulkWrite`` alike."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import encode
from mongio.errors import DocumentTooLarge
from mongio.operations import BulkWrite, InsertOne, ServerLimits
from mongio.operations.base import EncryptedWriteLimits, batch_split_size
from mongio.operations.client_bulk import ClientBulkWrite

SPLIT = 10_000


def doc_of_size(size: int, _id: int) -> dict[str, Any]:
    base = len(encode({"_id": _id, "s": ""}))
    document = {"_id": _id, "s": "x" * (size - base)}
    assert len(encode(document)) == size
    return document


def batch_sizes(bulk: BulkWrite, context: Any) -> list[int]:
    sizes = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(context)
        assert command.sequences is not None
        (sequence,) = command.sequences.values()
        sizes.append(len(sequence.documents))
        batch.handle_response({"ok": 1, "n": len(sequence.documents)}, context)
    return sizes


def client_batch_sizes(bulk: ClientBulkWrite, context: Any) -> list[int]:
    sizes = []
    while (batch := bulk.next_batch()) is not None:
        command = batch.build(context)
        assert command.sequences is not None
        count = len(command.sequences["ops"].documents)
        sizes.append(count)
        reply = {
            "ok": 1,
            "nErrors": 0,
            "nInserted": count,
            "cursor": {"id": 0, "ns": "admin.$cmd", "firstBatch": []},
        }
        batch.handle_response(reply, context)
    return sizes


def test_the_limits_are_the_connection_s_plus_the_split_size() -> None:
    connection = ServerLimits(
        max_wire_version=25, max_bson_size=1000, max_message_size=5000, max_write_batch_size=7
    )
    limits = EncryptedWriteLimits(connection, SPLIT)
    assert (
        limits.max_wire_version,
        limits.max_bson_size,
        limits.max_message_size,
        limits.max_write_batch_size,
    ) == (
        25,
        1000,
        5000,
        7,
    )
    assert batch_split_size(limits) == SPLIT
    assert batch_split_size(connection) is None


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ([4000, 4000, 4000, 4000], [2, 2]),  # 8000 fits, 12000 does not
        ([5000, 5000, 100], [2, 1]),  # exactly the split size
        ([6000, 6000], [1, 1]),
        ([25_000, 100, 100], [1, 2]),  # over the split size, alone
        ([100] * 30, [30]),
    ],
)
def test_collection_bulk_write_batches_are_cut_at_the_split_size(
    sizes: list[int], expected: list[int]
) -> None:
    documents = [doc_of_size(size, n) for n, size in enumerate(sizes)]
    limits = EncryptedWriteLimits(ServerLimits(), SPLIT)
    assert batch_sizes(BulkWrite("db", "c", [InsertOne(d) for d in documents]), limits) == expected
    # The same writes without automatic encryption: one batch.
    assert batch_sizes(BulkWrite("db", "c", [InsertOne(d) for d in documents]), ServerLimits()) == [
        len(sizes)
    ]


def test_the_connection_s_limits_still_hold() -> None:
    documents = [doc_of_size(100, n) for n in range(5)]
    limits = EncryptedWriteLimits(ServerLimits(max_write_batch_size=2), SPLIT)
    assert batch_sizes(BulkWrite("db", "c", [InsertOne(d) for d in documents]), limits) == [2, 2, 1]
    too_large = EncryptedWriteLimits(ServerLimits(max_bson_size=20_000), SPLIT)
    with pytest.raises(DocumentTooLarge):
        batch_sizes(BulkWrite("db", "c", [InsertOne(doc_of_size(20_000 + 16 * 1024 + 1, 1))]), too_large)


def test_client_bulk_write_batches_are_cut_at_the_split_size() -> None:
    models = [InsertOne(doc_of_size(4000, n), namespace="db.c") for n in range(4)]
    limits = EncryptedWriteLimits(ServerLimits(), SPLIT)
    assert client_batch_sizes(ClientBulkWrite(models), limits) == [2, 2]
    assert client_batch_sizes(ClientBulkWrite(models), ServerLimits()) == [4]
    # An operation over the split size goes alone, within the message's limit.
    alone = [InsertOne(doc_of_size(25_000, 1), namespace="db.c"), InsertOne({"_id": 2}, namespace="db.c")]
    assert client_batch_sizes(ClientBulkWrite(alone), limits) == [1, 1]
    with pytest.raises(DocumentTooLarge):
        client_batch_sizes(
            ClientBulkWrite(alone), EncryptedWriteLimits(ServerLimits(max_message_size=20_000), SPLIT)
        )
