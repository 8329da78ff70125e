"""Exhaust cursors against the loopback peer, which streams replies exactly as scripted: one getMore answered
by a stream of batches, the connection kept by the cursor while it lasts and given back after, and what
happens when the stream is cut short (the cursor closed, the task cancelled, an error reply, a network
error)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mongio import MongoClient
from mongio.bson import Int64
from mongio.cursor import CursorType
from mongio.errors import AutoReconnect, InvalidOperation, OperationFailure, OperationTimeoutError
from mongio.events.cmap import ConnectionCheckedInEvent, ConnectionClosedEvent
from mongio.events.command import CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent
from mongio.events.listeners import ConnectionPoolListener
from mongio.topology.server_type import ServerType
from tests.support.loopback_peer import LoopbackPeer, Reply, Request
from tests.support.recorders import CommandRecorder

CURSOR_ID = 4242
NAMESPACE = "db.coll"


def batch(first: int, count: int, *, cursor_id: int = CURSOR_ID, kind: str = "nextBatch") -> dict[str, Any]:
    documents = [{"_id": i} for i in range(first, first + count)]
    return {"ok": 1, "cursor": {"id": Int64(cursor_id), "ns": NAMESPACE, kind: documents}}


class PoolEvents(ConnectionPoolListener):
    def __init__(self) -> None:
        self.closed: list[ConnectionClosedEvent] = []
        self.checked_in: list[int] = []

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        self.closed.append(event)

    def connection_checked_in(self, event: ConnectionCheckedInEvent) -> None:
        self.checked_in.append(event.connection_id)


def find_then(streams: list[list[Any]]) -> Any:
    """A handler: find answers with documents 0-1; each getMore gets the next of ``streams`` (a list of
    replies: every one but the last goes with moreToCome)."""
    answers = iter(streams)

    def handler(request: Request) -> Any:
        if request.command_name == "find":
            return batch(0, 2, kind="firstBatch")
        if request.command_name == "getMore":
            return next(answers)
        return None

    return handler


def requests(peer: LoopbackPeer, name: str) -> list[Request]:
    return [r for r in peer.requests if r.command_name == name]


async def test_one_getmore_is_answered_by_a_stream_of_batches() -> None:
    stream = [batch(2, 2), batch(4, 2), batch(6, 1, cursor_id=0)]
    recorder = CommandRecorder()
    pool_events = PoolEvents()
    async with LoopbackPeer(find_then([stream])) as peer:
        async with MongoClient(
            peer.uri, directConnection=True, event_listeners=[recorder, pool_events]
        ) as client:
            cursor = client.db.coll.find({}, batch_size=2, cursor_type=CursorType.EXHAUST)
            documents = await cursor.to_list()
            await client.db.command("ping")
        assert [d["_id"] for d in documents] == list(range(7))
        (get_more,) = requests(peer, "getMore")
        assert get_more.exhaust_allowed
        assert not requests(peer, "find")[0].exhaust_allowed  # only getMore may carry the flag
        assert not requests(peer, "killCursors")  # the stream ended with the cursor
        # The connection went back to the pool once the stream ended: the next command used it.
        assert requests(peer, "ping")[0].connection is get_more.connection
    # Each streamed batch publishes the events of the getMore that opened the stream.
    started = recorder.of(CommandStartedEvent, "getMore")
    succeeded = recorder.of(CommandSucceededEvent, "getMore")
    assert len(started) == len(succeeded) == 3
    assert {e.request_id for e in started} == {started[0].request_id}
    assert [len(e.reply["cursor"]["nextBatch"]) for e in succeeded] == [2, 2, 1]
    assert not pool_events.closed or all(e.reason == "poolClosed" for e in pool_events.closed)


async def test_a_stream_that_ends_before_the_cursor_is_followed_by_another_exhaust_getmore() -> None:
    streams = [[batch(2, 2), batch(4, 2)], [batch(6, 1), batch(7, 1, cursor_id=0)]]
    async with LoopbackPeer(find_then(streams)) as peer:
        async with MongoClient(peer.uri, directConnection=True) as client:
            documents = await client.db.coll.find({}, cursor_type=CursorType.EXHAUST).to_list()
        assert [d["_id"] for d in documents] == list(range(8))
        get_mores = requests(peer, "getMore")
        assert len(get_mores) == 2
        assert all(r.exhaust_allowed for r in get_mores)


async def test_an_ordinary_cursor_sends_no_exhaust_flag() -> None:
    streams = [[batch(2, 2, cursor_id=0)]]
    async with LoopbackPeer(find_then(streams)) as peer:
        async with MongoClient(peer.uri, directConnection=True) as client:
            assert len(await client.db.coll.find({}).to_list()) == 4
        (get_more,) = requests(peer, "getMore")
        assert not get_more.exhaust_allowed


async def test_closing_mid_stream_closes_the_connection_and_kills_the_cursor_over_another() -> None:
    # The last reply is held back, so the stream is still going when the cursor is closed.
    stream = [batch(2, 2), batch(4, 2), Reply(batch(6, 1, cursor_id=0), delay=30)]
    pool_events = PoolEvents()
    recorder = CommandRecorder()
    async with LoopbackPeer(find_then([stream])) as peer:
        async with MongoClient(
            peer.uri, directConnection=True, event_listeners=[pool_events, recorder]
        ) as client:
            cursor = client.db.coll.find({}, batch_size=2, cursor_type=CursorType.EXHAUST)
            taken = [await cursor.next() for _ in range(4)]  # the first batch and the first streamed one
            await cursor.close()
            assert not cursor.alive
            await client.db.command("ping")
        assert [d["_id"] for d in taken] == [0, 1, 2, 3]
        (get_more,) = requests(peer, "getMore")
        (kill,) = requests(peer, "killCursors")
        assert kill.document["cursors"] == [CURSOR_ID]
        assert kill.connection is not get_more.connection
        assert requests(peer, "ping")[0].connection is not get_more.connection
    # One connection, the stream's, was closed before the client was.
    assert len([e for e in pool_events.closed if e.reason != "poolClosed"]) == 1


async def test_cancelled_mid_stream_the_connection_is_closed_not_pooled() -> None:
    stream = [batch(2, 2), Reply(batch(4, 1, cursor_id=0), delay=30)]
    pool_events = PoolEvents()
    recorder = CommandRecorder()
    async with LoopbackPeer(find_then([stream])) as peer:
        async with MongoClient(
            peer.uri, directConnection=True, event_listeners=[pool_events, recorder]
        ) as client:
            cursor = client.db.coll.find({}, batch_size=2, cursor_type=CursorType.EXHAUST)
            four = anyio.Event()
            taken: list[Any] = []

            async def read_all() -> None:
                async for document in cursor:
                    taken.append(document)
                    if len(taken) == 4:
                        four.set()  # the next document is in the reply held back

            async with anyio.create_task_group() as reader:
                reader.start_soon(read_all)
                await four.wait()
                reader.cancel_scope.cancel()
            await client.db.command("ping")
            # The client kills the abandoned server cursor on its own time, over another connection.
            while not requests(peer, "killCursors"):
                await peer.wait_for_requests(len(peer.requests) + 1)
        (get_more,) = requests(peer, "getMore")
        assert requests(peer, "ping")[0].connection is not get_more.connection
        kills = requests(peer, "killCursors")
        assert [k.document["cursors"] for k in kills] == [[CURSOR_ID]]
        assert kills[0].connection is not get_more.connection
    assert len([e for e in pool_events.closed if e.reason != "poolClosed"]) == 1
    # The cancelled wait still ends the streamed batch's events, with a failure.
    assert [type(e) for e in recorder.events if e.command_name == "getMore"] == [
        CommandStartedEvent,
        CommandSucceededEvent,
        CommandStartedEvent,
        CommandFailedEvent,
    ]


async def test_an_error_reply_in_the_stream_fails_the_cursor_like_a_getmore_error() -> None:
    error = {"ok": 0, "code": 96, "codeName": "OperationFailed", "errmsg": "the plan failed"}
    stream = [batch(2, 2), error]
    recorder = CommandRecorder()
    async with LoopbackPeer(find_then([stream])) as peer:
        async with MongoClient(peer.uri, directConnection=True, event_listeners=[recorder]) as client:
            cursor = client.db.coll.find({}, batch_size=2, cursor_type=CursorType.EXHAUST)
            taken: list[Any] = []
            with pytest.raises(OperationFailure, match="the plan failed") as raised:
                async for document in cursor:
                    taken.append(document)
            assert raised.value.code == 96
            assert not cursor.alive
            await client.db.command("ping")
        assert len(taken) == 4
        (get_more,) = requests(peer, "getMore")
        # The error reply ended the stream: the connection was whole and served the next commands.
        assert requests(peer, "ping")[0].connection is get_more.connection
        assert requests(peer, "killCursors")[0].document["cursors"] == [CURSOR_ID]
    assert [type(e).__name__ for e in recorder.events if e.command_name == "getMore"] == [
        "CommandStartedEvent",
        "CommandSucceededEvent",
        "CommandStartedEvent",
        "CommandFailedEvent",
    ]


async def test_a_network_error_mid_stream_marks_the_server_unknown_and_closes_the_cursor() -> None:
    stream = [batch(2, 2), Reply(batch(4, 1, cursor_id=0), cut_after=30)]
    async with (
        LoopbackPeer(find_then([stream])) as peer,
        MongoClient(peer.uri, directConnection=True, heartbeatFrequencyMS=60_000) as client,
    ):
        cursor = client.db.coll.find({}, batch_size=2, cursor_type=CursorType.EXHAUST)
        taken: list[Any] = []
        with pytest.raises(AutoReconnect):
            async for document in cursor:
                taken.append(document)
        assert len(taken) == 4
        assert not cursor.alive
        topology = client._topology
        assert topology is not None
        description = topology.description.server_descriptions()
        assert [d.server_type for d in description.values()] == [ServerType.Unknown]


async def test_the_stream_is_read_one_reply_at_a_time() -> None:
    # A long stream sent at once: the client's connection holds one unread reply and leaves the rest to the
    # socket (reading pauses), so every document still arrives, in order.
    stream = [batch(2 + 100 * i, 100) for i in range(40)] + [batch(4002, 1, cursor_id=0)]
    async with LoopbackPeer(find_then([stream])) as peer:
        async with MongoClient(peer.uri, directConnection=True) as client:
            cursor = client.db.coll.find({}, batch_size=100, cursor_type=CursorType.EXHAUST)
            first = await cursor.next()
            await anyio.sleep(0.05)  # let the server's stream run ahead of the reader
            rest = await cursor.to_list()
        assert [d["_id"] for d in [first, *rest]] == list(range(4003))
        assert len(requests(peer, "getMore")) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [({"limit": 5}, "no limit"), ({"limit": -1}, "no limit")],
)
async def test_exhaust_refuses_a_limit(options: dict[str, Any], message: str) -> None:
    async with MongoClient("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=1") as client:
        with pytest.raises(InvalidOperation, match=message):
            client.db.coll.find({}, cursor_type=CursorType.EXHAUST, **options)
        with pytest.raises(InvalidOperation, match=message):
            client.db.coll.find({}, cursor_type=CursorType.EXHAUST).limit(3)
        with pytest.raises(InvalidOperation, match="cannot be tailable"):
            client.db.coll.find({}, cursor_type=CursorType.EXHAUST).add_option(2)


async def test_a_timeout_mid_stream_closes_the_connection_and_the_cursor() -> None:
    stream = [batch(2, 2), Reply(batch(4, 1, cursor_id=0), delay=30)]
    async with (
        LoopbackPeer(find_then([stream])) as peer,
        MongoClient(peer.uri, directConnection=True, timeoutMS=300) as client,
    ):
        cursor = client.db.coll.find(
            {}, batch_size=2, cursor_type=CursorType.EXHAUST, timeout_mode="iteration"
        )
        taken = [await cursor.next() for _ in range(4)]
        with pytest.raises(OperationTimeoutError):
            await cursor.next()  # the held-back reply never comes in time
        assert not cursor.alive  # the batches on their way were lost with the connection
        assert len(taken) == 4
        # The client kills the server cursor on its own time, over another connection.
        while not requests(peer, "killCursors"):
            await peer.wait_for_requests(len(peer.requests) + 1)
        (get_more,) = requests(peer, "getMore")
        (kill,) = requests(peer, "killCursors")
        assert kill.connection is not get_more.connection


def mongos_hello(max_wire_version: int) -> Any:
    def hello(request: Request) -> Any:
        if request.command_name.lower() in ("hello", "ismaster"):
            return {
                "ok": 1,
                "isWritablePrimary": True,
                "msg": "isdbgrid",
                "maxWireVersion": max_wire_version,
                "minWireVersion": 0,
                "maxBsonObjectSize": 16 * 1024 * 1024,
                "maxMessageSizeBytes": 48_000_000,
                "maxWriteBatchSize": 100_000,
            }
        return None

    return hello


@pytest.mark.parametrize(("max_wire_version", "streams"), [(21, False), (22, True)])
async def test_a_mongos_streams_from_7_1(max_wire_version: int, streams: bool) -> None:
    answer = find_then([[batch(2, 2, cursor_id=0)]])
    hello = mongos_hello(max_wire_version)

    def handler(request: Request) -> Any:
        return hello(request) or answer(request)

    async with LoopbackPeer(handler) as peer:
        async with MongoClient(peer.uri, directConnection=True) as client:
            assert len(await client.db.coll.find({}, cursor_type=CursorType.EXHAUST).to_list()) == 4
        (get_more,) = requests(peer, "getMore")
        assert get_more.exhaust_allowed is streams
