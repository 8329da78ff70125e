"""The transaction state machine: every legal and illegal transition, the fields each command carries, the
commit write concern on retries, and the with_transaction retry decisions."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from mongio.bson.int64 import Int64
from mongio.bson.timestamp import Timestamp
from mongio.error_classification import is_max_time_ms_expired
from mongio.errors import ConfigurationError, ConnectionFailure, InvalidOperation, OperationFailure
from mongio.execution.deadline import OperationTimeoutError
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import ReadPreference
from mongio.options.write_concern import WriteConcern
from mongio.sessions.transaction_state import (
    ClientTransactionDefaults,
    Transaction,
    TransactionOptions,
    TxnState,
    check_no_operation_concerns,
    check_read_preference,
)
from mongio.sessions.with_transaction_policy import (
    NextStep,
    WithTransactionRetry,
    callback_ended_transaction,
    transaction_backoff,
)

S = TxnState


def _in_state(state: TxnState) -> Transaction:
    """A transaction driven into ``state`` through the public transitions only."""
    txn = Transaction()
    if state is S.NO_TXN:
        return txn
    txn.start(TransactionOptions())
    if state is S.STARTING:
        return txn
    if state is S.COMMITTED_EMPTY:
        txn.begin_commit()
        return txn
    txn.first_command_done()
    if state is S.IN_PROGRESS:
        return txn
    if state is S.COMMITTED:
        txn.begin_commit()
    else:
        txn.begin_abort()
    return txn


@pytest.mark.parametrize("state", list(TxnState))
def test_helper_reaches_each_state(state: TxnState) -> None:
    assert _in_state(state).state is state


# (from state, action) -> (to state, command sent) or the error message.
LEGAL: dict[tuple[TxnState, str], tuple[TxnState, bool | None]] = {
    (S.NO_TXN, "start"): (S.STARTING, None),
    (S.COMMITTED, "start"): (S.STARTING, None),
    (S.COMMITTED_EMPTY, "start"): (S.STARTING, None),
    (S.ABORTED, "start"): (S.STARTING, None),
    (S.STARTING, "commit"): (S.COMMITTED_EMPTY, False),
    (S.COMMITTED_EMPTY, "commit"): (S.COMMITTED_EMPTY, False),
    (S.IN_PROGRESS, "commit"): (S.COMMITTED, True),
    (S.COMMITTED, "commit"): (S.COMMITTED, True),
    (S.STARTING, "abort"): (S.ABORTED, False),
    (S.IN_PROGRESS, "abort"): (S.ABORTED, True),
    (S.STARTING, "operation"): (S.STARTING, None),
    (S.IN_PROGRESS, "operation"): (S.IN_PROGRESS, None),
    (S.NO_TXN, "operation"): (S.NO_TXN, None),
    (S.COMMITTED, "operation"): (S.NO_TXN, None),
    (S.COMMITTED_EMPTY, "operation"): (S.NO_TXN, None),
    (S.ABORTED, "operation"): (S.NO_TXN, None),
}
ILLEGAL: dict[tuple[TxnState, str], str] = {
    (S.STARTING, "start"): "Transaction already in progress",
    (S.IN_PROGRESS, "start"): "Transaction already in progress",
    (S.NO_TXN, "commit"): "No transaction started",
    (S.ABORTED, "commit"): "Cannot call commitTransaction after calling abortTransaction",
    (S.NO_TXN, "abort"): "No transaction started",
    (S.COMMITTED, "abort"): "Cannot call abortTransaction after calling commitTransaction",
    (S.COMMITTED_EMPTY, "abort"): "Cannot call abortTransaction after calling commitTransaction",
    (S.ABORTED, "abort"): "Cannot call abortTransaction twice",
}

ACTIONS: dict[str, Callable[[Transaction], bool | None]] = {
    "start": lambda t: t.start(TransactionOptions()),
    "commit": Transaction.begin_commit,
    "abort": Transaction.begin_abort,
    "operation": Transaction.before_operation,
}


def test_tables_cover_every_state_and_action() -> None:
    assert set(LEGAL) | set(ILLEGAL) == {(s, a) for s in TxnState for a in ACTIONS}
    assert not set(LEGAL) & set(ILLEGAL)


@pytest.mark.parametrize(("state", "action"), list(LEGAL))
def test_legal_transitions(state: TxnState, action: str) -> None:
    txn = _in_state(state)
    sent = ACTIONS[action](txn)
    to_state, command_sent = LEGAL[(state, action)]
    assert txn.state is to_state
    assert sent is command_sent


@pytest.mark.parametrize(("state", "action"), list(ILLEGAL))
def test_illegal_transitions_raise_the_spec_message_and_change_nothing(state: TxnState, action: str) -> None:
    txn = _in_state(state)
    options_before = txn.options
    with pytest.raises(InvalidOperation) as info:
        ACTIONS[action](txn)
    assert str(info.value) == ILLEGAL[(state, action)]
    assert txn.state is state
    assert txn.options is options_before


def test_first_command_moves_starting_to_in_progress_only() -> None:
    txn = _in_state(S.STARTING)
    txn.first_command_done()
    assert txn.state is S.IN_PROGRESS
    txn.first_command_done()
    assert txn.state is S.IN_PROGRESS
    ended = _in_state(S.ABORTED)
    ended.first_command_done()
    assert ended.state is S.ABORTED


def test_snapshot_sessions_cannot_start_transactions() -> None:
    txn = Transaction()
    with pytest.raises(InvalidOperation, match="Transactions are not supported in snapshot sessions"):
        txn.start(TransactionOptions(), snapshot=True)
    assert txn.state is S.NO_TXN


def test_unacknowledged_write_concern_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="transactions do not support unacknowledged write concerns"):
        TransactionOptions(write_concern=WriteConcern(w=0))
    # Inherited from the client: refused when the resolved options are built.
    with pytest.raises(ConfigurationError, match="transactions do not support unacknowledged write concerns"):
        TransactionOptions().inherit(None, ClientTransactionDefaults(write_concern=WriteConcern(w=0)))


def test_client_w0_is_refused_only_when_the_transaction_inherits_it() -> None:
    """Transactions spec, TransactionOptions > writeConcern: the error is for an unacknowledged write concern
    the user provides "or if defaults would result in" one; a w=0 client whose transaction (or session
    default) sets an acknowledged write concern starts transactions."""
    client = ClientTransactionDefaults(write_concern=WriteConcern(w=0))
    own = TransactionOptions(write_concern=WriteConcern(w=1)).inherit(None, client)
    assert own.write_concern == WriteConcern(w=1)
    session_default = TransactionOptions(write_concern=WriteConcern(w="majority"))
    assert TransactionOptions().inherit(session_default, client).write_concern == WriteConcern(w="majority")


def test_options_inherit_field_by_field() -> None:
    session_defaults = TransactionOptions(read_concern=ReadConcern("majority"), max_commit_time_ms=50)
    client = TransactionOptions(
        read_concern=ReadConcern("local"),
        write_concern=WriteConcern(w=1),
        read_preference=ReadPreference.PRIMARY,
    )
    own = TransactionOptions(write_concern=WriteConcern(w="majority"))
    resolved = own.inherit(session_defaults, client)
    assert resolved.read_concern == ReadConcern("majority")
    assert resolved.write_concern == WriteConcern(w="majority")
    assert resolved.read_preference == ReadPreference.PRIMARY
    assert resolved.max_commit_time_ms == 50


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_max_commit_time_ms_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        TransactionOptions(max_commit_time_ms=bad)  # type: ignore[arg-type]


def test_read_preference_must_be_primary_for_reads() -> None:
    check_read_preference(ReadPreference.PRIMARY)
    with pytest.raises(InvalidOperation, match="read preference in a transaction must be primary"):
        check_read_preference(ReadPreference.NEAREST)


def test_operations_cannot_bring_their_own_concerns() -> None:
    check_no_operation_concerns()
    with pytest.raises(InvalidOperation, match=r"^Cannot set read concern after starting a transaction\.$"):
        check_no_operation_concerns(read_concern=True)
    with pytest.raises(InvalidOperation, match=r"^Cannot set write concern after starting a transaction\.$"):
        check_no_operation_concerns(write_concern=True)


def test_first_command_fields_then_later_command_fields() -> None:
    txn = Transaction()
    txn.start(TransactionOptions(read_concern=ReadConcern("snapshot"), write_concern=WriteConcern(w=1)))
    first = txn.command_fields(7, after_cluster_time=Timestamp(42, 1))
    assert first == {
        "txnNumber": Int64(7),
        "startTransaction": True,
        "readConcern": {"level": "snapshot", "afterClusterTime": Timestamp(42, 1)},
        "autocommit": False,
    }
    assert isinstance(first["txnNumber"], Int64)
    assert "writeConcern" not in first
    # A retry of the first command after an overload error is still the first command.
    assert txn.command_fields(7)["startTransaction"] is True
    txn.first_command_done()
    later = txn.command_fields(7, after_cluster_time=Timestamp(50, 0))
    assert later == {"txnNumber": Int64(7), "autocommit": False}


def test_first_command_without_read_concern() -> None:
    txn = Transaction()
    txn.start(TransactionOptions())
    assert "readConcern" not in txn.command_fields(1)
    assert txn.command_fields(1, after_cluster_time=Timestamp(3, 4))["readConcern"] == {
        "afterClusterTime": Timestamp(3, 4)
    }


def test_commit_and_abort_commands() -> None:
    txn = Transaction()
    txn.start(TransactionOptions(write_concern=WriteConcern(w=2, j=True), max_commit_time_ms=500))
    txn.first_command_done()
    txn.recovery_token = {"recoveryShardId": "sh0"}
    assert txn.begin_commit()
    assert txn.commit_command(3) == {
        "commitTransaction": 1,
        "txnNumber": Int64(3),
        "autocommit": False,
        "writeConcern": {"w": 2, "j": True},
        "maxTimeMS": 500,
        "recoveryToken": {"recoveryShardId": "sh0"},
    }
    other = Transaction()
    other.start(TransactionOptions(write_concern=WriteConcern(w="majority")))
    other.first_command_done()
    assert other.begin_abort()
    assert other.abort_command(9) == {
        "abortTransaction": 1,
        "txnNumber": Int64(9),
        "autocommit": False,
        "writeConcern": {"w": "majority"},
    }
    plain = Transaction()
    plain.start(TransactionOptions(write_concern=WriteConcern()))
    plain.first_command_done()
    plain.begin_abort()
    assert "writeConcern" not in plain.abort_command(1)


def _committing(write_concern: WriteConcern | None) -> Transaction:
    txn = Transaction()
    txn.start(TransactionOptions(write_concern=write_concern))
    txn.first_command_done()
    assert txn.begin_commit()
    return txn


def test_commit_write_concern_on_retries() -> None:
    txn = _committing(WriteConcern(w=2, wtimeout=5))
    assert txn.commit_write_concern() == {"w": 2, "wtimeout": 5}
    # An overload failure: the retry keeps the write concern of the failed attempt.
    txn.record_commit_failure(retryable_overload=True)
    assert txn.commit_write_concern() == {"w": 2, "wtimeout": 5}
    # Any other failure: w becomes majority, the other options stay.
    txn.record_commit_failure(retryable_overload=False)
    assert txn.commit_write_concern() == {"w": "majority", "wtimeout": 5}
    # Once majority, an overload failure does not undo it.
    txn.record_commit_failure(retryable_overload=True)
    assert txn.commit_write_concern() == {"w": "majority", "wtimeout": 5}


def test_commit_retry_adds_wtimeout_10000_when_missing() -> None:
    txn = _committing(None)
    assert txn.commit_write_concern() is None
    assert "writeConcern" not in txn.commit_command(1)
    txn.record_commit_failure(retryable_overload=False)
    assert txn.commit_command(1)["writeConcern"] == {"w": "majority", "wtimeout": 10000}
    journaled = _committing(WriteConcern(w=1, j=True))
    journaled.record_commit_failure(retryable_overload=False)
    assert journaled.commit_write_concern() == {"w": "majority", "j": True, "wtimeout": 10000}


def test_application_recommit_uses_majority() -> None:
    txn = _committing(WriteConcern(w=1))
    assert txn.commit_write_concern() == {"w": 1}
    assert txn.begin_commit()  # the application calls commit again
    assert txn.commit_write_concern() == {"w": "majority", "wtimeout": 10000}
    # A new transaction starts over with its own write concern.
    txn.before_operation()
    txn.start(TransactionOptions(write_concern=WriteConcern(w=1)))
    txn.first_command_done()
    txn.begin_commit()
    assert txn.commit_write_concern() == {"w": 1}


# with_transaction decisions


def _labelled(*labels: str, code: int = 1) -> OperationFailure:
    return OperationFailure("boom", code, {"ok": 0, "code": code, "errorLabels": list(labels)})


def test_transaction_backoff_formula_and_cap() -> None:
    assert transaction_backoff(1, 1.0) == pytest.approx(0.0075)
    assert transaction_backoff(2, 0.5) == pytest.approx(0.5 * 0.005 * 2.25)
    assert transaction_backoff(20, 1.0) == 0.5
    assert transaction_backoff(5, 0.0) == 0.0


def test_backoff_with_jitter_one_sums_to_the_prose_tests_2_3_seconds_over_13_retries() -> None:
    # "Retry Backoff is Enforced": 13 transient commit failures cost about 2.3 s more with jitter ~1.
    always_one = random.Random()
    always_one.random = lambda: 1.0  # type: ignore[method-assign]
    retry = WithTransactionRetry(0.0, rng=always_one)
    total = sum(retry.before_transaction(0.0) for _ in range(14))
    assert retry.transaction_attempt == 14
    assert abs(total - 2.3) < 0.05


def test_first_attempt_has_no_backoff_and_draws_no_jitter() -> None:
    rng = random.Random(3)
    state = rng.getstate()
    retry = WithTransactionRetry(0.0, rng=rng)
    assert retry.before_transaction(0.0) == 0.0
    assert rng.getstate() == state


def test_backoff_uses_the_injected_jitter() -> None:
    retry = WithTransactionRetry(0.0, rng=random.Random(11))
    retry.before_transaction(0.0)
    expected = random.Random(11).random() * 0.005 * 1.5
    assert retry.before_transaction(0.0) == pytest.approx(expected)


def test_callback_errors() -> None:
    retry = WithTransactionRetry(100.0)
    transient = _labelled("TransientTransactionError")
    assert retry.after_callback_error(transient, 219.9).step is NextStep.RETRY_TRANSACTION
    plain = ValueError("application error")
    decision = retry.after_callback_error(plain, 101.0)
    assert decision.step is NextStep.RAISE and decision.error is plain
    unknown = _labelled("UnknownTransactionCommitResult")
    decision = retry.after_callback_error(unknown, 101.0)
    assert decision.step is NextStep.RAISE and decision.error is unknown


def test_transient_callback_error_after_120_seconds_raises_a_timeout_error_with_its_labels() -> None:
    retry = WithTransactionRetry(100.0)
    transient = _labelled("TransientTransactionError")
    decision = retry.after_callback_error(transient, 220.0)
    assert decision.step is NextStep.RAISE
    assert isinstance(decision.error, OperationTimeoutError)
    assert decision.error.cause is transient
    assert decision.error.has_error_label("TransientTransactionError")
    assert "boom" in str(decision.error)


def test_commit_errors() -> None:
    retry = WithTransactionRetry(0.0, timeout=10.0)
    unknown = _labelled("UnknownTransactionCommitResult")
    assert retry.after_commit_error(unknown, 9.9).step is NextStep.RETRY_COMMIT
    late = retry.after_commit_error(unknown, 10.0)
    assert late.step is NextStep.RAISE and isinstance(late.error, OperationTimeoutError)
    # MaxTimeMSExpired is never retried as a commit, at top level or as a write concern error.
    max_time = _labelled("UnknownTransactionCommitResult", code=50)
    assert retry.after_commit_error(max_time, 1.0).step is NextStep.RAISE
    wce = OperationFailure(
        "wce",
        64,
        {"ok": 1, "writeConcernError": {"code": 50}, "errorLabels": ["UnknownTransactionCommitResult"]},
    )
    assert is_max_time_ms_expired(wce)
    assert retry.after_commit_error(wce, 1.0).error is wce
    transient = _labelled("TransientTransactionError")
    assert retry.after_commit_error(transient, 50.0).step is NextStep.RETRY_TRANSACTION
    other = _labelled(code=11000)
    assert retry.after_commit_error(other, 1.0).error is other
    assert not is_max_time_ms_expired(ConnectionFailure("x"))


def test_backoff_past_the_limit_raises_the_last_error_as_a_timeout() -> None:
    always_one = random.Random()
    always_one.random = lambda: 1.0  # type: ignore[method-assign]
    retry = WithTransactionRetry(0.0, timeout=1.0, rng=always_one)
    retry.before_transaction(0.0)
    transient = _labelled("TransientTransactionError")
    retry.after_commit_error(transient, 0.5)
    assert retry.before_transaction(0.99) == pytest.approx(0.0075)
    with pytest.raises(OperationTimeoutError) as info:
        retry.before_transaction(0.995)  # 0.995 + 0.01125 >= 1.0
    assert info.value.cause is transient


def test_callback_ended_transaction() -> None:
    ended = {s for s in TxnState if callback_ended_transaction(s)}
    assert ended == {S.NO_TXN, S.COMMITTED, S.COMMITTED_EMPTY, S.ABORTED}
