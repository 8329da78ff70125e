"""The retry policy: decisions for single failures (retryable reads/writes, overload, transactions), sequences
taken from the retryable-reads, retryable-writes and client-backpressure prose tests, and the exact backoff
and token-bucket arithmetic."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mongio.connection.pool import PoolClearedError
from mongio.error_classification import (
    NOT_WRITABLE_PRIMARY_CODES,
    RECOVERING_CODES,
    RETRYABLE_READ_CODES,
    RETRYABLE_WRITE_CODES,
    AttemptFailure,
    FailureKind,
    retryable_write_concern_error,
)
from mongio.errors import (
    AutoReconnect,
    ConnectionFailure,
    NetworkTimeout,
    OperationFailure,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
)
from mongio.execution.deadline import OperationTimeoutError
from mongio.execution.retry_policy import (
    OperationRetryability,
    RetryDecision,
    RetryOptions,
    RetryState,
    TokenBucket,
    overload_backoff,
)
from mongio.options.client_options import ClientOptions
from mongio.topology.server_description import Address

A: Address = ("a", 27017)
B: Address = ("b", 27017)
OVERLOAD = ("SystemOverloadedError", "RetryableError")
CURRENT_WIRE = 25


def server_error(code: int, *labels: str, base_backoff_ms: float | None = None) -> OperationFailure:
    details: dict[str, object] = {
        "ok": 0,
        "code": code,
        "errmsg": f"error {code}",
        "errorLabels": list(labels),
    }
    if base_backoff_ms is not None:
        details["baseBackoffMS"] = base_backoff_ms
    return OperationFailure(f"error {code}", code, details)


def overload(code: int = 462, *more: str, base_backoff_ms: float | None = None) -> OperationFailure:
    return server_error(code, *OVERLOAD, *more, base_backoff_ms=base_backoff_ms)


def fail(
    error: BaseException,
    address: Address | None = A,
    *,
    wire: int = CURRENT_WIRE,
    mongos: bool = False,
    sent: bool = True,
) -> AttemptFailure:
    return AttemptFailure.from_exception(
        error, address=address, max_wire_version=wire, from_mongos=mongos, sent=sent
    )


class FixedJitter(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.draws = 0

    def random(self) -> float:
        self.draws += 1
        return self.value


# --- single failures -----------------------------------------------------------------------------------


DEFAULTS = RetryOptions()


@dataclass
class Case:
    name: str
    operation: OperationRetryability
    error: BaseException
    retry: bool
    add_labels: frozenset[str] = frozenset()
    options: RetryOptions = DEFAULTS
    in_transaction: bool = False
    wire: int = CURRENT_WIRE
    mongos: bool = False
    sent: bool = True
    backoff: bool = False


W, R = OperationRetryability.write(), OperationRetryability.read()
W_MULTI, R_CURSOR = OperationRetryability.write(False), OperationRetryability.read(False)
RUN = OperationRetryability.run_command()
COMMIT, ABORT = OperationRetryability.commit_transaction(), OperationRetryability.abort_transaction()
RWE, TTE, UTCR = "RetryableWriteError", "TransientTransactionError", "UnknownTransactionCommitResult"
NO_WRITES = RetryOptions(retry_writes=False)
NO_READS = RetryOptions(retry_reads=False)

CASES = [
    # Retryable writes: the server's label decides; the driver labels network errors and pool clears.
    Case("write, server RetryableWriteError", W, server_error(91, RWE), True),
    Case("write, server error without label", W, server_error(91), False),
    Case("write, network error", W, ConnectionFailure("reset"), True, frozenset({RWE})),
    Case(
        "write, network error while connecting",
        W,
        ConnectionFailure("reset"),
        True,
        frozenset({RWE}),
        sent=False,
    ),
    Case("read, network error while connecting", R, ConnectionFailure("reset"), True, sent=False),
    Case("write, socket timeout", W, NetworkTimeout("timed out"), True, frozenset({RWE})),
    Case(
        "write, pool cleared at checkout",
        W,
        PoolClearedError("cleared", A),
        True,
        frozenset({RWE}),
        sent=False,
    ),
    Case("write, network error, retryWrites off", W, ConnectionFailure("reset"), False, options=NO_WRITES),
    Case("write, code 91 from a 4.2 server", W, server_error(91), True, frozenset({RWE}), wire=8),
    Case("write, code 262 from a 4.2 server", W, server_error(262), True, frozenset({RWE}), wire=8),
    Case("write, code 11000 from a 4.2 server", W, server_error(11000), False, wire=8),
    Case("write, code 91 from a 4.4 server", W, server_error(91), False, wire=9),
    Case("write, code 91, 4.2, retryWrites off", W, server_error(91), False, options=NO_WRITES, wire=8),
    Case(
        "write, mongod writeConcernError 91, 4.2",
        W,
        WriteConcernError("wce", 91, {"ok": 1, "writeConcernError": {"code": 91}}),
        True,
        frozenset({RWE}),
        wire=8,
    ),
    Case(
        "write, mongos writeConcernError 91, 4.2",
        W,
        WriteConcernError("wce", 91, {"ok": 1, "writeConcernError": {"code": 91}}),
        False,
        wire=8,
        mongos=True,
    ),
    Case("write, server selection error", W, ServerSelectionTimeoutError("none"), False, sent=False),
    Case("write, checkout timeout", W, WaitQueueTimeoutError("busy"), False, sent=False),
    Case("updateMany, network error", W_MULTI, ConnectionFailure("reset"), False),
    # Retryable reads.
    Case("read, network error", R, ConnectionFailure("reset"), True),
    Case("read, socket timeout", R, NetworkTimeout("slow"), True),
    Case("read, pool cleared", R, PoolClearedError("cleared", A), True, sent=False),
    *(Case(f"read, code {c}", R, server_error(c), True) for c in (6, 7, 89, 91, 134, 189, 262, 9001, 10107)),
    *(Case(f"read, code {c}", R, server_error(c), True) for c in (11600, 11602, 13435, 13436)),
    Case("read, code 10058 (legacy not master)", R, server_error(10058), False),
    Case("read, code 11000", R, server_error(11000), False),
    Case("read, code 2 with RetryableError only", R, server_error(2, "RetryableError"), False),
    Case("read, network error, retryReads off", R, ConnectionFailure("reset"), False, options=NO_READS),
    Case(
        "read in a transaction, network error",
        R,
        ConnectionFailure("x"),
        False,
        frozenset({TTE}),
        in_transaction=True,
    ),
    Case("getMore, network error", R_CURSOR, ConnectionFailure("reset"), False),
    # Overload errors are retried for any command when the matching option is on.
    Case("write, overload", W, overload(), True, backoff=True),
    Case("updateMany, overload", W_MULTI, overload(), True, backoff=True),
    Case("updateMany, overload, retryWrites off", W_MULTI, overload(), False, options=NO_WRITES),
    Case("getMore, overload", R_CURSOR, overload(), True, backoff=True),
    Case("getMore, overload, retryReads off", R_CURSOR, overload(), False, options=NO_READS),
    Case("read, overload, retryWrites off", R, overload(), True, options=NO_WRITES, backoff=True),
    Case("runCommand, overload", RUN, overload(), True, backoff=True),
    Case("runCommand, overload, retryReads off", RUN, overload(), False, options=NO_READS),
    Case("runCommand, overload, retryWrites off", RUN, overload(), False, options=NO_WRITES),
    Case("runCommand, network error", RUN, ConnectionFailure("reset"), False),
    Case(
        "read, overload label without RetryableError",
        R_CURSOR,
        server_error(2, "SystemOverloadedError"),
        False,
    ),
    Case(
        "read, code 91 with SystemOverloadedError only",
        R,
        server_error(91, "SystemOverloadedError"),
        True,
        backoff=True,
    ),
    Case(
        "write, overload, no adaptive retries",
        W,
        overload(),
        False,
        options=RetryOptions(max_adaptive_retries=0),
    ),
    # Transactions: no retries of ordinary commands (except overload), labels for the application.
    Case(
        "write in a transaction, network error",
        W,
        ConnectionFailure("x"),
        False,
        frozenset({TTE}),
        in_transaction=True,
    ),
    Case(
        "write in a transaction, selection error",
        W,
        ServerSelectionTimeoutError("none"),
        False,
        frozenset({TTE}),
        in_transaction=True,
        sent=False,
    ),
    Case("write in a transaction, 4.2 code 91", W, server_error(91), False, in_transaction=True, wire=8),
    Case("write in a transaction, overload", W, overload(), True, in_transaction=True, backoff=True),
    Case(
        "commit, network error, retryWrites off",
        COMMIT,
        ConnectionFailure("x"),
        True,
        frozenset({RWE, UTCR}),
        options=NO_WRITES,
        in_transaction=True,
    ),
    Case(
        "commit, server RetryableWriteError",
        COMMIT,
        server_error(189, RWE),
        True,
        frozenset({UTCR}),
        in_transaction=True,
    ),
    Case(
        "commit, selection error",
        COMMIT,
        ServerSelectionTimeoutError("x"),
        False,
        frozenset({UTCR}),
        in_transaction=True,
        sent=False,
    ),
    Case("commit, MaxTimeMSExpired", COMMIT, server_error(50), False, frozenset({UTCR}), in_transaction=True),
    Case(
        "commit, writeConcernError 64",
        COMMIT,
        WriteConcernError("wce", 64, {"ok": 1, "writeConcernError": {"code": 64}}),
        False,
        frozenset({UTCR}),
        in_transaction=True,
    ),
    Case(
        "commit, writeConcernError 100 (unsatisfiable)",
        COMMIT,
        WriteConcernError("wce", 100, {"ok": 1, "writeConcernError": {"code": 100}}),
        False,
        in_transaction=True,
    ),
    Case(
        "commit, writeConcernError 79 (unknown replication write concern)",
        COMMIT,
        WriteConcernError("wce", 79, {"ok": 1, "writeConcernError": {"code": 79}}),
        False,
        in_transaction=True,
    ),
    Case("commit, NoSuchTransaction", COMMIT, server_error(251, TTE), False, in_transaction=True),
    Case("commit, overload", COMMIT, overload(), True, in_transaction=True, backoff=True),
    Case(
        "abort, network error",
        ABORT,
        ConnectionFailure("x"),
        True,
        frozenset({RWE, TTE}),
        in_transaction=True,
    ),
    Case(
        "abort, network error, retryWrites off",
        ABORT,
        ConnectionFailure("x"),
        True,
        frozenset({RWE, TTE}),
        options=NO_WRITES,
        in_transaction=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_first_failure_decision(case: Case) -> None:
    jitter = FixedJitter(0.5)
    state = RetryState(case.operation, case.options, in_transaction=case.in_transaction, rng=jitter)
    decision = state.on_failure(fail(case.error, wire=case.wire, mongos=case.mongos, sent=case.sent))
    assert decision.retry is case.retry, decision.reason
    assert decision.add_labels == case.add_labels
    if case.retry:
        assert decision.error is None
        assert decision.backoff == (0.5 * 0.2 if case.backoff else 0.0)
        assert jitter.draws == (1 if case.backoff else 0)
    else:
        assert decision.error is case.error
        assert decision.backoff == 0.0


def test_network_error_during_commit_loses_transient_label() -> None:
    error = ConnectionFailure("reset", error_labels=["TransientTransactionError"])
    state = RetryState(COMMIT, RetryOptions(), in_transaction=True)
    decision = state.on_failure(fail(error))
    assert decision.remove_labels == {"TransientTransactionError"}
    assert UTCR in decision.add_labels


def test_labels_the_error_already_has_are_not_added_again() -> None:
    state = RetryState(W, RetryOptions())
    decision = state.on_failure(fail(AutoReconnect("x", error_labels=[RWE])))
    assert decision.retry and decision.add_labels == frozenset()


# --- attempt counts, reported errors -------------------------------------------------------------------


def run_sequence(
    state: RetryState, errors: list[AttemptFailure], remaining: list[float | None] | None = None
) -> list[RetryDecision]:
    """Feed failures until the policy stops; return the decisions (the attempt count is their number)."""
    decisions = []
    for index, failure in enumerate(errors):
        left = remaining[index] if remaining is not None else None
        decision = state.on_failure(failure, remaining=left)
        decisions.append(decision)
        if not decision.retry:
            return decisions
    raise AssertionError("the policy was still retrying when the failures ran out")


def test_non_csot_retryable_write_is_retried_once_and_reports_the_second_error() -> None:
    first, second = ConnectionFailure("one"), ConnectionFailure("two")
    decisions = run_sequence(RetryState(W, RetryOptions()), [fail(first), fail(second), fail(first)])
    assert [d.retry for d in decisions] == [True, False]
    assert decisions[-1].error is second


def test_non_csot_retryable_read_is_retried_once() -> None:
    errors = [fail(server_error(91)), fail(server_error(189)), fail(server_error(6))]
    decisions = run_sequence(RetryState(R, RetryOptions()), errors)
    assert len(decisions) == 2
    assert decisions[-1].error is errors[1].error


def test_read_retry_failing_at_checkout_reports_the_first_error() -> None:
    first = server_error(91)
    decisions = run_sequence(
        RetryState(R, RetryOptions()), [fail(first), fail(PoolClearedError("cleared", A), sent=False)]
    )
    assert decisions[-1].error is first


def test_no_server_for_the_retry_reports_the_previous_error() -> None:
    first = ConnectionFailure("reset")
    state = RetryState(W, RetryOptions(), csot=True)
    assert state.on_failure(fail(first), remaining=5.0).retry
    decision = state.on_failure(fail(ServerSelectionTimeoutError("none"), None, sent=False), remaining=4.0)
    assert not decision.retry and decision.error is first


def test_retry_server_without_retryable_writes_reports_the_previous_error() -> None:
    first = server_error(91, RWE)
    state = RetryState(W, RetryOptions())
    assert state.on_failure(fail(first)).retry
    assert state.cannot_retry().error is first


def test_csot_retries_until_the_time_runs_out_then_raises_a_timeout_error() -> None:
    state = RetryState(R, RetryOptions(), csot=True)
    errors = [fail(ConnectionFailure(f"reset {i}")) for i in range(6)]
    decisions = run_sequence(state, errors, remaining=[5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    assert [d.retry for d in decisions] == [True] * 5 + [False]
    final = decisions[-1].error
    assert isinstance(final, OperationTimeoutError)
    assert final.cause is errors[-1].error
    assert "reset 5" in str(final)


def test_csot_without_bound_retries_non_overload_errors_without_limit() -> None:
    state = RetryState(W, RetryOptions(), csot=True)
    for _ in range(50):
        assert state.on_failure(fail(ConnectionFailure("x")), remaining=math.inf).retry


def test_csot_overload_errors_are_capped_at_max_adaptive_retries() -> None:
    state = RetryState(R, RetryOptions(), csot=True, rng=FixedJitter(0.0))
    decisions = run_sequence(state, [fail(overload())] * 5, remaining=[math.inf] * 5)
    assert len(decisions) == 3


def test_backoff_that_would_outlast_the_deadline_stops_with_the_error_itself() -> None:
    error = overload()
    state = RetryState(R, RetryOptions(), csot=True, rng=FixedJitter(1.0))
    decision = state.on_failure(fail(error), remaining=0.15)  # backoff would be 0.2 s
    assert not decision.retry and decision.error is error


def test_backpressure_prose_3_overload_retried_max_retries_times() -> None:
    error = overload()
    decisions = run_sequence(RetryState(R, RetryOptions(), rng=FixedJitter(0.3)), [fail(error)] * 10)
    assert len(decisions) == 3  # MAX_RETRIES + 1 started commands
    final = decisions[-1].error
    assert isinstance(final, OperationFailure)
    assert final.has_error_label("RetryableError") and final.has_error_label("SystemOverloadedError")


def test_backpressure_prose_4_max_adaptive_retries_is_configurable() -> None:
    options = RetryOptions(max_adaptive_retries=1)
    decisions = run_sequence(RetryState(R, options, rng=FixedJitter(0.3)), [fail(overload())] * 10)
    assert len(decisions) == 2


def test_backpressure_prose_1_and_5_backoff_sums() -> None:
    # Jitter pinned to 1: the two backoffs are 0.2 + 0.4 s by default, 0.1 + 0.2 s with baseBackoffMS=50.
    for base, expected in ((None, [0.2, 0.4]), (50, [0.1, 0.2])):
        state = RetryState(W, RetryOptions(), rng=FixedJitter(1.0))
        decisions = run_sequence(state, [fail(overload(base_backoff_ms=base))] * 3)
        assert [d.backoff for d in decisions[:-1]] == pytest.approx(expected)
        assert sum(d.backoff for d in decisions) == pytest.approx(sum(expected))
    zero = run_sequence(RetryState(W, RetryOptions(), rng=FixedJitter(0.0)), [fail(overload())] * 3)
    assert [d.backoff for d in zero] == [0.0, 0.0, 0.0]


def test_non_positive_base_backoff_ms_is_ignored() -> None:
    assert overload_backoff(1, 1.0, 0) == pytest.approx(0.2)
    assert overload_backoff(1, 1.0, -5) == pytest.approx(0.2)
    assert overload_backoff(2, 0.5, 30) == pytest.approx(0.5 * 0.12)
    assert overload_backoff(20, 1.0) == 10.0  # the 10-second cap
    assert overload_backoff(7, 0.25, 1000) == 0.25 * 10.0


@pytest.mark.parametrize(("operation", "labels"), [(R, ("RetryableError",)), (W, ("RetryableError", RWE))])
def test_reads_and_writes_prose_4_overload_sets_the_limit_for_later_errors(
    operation: OperationRetryability, labels: tuple[str, ...]
) -> None:
    # The first error is an overload error, every later one a plain retryable error: MAX_RETRIES + 1
    # attempts, and only the first retry backs off (prose tests 5).
    jitter = FixedJitter(1.0)
    state = RetryState(operation, RetryOptions(), rng=jitter)
    errors = [fail(overload(91))] + [fail(server_error(91, *labels))] * 5
    decisions = run_sequence(state, errors)
    assert len(decisions) == 3
    assert [d.backoff for d in decisions[:2]] == [pytest.approx(0.2), 0.0]
    assert jitter.draws == 1


def test_non_overload_then_overload_raises_the_limit_mid_operation() -> None:
    state = RetryState(W, RetryOptions(), rng=FixedJitter(0.5))
    errors = [fail(ConnectionFailure("x")), fail(overload()), fail(overload())]
    decisions = run_sequence(state, errors)
    assert [d.retry for d in decisions] == [True, True, False]
    assert decisions[1].backoff == pytest.approx(0.5 * 0.4)  # attempt 2


def test_writes_prose_6_case_1_only_errors_that_wrote_reports_the_last() -> None:
    errors = [fail(overload(91)), fail(overload(10107)), fail(overload(10107))]
    decisions = run_sequence(RetryState(W, RetryOptions(), rng=FixedJitter(0.0)), errors)
    final = decisions[-1].error
    assert isinstance(final, OperationFailure) and final.code == 10107


def test_writes_prose_6_case_2_all_no_writes_performed_reports_the_first() -> None:
    first = overload(91, "NoWritesPerformed")
    errors = [fail(first)] + [fail(overload(10107, "NoWritesPerformed"))] * 2
    decisions = run_sequence(RetryState(W, RetryOptions(), rng=FixedJitter(0.0)), errors)
    assert decisions[-1].error is first


def test_writes_prose_6_case_3_reports_the_error_that_wrote() -> None:
    first = overload(91)
    errors = [fail(first)] + [fail(overload(91, "NoWritesPerformed"))] * 2
    decisions = run_sequence(RetryState(W, RetryOptions(), rng=FixedJitter(0.0)), errors)
    final = decisions[-1].error
    assert final is first
    assert isinstance(final, OperationFailure) and not final.has_error_label("NoWritesPerformed")


def test_writes_prose_3_write_concern_error_then_no_writes_performed() -> None:
    wce = WriteConcernError("wce", 91, {"ok": 1, "writeConcernError": {"code": 91}, "errorLabels": [RWE]})
    retry_error = server_error(10107, RWE, "NoWritesPerformed")
    decisions = run_sequence(RetryState(W, RetryOptions()), [fail(wce), fail(retry_error)])
    assert decisions[-1].error is wce


def test_a_connection_error_on_the_retry_reports_the_first_error() -> None:
    first = server_error(91, RWE)
    state = RetryState(W, RetryOptions())
    assert state.on_failure(fail(first)).retry
    decision = state.on_failure(fail(ConnectionFailure("refused"), sent=False))
    assert not decision.retry and decision.error is first
    assert decision.add_labels == {RWE}


def test_write_errors_after_a_checkout_failure_report_the_server_error() -> None:
    # A retryable server error, then a pool clear at checkout: the server error may have written.
    first = server_error(91, RWE)
    state = RetryState(W, RetryOptions(), csot=True)
    assert state.on_failure(fail(first), remaining=1.0).retry
    second = state.on_failure(fail(PoolClearedError("cleared", A), sent=False), remaining=1.0)
    assert second.retry and second.add_labels == {RWE}
    final = state.on_failure(fail(ServerSelectionTimeoutError("none"), None, sent=False), remaining=0.5)
    assert final.error is first


# --- deprioritized servers -----------------------------------------------------------------------------


def test_replica_set_non_overload_errors_retry_on_the_same_server() -> None:
    state = RetryState(R, RetryOptions(enable_overload_retargeting=True))
    assert state.on_failure(fail(server_error(91), A)).deprioritized == ()


def test_replica_set_overload_errors_retarget_only_when_enabled() -> None:
    enabled = RetryState(R, RetryOptions(enable_overload_retargeting=True), rng=FixedJitter(0))
    assert enabled.on_failure(fail(overload(), A)).deprioritized == (A,)
    assert enabled.on_failure(fail(overload(), B)).deprioritized == (A, B)
    disabled = RetryState(R, RetryOptions(), rng=FixedJitter(0))
    assert disabled.on_failure(fail(overload(), A)).deprioritized == ()


def test_sharded_clusters_retarget_on_every_retryable_error() -> None:
    state = RetryState(W, RetryOptions(), sharded=True)
    assert state.on_failure(fail(server_error(6, RWE), A)).deprioritized == (A,)
    overloaded = RetryState(R, RetryOptions(), sharded=True, rng=FixedJitter(0))
    assert overloaded.on_failure(fail(overload(), B)).deprioritized == (B,)


# --- token bucket --------------------------------------------------------------------------------------


def test_token_bucket_arithmetic_is_exact() -> None:
    bucket = TokenBucket()
    assert bucket.tokens == 1000 and bucket.capacity == 1000
    bucket.deposit(5)
    assert bucket.tokens == 1000  # never beyond capacity
    assert bucket.consume(1)
    for _ in range(10):
        bucket.deposit(0.1)
    assert bucket.tokens == 1000
    assert bucket.consume(3)
    for _ in range(7):
        bucket.deposit(0.1)
    assert bucket.tokens == 997.7
    small = TokenBucket(capacity=1.5)
    assert small.consume(1) and not small.consume(1)
    assert small.tokens == 0.5


def test_backpressure_scenario_with_exact_numbers() -> None:
    """Overload, overload, success; then a first-attempt success; then overload followed by a non-overload
    error on the retry; then overload three times: attempt counts, backoffs and the balance after each step."""
    seed = 20260813
    jitter_source = random.Random(seed)
    expected_jitters = random.Random(seed)
    bucket = TokenBucket()
    assert bucket.consume(5)  # some earlier retries left the bucket below capacity
    assert bucket.tokens == 995
    options = RetryOptions(adaptive_retries=True)

    def op(kind: OperationRetryability = W) -> RetryState:
        return RetryState(kind, options, token_bucket=bucket, rng=jitter_source)

    # 1. overload, overload, success: 3 attempts, two backoffs from the seeded jitter, 2 tokens paid, 1.1 back.
    state = op()
    first = state.on_failure(fail(overload()))
    assert first.retry and first.backoff == expected_jitters.random() * 0.2
    assert bucket.tokens == 994
    second = state.on_failure(fail(overload()))
    assert second.retry and second.backoff == expected_jitters.random() * 0.4
    assert bucket.tokens == 993
    state.on_success()
    assert state.attempt == 2  # three attempts
    assert bucket.tokens == 994.1

    # 2. success on the first attempt: 0.1 back.
    op().on_success()
    assert bucket.tokens == 994.2

    # 3. overload, then a non-overload non-retryable error on the retry: 1 paid, 1 back.
    state = op()
    assert state.on_failure(fail(overload())).retry
    expected_jitters.random()
    assert bucket.tokens == 993.2
    final = state.on_failure(fail(server_error(11000)))
    assert not final.retry
    assert bucket.tokens == 994.2

    # 4. three overload errors: two retries paid for, the third error is raised with nothing back.
    state = op(R)
    decisions = run_sequence(state, [fail(overload())] * 5)
    assert len(decisions) == 3
    assert [d.backoff for d in decisions[:2]] == [
        expected_jitters.random() * 0.2,
        expected_jitters.random() * 0.4,
    ]
    assert bucket.tokens == 992.2

    # 5. a non-overload retryable error first: retried without a token and without backoff; success then
    # gives 1.1 back.
    state = op()
    decision = state.on_failure(fail(ConnectionFailure("reset")))
    assert decision.retry and decision.backoff == 0.0
    assert bucket.tokens == 992.2
    state.on_success()
    assert bucket.tokens == 993.3


def test_no_retry_without_a_token() -> None:
    bucket = TokenBucket(capacity=1)
    options = RetryOptions(adaptive_retries=True)
    state = RetryState(W, options, token_bucket=bucket, rng=FixedJitter(0.5))
    assert state.on_failure(fail(overload())).retry
    assert bucket.tokens == 0
    error = overload()
    decision = state.on_failure(fail(error))
    assert not decision.retry and decision.error is error
    # Non-overload retries never need tokens.
    other = RetryState(W, options, token_bucket=bucket)
    assert other.on_failure(fail(ConnectionFailure("x"))).retry
    assert bucket.tokens == 0


def test_token_bucket_ignored_unless_adaptive_retries_is_on() -> None:
    bucket = TokenBucket(capacity=0)
    state = RetryState(W, RetryOptions(), token_bucket=bucket, rng=FixedJitter(0.5))
    assert state.on_failure(fail(overload())).retry
    state.on_success()
    assert bucket.tokens == 0


def test_retry_options_from_client_options() -> None:
    options = RetryOptions.from_client_options(
        ClientOptions.from_uri("mongodb://h/?retryReads=false&maxAdaptiveRetries=4&adaptiveRetries=true")
    )
    assert options == RetryOptions(
        retry_reads=False,
        retry_writes=True,
        max_adaptive_retries=4,
        enable_overload_retargeting=False,
        adaptive_retries=True,
    )


# --- failure classification ----------------------------------------------------------------------------


def test_attempt_failure_classification() -> None:
    assert fail(ConnectionFailure("x")).kind is FailureKind.NETWORK
    assert fail(OSError("x")).kind is FailureKind.NETWORK
    assert fail(NetworkTimeout("x")).kind is FailureKind.TIMEOUT
    assert fail(TimeoutError()).kind is FailureKind.TIMEOUT
    assert fail(PoolClearedError("x", A)).kind is FailureKind.POOL_CLEARED
    assert fail(ServerSelectionTimeoutError("x")).kind is FailureKind.SELECTION
    assert fail(WaitQueueTimeoutError("x")).kind is FailureKind.CLIENT
    connecting = fail(ConnectionFailure("x"), sent=False)
    assert connecting.kind is FailureKind.NETWORK and not connecting.write_attempted
    assert not fail(server_error(91), sent=False).write_attempted
    assert fail(ValueError("x")).kind is FailureKind.CLIENT
    server = fail(overload(base_backoff_ms=50))
    assert server.kind is FailureKind.SERVER and server.code == 462 and server.base_backoff_ms == 50
    assert server.is_overload and server.is_retryable_overload and server.write_attempted
    assert not fail(server_error(91, "NoWritesPerformed")).write_attempted
    assert not fail(PoolClearedError("x", A), sent=False).write_attempted
    wce = fail(WriteConcernError("w", 64, {"ok": 1, "writeConcernError": {"code": 64}}))
    assert wce.write_concern_error and wce.code == 64


def test_retryable_code_tables_extend_the_sdam_state_change_codes() -> None:
    state_change = RECOVERING_CODES | NOT_WRITABLE_PRIMARY_CODES
    assert state_change - {10058} <= RETRYABLE_WRITE_CODES
    assert 10058 not in RETRYABLE_WRITE_CODES
    assert {134} == RETRYABLE_READ_CODES - RETRYABLE_WRITE_CODES


_ERRORS = st.sampled_from(
    [
        lambda: overload(),
        lambda: overload(91, "NoWritesPerformed", base_backoff_ms=50),
        lambda: server_error(91, RWE),
        lambda: server_error(2, "SystemOverloadedError"),
        lambda: server_error(11000),
        lambda: ConnectionFailure("reset"),
        lambda: PoolClearedError("cleared", A),
        lambda: ServerSelectionTimeoutError("none"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    makers=st.lists(_ERRORS, min_size=1, max_size=12),
    kind=st.sampled_from([R, W, W_MULTI, R_CURSOR, RUN, COMMIT]),
    max_adaptive=st.integers(min_value=0, max_value=4),
    adaptive=st.booleans(),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_retry_invariants(
    makers: list[Callable[[], BaseException]],
    kind: OperationRetryability,
    max_adaptive: int,
    adaptive: bool,
    seed: int,
) -> None:
    bucket = TokenBucket(capacity=3)
    bucket.consume(1)
    options = RetryOptions(max_adaptive_retries=max_adaptive, adaptive_retries=adaptive)
    state = RetryState(kind, options, token_bucket=bucket, rng=random.Random(seed))
    errors = [maker() for maker in makers]
    attempts = 0
    for error in errors:
        attempts += 1
        before = bucket.tokens
        decision = state.on_failure(fail(error, sent=not isinstance(error, ServerSelectionTimeoutError)))
        assert 0 <= bucket.tokens <= bucket.capacity
        assert 0.0 <= decision.backoff <= 10.0
        if decision.backoff > 0:
            assert "SystemOverloadedError" in (getattr(error, "error_labels", None) or ())
        if decision.retry and adaptive and decision.backoff > 0:
            assert bucket.tokens <= before
        if not decision.retry:
            # The reported error is one of those seen (or a timeout error wrapping one).
            assert any(decision.error is e for e in errors[:attempts]) or isinstance(
                decision.error, OperationTimeoutError
            )
            break
    assert attempts <= max(1, max_adaptive) + 1


# -- write concern errors in ok: 1 replies ---------------------------------------------------------------------


def _wce_reply(code: int, labels: list[str] | None = None) -> dict[str, object]:
    reply: dict[str, object] = {"ok": 1, "n": 1, "writeConcernError": {"code": code, "errmsg": "wce"}}
    if labels is not None:
        reply["errorLabels"] = labels
    return reply


@pytest.mark.parametrize(
    ("reply", "wire", "mongos", "retryable"),
    [
        (_wce_reply(91, ["RetryableWriteError"]), 21, False, True),  # labelled by a 4.4+ server
        (_wce_reply(91), 21, False, False),  # a 4.4+ server that did not label it: not retryable
        (_wce_reply(91), 8, False, True),  # before 4.4: the code is in the table
        (_wce_reply(91), 8, True, False),  # ... but never from mongos, which has retried already
        (_wce_reply(100), 8, False, False),  # UnsatisfiableWriteConcern is not in the table
        ({"ok": 1, "n": 1}, 21, False, False),  # no write concern error at all
    ],
)
def test_retryable_write_concern_error(reply: dict[str, object], wire: int, mongos: bool, retryable: bool) -> None:
    error = retryable_write_concern_error(reply, max_wire_version=wire, from_mongos=mongos)
    if not retryable:
        assert error is None
        return
    assert isinstance(error, WriteConcernError)
    assert error.code == 91
    assert error.has_error_label("RetryableWriteError")
