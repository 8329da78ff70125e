"""Waiting on trio, against the test server: the pool's wait queue (contention, ``waitQueueTimeoutMS``),
server selection waiting on the topology's condition, the client-side operation timeout, and trio's
cancellation of operations (``move_on_after`` at random moments): no half-used connection is handed out
again, check-outs equal check-ins, and every acknowledged write is there.

Each test drives its own trio run through anyio (the suite's asyncio plugin runs ``async def`` tests on
asyncio).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import trio
from spec_runner.server import free_port

from mongio import MongoClient, backend
from mongio.connection.pool import Pool
from mongio.errors import OperationTimeoutError, ServerSelectionTimeoutError, WaitQueueTimeoutError
from mongio.events import (
    ConnectionCheckedInEvent,
    ConnectionCheckedOutEvent,
    ConnectionClosedEvent,
    ConnectionCreatedEvent,
    ConnectionPoolListener,
)

pytestmark = pytest.mark.server


def run_on_trio(body: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(body, backend="trio")


class PoolCounts(ConnectionPoolListener):
    """Check-outs, check-ins, and the connections open now and at most."""

    def __init__(self) -> None:
        self.checked_out = 0
        self.checked_in = 0
        self.open = 0
        self.most = 0

    def connection_created(self, event: ConnectionCreatedEvent) -> None:
        self.open += 1
        self.most = max(self.most, self.open)

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        self.open -= 1

    def connection_checked_out(self, event: ConnectionCheckedOutEvent) -> None:
        self.checked_out += 1

    def connection_checked_in(self, event: ConnectionCheckedInEvent) -> None:
        self.checked_in += 1


async def _hold_back(client: MongoClient[Any], appname: str, commands: list[str], block_ms: int) -> None:
    await client.admin.command(
        {
            "configureFailPoint": "failCommand",
            "mode": "alwaysOn",
            "data": {
                "failCommands": commands,
                "blockConnection": True,
                "blockTimeMS": block_ms,
                "appName": appname,
            },
        }
    )


async def _release(client: MongoClient[Any]) -> None:
    await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


def test_contended_pool_serves_every_waiter_on_trio(server_uri: str) -> None:
    counts = PoolCounts()
    appname = f"trioContention{uuid.uuid4().hex[:6]}"

    async def body() -> list[Any]:
        async with (
            MongoClient(server_uri) as admin,
            MongoClient(server_uri, maxPoolSize=2, appname=appname, event_listeners=[counts]) as client,
        ):
            coll = client.trio_pool.items
            await coll.insert_one({"_id": 1})
            await _hold_back(admin, appname, ["find"], 30)
            found: list[Any] = []
            try:
                async with trio.open_nursery() as nursery:
                    for _ in range(20):
                        nursery.start_soon(lambda: _append(found, coll.find_one({"_id": 1})))
            finally:
                await _release(admin)
            await coll.drop()
            return found

    found = run_on_trio(body)
    assert found == [{"_id": 1}] * 20
    assert counts.most <= 2
    assert counts.checked_out == counts.checked_in


async def _append(into: list[Any], operation: Awaitable[Any]) -> None:
    into.append(await operation)


def test_wait_queue_timeout_on_trio(server_uri: str) -> None:
    appname = f"trioWaitQueue{uuid.uuid4().hex[:6]}"

    async def body() -> Any:
        async with (
            MongoClient(server_uri) as admin,
            MongoClient(server_uri, maxPoolSize=1, waitQueueTimeoutMS=100, appname=appname) as client,
        ):
            coll = client.trio_pool.items
            await coll.insert_one({"_id": 1})
            await _hold_back(admin, appname, ["find"], 700)
            outcome: list[Any] = []
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(lambda: _append(outcome, coll.find_one({"_id": 1})))
                    await trio.sleep(0.2)  # the first find holds the only connection now

                    async def second() -> None:
                        try:
                            await coll.find_one({"_id": 1})
                        except WaitQueueTimeoutError as exc:
                            outcome.append(exc)

                    nursery.start_soon(second)
            finally:
                await _release(admin)
            await coll.drop()
            return outcome

    outcome = run_on_trio(body)
    assert isinstance(outcome[0], WaitQueueTimeoutError)
    assert outcome[1] == {"_id": 1}


def test_server_selection_waits_then_times_out_on_trio() -> None:
    unused = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=300&connectTimeoutMS=200"

    async def body() -> tuple[Any, float]:
        async with MongoClient(unused) as client:
            start = trio.current_time()
            try:
                await client.admin.command("ping")
            except ServerSelectionTimeoutError as exc:
                return exc, trio.current_time() - start
        raise AssertionError("the selection succeeded")

    error, waited = run_on_trio(body)
    assert "No server available" in str(error)
    assert waited >= 0.3


def test_selections_cancelled_by_trio_leave_no_waiter() -> None:
    unused = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=5000&connectTimeoutMS=200"

    async def body() -> tuple[int, int]:
        client: MongoClient[Any] = MongoClient(unused)
        cancelled = 0
        async with trio.open_nursery() as nursery:
            for _ in range(200):

                async def one() -> None:
                    nonlocal cancelled
                    with trio.move_on_after(0.05) as scope:
                        await client.admin.command("ping")
                    cancelled += scope.cancelled_caught

                nursery.start_soon(one)
        topology = client._topology
        assert topology is not None
        waiting = topology.waiting_selections
        await client.close()
        return cancelled, waiting

    cancelled, waiting = run_on_trio(body)
    assert cancelled == 200
    assert waiting == 0


def test_client_side_operation_timeout_on_trio_as_on_asyncio(server_uri: str) -> None:
    appname = f"trioCsot{uuid.uuid4().hex[:6]}"

    async def body() -> Any:
        async with (
            MongoClient(server_uri) as admin,
            MongoClient(server_uri, timeoutMS=400, appname=appname) as client,
        ):
            await admin.trio_pool.items.insert_one({"_id": 1})
            coll = client.trio_pool.items
            await _hold_back(admin, appname, ["find"], 1500)
            try:
                await coll.find_one({"_id": 1})
            except OperationTimeoutError as exc:
                return exc
            finally:
                await _release(admin)
                await admin.trio_pool.items.drop()
        return None

    on_trio = run_on_trio(body)
    on_asyncio = anyio.run(body, backend="asyncio")
    assert isinstance(on_trio, OperationTimeoutError)
    assert type(on_trio) is type(on_asyncio)
    assert type(on_trio.__cause__) is type(on_asyncio.__cause__)


def test_deadlines_on_trio_are_those_of_the_operation(server_uri: str) -> None:
    """A find the server holds back for 300 ms completes within timeoutMS=5000, with socketTimeoutMS=5000,
    and within a backend.timeout of 5 s: the deadlines are on one clock on trio too (trio's own clock is
    offset from time.monotonic, which the client-side timeout uses)."""
    appname = f"trioDeadlines{uuid.uuid4().hex[:6]}"

    async def body() -> list[Any]:
        found: list[Any] = []
        async with MongoClient(server_uri) as admin:
            await admin.trio_pool.items.insert_one({"_id": 1})
            await _hold_back(admin, appname, ["find"], 300)
            try:
                for options in ("&timeoutMS=5000", "&socketTimeoutMS=5000", ""):
                    uri = f"{server_uri}?appname={appname}{options}"
                    async with MongoClient(uri) as client, backend.timeout(5):
                        found.append(await client.trio_pool.items.find_one({"_id": 1}))
            finally:
                await _release(admin)
                await admin.trio_pool.items.drop()
        return found

    assert run_on_trio(body) == [{"_id": 1}] * 3


def test_operations_cut_by_move_on_after_leave_the_pool_whole(server_uri: str) -> None:
    """A small cancellation storm: 300 operations (inserts and finds) cut at random moments."""
    counts = PoolCounts()
    rng = random.Random(20261206)
    name = f"trio_storm_{uuid.uuid4().hex[:8]}"

    async def body() -> tuple[set[int], set[int], Any, Any]:
        acknowledged: set[int] = set()
        async with MongoClient(server_uri, maxPoolSize=5, event_listeners=[counts]) as client:
            coll = client[name].items

            async def insert(value: int, limit: float) -> None:
                with trio.move_on_after(limit):
                    await coll.insert_one({"_id": value})
                    acknowledged.add(value)

            async def find(limit: float) -> None:
                with trio.move_on_after(limit):
                    await coll.find_one({"_id": {"$gte": 0}})

            async with trio.open_nursery() as nursery:
                for value in range(300):
                    limit = rng.uniform(0, 0.01)
                    if value % 2:
                        nursery.start_soon(find, limit)
                    else:
                        nursery.start_soon(insert, value, limit)
            topology = client._topology
            assert topology is not None
            (server,) = topology.servers.values()
            pool = server.pool
            assert isinstance(pool, Pool)
            # Nothing is left waiting or checked out once every task ended.
            left = (pool.wait_queue_length, pool.in_use_connection_count, topology.waiting_selections)
            stored = {doc["_id"] async for doc in coll.find({})}
            still_working = await coll.count_documents({})
            await client.drop_database(name)
        return acknowledged, stored, still_working, left

    acknowledged, stored, still_working, left = run_on_trio(body)
    assert left == (0, 0, 0)
    assert acknowledged <= stored  # no acknowledged write is missing
    assert still_working == len(stored)
    assert counts.checked_out == counts.checked_in
