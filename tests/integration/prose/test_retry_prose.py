"""The prose tests of the retryable-reads and retryable-writes READMEs that one replica set member can run.

The sharded-cluster tests (reads 2.x, writes 4 and 5) need mongoses and the replica-set retargeting tests
(reads 3.x) a secondary: test_retry_topologies.py runs them against loopback peers. Writes 1 needs the MMAPv1
storage engine; it is a unit test in tests/unit/execution/test_executor.py.

Several tests set a second fail point once the first attempt has failed or succeeded and before the retry: the
command listener does it with a blocking one-shot command, so the fail point is in place before the driver
goes on (the listener runs in the driver's task, between the attempt and the retry).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import pytest
from spec_runner.raw_wire import command_once

from mongio import MongoClient
from mongio.errors import OperationFailure, WriteConcernError
from mongio.events.cmap import ConnectionCheckedOutEvent, ConnectionCheckOutFailedEvent, PoolClearedEvent
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.events.listeners import ConnectionPoolListener
from tests.conftest import first_host
from tests.support.backends import gather_outcomes

pytestmark = pytest.mark.server

# A state-change error leaves the server Unknown until its next streamed hello; a short heartbeat keeps the
# retry that waits for it short.
FAST: dict[str, Any] = {"heartbeatFrequencyMS": 500}


class Recorder(CommandListener, ConnectionPoolListener):
    """Command and pool events in order; ``on_failed`` / ``on_succeeded`` run on every such event."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.on_failed: Callable[[CommandFailedEvent], None] | None = None
        self.on_succeeded: Callable[[CommandSucceededEvent], None] | None = None

    def started(self, event: CommandStartedEvent) -> None:
        self.events.append(event)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.events.append(event)
        if self.on_succeeded is not None:
            self.on_succeeded(event)

    def failed(self, event: CommandFailedEvent) -> None:
        self.events.append(event)
        if self.on_failed is not None:
            self.on_failed(event)

    def connection_checked_out(self, event: ConnectionCheckedOutEvent) -> None:
        self.events.append(event)

    def connection_check_out_failed(self, event: ConnectionCheckOutFailedEvent) -> None:
        self.events.append(event)

    def pool_cleared(self, event: PoolClearedEvent) -> None:
        self.events.append(event)

    def started_of(self, name: str) -> list[CommandStartedEvent]:
        return [e for e in self.events if isinstance(e, CommandStartedEvent) and e.command_name == name]

    def failed_of(self, name: str) -> list[CommandFailedEvent]:
        return [e for e in self.events if isinstance(e, CommandFailedEvent) and e.command_name == name]


def fail_command(mode: Any, **data: Any) -> dict[str, Any]:
    return {"configureFailPoint": "failCommand", "mode": mode, "data": data}


class Server:
    """Sets fail points below the driver: awaitable from tests, blocking from listeners."""

    def __init__(self, uri: str) -> None:
        self.host, self.port = first_host(uri)

    def set_now(self, command: Mapping[str, Any]) -> None:
        reply = command_once(self.host, self.port, {**command, "$db": "admin"})
        assert reply.get("ok") == 1, reply

    async def set(self, command: Mapping[str, Any]) -> None:
        await anyio.to_thread.run_sync(self.set_now, command)

    async def off(self) -> None:
        await self.set({"configureFailPoint": "failCommand", "mode": "off"})


@pytest.fixture
async def server(server_uri: str) -> AsyncIterator[Server]:
    server = Server(server_uri)
    try:
        yield server
    finally:
        await server.off()


@pytest.fixture
async def recorded(server_uri: str) -> AsyncIterator[tuple[MongoClient, Recorder]]:
    recorder = Recorder()
    async with MongoClient(server_uri, event_listeners=[recorder], **FAST) as client:
        await client.admin.command("ping")
        recorder.events.clear()
        yield client, recorder


def second_fail_point_after_first_failure(
    recorder: Recorder, server: Server, name: str, first_code: int, command: Mapping[str, Any]
) -> None:
    """Once the first attempt failed with ``first_code``, replace the fail point with ``command``."""

    def on_failed(event: CommandFailedEvent) -> None:
        if event.command_name == name and event.failure.get("code") == first_code and recorder.on_failed:
            recorder.on_failed = None
            server.set_now(command)

    recorder.on_failed = on_failed


