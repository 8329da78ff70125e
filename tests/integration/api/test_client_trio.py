"""The same client API on trio, run by ``trio.run`` and by ``anyio.run(..., backend="trio")``, against the
test server.

Each test drives its own trio run (the suite's asyncio plugin runs ``async def`` tests on asyncio): the body
is an ``async def`` run with ``run_on_trio``.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import trio
import trio.testing

from mongio import MongoClient
from mongio.backend.trio_loop import TrioLoop
from mongio.connection.pool import Pool
from mongio.errors import EventLoopMismatchError, OperationFailure
from mongio.events import CommandStartedEvent, CommandSucceededEvent
from tests.support.recorders import CommandRecorder

pytestmark = pytest.mark.server


def run_on_trio(body: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``body`` in a trio run through anyio, as an application on anyio's trio backend does."""
    return anyio.run(body, backend="trio")


def _name() -> str:
    return f"trio_{uuid.uuid4().hex[:12]}"


def _pool_of(client: MongoClient[Any]) -> Pool[Any]:
    topology = client._topology
    assert topology is not None
    (server,) = topology.servers.values()
    assert isinstance(server.pool, Pool)
    return server.pool


def test_commands_and_crud_on_trio(server_uri: str) -> None:
    async def body() -> dict[str, Any]:
        async with MongoClient(server_uri) as client:
            coll = client[_name()].items
            ping = await client.admin.command("ping")
            inserted = await coll.insert_one({"x": 1})
            await coll.insert_many([{"x": i} for i in range(2, 302)])
            found = await coll.find_one({"x": 1})
            many = await coll.find({}, batch_size=40).sort("x").to_list()
            streamed = [doc["x"] async for doc in coll.find({"x": {"$gt": 290}}).sort("x")]
            count = await coll.count_documents({})
            updated = await coll.update_many({"x": {"$lt": 10}}, {"$set": {"small": True}})
            loop = client._runtimes.current()
            assert loop is not None
            await client.drop_database(coll.database.name)
            return {
                "ping": ping["ok"],
                "inserted": inserted.inserted_id,
                "found": found,
                "many": [doc["x"] for doc in many],
                "streamed": streamed,
                "count": count,
                "updated": updated.modified_count,
                "loop": loop.loop,
            }

    result = run_on_trio(body)
    assert result["ping"] == 1.0
    assert result["found"] == {"_id": result["inserted"], "x": 1}
    assert result["many"] == list(range(1, 302))
    assert result["streamed"] == list(range(291, 302))
    assert result["count"] == 301
    assert result["updated"] == 9
    # The runtime was keyed by the trio run's loop façade, which closed with the run.
    assert isinstance(result["loop"], TrioLoop)
    assert result["loop"].is_closed()


def test_plain_trio_run_and_background_tasks_stop_with_close(server_uri: str) -> None:
    client: MongoClient[Any] = MongoClient(server_uri)

    async def body() -> list[bool]:
        await client.admin.command("ping")
        topology = client._topology
        assert topology is not None
        (server,) = topology.servers.values()
        assert server.monitor is not None and server.monitor.running
        tasks = topology.tasks()
        assert tasks
        await client.close()
        return [server.monitor.running, *(not task.done() for task in tasks)]

    still_running = trio.run(body)
    assert not any(still_running)


def test_a_run_that_ends_without_closing_closes_its_runtime(server_uri: str) -> None:
    client: MongoClient[Any] = MongoClient(server_uri)

    async def body() -> Any:
        await client.admin.command("ping")
        runtime = client._runtimes.current()
        assert runtime is not None and not runtime.closed
        return runtime, _pool_of(client)

    runtime, pool = trio.run(body)
    # The run's end closed the runtime: its pool closed, its connections with it, its monitor stopped.
    assert runtime.closed
    assert pool.state == "closed"
    assert pool.total_connection_count == 0
    assert len(client._runtimes) == 0


def test_one_client_on_asyncio_then_trio_then_asyncio(server_uri: str) -> None:
    client: MongoClient[Any] = MongoClient(server_uri)
    name = _name()

    async def write(value: int) -> None:
        await client[name].items.insert_one({"v": value})

    async def read() -> list[int]:
        return [doc["v"] async for doc in client[name].items.find({}).sort("v")]

    async def on_trio() -> list[int]:
        await write(2)
        return await read()

    async def finish() -> list[int]:
        await write(3)
        values = await read()
        await client.drop_database(name)
        await client.close()
        return values

    asyncio.run(write(1))
    assert trio.run(on_trio) == [1, 2]
    assert asyncio.run(finish()) == [1, 2, 3]


def test_streaming_monitor_and_round_trip_time_task_on_trio(server_uri: str) -> None:
    async def body() -> tuple[int, bool, int, float | None]:
        async with MongoClient(server_uri, heartbeatFrequencyMS=500) as client:
            await client.admin.command("ping")
            await trio.sleep(1.5)
            topology = client._topology
            assert topology is not None
            (server,) = topology.servers.values()
            monitor = server.monitor
            assert monitor is not None and monitor.connection is not None
            rtt_tasks = monitor.rtt_monitor.unfinished_tasks() if monitor.rtt_monitor is not None else []
            return (
                monitor.checks,
                monitor.connection.more_to_come,
                len(rtt_tasks),
                server.description.round_trip_time,
            )

    checks, streaming, rtt_tasks, round_trip = trio.run(body)
    assert checks >= 2  # the streamed replies count as checks
    assert streaming  # the server streams its hello replies (exhaust) to the monitor
    assert rtt_tasks == 1
    assert round_trip is not None and round_trip > 0


