"""``close()`` against peers that misbehave: it never raises because of what a server sent, and leaves
nothing running: operations still in flight end at once with ``ClientClosedError`` naming the cause, never
retried, with no task left behind and no warning under ``-X dev``."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from benchmarks import close_inflight
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio import InsertOneResult, MongoClient
from mongio.bson import encode
from mongio.errors import AutoReconnect, ClientClosedError
from mongio.wire import encode_op_msg, next_request_id
from mongio.write_concern import WriteConcern
from tests.support.fake_pool import Recorder
from tests.support.loopback_peer import NO_REPLY, LoopbackPeer, Reply, Request

# A hello that makes the client use server sessions (the loopback peer's default one does not).
HELLO = {
    "helloOk": True,
    "isWritablePrimary": True,
    "maxWireVersion": 21,
    "logicalSessionTimeoutMinutes": 30,
    "ok": 1,
}
SAFETY = 30.0  # seconds: only so that a regression fails the test instead of hanging it
CLOSED_TEXT = "did not complete: the client was closed while it was running"


def is_hello(request: Request) -> bool:
    return request.command_name.lower() in ("hello", "ismaster")


def reply_with_invalid_utf8(request: Request) -> Reply:
    """``{ok: 1, s: <two bytes that are not UTF-8>}``, answering ``request``."""
    body = bytearray(encode({"ok": 1, "s": "ab"}))
    at = body.index(b"ab")
    body[at : at + 2] = b"\xff\xfe"
    message = encode_op_msg(next_request_id(), bytes(body), response_to=request.header.request_id)
    return Reply(raw=bytes(message))


def closing_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if "while closing the client" in record.getMessage()]


# -- close() does not raise -----------------------------------------------------------------------------------


async def test_close_does_not_raise_on_an_end_sessions_reply_with_invalid_utf8(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mongio")

    def handler(request: Request) -> Any:
        if is_hello(request):
            return HELLO
        if request.command_name == "endSessions":
            return reply_with_invalid_utf8(request)
        return None

    async with LoopbackPeer(handler) as peer:
        async with MongoClient(peer.uri, directConnection=True) as client:
            await client.admin.command("ping")  # pools a server session, which close() ends
        assert len(peer.commands("endSessions")) == 1
    (record,) = closing_records(caplog)
    assert record.levelno == logging.DEBUG
    assert "endSessions failed" in record.getMessage() and "InvalidBSON" in record.getMessage()
    assert record.exc_info is not None and "not valid UTF-8" in str(record.exc_info[1])


async def test_close_does_not_raise_after_a_hello_with_negative_sizes() -> None:
    def handler(request: Request) -> Any:
        if is_hello(request):
            return {**HELLO, "maxBsonObjectSize": -5, "maxMessageSizeBytes": -5}
        return None

    async with LoopbackPeer(handler) as peer:
        client = MongoClient(peer.uri, directConnection=True)
        async with client:
            try:
                await client.admin.command("ping")  # pools a server session, whatever it answers
            except Exception:
                pass
        with pytest.raises(ClientClosedError):
            await client.admin.command("ping")


async def test_a_failure_of_the_closing_itself_is_logged_with_its_traceback_not_raised(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="mongio")

    def broken(self: object, batch_size: int = 0) -> list[dict[str, Any]]:
        raise RuntimeError("a bug while building endSessions")

    monkeypatch.setattr("mongio.sessions.server_session.ServerSessionPool.end_sessions_commands", broken)

    def handler(request: Request) -> Any:
        return HELLO if is_hello(request) else None

    async with LoopbackPeer(handler) as peer, MongoClient(peer.uri, directConnection=True) as client:
        await client.admin.command("ping")
    (record,) = closing_records(caplog)
    assert "RuntimeError: a bug while building endSessions" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[2] is not None  # the traceback, to debug it


# -- operations in flight end ---------------------------------------------------------------------------------


async def test_close_ends_every_find_in_flight_against_a_stalled_peer_with_a_clear_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mongio.execution")
    before = running_tasks()
    pool_events = Recorder()

    def handler(request: Request) -> Any:
        return NO_REPLY if request.command_name == "find" else None

    async with LoopbackPeer(handler) as peer:
        client = MongoClient(peer.uri, directConnection=True, event_listeners=[pool_events])
        await client.aconnect()
        errors: list[BaseException | None] = [None] * 100

        async def find(i: int) -> None:
            try:
                await client.db.coll.find_one({"i": i})
            except Exception as error:
                errors[i] = error

        # The task group ends once every find ended: close() must end them all within SAFETY.
        with anyio.fail_after(SAFETY):
            async with anyio.create_task_group() as finds:
                for i in range(100):
                    finds.start_soon(find, i)
                while len(peer.commands("find")) < 100:
                    await peer.wait_for_requests(len(peer.requests) + 1)
                await client.close()
        assert all(isinstance(error, ClientClosedError) for error in errors), errors
        assert all(str(error).startswith(f"find {CLOSED_TEXT}") for error in errors)
        # Each one names how it was cut off: its connection closed under it by the pool's close.
        assert all(isinstance(error.__cause__, AutoReconnect) for error in errors if error is not None)
        assert all("was closed" in str(error.__cause__) for error in errors if error is not None)
        assert len(peer.commands("find")) == 100  # nothing was sent again
    # Not retried, on any server: the retry rules were never asked.
    assert not [record for record in caplog.records if record.getMessage().startswith("retrying find")]
    # Every connection the pool made was closed by the closing, none left half-used.
    created = {event.connection_id for event in pool_events.of("ConnectionCreatedEvent")}
    closed = {event.connection_id: event.reason for event in pool_events.of("ConnectionClosedEvent")}
    assert len(created) >= 100 and closed == dict.fromkeys(created, "poolClosed")
    assert tasks_started_since(before) == []


async def test_close_ends_operations_waiting_for_a_server_or_a_connection() -> None:
    stall_handshakes = False

    def handler(request: Request) -> Any:
        if request.command_name == "find" or (stall_handshakes and is_hello(request)):
            return NO_REPLY
        return None

    async with LoopbackPeer(handler) as peer:
        # Waiting in server selection: a server that cannot be reached.
        unreachable = MongoClient(
            "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=60000&connectTimeoutMS=200",
            directConnection=True,
        )
        errors: list[BaseException | None] = [None] * 20

        async def find(client: MongoClient, index: int) -> None:
            try:
                await client.db.coll.find_one({})
            except Exception as error:
                errors[index] = error

        # The task group ends once every find ended: close() must end them all within SAFETY.
        with anyio.fail_after(SAFETY):
            async with anyio.create_task_group() as finds:
                for index in range(10):
                    finds.start_soon(find, unreachable, index)
                # At most two connections: one open (its find stalled), one whose handshake the peer stalls,
                # and the other finds in the pool's wait queue.
                client = MongoClient(peer.uri, directConnection=True, maxPoolSize=2)
                where = f"{peer.address[0]}:{peer.address[1]}"
                await client.admin.command("ping")
                stall_handshakes = True
                answered = len(peer.requests)
                for index in range(10, 20):
                    finds.start_soon(find, client, index)
                await peer.wait_for_requests(answered + 2)
                assert sorted(request.command_name for request in peer.requests[answered:]) == [
                    "find",
                    "isMaster",
                ]
                await unreachable.close()
                await client.close()
    assert all(isinstance(error, ClientClosedError) for error in errors), errors
    assert all(CLOSED_TEXT in str(error) for error in errors)
    causes = [str(error.__cause__) for error in errors if error is not None]
    assert causes[:10] == ["this topology was closed; make a new client"] * 10  # selection refused
    # The find on the open connection, the one waiting for its handshake, the ones in the wait queue.
    assert sorted(causes[10:]) == sorted(
        [
            f"{where}: connection 1 closed: interrupted: the pool for {where} was closed",
            f"Connection to {where} interrupted: the connection pool was closed",
            *[f"Attempted to check out a connection from closed connection pool {where}"] * 8,
        ]
    )


class Write:
    """One write run in a task of its own: what it returned or raised is ``outcome`` once ``ended`` is set."""

    def __init__(self) -> None:
        self.ended = anyio.Event()
        self.outcome: object = None

    async def run(self, write: Callable[[], Awaitable[object]]) -> None:
        try:
            self.outcome = await write()
        except Exception as error:  # the outcome the test checks
            self.outcome = error
        finally:
            self.ended.set()


async def test_close_ends_an_unacknowledged_write_waiting_for_a_peer_that_stopped_reading() -> None:
    async def handler(request: Request) -> Any:
        if request.command_name == "insert":
            # The peer reads nothing more on this connection, until it stops (which cancels this wait).
            await asyncio.get_running_loop().create_future()
        return None

    async with LoopbackPeer(handler) as peer:
        client = MongoClient(peer.uri, directConnection=True, maxPoolSize=1)
        await client.aconnect()
        unacknowledged = client.db.get_collection("coll", write_concern=WriteConcern(w=0))
        big = "x" * 8_000_000
        async with anyio.create_task_group() as writes:
            # Each write fills the socket buffers further, until one waits for them to drain.
            for _ in range(20):
                stuck = Write()
                writes.start_soon(stuck.run, functools.partial(unacknowledged.insert_one, {"big": big}))
                with anyio.move_on_after(0.5):
                    await stuck.ended.wait()
                if not stuck.ended.is_set():
                    break
                assert isinstance(stuck.outcome, InsertOneResult) and not stuck.outcome.acknowledged
            assert not stuck.ended.is_set()  # still waiting to write when the client closes
            await client.close()
            with anyio.fail_after(SAFETY):
                await stuck.ended.wait()
        error = stuck.outcome
        assert isinstance(error, ClientClosedError) and str(error).startswith(f"insert {CLOSED_TEXT}")


def test_closing_with_finds_in_flight_under_dev_mode_leaves_no_task_and_no_warning() -> None:
    # The benchmark's own run: a fresh process under -X dev -W error, a stalled peer, 100 finds in flight.
    result = close_inflight.run_once(100, "cold", limit=SAFETY)
    assert result["unended"] == 0 and result["tasks_left"] == []
    assert list(result["errors"]) == [
        "ClientClosedError: find did not complete: the client was closed while it was running (N.N.N.N:N: "
        "connection N closed: interrupted: the pool for N.N.N.N:N was closed)"
    ]
    assert sum(result["errors"].values()) == 100
    # Under -X dev asyncio logs callbacks slower than 100 ms (a loaded machine): those are not warnings.
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    assert [line for line in lines if not (line.startswith("Executing ") and " took " in line)] == []
