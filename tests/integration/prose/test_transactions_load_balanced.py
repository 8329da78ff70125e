"""Transactions behind a load balancer, shown with a loopback peer answering as one (the test server has no
load-balanced mode): every command of a transaction goes over the connection of its first command, which
other operations cannot use meanwhile, and which goes back to the pool when the session unpins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.sessions.client_session import ClientSession
from tests.support.loopback_peer import LoopbackPeer, Request, default_reply


class FakeLoadBalancer:
    """Answers hello with a serviceId, finds with one document, the rest with ok; records which connection
    (by index) carried each command. ``fail_next`` is a command name and the error reply its next run gets."""

    def __init__(self) -> None:
        self.peer = LoopbackPeer(self.handle, max_wire_version=25)
        self.seen: list[tuple[str, int]] = []
        self.fail_next: tuple[str, dict[str, Any]] | None = None

    async def handle(self, request: Request) -> Any:
        name = request.command_name
        if name.lower() in ("hello", "ismaster"):
            return {**default_reply(request, self.peer), "serviceId": "service-1", "msg": "isdbgrid"}
        self.seen.append((name, request.connection.index))
        if self.fail_next is not None and self.fail_next[0] == name:
            reply = self.fail_next[1]
            self.fail_next = None
            return reply
        if name == "find":
            namespace = f"{request.db}.{request.document['find']}"
            return {"ok": 1, "cursor": {"id": 0, "ns": namespace, "firstBatch": [{"_id": 1}]}}
        return {"ok": 1}

    def connections(self, name: str) -> list[int]:
        return [index for seen, index in self.seen if seen == name]


def pinned(session: ClientSession) -> bool:
    return session._pinned_connection is not None


@pytest.fixture
async def balancer() -> AsyncIterator[FakeLoadBalancer]:
    fake = FakeLoadBalancer()
    async with fake.peer:
        yield fake


@pytest.fixture
async def client(balancer: FakeLoadBalancer) -> AsyncIterator[MongoClient]:
    host, port = balancer.peer.address
    async with MongoClient(f"mongodb://{host}:{port}/?loadBalanced=true") as client:
        yield client


async def test_transaction_keeps_its_connection(client: MongoClient, balancer: FakeLoadBalancer) -> None:
    coll = client.test.items
    async with client.start_session() as session:
        async with session.start_transaction():
            await coll.find_one({}, session=session)
            # Outside the transaction: the transaction's connection is not in the pool.
            await coll.find_one({})
            await coll.insert_one({"_id": 2}, session=session)
            await coll.find_one({}, session=session)
        txn_finds = balancer.connections("find")
        first = txn_finds[0]
        assert txn_finds[1] != first  # the operation outside the transaction
        assert txn_finds[2] == first
        assert balancer.connections("insert") == [first]
        assert balancer.connections("commitTransaction") == [first]
        # after the commit the session still holds it (a commit may be sent again); a new transaction releases it
        assert pinned(session)
        async with session.start_transaction():
            await coll.find_one({}, session=session)
    assert not pinned(session)


async def test_abort_and_transient_error_release_the_connection(
    client: MongoClient, balancer: FakeLoadBalancer
) -> None:
    coll = client.test.items
    async with client.start_session() as session:
        session.start_transaction()
        await coll.find_one({}, session=session)
        assert pinned(session)
        await session.abort_transaction()
        assert not pinned(session)

        session.start_transaction()
        await coll.find_one({}, session=session)
        balancer.fail_next = (
            "insert",
            {"ok": 0, "code": 251, "errmsg": "no such transaction", "errorLabels": ["TransientTransactionError"]},
        )
        with pytest.raises(OperationFailure):
            await coll.insert_one({"_id": 1}, session=session)
        assert not pinned(session)
        await session.abort_transaction()
    # every connection went back: a pool of one serves the next operation at once
    async with MongoClient(
        f"mongodb://{balancer.peer.address[0]}:{balancer.peer.address[1]}/?loadBalanced=true&maxPoolSize=1&waitQueueTimeoutMS=2000"
    ) as small:
        async with small.start_session() as session, session.start_transaction():
            await small.test.items.find_one({}, session=session)
        await small.test.items.find_one({})
