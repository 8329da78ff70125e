"""The executor without a server: the $readPreference rules, and what an attempt leaves behind however it ends."""

from __future__ import annotations

import asyncio
import logging
import random
from types import SimpleNamespace
from typing import Any

import pytest

from mongio.bson.int64 import Int64
from mongio.bson.timestamp import Timestamp
from mongio.errors import (
    AutoReconnect,
    BulkWriteError,
    ClientClosedError,
    OperationFailure,
    WriteConcernError,
)
from mongio.events.command import (
    COMMAND_LOGGER_NAME,
    CommandFailedEvent,
    CommandListener,
    CommandPublisher,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.execution.command_assembly import read_preference_document
from mongio.execution.executor import Answered, Executor
from mongio.execution.retry_policy import RETRYABLE_WRITES_UNSUPPORTED_MESSAGE, RetryOptions
from mongio.operations.base import Command, ConnectionContext, Retryability, check_write_reply
from mongio.operations.bulk import BulkWrite
from mongio.operations.run_command import RunCommand
from mongio.options.read_preference import (
    Nearest,
    Primary,
    PrimaryPreferred,
    Secondary,
    SecondaryPreferred,
)
from mongio.topology.server_description import ServerDescription
from mongio.topology.topology_type import TopologyType
from tests.support.scripted_executor import (
    ADDRESS,
    PRIMARY_HELLO,
    FakeClient,
    FakeConnection,
    FakePool,
    FakeServer,
    FakeTopology,
    InsertOne,
    make_executor,
)

SECONDARY_HELLO = {**PRIMARY_HELLO, "isWritablePrimary": False, "secondary": True}
MONGOS_HELLO = {"ok": 1, "msg": "isdbgrid", "maxWireVersion": 21, "logicalSessionTimeoutMinutes": 30}
PRIMARY = ServerDescription(ADDRESS, PRIMARY_HELLO)
STANDALONE_HELLO = {
    "ok": 1,
    "isWritablePrimary": True,
    "maxWireVersion": 21,
    "logicalSessionTimeoutMinutes": 30,
}


def read_op(read_preference: Any) -> RunCommand:
    return RunCommand("db", "count", read_preference=read_preference)


# -- $readPreference ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("read_preference", "expected"),
    [
        (None, None),
        (Primary(), None),
        # OP_MSG: every mode but primary is sent, a plain secondaryPreferred included (server selection,
        # "Passing read preference to mongos and load balancers").
        (SecondaryPreferred(), {"mode": "secondaryPreferred"}),
        (SecondaryPreferred(tag_sets=[{"dc": "ny"}]), {"mode": "secondaryPreferred", "tags": [{"dc": "ny"}]}),
        (SecondaryPreferred(max_staleness=120), {"mode": "secondaryPreferred", "maxStalenessSeconds": 120}),
        (Secondary(), {"mode": "secondary"}),
        (PrimaryPreferred(), {"mode": "primaryPreferred"}),
        (Nearest(), {"mode": "nearest"}),
    ],
)
def test_read_preference_for_mongos(read_preference: Any, expected: Any) -> None:
    mongos = ServerDescription(ADDRESS, MONGOS_HELLO)
    for topology_type in (TopologyType.Sharded, TopologyType.Single):
        assert read_preference_document(read_op(read_preference), mongos, topology_type) == expected
    # A load balancer is treated like a mongos (load balancer specification, "Server Selection").
    balancer = ServerDescription.load_balancer(ADDRESS)
    assert read_preference_document(read_op(read_preference), balancer, TopologyType.LoadBalanced) == expected


def test_read_preference_for_a_direct_connection() -> None:
    secondary = ServerDescription(ADDRESS, SECONDARY_HELLO)
    single = TopologyType.Single
    assert read_preference_document(read_op(None), secondary, single) == {"mode": "primaryPreferred"}
    assert read_preference_document(read_op(Primary()), secondary, single) == {"mode": "primaryPreferred"}
    assert read_preference_document(read_op(Secondary()), secondary, single) == {"mode": "secondary"}
    standalone = ServerDescription(ADDRESS, STANDALONE_HELLO)
    assert read_preference_document(read_op(Secondary()), standalone, single) is None


