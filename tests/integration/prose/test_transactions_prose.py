"""Transactions against the test server: the prose tests of transactions/tests/README.md and
transactions-convenient-api/tests/README.md that one replica-set member can run, and the asyncio API
(``async with session.start_transaction()``, cancellation, ``with_transaction``)."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.error_classification import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_TRANSACTION_COMMIT_RESULT,
    AttemptFailure,
    labels_to_add,
)
from mongio.errors import (
    ConnectionFailure,
    InvalidOperation,
    OperationFailure,
    OperationTimeoutError,
    PoolClearedError,
)
from mongio.execution import deadline as csot
from mongio.options.read_preference import Secondary
from mongio.options.write_concern import WriteConcern
from mongio.sessions import client_session, with_transaction_policy
from mongio.sessions.client_session import ClientSession
from mongio.sessions.transaction_state import TxnState
from tests.support.recorders import CommandRecorder


async def fail_point(client: MongoClient, mode: Any, data: dict[str, Any]) -> None:
    await client.admin.command({"configureFailPoint": "failCommand", "mode": mode, "data": data})


async def fail_point_off(client: MongoClient) -> None:
    await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


# -- transactions/tests/README.md ------------------------------------------------------------------------


async def test_write_concern_not_inherited_from_collection(client: MongoClient, coll: Collection[Any]) -> None:
    """Options Inside Transaction 1.0: a w:0 collection inside a transaction writes acknowledged, in it."""
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    async with client.start_session() as session, session.start_transaction():
        await unacknowledged.insert_one({"n": 1}, session=session)
    assert await coll.find_one({"n": 1}) is not None


def test_pool_cleared_error_is_transient_in_a_transaction() -> None:
    """PoolClearedError Prose Test: the error gets TransientTransactionError inside a transaction."""
    failure = AttemptFailure.from_exception(PoolClearedError("pool cleared", ("localhost", 27017)), sent=False)
    added, _ = labels_to_add(failure, is_write=True, retry_writes=True, in_transaction=True)
    assert TRANSIENT_TRANSACTION_ERROR in added
    outside, _ = labels_to_add(failure, is_write=True, retry_writes=True, in_transaction=False)
    assert TRANSIENT_TRANSACTION_ERROR not in outside


# -- the asyncio API ---------------------------------------------------------------------------------------


async def test_context_manager_commits(client: MongoClient, coll: Collection[Any], recorder: CommandRecorder) -> None:
    async with client.start_session() as session:
        async with session.start_transaction() as transaction:
            assert transaction.session is session and session.in_transaction
            await coll.insert_one({"_id": 1}, session=session)
            await coll.insert_one({"_id": 2}, session=session)
            # not visible outside the transaction yet
            assert await coll.count_documents({}) == 0
        assert session._transaction.state is TxnState.COMMITTED
    assert await coll.count_documents({}) == 2
    inserts = recorder.commands("insert")
    assert inserts[0]["startTransaction"] is True and inserts[0]["autocommit"] is False
    assert "startTransaction" not in inserts[1]
    assert inserts[0]["txnNumber"] == inserts[1]["txnNumber"]
    commit = recorder.last("commitTransaction")
    assert commit["txnNumber"] == inserts[0]["txnNumber"] and commit["autocommit"] is False


async def test_context_manager_aborts_on_exception(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    async with client.start_session() as session:
        with pytest.raises(ValueError, match="boom"):
            async with session.start_transaction():
                await coll.insert_one({"_id": 1}, session=session)
                raise ValueError("boom")
        assert session._transaction.state is TxnState.ABORTED
    assert "abortTransaction" in recorder.names()
    assert "commitTransaction" not in recorder.names()
    assert await coll.count_documents({}) == 0


async def test_cancellation_aborts_the_transaction(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    inserted = anyio.Event()

    async with client.start_session() as session:

        async def work() -> None:
            async with session.start_transaction():
                await coll.insert_one({"_id": 1}, session=session)
                inserted.set()
                await anyio.sleep_forever()

        async with anyio.create_task_group() as working:
            working.start_soon(work)
            await inserted.wait()
            working.cancel_scope.cancel()
        assert working.cancel_scope.cancelled_caught
        assert not session.in_transaction
        assert recorder.names()[-1] == "abortTransaction"
        # the session is usable again
        await coll.insert_one({"_id": 2}, session=session)
    assert [doc["_id"] async for doc in coll.find({})] == [2]


async def test_plain_calls_and_awaitable_start(client: MongoClient, coll: Collection[Any]) -> None:
    async with client.start_session() as session:
        session.start_transaction()
        await coll.insert_one({"_id": 1}, session=session)
        await session.commit_transaction()
        context = await session.start_transaction()
        async with context:
            await coll.insert_one({"_id": 2}, session=session)
            await session.abort_transaction()  # ended inside the block: the block leaves it as it is
        assert session._transaction.state is TxnState.ABORTED
    assert await coll.count_documents({}) == 1


async def test_state_errors(client: MongoClient, coll: Collection[Any], recorder: CommandRecorder) -> None:
    async with client.start_session() as session:
        with pytest.raises(InvalidOperation, match="No transaction started"):
            await session.commit_transaction()
        session.start_transaction()
        with pytest.raises(InvalidOperation, match="already in progress"):
            session.start_transaction()
        await session.commit_transaction()  # nothing ran: no command
        assert "commitTransaction" not in recorder.names()
        with pytest.raises(InvalidOperation, match="after calling commitTransaction"):
            await session.abort_transaction()


async def test_non_primary_read_preference_refused_before_selection(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    async with client.start_session() as session, session.start_transaction(read_preference=Secondary()):
        recorder.clear()
        with pytest.raises(InvalidOperation, match="must be primary"):
            await coll.find_one({}, session=session)
        assert recorder.events == []
        await coll.insert_one({"_id": 1}, session=session)  # writes are not affected
    assert await coll.count_documents({}) == 1


async def test_end_session_aborts_open_transaction(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    session = client.start_session()
    session.start_transaction()
    await coll.insert_one({"_id": 1}, session=session)
    await session.end_session()
    assert recorder.names()[-1] == "abortTransaction"
    assert await coll.count_documents({}) == 0


async def test_transient_error_label_on_network_error(client: MongoClient, coll: Collection[Any]) -> None:
    await fail_point(client, {"times": 1}, {"failCommands": ["insert"], "closeConnection": True})
    try:
        async with client.start_session() as session:
            session.start_transaction()
            with pytest.raises(ConnectionFailure) as caught:
                await coll.insert_one({"_id": 1}, session=session)
            assert caught.value.has_error_label(TRANSIENT_TRANSACTION_ERROR)
            await session.abort_transaction()
    finally:
        await fail_point_off(client)


# -- transactions-convenient-api/tests/README.md ---------------------------------------------------------


class CustomError(Exception):
    pass


async def test_callback_custom_error_propagates(client: MongoClient, coll: Collection[Any]) -> None:
    calls = 0

    async def callback(session: ClientSession) -> None:
        nonlocal calls
        calls += 1
        await coll.insert_one({"_id": calls}, session=session)
        raise CustomError

    async with client.start_session() as session:
        with pytest.raises(CustomError):
            await session.with_transaction(callback)
        assert session._transaction.state is TxnState.ABORTED
    assert calls == 1
    assert await coll.count_documents({}) == 0


async def test_callback_return_value(client: MongoClient, coll: Collection[Any]) -> None:
    async def callback(session: ClientSession) -> dict[str, Any]:
        await coll.insert_one({"_id": 1}, session=session)
        return {"answer": 42}

    async with client.start_session() as session:
        assert await session.with_transaction(callback) == {"answer": 42}
    assert await coll.count_documents({}) == 1


@pytest.fixture
def no_retry_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every retry decision finds the 120-second limit already used up.
    monkeypatch.setattr(with_transaction_policy, "WITH_TRANSACTION_TIMEOUT", 0.0)


async def test_retry_timeout_callback_transient_error(
    client: MongoClient, coll: Collection[Any], no_retry_time: None
) -> None:
    await fail_point(
        client, {"times": 1}, {"failCommands": ["insert"], "errorCode": 112, "errorLabels": ["TransientTransactionError"]}
    )
    try:
        async with client.start_session() as session:
            with pytest.raises(OperationTimeoutError) as caught:
                await session.with_transaction(lambda s: coll.insert_one({"_id": 1}, session=s))
    finally:
        await fail_point_off(client)
    assert caught.value.has_error_label(TRANSIENT_TRANSACTION_ERROR)
    assert isinstance(caught.value.cause, OperationFailure) and caught.value.cause.code == 112


async def test_retry_timeout_commit_unknown_result(
    client: MongoClient, coll: Collection[Any], no_retry_time: None
) -> None:
    # WriteConcernFailed: the commit may or may not have happened.
    await fail_point(client, {"times": 1}, {"failCommands": ["commitTransaction"], "errorCode": 64})
    try:
        async with client.start_session() as session:
            with pytest.raises(OperationTimeoutError) as caught:
                await session.with_transaction(lambda s: coll.insert_one({"_id": 1}, session=s))
    finally:
        await fail_point_off(client)
    assert caught.value.has_error_label(UNKNOWN_TRANSACTION_COMMIT_RESULT)


async def test_retry_timeout_commit_transient_error(
    client: MongoClient, coll: Collection[Any], no_retry_time: None
) -> None:
    await fail_point(
        client,
        {"times": 1},
        {"failCommands": ["commitTransaction"], "errorCode": 251, "errorLabels": ["TransientTransactionError"]},
    )
    try:
        async with client.start_session() as session:
            with pytest.raises(OperationTimeoutError) as caught:
                await session.with_transaction(lambda s: coll.insert_one({"_id": 1}, session=s))
    finally:
        await fail_point_off(client)
    assert caught.value.has_error_label(TRANSIENT_TRANSACTION_ERROR)


class FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize("jitter", [0.0, 0.999999])
async def test_retry_backoff_is_enforced(
    client: MongoClient, coll: Collection[Any], monkeypatch: pytest.MonkeyPatch, jitter: float
) -> None:
    """Retry Backoff is Enforced: 13 NoSuchTransaction commits give 12 backoffs before the 13 later attempts
    (one per attempt from the second on), as the jitter scales them. The sleeps asked for are recorded
    instead of measuring the elapsed time."""
    requested: list[float] = []

    async def record_sleep(seconds: float) -> None:
        requested.append(seconds)

    monkeypatch.setattr(client_session, "_sleep", record_sleep)
    await fail_point(client, {"times": 13}, {"failCommands": ["commitTransaction"], "errorCode": 251})
    try:
        async with client.start_session() as session:
            session._transaction_rng = FixedRandom(jitter)
            await session.with_transaction(lambda s: coll.insert_one({}, session=s))
    finally:
        await fail_point_off(client)
    expected = [jitter * min(0.005 * 1.5**attempt, 0.5) for attempt in range(1, 14)]
    if jitter == 0.0:
        assert requested == []
    else:
        assert requested == pytest.approx(expected)
        assert sum(requested) == pytest.approx(2.3, abs=0.1)
    assert await coll.count_documents({}) == 1


async def test_with_transaction_cancelled_in_callback_aborts(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    inserted = anyio.Event()

    async def callback(session: ClientSession) -> None:
        await coll.insert_one({"_id": 1}, session=session)
        inserted.set()
        await anyio.sleep_forever()

    async with client.start_session() as session:
        async with anyio.create_task_group() as working:
            working.start_soon(session.with_transaction, callback)
            await inserted.wait()
            working.cancel_scope.cancel()
        assert working.cancel_scope.cancelled_caught
        assert session._transaction.state is TxnState.ABORTED
        assert recorder.names()[-1] == "abortTransaction"
    assert await coll.count_documents({}) == 0


async def test_with_transaction_timeout_cannot_be_overridden_inside(
    server_uri: str, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """CSOT: with_transaction's timeoutMS covers its callback; an operation in the session that brings its own
    timeout is refused before anything is sent."""
    async with MongoClient(server_uri, timeoutMS=5000, event_listeners=[recorder]) as client:
        target = client[coll.database.name][coll.name]

        async def callback(session: ClientSession) -> None:
            with csot.timeout(0.1):
                await target.insert_one({"_id": 1}, session=session)

        async with client.start_session() as session:
            recorder.clear()
            with pytest.raises(InvalidOperation, match="cannot set its own timeout"):
                await session.with_transaction(callback)
            assert recorder.events == []
