"""Cursors through the harness's load balancer (two mongoses, each connection dealt to the next one, a
serviceId each): every getMore and killCursors goes over the connection the cursor's first command used
(load balancer specification, "Behaviour With Cursors"), and cancelled or abandoned cursors leave no
connection checked out or holding an unread reply."""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from spec_runner.cluster import Deployment, load_balanced

from mongio.client import MongoClient
from mongio.connection.pool import Pool
from mongio.cursor import CursorType
from mongio.events import ConnectionCheckedInEvent, ConnectionCheckedOutEvent, ConnectionPoolListener
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.operations import UpdateOne
from tests.support.backends import gather_outcomes

pytestmark = pytest.mark.server

DOCUMENTS = 30


class Started(CommandListener):
    def __init__(self) -> None:
        self.events: list[CommandStartedEvent] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.events.append(event)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


@pytest.fixture(scope="module")
def balancer() -> Iterator[Deployment]:
    with load_balanced(2) as deployment:
        yield deployment


def checked_out(client: MongoClient) -> int:
    topology = client._topology
    assert topology is not None
    pools = [server.pool for server in topology.servers.values() if server.pool]
    assert all(isinstance(pool, Pool) for pool in pools)
    return sum(pool.in_use_connection_count for pool in pools if isinstance(pool, Pool))


async def fill(client: MongoClient) -> Any:
    collection = client.get_database("lb").get_collection("cursors")
    await collection.drop()
    await collection.insert_many([{"_id": index} for index in range(DOCUMENTS)])
    return collection


async def test_each_cursor_keeps_its_service_from_find_to_the_last_getmore(balancer: Deployment) -> None:
    listener = Started()
    async with MongoClient(balancer.uri, event_listeners=[listener]) as client:
        collection = await fill(client)
        first, second = collection.find({}, batch_size=4), collection.find({}, batch_size=4)
        await first  # each opens its own connection: the load balancer deals them to different mongoses
        await second
        assert checked_out(client) == 2  # one held by each open cursor
        read = await gather_outcomes(first.to_list(), second.to_list())
        assert [len(documents) for documents in read if isinstance(documents, list)] == [DOCUMENTS] * 2, read
        assert checked_out(client) == 0  # exhausted: both connections went back
        by_cursor: dict[Any, set[Any]] = {}
        find_services = []
        for event in listener.events:
            if event.command_name == "find":
                find_services.append(event.service_id)
            elif event.command_name == "getMore":
                by_cursor.setdefault(event.command["getMore"], set()).add(event.service_id)
        assert len(set(find_services)) == 2
        assert len(by_cursor) == 2 and all(len(services) == 1 for services in by_cursor.values())
        assert {service for services in by_cursor.values() for service in services} == set(find_services)


async def test_closing_an_open_cursor_kills_it_over_its_own_connection(balancer: Deployment) -> None:
    listener = Started()
    async with MongoClient(balancer.uri, event_listeners=[listener]) as client:
        collection = await fill(client)
        cursor = await collection.find({}, batch_size=2)
        assert await cursor.next() == {"_id": 0}
        assert checked_out(client) == 1
        await cursor.close()
        assert checked_out(client) == 0
        find, kill = (
            next(event for event in listener.events if event.command_name == name) for name in ("find", "killCursors")
        )
        assert kill.service_id == find.service_id


async def test_an_exhaust_cursor_streams_over_its_pinned_connection(balancer: Deployment) -> None:
    listener = Started()
    async with MongoClient(balancer.uri, event_listeners=[listener]) as client:
        collection = await fill(client)
        documents = await collection.find({}, batch_size=4, cursor_type=CursorType.EXHAUST).to_list()
        assert len(documents) == DOCUMENTS
        assert checked_out(client) == 0  # drained: the pinned connection went back
        find = [event for event in listener.events if event.command_name == "find"][-1]
        get_mores = [event for event in listener.events if event.command_name == "getMore"]
        assert len({event.request_id for event in get_mores}) == 1  # one getMore sent, its batches streamed
        assert len(get_mores) >= (DOCUMENTS - 4) // 4
        assert {event.service_id for event in get_mores} == {find.service_id}


