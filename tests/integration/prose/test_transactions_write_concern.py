"""Write concerns inside a transaction, against the test server (transactions specification,
TransactionOptions: writeConcern; "Users cannot pass readConcern or writeConcern to operations in
transactions"; Options Inside Transaction prose test 1.0).

A collection's or client's own write concern does not apply to the commands of a transaction: none is
sent on them, the transaction's goes on commitTransaction/abortTransaction only, and so every write in it
is acknowledged and reports what the server answered, even from a ``w: 0`` collection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.errors import BulkWriteError, ConfigurationError, DuplicateKeyError, InvalidOperation
from mongio.operations.models import DeleteOne, InsertOne, ReplaceOne, UpdateOne
from mongio.options.write_concern import WriteConcern
from mongio.sessions.client_session import ClientSession
from mongio.sessions.transaction_state import TransactionOptions
from tests.support.recorders import CommandRecorder


@pytest.fixture
async def coll(coll: Collection[Any]) -> Collection[Any]:
    """The shared empty collection, with one document."""
    await coll.insert_one({"_id": 0, "x": 0})
    return coll


Write = Callable[[Collection[Any], ClientSession], Awaitable[Any]]


async def _insert_one(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.insert_one({"_id": 1}, session=s)
    return result.acknowledged, result.inserted_id


async def _insert_many(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.insert_many([{"_id": 1}, {"_id": 2}], session=s)
    return result.acknowledged, result.inserted_ids


async def _bulk_write(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.bulk_write(
        [InsertOne({"_id": 1}), UpdateOne({"_id": 0}, {"$set": {"x": 1}}), DeleteOne({"_id": 1})], session=s
    )
    return result.acknowledged, result.inserted_count, result.modified_count, result.deleted_count


async def _update_one(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
    return result.acknowledged, result.matched_count, result.modified_count


async def _update_many(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.update_many({}, {"$set": {"x": 1}}, session=s)
    return result.acknowledged, result.matched_count, result.modified_count


async def _replace_one(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.replace_one({"_id": 0}, {"x": 1}, session=s)
    return result.acknowledged, result.matched_count


async def _delete_one(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.delete_one({"_id": 0}, session=s)
    return result.acknowledged, result.deleted_count


async def _delete_many(c: Collection[Any], s: ClientSession) -> Any:
    result = await c.delete_many({}, session=s)
    return result.acknowledged, result.deleted_count


async def _find_one_and_update(c: Collection[Any], s: ClientSession) -> Any:
    return await c.find_one_and_update({"_id": 0}, {"$set": {"x": 1}}, session=s)


async def _find_one_and_replace(c: Collection[Any], s: ClientSession) -> Any:
    return await c.find_one_and_replace({"_id": 0}, {"x": 1}, session=s)


async def _find_one_and_delete(c: Collection[Any], s: ClientSession) -> Any:
    return await c.find_one_and_delete({"_id": 0}, session=s)


# (the write, the command it sends, what it returns, the documents once committed)
CASES: list[tuple[Write, str, Any, list[dict[str, Any]]]] = [
    (_insert_one, "insert", (True, 1), [{"_id": 0, "x": 0}, {"_id": 1}]),
    (_insert_many, "insert", (True, [1, 2]), [{"_id": 0, "x": 0}, {"_id": 1}, {"_id": 2}]),
    (_bulk_write, "update", (True, 1, 1, 1), [{"_id": 0, "x": 1}]),
    (_update_one, "update", (True, 1, 1), [{"_id": 0, "x": 1}]),
    (_update_many, "update", (True, 1, 1), [{"_id": 0, "x": 1}]),
    (_replace_one, "update", (True, 1), [{"_id": 0, "x": 1}]),
    (_delete_one, "delete", (True, 1), []),
    (_delete_many, "delete", (True, 1), []),
    (_find_one_and_update, "findAndModify", {"_id": 0, "x": 0}, [{"_id": 0, "x": 1}]),
    (_find_one_and_replace, "findAndModify", {"_id": 0, "x": 0}, [{"_id": 0, "x": 1}]),
    (_find_one_and_delete, "findAndModify", {"_id": 0, "x": 0}, []),
]


@pytest.mark.parametrize(("write", "command", "expected", "committed"), CASES, ids=[c[0].__name__[1:] for c in CASES])
async def test_w0_collection_writes_acknowledged_in_a_transaction(
    client: MongoClient,
    coll: Collection[Any],
    recorder: CommandRecorder,
    write: Write,
    command: str,
    expected: Any,
    committed: list[dict[str, Any]],
) -> None:
    """Transactions spec, TransactionOptions > writeConcern: a collection's write concern (here w: 0) is
    ignored inside a transaction and the transaction's used instead, so the write is acknowledged: its
    result carries the server's counts (or the document), no writeConcern goes on the command, and the
    transaction's own write concern goes on commitTransaction."""
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    recorder.clear()
    async with client.start_session() as session:
        async with session.start_transaction(write_concern=WriteConcern(w=1)):
            assert await write(unacknowledged, session) == expected
        sent = recorder.commands(command)
        assert sent, f"no {command} command was sent"
        assert all("writeConcern" not in body and body["autocommit"] is False for body in sent)
        assert recorder.commands("commitTransaction")[-1]["writeConcern"] == {"w": 1}
    assert [doc async for doc in coll.find({}).sort("_id", 1)] == committed