def test_read_preference_for_a_replica_set() -> None:
    primary = ServerDescription(ADDRESS, PRIMARY_HELLO)
    rs = TopologyType.ReplicaSetWithPrimary
    assert read_preference_document(read_op(None), primary, rs) is None
    assert read_preference_document(read_op(Primary()), primary, rs) is None
    assert read_preference_document(read_op(Nearest()), primary, rs) == {"mode": "nearest"}


def test_writes_carry_no_read_preference() -> None:
    class Write(RunCommand):
        takes_write_concern = True

    mongos = ServerDescription(ADDRESS, MONGOS_HELLO)
    op = Write("db", "insert", read_preference=Secondary())
    assert read_preference_document(op, mongos, TopologyType.Sharded) is None


# -- attempts with fakes ----------------------------------------------------------------------------------------


async def test_retryable_write_is_retried_with_the_same_transaction_number() -> None:
    executor, topology, pool, conn = make_executor([AutoReconnect("connection reset"), {"ok": 1, "n": 1}])
    assert await executor.execute(InsertOne("db")) == 1
    first, second = conn.sent
    assert first["txnNumber"] == second["txnNumber"] == Int64(1)
    assert first["lsid"] == second["lsid"]
    assert first["$db"] == "db"
    assert pool.checked_out == pool.checked_in == 2
    assert topology.server.operation_count == 0
    assert len(topology.errors) == 1  # the network error was reported to the topology
    # The session that saw a network error is dirty and never pooled again.
    assert len(executor.session_pool) == 0


async def test_execute_answered_gives_the_result_and_the_server_that_answered() -> None:
    executor, _, _, _ = make_executor([AutoReconnect("connection reset"), {"ok": 1, "n": 1}])
    answered = await executor.execute_answered(InsertOne("db"))
    assert isinstance(answered, Answered)
    assert answered.result == 1
    assert answered.address == ADDRESS
    result, address = answered
    assert (result, address) == (1, ADDRESS)


async def test_cancellation_checks_the_connection_in_and_drops_the_session() -> None:
    executor, topology, pool, _ = make_executor(["block"])
    task = asyncio.ensure_future(executor.execute(RunCommand("db", "ping")))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.checked_out == pool.checked_in == 1
    assert topology.server.operation_count == 0
    # Cut off after the command was sent: what the server did in the session is unknown, so it is dirty.
    assert len(executor.session_pool) == 0