OVERLOAD_LABELS = ["RetryableError", "SystemOverloadedError"]
OVERLOAD_91: dict[str, Any] = {"failCommands": ["insert"], "errorCode": 91, "errorLabels": OVERLOAD_LABELS}
RETRYABLE_FIND_91 = fail_command(
    "alwaysOn", failCommands=["find"], errorCode=91, errorLabels=["RetryableError"]
)
RETRYABLE_INSERT_91 = fail_command(
    "alwaysOn", failCommands=["insert"], errorCode=91, errorLabels=["RetryableError", "RetryableWriteError"]
)


# -- retryable reads ---------------------------------------------------------------------------------------


async def test_reads_prose_1_pool_cleared_error_is_retried(server_uri: str, server: Server) -> None:
    recorder = Recorder()
    async with MongoClient(
        server_uri, maxPoolSize=1, retryReads=True, event_listeners=[recorder], **FAST
    ) as client:
        collection = client["retry_prose"]["reads_1"]
        await collection.insert_one({"x": 1})
        await server.set(
            fail_command(
                {"times": 1}, failCommands=["find"], errorCode=91, blockConnection=True, blockTimeMS=1000
            )
        )
        recorder.events.clear()
        found = await gather_outcomes(collection.find_one({}), collection.find_one({}))
        assert [document["x"] for document in found if isinstance(document, dict)] == [1, 1], found
    kinds = [type(e) for e in recorder.events]
    checked_out = kinds.index(ConnectionCheckedOutEvent)
    cleared = kinds.index(PoolClearedEvent)
    check_out_failed = kinds.index(ConnectionCheckOutFailedEvent)
    assert checked_out < cleared < check_out_failed
    assert recorder.events[check_out_failed].reason == "connectionError"
    assert len(recorder.started_of("find")) == 3


async def test_reads_prose_4_overload_sets_the_retry_limit_for_later_errors(
    recorded: tuple[MongoClient, Recorder], server: Server
) -> None:
    client, recorder = recorded
    await server.set(fail_command({"times": 1}, **{**OVERLOAD_91, "failCommands": ["find"]}))
    second_fail_point_after_first_failure(recorder, server, "find", 91, RETRYABLE_FIND_91)
    with pytest.raises(OperationFailure) as info:
        await client["retry_prose"]["reads_4"].find_one({})
    assert info.value.code == 91
    assert len(recorder.started_of("find")) == 2 + 1  # MAX_RETRIES + 1


async def test_reads_prose_5_backoff_only_after_the_overload_error(
    recorded: tuple[MongoClient, Recorder], server: Server
) -> None:
    client, recorder = recorded
    backoffs: list[float] = []

    async def sleep(delay: float) -> None:
        backoffs.append(delay)
        await anyio.sleep(delay)

    client._executor.backoff_sleep = sleep
    client._executor.retry_random = _Jitter(1.0)
    await server.set(fail_command({"times": 1}, **{**OVERLOAD_91, "failCommands": ["find"]}))
    second_fail_point_after_first_failure(recorder, server, "find", 91, RETRYABLE_FIND_91)
    with pytest.raises(OperationFailure):
        await client["retry_prose"]["reads_5"].find_one({})
    assert len(recorder.started_of("find")) == 3
    assert backoffs == [pytest.approx(1.0 * 0.1 * 2**1)]  # one backoff, for the first (overload) error


# -- retryable writes --------------------------------------------------------------------------------------


async def test_writes_prose_2_pool_cleared_error_is_retried(server_uri: str, server: Server) -> None:
    recorder = Recorder()
    async with MongoClient(
        server_uri, maxPoolSize=1, retryWrites=True, event_listeners=[recorder], **FAST
    ) as client:
        collection = client["retry_prose"]["writes_2"]
        await collection.drop()
        await server.set(
            fail_command(
                {"times": 1},
                failCommands=["insert"],
                errorCode=91,
                blockConnection=True,
                blockTimeMS=1000,
                errorLabels=["RetryableWriteError"],
            )
        )
        recorder.events.clear()
        inserted = await gather_outcomes(collection.insert_one({"_id": 1}), collection.insert_one({"_id": 2}))
        assert not [outcome for outcome in inserted if isinstance(outcome, Exception)], inserted
        assert await collection.count_documents({}) == 2
    kinds = [type(e) for e in recorder.events]
    checked_out = kinds.index(ConnectionCheckedOutEvent)
    cleared = kinds.index(PoolClearedEvent)
    check_out_failed = kinds.index(ConnectionCheckOutFailedEvent)
    assert checked_out < cleared < check_out_failed
    assert recorder.events[check_out_failed].reason == "connectionError"
    assert len(recorder.started_of("insert")) == 3


