"""commitTransaction / abortTransaction operations: bodies from the transaction state, majority on retries."""

from __future__ import annotations

import pytest

from mongio.errors import WriteConcernError
from mongio.operations.base import ServerLimits
from mongio.operations.transaction_commands import AbortTransaction, CommitTransaction
from mongio.options.write_concern import WriteConcern
from mongio.sessions.transaction_state import Transaction, TransactionOptions

LIMITS = ServerLimits()


def in_progress(options: TransactionOptions | None = None) -> Transaction:
    transaction = Transaction()
    transaction.start(options or TransactionOptions())
    transaction.first_command_done()
    return transaction


def test_commit_body_and_majority_after_a_failed_attempt() -> None:
    transaction = in_progress(TransactionOptions(write_concern=WriteConcern(w=1), max_commit_time_ms=500))
    assert transaction.begin_commit()
    op = CommitTransaction(transaction, 3)
    assert op.database == "admin" and op.transaction_command == "commitTransaction"
    first = op.build(LIMITS).body
    assert first["commitTransaction"] == 1 and first["txnNumber"] == 3 and first["autocommit"] is False
    assert first["writeConcern"] == {"w": 1}
    assert first["maxTimeMS"] == 500
    op.retrying(after_overload=False)
    assert op.build(LIMITS).body["writeConcern"] == {"w": "majority", "wtimeout": 10_000}


def test_commit_retried_after_overload_keeps_its_write_concern() -> None:
    transaction = in_progress()
    transaction.begin_commit()
    op = CommitTransaction(transaction, 1)
    op.retrying(after_overload=True)
    assert "writeConcern" not in op.build(LIMITS).body


def test_recovery_token_sent_with_commit_and_abort() -> None:
    transaction = in_progress()
    transaction.recovery_token = {"recoveryShardId": "s1"}
    transaction.begin_abort()
    abort = AbortTransaction(transaction, 7).build(LIMITS).body
    assert abort == {
        "abortTransaction": 1,
        "txnNumber": 7,
        "autocommit": False,
        "recoveryToken": {"recoveryShardId": "s1"},
    }


def test_write_concern_error_of_the_reply_is_raised() -> None:
    transaction = in_progress()
    transaction.begin_commit()
    op = CommitTransaction(transaction, 1)
    reply = {"ok": 1, "writeConcernError": {"code": 64, "errmsg": "waiting"}, "errorLabels": ["X"]}
    with pytest.raises(WriteConcernError) as caught:
        op.handle_response(reply, LIMITS)
    assert caught.value.code == 64
    assert op.handle_response({"ok": 1}, LIMITS) == {"ok": 1}
