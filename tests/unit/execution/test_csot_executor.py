"""The executor under a client-side operation timeout (the CSOT README's unit tests, and the command fields
and errors the specification asks for), over the fake topology, pool and connection of test_executor."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mongio.errors import ExecutionTimeout, NetworkTimeout, OperationFailure, OperationTimeoutError
from mongio.events.command import CommandPublisher
from mongio.execution import deadline as csot
from mongio.execution.executor import Executor
from mongio.execution.retry_policy import RetryOptions
from mongio.operations.base import Command, ConnectionContext, Operation
from mongio.operations.run_command import RunCommand
from mongio.options.write_concern import WriteConcern
from mongio.topology.server_description import ServerDescription
from tests.support.scripted_executor import (
    ADDRESS,
    PRIMARY_HELLO,
    FakeClient,
    FakeConnection,
    FakePool,
    FakeServer,
    FakeTopology,
    InsertOne,
)

OK = {"ok": 1, "n": 1}


class RecordingPool(FakePool):
    def __init__(self, conn: FakeConnection) -> None:
        super().__init__(conn)
        self.waits: list[float | None] = []

    async def check_out(self, max_wait: float | None = None) -> FakeConnection:
        self.waits.append(max_wait)
        return await super().check_out(max_wait)


def make(
    replies: list[Any], *, timeout: float | None = None, wait_queue_timeout: float | None = None
) -> tuple[Executor, RecordingPool, FakeConnection]:
    conn = FakeConnection(replies)
    pool = RecordingPool(conn)
    topology = FakeTopology(FakeServer(pool, ServerDescription(ADDRESS, PRIMARY_HELLO)))
    executor = Executor(
        FakeClient(topology),
        retry_options=RetryOptions(),
        publisher=CommandPublisher(),
        timeout=timeout,
        wait_queue_timeout=wait_queue_timeout,
    )
    executor.attach(topology)  # type: ignore[arg-type]
    return executor, pool, conn


class WriteWithConcern(InsertOne):
    def __init__(self, database: str, concern: WriteConcern) -> None:
        super().__init__(database)
        self.write_concern = concern


class GetMoreLike(Operation[dict[str, Any]]):
    command_name = "getMore"

    def __init__(self, database: str, max_time_ms: int | None = None) -> None:
        super().__init__(database)
        self.max_time_ms = max_time_ms

    def build(self, context: ConnectionContext) -> Command:
        body: dict[str, Any] = {"getMore": 1, "collection": "c"}
        if self.max_time_ms is not None:
            body["maxTimeMS"] = self.max_time_ms
        return Command(body)

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
        return reply


async def test_wait_queue_timeout_is_ignored_under_csot_and_the_time_left_bounds_checkout() -> None:
    executor, pool, _ = make([OK], wait_queue_timeout=30.0)
    with csot.timeout(2.0):
        await executor.execute(RunCommand("db", "ping"))
    (wait,) = pool.waits
    assert wait is not None and 0 < wait <= 2.0


async def test_checkout_under_csot_ends_with_server_selection_timeout_when_that_is_sooner() -> None:
    executor, pool, _ = make([OK], wait_queue_timeout=30.0)
    executor._selection_timeout = 0.5
    seen: list[float | None] = []
    original = pool.check_out

    async def check_out(max_wait: float | None = None) -> FakeConnection:
        seen.append(csot.establishment_deadline())  # what a connection opened now would have to meet
        return await original(max_wait)

    pool.check_out = check_out  # type: ignore[method-assign]
    with csot.timeout(10.0):
        deadline = csot.current_deadline()
        await executor.execute(RunCommand("db", "ping"))
    (wait,) = pool.waits
    assert wait is not None and 0 < wait <= 0.5
    (establish_by,) = seen
    assert deadline is not None and establish_by is not None and establish_by < deadline


async def test_wait_queue_timeout_bounds_checkout_without_csot() -> None:
    executor, pool, _ = make([OK], wait_queue_timeout=30.0)
    await executor.execute(RunCommand("db", "ping"))
    assert pool.waits == [30.0]


async def test_the_client_timeout_applies_when_no_block_is_in_force() -> None:
    executor, pool, conn = make([OK, OK], timeout=5.0, wait_queue_timeout=30.0)
    await executor.execute(RunCommand("db", "ping"))
    assert 0 < conn.sent[0]["maxTimeMS"] <= 5000
    assert pool.waits[0] is not None and pool.waits[0] <= 5.0
    # A database's or collection's own timeout wins over the client's.
    await executor.execute(RunCommand("db", "ping"), level_timeout=0.5)
    assert 0 < conn.sent[1]["maxTimeMS"] <= 500


async def test_a_timeout_block_in_force_wins_over_the_levels_timeout() -> None:
    # No deadline to set (the block's is in force): the operation still runs under the block's deadline.
    executor, _, conn = make([OK], timeout=0.25)
    with csot.timeout(20.0):
        await executor.execute(RunCommand("db", "ping"), level_timeout=0.5)
    assert 500 < conn.sent[0]["maxTimeMS"] <= 20000


def test_operation_timeout_order_level_then_session_then_client() -> None:
    executor, _, _ = make([], timeout=5.0)

    class Session:
        options = type("Options", (), {"default_timeout_ms": 250})()

    session: Any = Session()
    assert executor.operation_timeout(1.5, session) == 1.5
    assert executor.operation_timeout(None, session) == 0.25
    assert executor.operation_timeout(None, None) == 5.0
    Session.options.default_timeout_ms = 0
    assert executor.operation_timeout(None, session) == math.inf


async def test_the_computed_max_time_ms_replaces_the_deprecated_option() -> None:
    executor, _, conn = make([OK, OK])
    with csot.timeout(1.0):
        await executor.execute(RunCommand("db", {"find": "c", "maxTimeMS": 99_999}))
    assert conn.sent[0]["maxTimeMS"] <= 1000
    await executor.execute(RunCommand("db", {"find": "c", "maxTimeMS": 99_999}))
    assert conn.sent[1]["maxTimeMS"] == 99_999


async def test_get_more_never_takes_the_operations_max_time_ms_but_its_await_time_is_capped() -> None:
    executor, _, conn = make([OK, OK, OK])
    with csot.timeout(1.0):
        await executor.execute(GetMoreLike("db"))
        await executor.execute(GetMoreLike("db", max_time_ms=50))
        await executor.execute(GetMoreLike("db", max_time_ms=60_000))
    assert "maxTimeMS" not in conn.sent[0]
    assert conn.sent[1]["maxTimeMS"] == 50
    assert conn.sent[2]["maxTimeMS"] <= 1000


async def test_omit_policy_sends_no_max_time_ms_but_still_checks_the_time_left() -> None:
    executor, _, conn = make([OK])
    with csot.timeout(1.0), csot.sending_max_time("omit"):
        await executor.execute(RunCommand("db", "ping"))
    assert "maxTimeMS" not in conn.sent[0]
    executor, _, conn = make([OK])
    with pytest.raises(OperationTimeoutError), csot.timeout(0.0), csot.sending_max_time("omit"):
        await executor.execute(RunCommand("db", "ping"))
    assert conn.sent == []  # too little time: nothing was written


async def test_wtimeout_is_dropped_under_csot() -> None:
    executor, _, conn = make([OK, OK])
    with csot.timeout(1.0):
        await executor.execute(WriteWithConcern("db", WriteConcern(w=1, wtimeout=100)))
    assert conn.sent[0]["writeConcern"] == {"w": 1}
    await executor.execute(WriteWithConcern("db", WriteConcern(w=1, wtimeout=100)))
    assert conn.sent[1]["writeConcern"] == {"w": 1, "wtimeout": 100}


MAX_TIME_EXPIRED = {"ok": 0, "code": 50, "codeName": "MaxTimeMSExpired", "errmsg": "operation exceeded time limit"}


async def test_max_time_ms_expired_becomes_the_timeout_error_under_csot() -> None:
    executor, _, _ = make([MAX_TIME_EXPIRED])
    with pytest.raises(OperationTimeoutError) as raised, csot.timeout(1.0):
        await executor.execute(RunCommand("db", "ping"))
    assert isinstance(raised.value.cause, OperationFailure)
    assert raised.value.__cause__ is raised.value.cause
    assert "operation exceeded time limit" in str(raised.value)
    executor, _, _ = make([MAX_TIME_EXPIRED])
    with pytest.raises(ExecutionTimeout):
        await executor.execute(RunCommand("db", "ping"))


async def test_a_max_time_ms_expired_write_concern_error_is_a_timeout_under_csot() -> None:
    reply = {"ok": 1, "n": 1, "writeConcernError": {"code": 50, "codeName": "MaxTimeMSExpired", "errmsg": "late"}}

    class Insert(InsertOne):
        def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> int:
            if "writeConcernError" in reply:
                raise OperationFailure("write concern error", 64, reply)
            return int(reply["n"])

    executor, _, _ = make([reply])
    with pytest.raises(OperationTimeoutError), csot.timeout(1.0):
        await executor.execute(Insert("db"))


async def test_retryable_write_is_retried_until_the_deadline_under_csot() -> None:
    # Without CSOT a retryable write is retried once; under it, as often as time allows.
    failures: list[Any] = [NetworkTimeout("slow") for _ in range(3)]
    executor, pool, conn = make([*failures, OK])
    with csot.timeout(5.0):
        assert await executor.execute(InsertOne("db")) == 1
    assert len(conn.sent) == 4
    assert pool.checked_out == pool.checked_in == 4
    executor, _, conn = make([NetworkTimeout("slow"), NetworkTimeout("slow"), OK])
    with pytest.raises(NetworkTimeout):
        await executor.execute(InsertOne("db"))
    assert len(conn.sent) == 2


async def test_a_network_timeout_under_csot_is_the_timeout_error_with_its_cause() -> None:
    executor, _, _ = make([NetworkTimeout("timed out waiting for a reply")])
    with pytest.raises(OperationTimeoutError) as raised, csot.timeout(1.0):
        await executor.execute(RunCommand("db", "ping"))  # runCommand is not retried
    assert isinstance(raised.value.cause, NetworkTimeout)
    assert raised.value.timeout


async def test_timeout_scope_gives_several_commands_one_deadline() -> None:
    executor, _, _ = make([], timeout=5.0)
    assert csot.current_deadline() is None
    with executor.timeout_scope(None, None):
        first = csot.current_deadline()
        assert first is not None and not math.isinf(first)
        with executor.timeout_scope(0.1, None):  # a deadline in force is kept
            assert csot.current_deadline() == first
    with executor.timeout_scope(0.5, None):  # a database's or collection's own timeout
        left = csot.remaining()
        assert left is not None and 0 < left <= 0.5
    executor, _, _ = make([])
    with executor.timeout_scope(None, None):
        assert csot.current_deadline() is None