async def test_writes_prose_3_write_concern_error_then_no_writes_performed(
    recorded: tuple[MongoClient, Recorder], server: Server
) -> None:
    client, recorder = recorded

    def on_succeeded(event: CommandSucceededEvent) -> None:
        concern = event.reply.get("writeConcernError") or {}
        if event.command_name == "insert" and concern.get("code") == 91 and recorder.on_succeeded:
            recorder.on_succeeded = None
            server.set_now(
                fail_command(
                    {"times": 1},
                    failCommands=["insert"],
                    errorCode=10107,
                    errorLabels=["RetryableWriteError", "NoWritesPerformed"],
                )
            )

    recorder.on_succeeded = on_succeeded
    await server.set(
        fail_command(
            {"times": 1},
            failCommands=["insert"],
            errorLabels=["RetryableWriteError"],
            writeConcernError={"code": 91, "errmsg": "Replication is being shut down"},
        )
    )
    with pytest.raises(WriteConcernError) as info:
        await client["retry_prose"]["writes_3"].insert_one({"x": 1})
    assert info.value.code == 91
    assert len(recorder.started_of("insert")) == 2




@pytest.mark.parametrize(
    ("first_labels", "second", "expected_code", "no_writes_label"),
    [
        # Case 1: only errors that may have written: the last one.
        ([], {"errorCode": 10107, "errorLabels": OVERLOAD_LABELS}, 10107, False),
        # Case 2: only errors saying nothing was written: the first one.
        (
            ["NoWritesPerformed"],
            {"errorCode": 10107, "errorLabels": [*OVERLOAD_LABELS, "NoWritesPerformed"]},
            91,
            True,
        ),
        # Case 3: the error that may have written, not the later NoWritesPerformed ones.
        (
            [],
            {"errorCode": 91, "errorLabels": [*OVERLOAD_LABELS, "NoWritesPerformed"]},
            91,
            False,
        ),
    ],
    ids=["case-1", "case-2", "case-3"],
)
async def test_writes_prose_6_error_propagation_after_several_errors(
    recorded: tuple[MongoClient, Recorder],
    server: Server,
    first_labels: list[str],
    second: dict[str, Any],
    expected_code: int,
    no_writes_label: bool,
) -> None:
    client, recorder = recorded
    client._executor.retry_random = _Jitter(0.0)  # no backoff wait: the choice of error is what is tested
    first = {**OVERLOAD_91, "errorLabels": [*OVERLOAD_91["errorLabels"], *first_labels]}
    await server.set(fail_command({"times": 1}, **first))
    second_fail_point_after_first_failure(
        recorder, server, "insert", 91, fail_command("alwaysOn", failCommands=["insert"], **second)
    )
    with pytest.raises(OperationFailure) as info:
        await client["retry_prose"]["writes_6"].insert_one({"x": 1})
    assert info.value.code == expected_code
    assert info.value.has_error_label("NoWritesPerformed") is no_writes_label
    assert len(recorder.started_of("insert")) == 3  # MAX_RETRIES + 1: overload errors all along


async def test_writes_prose_6_case_4_overload_sets_the_retry_limit_for_later_errors(
    recorded: tuple[MongoClient, Recorder], server: Server
) -> None:
    client, recorder = recorded
    client._executor.retry_random = _Jitter(0.0)
    await server.set(fail_command({"times": 1}, **OVERLOAD_91))
    second_fail_point_after_first_failure(
        recorder,
        server,
        "insert",
        91,
        RETRYABLE_INSERT_91,
    )
    with pytest.raises(OperationFailure) as info:
        await client["retry_prose"]["writes_6_4"].insert_one({"x": 1})
    assert info.value.code == 91
    # MAX_RETRIES + 1, not the single retry of retryable writes.
    assert len(recorder.started_of("insert")) == 2 + 1


async def test_writes_prose_6_case_5_no_backoff_for_non_overload_errors(
    recorded: tuple[MongoClient, Recorder], server: Server
) -> None:
    client, recorder = recorded
    backoffs: list[float] = []

    async def sleep(delay: float) -> None:
        backoffs.append(delay)
        await anyio.sleep(delay)

    client._executor.backoff_sleep = sleep
    client._executor.retry_random = _Jitter(0.5)
    await server.set(fail_command({"times": 1}, **OVERLOAD_91))
    second_fail_point_after_first_failure(
        recorder,
        server,
        "insert",
        91,
        RETRYABLE_INSERT_91,
    )
    with pytest.raises(OperationFailure):
        await client["retry_prose"]["writes_6_5"].insert_one({"x": 1})
    assert len(recorder.started_of("insert")) == 3
    assert backoffs == [pytest.approx(0.5 * 0.1 * 2**1)]


class _Jitter(random.Random):
    """A jitter source that always answers ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value