class RecordingListener(CommandListener):
    """Records the kinds of the command events it gets; ``started_event`` is set by the first started."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.failures: list[Any] = []
        self.started_event = asyncio.Event()

    def started(self, event: CommandStartedEvent) -> None:
        self.kinds.append("started")
        self.started_event.set()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.kinds.append("succeeded")

    def failed(self, event: CommandFailedEvent) -> None:
        self.kinds.append("failed")
        self.failures.append(event.failure)


async def test_a_command_cancelled_after_its_started_event_gets_a_failed_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Command monitoring: every started event is followed by a succeeded or a failed one, and so is the
    # "Command started" log message; a cancellation while the reply is awaited is such an end.
    listener = RecordingListener()
    executor, _, pool, _ = make_executor(["block"], publisher=CommandPublisher([listener]))
    task = asyncio.ensure_future(executor.execute(RunCommand("db", "ping")))
    await listener.started_event.wait()
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert listener.kinds == ["started", "failed"]
    assert listener.failures[0]["errtype"] == "CancelledError"
    assert ['"ping" failed' in record.getMessage() for record in caplog.records] == [True]
    assert pool.checked_out == pool.checked_in == 1


async def test_a_command_outside_the_retry_loop_cancelled_after_its_started_event_gets_a_failed_event() -> (
    None
):
    listener = RecordingListener()
    executor, _, _, conn = make_executor(["block"], publisher=CommandPublisher([listener]))
    task = asyncio.ensure_future(executor._send_unmanaged(conn, "endSessions", {"endSessions": []}))  # type: ignore[arg-type]
    await listener.started_event.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert listener.kinds == ["started", "failed"]


async def test_server_error_is_not_retried_and_session_is_pooled() -> None:
    reply = {"ok": 0, "errmsg": "bad value", "code": 2, "codeName": "BadValue"}
    executor, _, pool, conn = make_executor([reply])
    with pytest.raises(OperationFailure) as info:
        await executor.execute(RunCommand("db", "ping"))
    assert info.value.code == 2
    assert len(conn.sent) == 1
    assert pool.checked_in == 1
    assert len(executor.session_pool) == 1


async def test_cluster_time_from_a_reply_is_sent_next() -> None:
    cluster_time = {"clusterTime": Timestamp(100, 1), "signature": {"keyId": Int64(0)}}
    executor, _, _, conn = make_executor([{"ok": 1, "$clusterTime": cluster_time}, {"ok": 1}])
    await executor.execute(RunCommand("db", "ping"))
    await executor.execute(RunCommand("db", "ping"))
    assert "$clusterTime" not in conn.sent[0]
    assert conn.sent[1]["$clusterTime"] == cluster_time


async def test_closed_topology_raises() -> None:
    executor, topology, _, _ = make_executor([])
    topology.closed = True
    with pytest.raises(ClientClosedError):
        await executor.execute(RunCommand("db", "ping"))


async def test_pool_cleared_at_checkout_retries_a_write() -> None:
    from mongio.errors import PoolClearedError

    executor, topology, pool, conn = make_executor([{"ok": 1, "n": 1}])
    real_check_out = pool.check_out
    failures = [PoolClearedError("cleared", ADDRESS)]

    async def check_out(max_wait: float | None = None) -> FakeConnection:
        if failures:
            raise failures.pop()
        return await real_check_out(max_wait)

    pool.check_out = check_out  # type: ignore[method-assign]
    assert await executor.execute(InsertOne("db")) == 1
    (sent,) = conn.sent
    assert sent["txnNumber"] == Int64(1)
    assert topology.errors == []  # a pool clear says nothing new about the server
    assert topology.server.operation_count == 0


async def test_no_transaction_number_when_the_build_says_not_retryable() -> None:
    class Multi(InsertOne):
        def build(self, context: ConnectionContext) -> Command:
            self.retryability = Retryability.NONE
            return Command({"delete": "c", "deletes": [{"q": {}, "limit": 0}]})

    executor, _, _, conn = make_executor([{"ok": 1, "n": 3}])
    assert await executor.execute(Multi("db")) == 3
    assert "txnNumber" not in conn.sent[0]
    assert "lsid" in conn.sent[0]


async def test_without_session_support_no_lsid_and_explicit_sessions_refused() -> None:
    from mongio.errors import ConfigurationError
    from mongio.sessions.client_session import ClientSession, SessionOptions

    executor, topology, _, conn = make_executor([{"ok": 1}, {"ok": 1}])
    topology.description.logical_session_timeout_minutes = None
    client: Any = executor._client
    client.executor = executor
    await executor.execute(RunCommand("db", "ping"))
    assert "lsid" not in conn.sent[0]
    explicit = ClientSession(client, SessionOptions())
    with pytest.raises(ConfigurationError, match="does not support sessions"):
        await executor.execute(RunCommand("db", "ping"), explicit)
    implicit = ClientSession(client, SessionOptions(causal_consistency=False), implicit=True)
    await executor.execute(RunCommand("db", "ping"), implicit)
    assert "lsid" not in conn.sent[1]


async def test_a_retryable_write_keeps_its_session_while_the_topology_knows_no_data_bearing_server() -> None:
    """Sessions specification, "How to Check Whether a Deployment Supports Sessions": with no data-bearing
    server in the topology (every mongos just marked Unknown, while the operation already holds a connection
    to one), the selected server's own logicalSessionTimeoutMinutes decides, so the retryable write carries
    its lsid and txnNumber and a retry cannot apply it twice."""
    executor, topology, _, conn = make_executor([AutoReconnect("connection reset"), {"ok": 1, "n": 1}])
    topology.description.logical_session_timeout_minutes = None
    topology.description.knows_a_data_bearing_server = False
    assert topology.server.description.logical_session_timeout_minutes is not None
    assert await executor.execute(InsertOne("db")) == 1
    first, second = conn.sent
    assert first["lsid"] == second["lsid"] and first["txnNumber"] == second["txnNumber"]


def _step_down_during_check_out(topology: FakeTopology, pool: FakePool) -> None:
    """Every selection finds the server primary; every check-out then sees it become Unknown (another
    operation's error, or a new primary's hello) before it hands out its connection."""
    real_select = topology.select_server_nowait
    real_check_out = pool.check_out
    unknown = ServerDescription(ADDRESS)

    def describe(server: ServerDescription) -> None:
        topology.server.description = server
        topology.description = SimpleNamespace(**{**vars(topology.description), "get": lambda _: server})

    def select(*args: Any, **kwargs: Any) -> FakeServer:
        describe(PRIMARY)
        return real_select(*args, **kwargs)

    async def check_out(max_wait: float | None = None) -> FakeConnection:
        conn = await real_check_out(max_wait)
        describe(unknown)
        return conn

    topology.select_server_nowait = select  # type: ignore[method-assign]
    pool.check_out = check_out  # type: ignore[method-assign]


async def test_a_retryable_write_is_judged_on_the_server_as_selected_not_as_described_after_check_out() -> (
    None
):
    """Retryable writes specification, "Supported Server Versions": the server selected for the attempt
    decides. A step-down seen while the write waited for its connection leaves it a retryable write: it
    carries its txnNumber, and the retry after the server's NotWritablePrimary reuses it."""
    not_writable = OperationFailure(
        "not primary", 10107, {"ok": 0, "code": 10107, "errorLabels": ["RetryableWriteError"]}
    )
    executor, topology, pool, conn = make_executor([not_writable, {"ok": 1, "n": 1}])
    _step_down_during_check_out(topology, pool)
    assert await executor.execute(InsertOne("db")) == 1
    first, retry = conn.sent
    assert first["txnNumber"] == retry["txnNumber"] == Int64(1)
    assert first["lsid"] == retry["lsid"]


