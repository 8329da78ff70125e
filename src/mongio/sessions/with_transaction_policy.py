"""The decisions of ``ClientSession.with_transaction``'s retry loop, without the loop's awaiting.

The loop starts a transaction, runs the callback, commits, and on errors asks :class:`WithTransactionRetry`
what next: run the whole transaction again (after a jittered exponential backoff) on a
``TransientTransactionError``, commit again on an ``UnknownTransactionCommitResult`` (unless the server's
time limit ran out), or raise. Everything is bounded by the session's ``timeoutMS`` when CSOT applies, and by
120 seconds otherwise; when that time is used up, the last error is raised as a timeout error that carries
it (and its labels).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from mongio.error_classification import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_TRANSACTION_COMMIT_RESULT,
    has_error_label,
    is_max_time_ms_expired,
)
from mongio.execution.deadline import timeout_error
from mongio.sessions.transaction_state import TxnState

__all__ = [
    "BACKOFF_INITIAL",
    "BACKOFF_MAX",
    "WITH_TRANSACTION_TIMEOUT",
    "NextStep",
    "StepDecision",
    "WithTransactionRetry",
    "callback_ended_transaction",
    "transaction_backoff",
]

WITH_TRANSACTION_TIMEOUT = 120.0  # seconds, when no timeoutMS applies
BACKOFF_INITIAL = 0.005  # seconds
BACKOFF_MAX = 0.5  # seconds


def transaction_backoff(transaction_attempt: int, jitter: float) -> float:
    """Seconds to wait before running the transaction again: ``jitter * min(5 ms * 1.5^attempt, 500 ms)``."""
    return jitter * min(BACKOFF_INITIAL * 1.5**transaction_attempt, BACKOFF_MAX)


def callback_ended_transaction(state: TxnState) -> bool:
    """After the callback returned: did it commit or abort the transaction itself?"""
    return state in (TxnState.NO_TXN, TxnState.COMMITTED, TxnState.COMMITTED_EMPTY, TxnState.ABORTED)


class NextStep(enum.Enum):
    RETRY_TRANSACTION = "retry transaction"
    RETRY_COMMIT = "retry commit"
    RAISE = "raise"


@dataclass(frozen=True)
class StepDecision:
    """What the loop does next; ``error`` is what to raise for ``RAISE``."""

    step: NextStep
    error: BaseException | None = None


class WithTransactionRetry:
    """The state of one ``with_transaction`` call.

    ``start`` is the monotonic time the call began; ``timeout`` the seconds it may take (the session's
    ``timeoutMS``, or ``None`` for the 120-second limit). ``rng`` supplies the backoff jitter.
    """

    def __init__(
        self, start: float, timeout: float | None = None, *, rng: random.Random | None = None
    ) -> None:
        self.start = start
        self.timeout = WITH_TRANSACTION_TIMEOUT if timeout is None else timeout
        self.transaction_attempt = 0
        self.last_error: BaseException | None = None
        self._rng = rng if rng is not None else random.Random()

    def _timeout(self, error: BaseException | None) -> BaseException:
        if error is not None and getattr(error, "timeout", False):
            return error
        return timeout_error(error, detail="with_transaction ran out of time")

    def before_transaction(self, now: float) -> float:
        """Call before each ``start_transaction``: the seconds to sleep first (0 for the first attempt).

        Raises the last error, as a timeout error, when the backoff would end past the time limit.
        """
        backoff = 0.0
        if self.transaction_attempt > 0:
            backoff = transaction_backoff(self.transaction_attempt, self._rng.random())
            if now + backoff - self.start >= self.timeout:
                raise self._timeout(self.last_error)
        self.transaction_attempt += 1
        return backoff

    def after_callback_error(self, error: BaseException, now: float) -> StepDecision:
        """The callback raised (the caller has already aborted a transaction still active)."""
        self.last_error = error
        if has_error_label(error, TRANSIENT_TRANSACTION_ERROR):
            if now - self.start < self.timeout:
                return StepDecision(NextStep.RETRY_TRANSACTION)
            return StepDecision(NextStep.RAISE, self._timeout(error))
        return StepDecision(NextStep.RAISE, error)

    def after_commit_error(self, error: BaseException, now: float) -> StepDecision:
        """``commit_transaction`` raised."""
        self.last_error = error
        if not is_max_time_ms_expired(error) and has_error_label(error, UNKNOWN_TRANSACTION_COMMIT_RESULT):
            if now - self.start >= self.timeout:
                return StepDecision(NextStep.RAISE, self._timeout(error))
            return StepDecision(NextStep.RETRY_COMMIT)
        if has_error_label(error, TRANSIENT_TRANSACTION_ERROR):
            return StepDecision(NextStep.RETRY_TRANSACTION)
        return StepDecision(NextStep.RAISE, error)
