"""Transactions on a sharded cluster, shown with two loopback peers answering as mongoses (the test server has
no sharding): the Mongos Pinning Prose Tests of transactions/tests/README.md, the recoveryToken, and unpinning
after a TransientTransactionError."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.sessions.client_session import ClientSession
from mongio.topology.server_description import Address
from tests.support.loopback_peer import LoopbackPeer, Request, default_reply

RECOVERY_TOKEN = {"recoveryShardId": "shard-a"}


class FakeMongos:
    """Answers as a mongos: inserts succeed, finds return one document, transaction commands succeed, and the
    first reply in each transaction carries a recoveryToken. ``fail_next_insert`` answers the next insert with
    a TransientTransactionError; ``fail_next`` is a command name and the error reply its next run gets."""

    def __init__(self) -> None:
        self.peer = LoopbackPeer(self.handle, max_wire_version=25)
        self.commands: list[dict[str, Any]] = []
        self.fail_next_insert = False
        self.fail_next: tuple[str, dict[str, Any]] | None = None
        # What an insert's reply carries as its recoveryToken (None: none).
        self.recovery_token: dict[str, Any] | None = RECOVERY_TOKEN

    async def handle(self, request: Request) -> Any:
        name = request.command_name
        if name.lower() in ("hello", "ismaster"):
            return {**default_reply(request, self.peer), "msg": "isdbgrid", "logicalSessionTimeoutMinutes": 30}
        self.commands.append(request.document)
        if self.fail_next is not None and self.fail_next[0] == name:
            reply = self.fail_next[1]
            self.fail_next = None
            return reply
        if name == "insert":
            if self.fail_next_insert:
                self.fail_next_insert = False
                return {
                    "ok": 0,
                    "code": 251,
                    "codeName": "NoSuchTransaction",
                    "errmsg": "no such transaction",
                    "errorLabels": ["TransientTransactionError"],
                }
            reply = {"ok": 1, "n": len(request.sequences.get("documents", []))}
            if self.recovery_token is not None:
                reply["recoveryToken"] = self.recovery_token
            return reply
        if name == "find":
            namespace = f"{request.db}.{request.document['find']}"
            return {"ok": 1, "cursor": {"id": 0, "ns": namespace, "firstBatch": [{"_id": 1}]}}
        return {"ok": 1}

    def count(self, name: str) -> int:
        return sum(1 for command in self.commands if next(iter(command)) == name)


@pytest.fixture
async def mongoses() -> AsyncIterator[list[FakeMongos]]:
    fakes = [FakeMongos(), FakeMongos()]
    async with AsyncExitStack() as stack:
        for fake in fakes:
            await stack.enter_async_context(fake.peer)
        yield fakes


@pytest.fixture
async def client(mongoses: list[FakeMongos]) -> AsyncIterator[MongoClient]:
    hosts = ",".join(f"{fake.peer.address[0]}:{fake.peer.address[1]}" for fake in mongoses)
    async with MongoClient(f"mongodb://{hosts}/?localThresholdMS=1000&heartbeatFrequencyMS=500") as client:
        await client.admin.command("ping")
        yield client


def pinned_address(session: ClientSession) -> Address | None:
    return session._pinned_address


async def one_find(client: MongoClient, session: Any) -> Address:
    cursor = client.test.test.find({}, session=session)
    assert await anext(cursor) == {"_id": 1}
    address: Address = cursor.address
    await cursor.close()
    return address


async def test_unpin_for_next_transaction(client: MongoClient, mongoses: list[FakeMongos]) -> None:
    async with client.start_session() as session:
        async with session.start_transaction():
            await client.test.test.insert_one({}, session=session)
        addresses = set()
        for _ in range(50):
            async with session.start_transaction():
                addresses.add(await one_find(client, session))
    assert len(addresses) > 1


async def test_unpin_for_non_transaction_operation(client: MongoClient, mongoses: list[FakeMongos]) -> None:
    async with client.start_session() as session:
        async with session.start_transaction():
            await client.test.test.insert_one({}, session=session)
        addresses = set()
        for _ in range(50):
            addresses.add(await one_find(client, session))
    assert len(addresses) > 1


async def test_transaction_stays_on_its_mongos_with_recovery_token(
    client: MongoClient, mongoses: list[FakeMongos]
) -> None:
    async with client.start_session() as session:
        for _ in range(10):
            async with session.start_transaction():
                first = await one_find(client, session)
                for _ in range(5):
                    assert await one_find(client, session) == first
                await client.test.test.insert_one({}, session=session)
            pinned = next(fake for fake in mongoses if fake.peer.address == first)
            commit = pinned.commands[-1]
            assert "commitTransaction" in commit
            assert commit["recoveryToken"] == RECOVERY_TOKEN
    assert sum(fake.count("commitTransaction") for fake in mongoses) == 10


async def test_transient_error_unpins(client: MongoClient, mongoses: list[FakeMongos]) -> None:
    async with client.start_session() as session:
        session.start_transaction()
        first = await one_find(client, session)
        pinned = next(fake for fake in mongoses if fake.peer.address == first)
        assert pinned_address(session) == first
        pinned.fail_next_insert = True
        with pytest.raises(OperationFailure) as caught:
            await client.test.test.insert_one({}, session=session)
        assert caught.value.has_error_label("TransientTransactionError")
        assert pinned_address(session) is None
        await session.abort_transaction()


@pytest.mark.parametrize("command", ["commitTransaction", "abortTransaction"])
async def test_retried_commit_or_abort_unpins_first(
    client: MongoClient, mongoses: list[FakeMongos], command: str
) -> None:
    """ShutdownInProgress with RetryableWriteError: the pinned mongos is marked Unknown and the session is
    unpinned, so the retry selects the other one."""
    async with client.start_session() as session:
        session.start_transaction()
        first = await one_find(client, session)
        pinned = next(fake for fake in mongoses if fake.peer.address == first)
        other = next(fake for fake in mongoses if fake is not pinned)
        pinned.fail_next = (command, {"ok": 0, "code": 91, "errmsg": "shutting down", "errorLabels": ["RetryableWriteError"]})
        if command == "commitTransaction":
            await session.commit_transaction()
        else:
            await session.abort_transaction()
        assert pinned.count(command) == 1
        assert other.count(command) == 1
        assert pinned_address(session) is None


def pinned_fake(mongoses: list[FakeMongos], address: Address) -> FakeMongos:
    return next(fake for fake in mongoses if fake.peer.address == address)


async def test_latest_recovery_token_goes_on_commit_and_abort_and_is_cleared_by_a_new_transaction(
    client: MongoClient, mongoses: list[FakeMongos]
) -> None:
    """Transactions spec, recoveryToken field: the driver tracks the most recently received recoveryToken and
    appends it, unmodified, to commitTransaction and abortTransaction; it is cleared when the session moves to
    "starting transaction", so a later transaction whose replies carry none sends none."""
    async with client.start_session() as session:
        session.start_transaction()
        pinned = pinned_fake(mongoses, await one_find(client, session))
        pinned.recovery_token = {"recoveryShardId": "shard-a", "n": 1}
        await client.test.test.insert_one({}, session=session)
        pinned.recovery_token = {"recoveryShardId": "shard-b", "n": 2}
        await client.test.test.insert_one({}, session=session)
        await session.commit_transaction()
        assert pinned.commands[-1]["recoveryToken"] == {"recoveryShardId": "shard-b", "n": 2}

        session.start_transaction()
        pinned = pinned_fake(mongoses, await one_find(client, session))
        pinned.recovery_token = {"recoveryShardId": "shard-c"}
        await client.test.test.insert_one({}, session=session)
        await session.abort_transaction()
        assert "abortTransaction" in pinned.commands[-1]
        assert pinned.commands[-1]["recoveryToken"] == {"recoveryShardId": "shard-c"}

        session.start_transaction()
        pinned = pinned_fake(mongoses, await one_find(client, session))
        pinned.recovery_token = None
        await client.test.test.insert_one({}, session=session)
        await session.commit_transaction()
        assert "commitTransaction" in pinned.commands[-1]
        assert "recoveryToken" not in pinned.commands[-1]


async def test_commit_keeps_the_session_pinned_and_a_recommit_goes_to_the_same_mongos(
    client: MongoClient, mongoses: list[FakeMongos]
) -> None:
    """Transactions spec, When to unpin: "committing a transaction on a pinned ClientSession MUST NOT unpin the
    session as commitTransaction may be called multiple times"; the second commit (with w: majority) goes to the
    pinned mongos."""
    async with client.start_session() as session:
        session.start_transaction()
        first = await one_find(client, session)
        await client.test.test.insert_one({}, session=session)
        await session.commit_transaction()
        assert pinned_address(session) == first
        await session.commit_transaction()
        pinned = pinned_fake(mongoses, first)
        assert pinned.count("commitTransaction") == 2
        assert pinned.commands[-1]["writeConcern"] == {"w": "majority", "wtimeout": 10000}
    assert pinned_address(session) is None  # ending the session unpins it


async def test_abort_unpins_even_when_it_fails(
    client: MongoClient, mongoses: list[FakeMongos]
) -> None:
    """Transactions spec, When to unpin (1): the session is unpinned when the transaction is aborted, even when
    abortTransaction fails (its error is not raised to the application)."""
    async with client.start_session() as session:
        session.start_transaction()
        pinned = pinned_fake(mongoses, await one_find(client, session))
        pinned.fail_next = ("abortTransaction", {"ok": 0, "code": 8, "errmsg": "unknown error"})
        await session.abort_transaction()  # the server's error is swallowed
        assert pinned.count("abortTransaction") == 1
        assert pinned_address(session) is None


async def test_unknown_commit_result_unpins(client: MongoClient, mongoses: list[FakeMongos]) -> None:
    """Transactions spec, When to unpin (3): a commitTransaction that fails with an
    UnknownTransactionCommitResult error (here a write concern timeout, which is not retried) unpins the
    session, so the application's next commit selects a mongos afresh."""
    async with client.start_session() as session:
        session.start_transaction()
        pinned = pinned_fake(mongoses, await one_find(client, session))
        pinned.fail_next = (
            "commitTransaction",
            {"ok": 1, "writeConcernError": {"code": 64, "errmsg": "waiting for replication timed out"}},
        )
        with pytest.raises(OperationFailure) as caught:
            await session.commit_transaction()
        assert caught.value.has_error_label("UnknownTransactionCommitResult")
        assert pinned_address(session) is None