async def test_the_retry_of_a_write_is_judged_on_its_own_selection() -> None:
    """The retry, too, is judged on the server selected for it: a change seen during its check-out does not end
    the operation with the previous error."""
    executor, topology, pool, conn = make_executor([AutoReconnect("connection reset"), {"ok": 1, "n": 1}])
    _step_down_during_check_out(topology, pool)
    assert await executor.execute(InsertOne("db")) == 1
    assert [sent["txnNumber"] for sent in conn.sent] == [Int64(1), Int64(1)]


async def test_a_write_to_a_server_selected_as_standalone_carries_no_transaction_number() -> None:
    """The rule cuts both ways: a server selected as a standalone gets no txnNumber, whatever it is described
    as once the connection is ready."""
    executor, topology, _pool, conn = make_executor([{"ok": 1, "n": 1}])
    standalone = ServerDescription(ADDRESS, STANDALONE_HELLO)
    topology.server.description = standalone
    topology.description.get = lambda _: standalone
    assert await executor.execute(InsertOne("db")) == 1
    assert "txnNumber" not in conn.sent[0]


async def test_explicit_session_is_bound_to_its_client() -> None:
    from mongio.errors import InvalidOperation
    from mongio.sessions.client_session import ClientSession, SessionOptions

    executor, _, _, conn = make_executor([{"ok": 1, "operationTime": Timestamp(5, 1)}])
    client: Any = executor._client
    client.executor = executor
    session = ClientSession(client, SessionOptions())
    await executor.execute(RunCommand("db", "ping"), session)
    assert conn.sent[0]["lsid"] == session.session_id
    assert session.operation_time == Timestamp(5, 1)
    other = ClientSession(FakeClient(FakeTopology(FakeServer(FakePool(conn), PRIMARY))), SessionOptions())  # type: ignore[arg-type]
    with pytest.raises(InvalidOperation, match="another client"):
        await executor.execute(RunCommand("db", "ping"), other)
    await session.end_session()
    assert len(executor.session_pool) == 1  # its server session went back to the pool
    with pytest.raises(InvalidOperation, match="ended"):
        await executor.execute(RunCommand("db", "ping"), session)