async def test_write_error_of_a_w0_collection_is_raised_in_a_transaction(
    client: MongoClient, coll: Collection[Any]
) -> None:
    """Transactions spec, TransactionOptions > writeConcern: since the transaction's write concern replaces
    the collection's w: 0, a write error inside the transaction (which aborts it on the server) reaches the
    application instead of being dropped as an unacknowledged write's would be."""
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    async with client.start_session() as session:
        session.start_transaction()
        with pytest.raises(DuplicateKeyError):
            await unacknowledged.insert_one({"_id": 0}, session=session)
        await session.abort_transaction()
        # The server aborted that transaction at the error: the bulk form is shown in a new one.
        session.start_transaction()
        with pytest.raises(BulkWriteError) as raised:
            await unacknowledged.insert_many([{"_id": 5}, {"_id": 0}], session=session)
        assert raised.value.details is not None
        assert raised.value.details["writeErrors"][0]["index"] == 1
        await session.abort_transaction()


async def test_collection_made_inside_a_transaction_does_not_lend_its_write_concern(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """Transactions spec, TransactionOptions > writeConcern: a Collection created inside a transaction with
    w: 0 writes with the transaction's write concern (prose test 1.0, with its result checked)."""
    async with client.start_session() as session, session.start_transaction():
        w0 = coll.database.get_collection(coll.name, write_concern=WriteConcern(w=0))
        result = await w0.insert_one({"n": 1}, session=session)
        assert result.acknowledged and result.inserted_id is not None
    assert await coll.count_documents({"n": 1}) == 1
    assert "writeConcern" not in recorder.commands("insert")[-1]


async def test_w0_outside_a_transaction_stays_unacknowledged(client: MongoClient, coll: Collection[Any]) -> None:
    """Driver sessions spec, Unacknowledged writes: outside a transaction a w: 0 write with an explicit session
    is refused (and the same session's transaction writes above are not), so the transaction rule does not
    leak to ordinary writes."""
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    async with client.start_session() as session:
        with pytest.raises(InvalidOperation, match="unacknowledged"):
            await unacknowledged.insert_one({"_id": 9}, session=session)
        async with session.start_transaction():
            assert (await unacknowledged.insert_one({"_id": 9}, session=session)).acknowledged
        with pytest.raises(InvalidOperation, match="unacknowledged"):
            await unacknowledged.insert_one({"_id": 10}, session=session)
    assert not (await unacknowledged.insert_one({"_id": 11})).acknowledged


@pytest.fixture
async def w0_client(server_uri: str, recorder: CommandRecorder) -> AsyncIterator[MongoClient]:
    async with MongoClient(server_uri, w=0, event_listeners=[recorder]) as client:
        yield client


async def test_client_bulk_write_in_a_transaction_ignores_the_clients_w0(
    w0_client: MongoClient, client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """Transactions spec, TransactionOptions > writeConcern: the client's w: 0 does not make an ordered
    client bulkWrite inside a transaction unacknowledged (nor refused as unacknowledged and ordered); it
    reports the server's counts and sends no writeConcern."""
    namespace = coll.full_name
    async with w0_client.start_session() as session, session.start_transaction(write_concern=WriteConcern(w=1)):
        result = await w0_client.bulk_write(
            [
                InsertOne({"_id": 1}, namespace=namespace),
                ReplaceOne({"_id": 0}, {"x": 5}, namespace=namespace),
            ],
            session=session,
        )
        assert result.acknowledged
        assert (result.inserted_count, result.matched_count) == (1, 1)
    assert "writeConcern" not in recorder.commands("bulkWrite")[-1]
    assert await coll.find_one({"_id": 0}) == {"_id": 0, "x": 5}


async def test_explicit_write_concern_on_an_operation_in_a_transaction_is_refused(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """Transactions spec, TransactionOptions > writeConcern and "Users cannot pass readConcern or writeConcern
    to operations in transactions": an operation given its own write concern inside a transaction raises
    "Cannot set write concern after starting a transaction." before sending anything, and leaves the
    transaction as it was."""
    async with client.start_session() as session:
        session.start_transaction()
        recorder.clear()
        with pytest.raises(InvalidOperation, match=r"^Cannot set write concern after starting a transaction\.$"):
            await client.bulk_write(
                [InsertOne({"_id": 1}, namespace=coll.full_name)], session=session, write_concern=WriteConcern(w=1)
            )
        assert recorder.events == []
        assert session.in_transaction and session._transaction.starting
        await session.abort_transaction()


async def test_a_w0_client_starts_a_transaction_only_with_an_acknowledged_write_concern_of_its_own(
    w0_client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """Transactions spec, TransactionOptions > writeConcern: an error containing "transactions do not support
    unacknowledged write concerns" when the defaults would make the transaction's write concern w: 0, and none
    when the transaction or the session's default transaction options set an acknowledged one."""
    async with w0_client.start_session() as session:
        with pytest.raises(ConfigurationError, match="transactions do not support unacknowledged write concerns"):
            session.start_transaction()
        assert not session.in_transaction
    defaults = TransactionOptions(write_concern=WriteConcern(w="majority"))
    async with w0_client.start_session(default_transaction_options=defaults) as session:
        async with session.start_transaction():
            await w0_client[coll.database.name][coll.name].insert_one({"_id": 7}, session=session)
        assert recorder.commands("commitTransaction")[-1]["writeConcern"] == {"w": "majority"}
    assert await coll.find_one({"_id": 7}) == {"_id": 7}