async def test_an_exhaust_cursor_closed_mid_stream_closes_its_pinned_connection(balancer: Deployment) -> None:
    listener = Started()
    async with MongoClient(balancer.uri, event_listeners=[listener]) as client:
        collection = await fill(client)
        cursor = collection.find({}, batch_size=4, cursor_type=CursorType.EXHAUST)
        for _ in range(10):
            await cursor.next()
        await cursor.close()
        assert checked_out(client) == 0
        # Its service reaps the cursor of the closed connection; another connection may reach another one.
        assert "killCursors" not in [event.command_name for event in listener.events]
        assert await collection.count_documents({}) == DOCUMENTS


async def test_cancelled_and_abandoned_cursors_leave_no_connection_checked_out(balancer: Deployment) -> None:
    client = MongoClient(balancer.uri, maxPoolSize=20)
    collection = await fill(client)
    rng = random.Random(7)

    counts: list[int] = []
    cancelled: list[int] = []

    async def read(index: int, deadline: float) -> None:
        count = 0
        with anyio.CancelScope(deadline=deadline) as scope:
            async for _document in collection.find({}, batch_size=2):
                count += 1
                if index % 5 == 0 and count == 5:
                    break  # left open, for the garbage collector
        (cancelled if scope.cancelled_caught else counts).append(count)

    # Each read is cut at a random moment of its first 0.3 s (if it is still running then).
    async with anyio.create_task_group() as reads:
        for index in range(200):
            reads.start_soon(read, index, anyio.current_time() + rng.random() * 0.3)
    assert cancelled
    assert all(count in (5, DOCUMENTS) for count in counts)
    gc.collect()
    # Every pooled connection answers its own command: none was left with a reply unread.
    found = await gather_outcomes(*(collection.find_one({"_id": index % DOCUMENTS}) for index in range(100)))
    assert found == [{"_id": index % DOCUMENTS} for index in range(100)]
    assert len(await collection.find({}, batch_size=3).to_list()) == DOCUMENTS
    topology = client._topology
    assert topology is not None
    pools = [server.pool for server in topology.servers.values() if isinstance(server.pool, Pool)]
    # close() waits for the killCursors of the abandoned cursors; then nothing may still be checked out.
    await client.close()
    assert sum(pool.in_use_connection_count for pool in pools) == 0


class Checkouts(ConnectionPoolListener):
    """The pool's check-outs and check-ins, in order, with the connection ids."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def connection_checked_out(self, event: ConnectionCheckedOutEvent) -> None:
        self.events.append(("out", event.connection_id))

    def connection_checked_in(self, event: ConnectionCheckedInEvent) -> None:
        self.events.append(("in", event.connection_id))


async def test_client_bulk_write_results_cursor_keeps_its_connection(balancer: Deployment) -> None:
    listener = Started()
    checkouts = Checkouts()
    async with MongoClient(balancer.uri, event_listeners=[listener, checkouts]) as client:
        max_bson_size = (await client.admin.command("hello"))["maxBsonObjectSize"]
        await client.get_database("lb").drop_collection("bulk")
        # Two results of half the document limit each: the second comes with a getMore.
        models = [
            UpdateOne({"_id": letter * (max_bson_size // 2)}, {"$set": {"x": 1}}, upsert=True, namespace="lb.bulk")
            for letter in "ab"
        ]
        listener.events.clear()
        checkouts.events.clear()
        result = await client.bulk_write(models, verbose_results=True)
        assert len(result.update_results) == 2
        assert [event.command_name for event in listener.events] == ["bulkWrite", "getMore"]
        bulk_write, get_more = listener.events
        assert get_more.service_id == bulk_write.service_id
        # The connection stays checked out from the bulkWrite to the end of its results cursor.
        [(_, connection_id)] = [event for event in checkouts.events if event[0] == "out"]
        assert checkouts.events == [("out", connection_id), ("in", connection_id)]
        assert checked_out(client) == 0