async def test_succeeded_event_keeps_the_reply_as_received() -> None:
    class Reworks(RunCommand):
        def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
            reply["upserted"] = reply["upserted"][0]["_id"]
            return reply

    replies: list[Any] = []

    class Keep(CommandListener):
        def succeeded(self, event: CommandSucceededEvent) -> None:
            replies.append(event.reply)

    executor, _, _, _ = make_executor(
        [{"ok": 1, "upserted": [{"index": 0, "_id": 4}]}], publisher=CommandPublisher([Keep()])
    )
    result = await executor.execute(Reworks("db", "update"))
    assert result["upserted"] == 4
    assert replies == [{"ok": 1, "upserted": [{"index": 0, "_id": 4}]}]


# -- the retry loop: write concern errors, backoff, the token bucket ---------------------------------------------


RETRYABLE_WCE = {
    "ok": 1,
    "n": 1,
    "writeConcernError": {"code": 91, "errmsg": "Replication is being shut down"},
    "errorLabels": ["RetryableWriteError"],
}
OVERLOAD = {
    "ok": 0,
    "code": 462,
    "errmsg": "rate limited",
    "errorLabels": ["SystemOverloadedError", "RetryableError"],
}


class FixedJitter(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def make_with(options: RetryOptions, replies: list[Any]) -> tuple[Executor, FakeConnection, list[float]]:
    executor, _, _, conn = make_executor(replies, retry_options=options)
    slept: list[float] = []

    async def record(delay: float) -> None:
        slept.append(delay)

    executor.backoff_sleep = record
    return executor, conn, slept


class CheckedInsert(InsertOne):
    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> int:
        check_write_reply(reply)
        return int(reply["n"])


async def test_a_retryable_write_concern_error_in_an_ok_reply_sends_the_write_again() -> None:
    executor, topology, _, conn = make_executor([RETRYABLE_WCE, {"ok": 1, "n": 1}])
    assert await executor.execute(CheckedInsert("db")) == 1
    first, second = conn.sent
    assert first["txnNumber"] == second["txnNumber"]
    assert [getattr(error, "code", None) for error in topology.errors] == [91]  # SDAM saw the WCE's code


async def test_a_write_concern_error_without_the_label_is_the_result() -> None:
    unlabelled = {k: v for k, v in RETRYABLE_WCE.items() if k != "errorLabels"}
    executor, _, _, conn = make_executor([unlabelled, {"ok": 1, "n": 1}])
    with pytest.raises(WriteConcernError):
        await executor.execute(CheckedInsert("db"))
    assert len(conn.sent) == 1


async def test_a_write_concern_error_is_not_retried_without_a_transaction_number() -> None:
    executor, _, _, conn = make_executor(
        [RETRYABLE_WCE, {"ok": 1, "n": 1}], retry_options=RetryOptions(retry_writes=False)
    )
    with pytest.raises(WriteConcernError):
        await executor.execute(CheckedInsert("db"))
    assert len(conn.sent) == 1
    assert "txnNumber" not in conn.sent[0]


async def test_a_batch_with_a_retryable_write_concern_error_is_merged_once() -> None:
    bulk = BulkWrite.for_insert_many("db", "c", [{"_id": 1}, {"_id": 2}])
    executor, _, _, conn = make_executor([{**RETRYABLE_WCE, "n": 2}, {"ok": 1, "n": 2}])
    batch = bulk.next_batch()
    assert batch is not None
    await executor.execute(batch)
    assert bulk.next_batch() is None
    assert bulk.result().inserted_count == 2
    assert conn.sent[0]["txnNumber"] == conn.sent[1]["txnNumber"]


async def test_a_batch_whose_retry_also_fails_reports_its_write_concern_error_and_stops() -> None:
    bulk = BulkWrite.for_insert_many("db", "c", [{"_id": 1}, {"_id": 2}])
    executor, _, _, conn = make_executor([{**RETRYABLE_WCE, "n": 2}, {**RETRYABLE_WCE, "n": 2}])
    batch = bulk.next_batch()
    assert batch is not None
    with pytest.raises(BulkWriteError) as info:
        await executor.execute(batch)
    details = info.value.details
    assert details is not None
    assert details["nInserted"] == 2
    assert [error["code"] for error in details["writeConcernErrors"]] == [91]
    assert info.value.has_error_label("RetryableWriteError")
    assert bulk.partial_result["nInserted"] == 0  # the raised result is a copy
    assert len(conn.sent) == 2


async def test_retryable_writes_prose_1_transaction_numbers_refused() -> None:
    refused = {
        "ok": 0,
        "code": 20,
        "codeName": "IllegalOperation",
        "errmsg": "Transaction numbers are only allowed on a replica set member or mongos",
    }
    executor, _, _, conn = make_executor([refused])
    with pytest.raises(OperationFailure) as info:
        await executor.execute(InsertOne("db"))
    assert info.value.code == 20
    assert info.value._message == RETRYABLE_WRITES_UNSUPPORTED_MESSAGE
    assert "txnNumber" in conn.sent[0]
    executor, _, _, _ = make_executor([refused])
    with pytest.raises(OperationFailure) as info:
        await executor.execute(RunCommand("db", "insert"))
    assert info.value._message.startswith("Transaction numbers")  # only retryable writes get the advice


@pytest.mark.parametrize("jitter", [0.0, 0.25, 0.999])
async def test_overload_backoffs_use_the_injected_jitter(jitter: float) -> None:
    executor, conn, slept = make_with(RetryOptions(), [OVERLOAD, OVERLOAD, OVERLOAD])
    executor.retry_random = FixedJitter(jitter)
    with pytest.raises(OperationFailure) as info:
        await executor.execute(InsertOne("db"))
    assert info.value.has_error_label("SystemOverloadedError")
    assert len(conn.sent) == 3  # maxAdaptiveRetries (2) retries
    positive = [delay for delay in [jitter * 0.1 * 2, jitter * 0.1 * 4] if delay > 0]
    assert slept == pytest.approx(positive)


async def test_base_backoff_ms_from_the_error_replaces_the_base() -> None:
    hinted = {**OVERLOAD, "baseBackoffMS": 50}
    executor, _, slept = make_with(RetryOptions(), [hinted, hinted, {"ok": 1, "n": 1}])
    executor.retry_random = FixedJitter(1.0)
    assert await executor.execute(InsertOne("db")) == 1
    assert slept == pytest.approx([0.05 * 2, 0.05 * 4])


async def test_the_token_bucket_is_paid_for_retries_and_refilled_by_successes() -> None:
    options = RetryOptions(adaptive_retries=True)
    executor, _, slept = make_with(options, [{"ok": 1, "n": 1}, OVERLOAD, {"ok": 1, "n": 1}])
    bucket = executor._token_bucket
    assert bucket is not None
    bucket._tokens -= 5 * 1000  # room for the deposits to show
    await executor.execute(InsertOne("db"))
    assert bucket.tokens == pytest.approx(995.1)  # a first-attempt success gives 0.1 back
    await executor.execute(InsertOne("db"))
    assert bucket.tokens == pytest.approx(995.1 - 1 + 1.1)  # one retry paid, success after a retry: 1.1
    assert len(slept) == 1


async def test_no_overload_retry_without_a_token() -> None:
    options = RetryOptions(adaptive_retries=True)
    executor, conn, slept = make_with(options, [OVERLOAD, {"ok": 1, "n": 1}])
    bucket = executor._token_bucket
    assert bucket is not None
    bucket._tokens = 500  # half a token
    with pytest.raises(OperationFailure):
        await executor.execute(InsertOne("db"))
    assert len(conn.sent) == 1
    assert slept == []