def test_a_cursor_of_one_run_refuses_another_run_naming_both(server_uri: str) -> None:
    client: MongoClient[Any] = MongoClient(server_uri)
    name = _name()

    async def start() -> Any:
        coll = client[name].items
        await coll.insert_many([{"i": i} for i in range(10)])
        cursor = coll.find({}, batch_size=2)
        await cursor.next()
        await cursor.next()  # the first batch is used up: the next document needs a getMore
        return cursor

    async def resume(cursor: Any) -> str:
        try:
            await cursor.next()
        except EventLoopMismatchError as exc:
            return str(exc)
        finally:
            await client.drop_database(name)
            await client.close()
        return "no error"

    cursor = trio.run(start)
    message = trio.run(resume, cursor)
    assert message.count("TrioLoop") == 2
    assert "this cursor belongs to the event loop" in message


def test_sessions_transactions_and_change_streams_on_trio(server_uri: str) -> None:
    async def body() -> dict[str, Any]:
        async with MongoClient(server_uri) as client:
            db = client[_name()]
            coll = db.items
            await coll.insert_one({"_id": 0})
            async with client.start_session() as session:
                async with session.start_transaction():
                    await coll.insert_one({"_id": 1}, session=session)
                    await coll.insert_one({"_id": 2}, session=session)
                committed = await coll.count_documents({})
                try:
                    async with session.start_transaction():
                        await coll.insert_one({"_id": 3}, session=session)
                        raise LookupError("abort it")
                except LookupError:
                    pass
                after_abort = await coll.count_documents({})

                async def callback(inner: Any) -> str:
                    await coll.insert_one({"_id": 4}, session=inner)
                    return "done"

                returned = await session.with_transaction(callback)
            async with coll.watch() as stream:
                await coll.insert_one({"_id": 5})
                change = await stream.next()
            await client.drop_database(db.name)
            return {
                "committed": committed,
                "after_abort": after_abort,
                "returned": returned,
                "change": (change["operationType"], change["documentKey"]),
            }

    result = trio.run(body)
    assert result == {
        "committed": 3,
        "after_abort": 3,
        "returned": "done",
        "change": ("insert", {"_id": 5}),
    }


def test_with_transaction_backs_off_and_retries_a_transient_error_on_trio(server_uri: str) -> None:
    async def body() -> dict[str, Any]:
        async with MongoClient(server_uri) as client:
            coll = client[_name()].items
            attempts: list[int] = []

            async def callback(session: Any) -> int:
                attempts.append(len(attempts) + 1)
                await coll.insert_one({"attempt": len(attempts)}, session=session)
                if len(attempts) < 3:
                    labels = {"errorLabels": ["TransientTransactionError"]}
                    raise OperationFailure("transient", details=labels)
                return len(attempts)

            async with client.start_session() as session:
                returned = await session.with_transaction(callback)
            kept = [doc["attempt"] async for doc in coll.find({}, {"_id": 0})]
            await client.drop_database(coll.database.name)
            return {"returned": returned, "attempts": attempts, "kept": kept}

    # The second and third attempts sleep their backoff first, on trio's clock.
    assert trio.run(body) == {"returned": 3, "attempts": [1, 2, 3], "kept": [3]}


def test_no_task_of_mongio_is_left_once_the_client_closed(server_uri: str) -> None:
    async def body() -> tuple[int, int, int]:
        before = trio.lowlevel.current_statistics().tasks_living
        async with MongoClient(server_uri, heartbeatFrequencyMS=500) as client:
            await client.admin.command("ping")
            await trio.sleep(0.6)  # streaming monitor and round trip time task running
            during = trio.lowlevel.current_statistics().tasks_living
        await trio.testing.wait_all_tasks_blocked()
        return before, during, trio.lowlevel.current_statistics().tasks_living

    before, during, after = trio.run(body)
    assert during > before
    assert after == before


class _KillsSeen(CommandRecorder):
    """The commands, and an event set once a killCursors succeeded."""

    def __init__(self) -> None:
        super().__init__()
        self.killed = trio.Event()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        super().succeeded(event)
        if event.command_name == "killCursors":
            self.killed.set()


def test_an_abandoned_cursor_is_killed_by_the_cursor_reaper_on_trio(server_uri: str) -> None:
    async def body() -> list[Any]:
        recorder = _KillsSeen()
        async with MongoClient(server_uri, event_listeners=[recorder]) as client:
            coll = client[_name()].items
            await coll.insert_many([{"i": i} for i in range(10)])
            cursor = coll.find({}, batch_size=2)
            await cursor.next()
            cursor_id = cursor.cursor_id
            del cursor
            gc.collect()
            with trio.fail_after(10):
                await recorder.killed.wait()
            await client.drop_database(coll.database.name)
        (killed,) = recorder.of(CommandStartedEvent, "killCursors")
        return [cursor_id, list(killed.command["cursors"])]

    cursor_id, killed = trio.run(body)
    assert cursor_id and killed == [cursor_id]


def test_large_documents_written_and_read_in_many_pieces_on_trio(server_uri: str) -> None:
    """Messages far larger than the socket buffers: a request sent in many pieces (waiting for room), a reply
    received in many reads into the framing's growing buffer."""
    big = "x" * (4 * 1024 * 1024)

    async def body() -> list[int]:
        async with MongoClient(server_uri) as client:
            coll = client[_name()].items
            await coll.insert_many([{"_id": i, "payload": big} for i in range(3)])
            lengths = [len(doc["payload"]) async for doc in coll.find({}).sort("_id")]
            await client.drop_database(coll.database.name)
            return lengths

    assert trio.run(body) == [len(big)] * 3
