"""The one retry policy: retryable reads, retryable writes, overload backoff and the adaptive token bucket.

Pure decisions, no I/O and no sleeping. The executor makes one :class:`RetryState` per operation and, after
each failed attempt, asks it what to do; the answer (:class:`RetryDecision`) says whether to go again, after
how long a backoff, avoiding which servers, with which labels added to the error, or which error to raise.

The rules combined here:

- Retryable reads and writes retry once when CSOT is off and for as long as time is left when it is on.
- An error labelled both ``SystemOverloadedError`` and ``RetryableError`` may be retried whatever the command
  (``updateMany``, ``getMore``, ``runCommand``, a command in a transaction), if ``retryReads`` (reads),
  ``retryWrites`` (writes) or both (``runCommand``) are on.
- Once an overload error has been seen, the operation may retry at most ``maxAdaptiveRetries`` times in all,
  CSOT or not, and each retry after an overload error waits ``jitter * min(10 s, base * 2^attempt)``, where
  ``base`` is the error's ``baseBackoffMS`` or 100 ms and ``attempt`` counts retries from 1.
- With ``adaptiveRetries=true`` the client's :class:`TokenBucket` pays for each overload retry.
- When several attempts failed, the error reported is the most recent one that may have written, else the first.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from mongio.error_classification import AttemptFailure, is_retryable_writes_unsupported, labels_to_add
from mongio.errors import OperationFailure
from mongio.execution.deadline import timeout_error
from mongio.loop_runtime.fork import renew_in_forked_children
from mongio.topology.server_description import Address

__all__ = [
    "BASE_BACKOFF",
    "DEFAULT_MAX_ADAPTIVE_RETRIES",
    "DEFAULT_RETRY_TOKEN_CAPACITY",
    "MAX_BACKOFF",
    "RETRYABLE_WRITES_UNSUPPORTED_MESSAGE",
    "RETRY_TOKEN_RETURN_RATE",
    "OperationKind",
    "OperationRetryability",
    "RetryDecision",
    "RetryOptions",
    "RetryState",
    "TokenBucket",
    "overload_backoff",
]

BASE_BACKOFF = 0.1  # seconds
MAX_BACKOFF = 10.0  # seconds
DEFAULT_MAX_ADAPTIVE_RETRIES = 2
DEFAULT_RETRY_TOKEN_CAPACITY = 1000
RETRY_TOKEN_RETURN_RATE = 0.1
RETRYABLE_WRITES_UNSUPPORTED_MESSAGE = (
    "This MongoDB deployment does not support retryable writes. Please add retryWrites=false to your "
    "connection string."
)

# Token amounts are kept in thousandths so that deposits of 0.1 add up exactly.
_TOKEN_SCALE = 1000


class TokenBucket:
    """The client's retry budget for overload errors (``adaptiveRetries=true``): one per client.

    Starts full. Each overload retry takes one token; success gives back 0.1 (1.1 after a retry) and a
    retry that fails with a non-overload error gives back 1. Safe to share between threads.
    """

    __slots__ = ("__weakref__", "_capacity", "_lock", "_tokens")

    def __init__(self, capacity: float = DEFAULT_RETRY_TOKEN_CAPACITY) -> None:
        if capacity < 0:
            raise ValueError("capacity must not be negative")
        self._capacity = round(capacity * _TOKEN_SCALE)
        self._tokens = self._capacity
        self._lock = threading.Lock()
        renew_in_forked_children(self)

    def renew_after_fork(self) -> None:
        """In the child of a fork (the loop runtime's fork hook calls it), whose parent may have held the lock
        in a thread the child does not have."""
        self._lock = threading.Lock()

    @property
    def capacity(self) -> float:
        return self._capacity / _TOKEN_SCALE

    @property
    def tokens(self) -> float:
        """The current balance."""
        return self._tokens / _TOKEN_SCALE

    def consume(self, n: float = 1) -> bool:
        """Take ``n`` tokens if the bucket holds that many; return whether it did."""
        amount = round(n * _TOKEN_SCALE)
        with self._lock:
            if self._tokens >= amount:
                self._tokens -= amount
                return True
            return False

    def deposit(self, n: float) -> None:
        """Give back ``n`` tokens, never beyond capacity."""
        amount = round(n * _TOKEN_SCALE)
        with self._lock:
            self._tokens = min(self._capacity, self._tokens + amount)

    def record_success(self, *, retried: bool) -> None:
        """An operation succeeded: 0.1 tokens back, 1.1 when it took a retry."""
        self.deposit(RETRY_TOKEN_RETURN_RATE + (1 if retried else 0))

    def __repr__(self) -> str:
        return f"TokenBucket(tokens={self.tokens}, capacity={self.capacity})"


class OperationKind(enum.Enum):
    """What an operation is for the retry options: a read, a write, or a generic ``runCommand``."""

    READ = "read"
    WRITE = "write"
    RUN_COMMAND = "runCommand"


@dataclass(frozen=True)
class OperationRetryability:
    """What the operation says about itself.

    ``retryable`` is true for a retryable read or write in the retryable-reads/-writes sense (``find`` and
    ``insertOne`` yes; ``getMore``, ``updateMany``, ``aggregate`` with ``$out``, an unacknowledged write
    no), and for a write, only when the first server selected supports retryable writes (a ``txnNumber``
    was added). ``transaction_command`` is ``"commitTransaction"`` or ``"abortTransaction"``, which are
    retryable writes even with ``retryWrites`` off.
    """

    kind: OperationKind
    retryable: bool = False
    transaction_command: str | None = None

    @classmethod
    def read(cls, retryable: bool = True) -> OperationRetryability:
        return cls(OperationKind.READ, retryable)

    @classmethod
    def write(cls, retryable: bool = True) -> OperationRetryability:
        return cls(OperationKind.WRITE, retryable)

    @classmethod
    def run_command(cls) -> OperationRetryability:
        return cls(OperationKind.RUN_COMMAND, False)

    @classmethod
    def commit_transaction(cls) -> OperationRetryability:
        return cls(OperationKind.WRITE, True, "commitTransaction")

    @classmethod
    def abort_transaction(cls) -> OperationRetryability:
        return cls(OperationKind.WRITE, True, "abortTransaction")


@dataclass(frozen=True)
class RetryOptions:
    """The client options the retry rules read."""

    retry_reads: bool = True
    retry_writes: bool = True
    max_adaptive_retries: int = DEFAULT_MAX_ADAPTIVE_RETRIES
    enable_overload_retargeting: bool = False
    adaptive_retries: bool = False

    @classmethod
    def from_client_options(cls, options: Any) -> RetryOptions:
        """Read ``retry_reads``, ``retry_writes``, ``max_adaptive_retries``, ``enable_overload_retargeting``
        and ``adaptive_retries`` from a client options object."""
        return cls(
            retry_reads=bool(options.retry_reads),
            retry_writes=bool(options.retry_writes),
            max_adaptive_retries=int(options.max_adaptive_retries),
            enable_overload_retargeting=bool(options.enable_overload_retargeting),
            adaptive_retries=bool(options.adaptive_retries),
        )


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a failed attempt.

    ``add_labels``/``remove_labels`` apply to the error of the attempt that just failed, whether or not it
    is retried. When ``retry`` is true, sleep ``backoff`` seconds (0 unless the error was an overload
    error), then select a server avoiding ``deprioritized``. When it is false, raise ``error``: the error
    chosen by the reporting rules (possibly an earlier attempt's), or a timeout error wrapping it.
    """

    retry: bool
    error: BaseException | None = None
    backoff: float = 0.0
    deprioritized: tuple[Address, ...] = ()
    add_labels: frozenset[str] = frozenset()
    remove_labels: frozenset[str] = frozenset()
    reason: str = field(default="", compare=False)


def overload_backoff(attempt: int, jitter: float, base_backoff_ms: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (from 1) after an overload error.

    ``jitter * min(MAX_BACKOFF, base * 2**attempt)``, where ``base`` is the server's positive
    ``baseBackoffMS`` when it sent one, else 100 ms.
    """
    base = base_backoff_ms / 1000.0 if base_backoff_ms is not None and base_backoff_ms > 0 else BASE_BACKOFF
    return jitter * min(MAX_BACKOFF, base * 2.0**attempt)


def _retryable_writes_unsupported(error: BaseException) -> BaseException:
    # A server that cannot take the txnNumber refuses it: tell the user what to do instead.
    if not is_retryable_writes_unsupported(error):
        return error
    replaced = OperationFailure(RETRYABLE_WRITES_UNSUPPORTED_MESSAGE, error.code, error.details)
    replaced.__cause__ = error
    return replaced


class RetryState:
    """The retry bookkeeping of one operation; ask :meth:`on_failure` after each failed attempt.

    ``csot`` says whether a CSOT deadline applies (then non-overload retries are bounded by time, not
    count); pass the seconds left to :meth:`on_failure`. ``sharded`` deprioritizes the failed mongos on any
    retryable error. ``rng`` supplies the jitter (``random.random()`` semantics, in [0, 1)).
    """

    def __init__(
        self,
        operation: OperationRetryability,
        options: RetryOptions,
        *,
        in_transaction: bool = False,
        csot: bool = False,
        sharded: bool = False,
        token_bucket: TokenBucket | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.operation = operation
        self.options = options
        self.in_transaction = in_transaction
        self.csot = csot
        self.sharded = sharded
        self.token_bucket = token_bucket if options.adaptive_retries else None
        self._rng = rng if rng is not None else random.Random()
        self.attempt = 0  # retries made so far: the attempt now running is number ``attempt`` from 0
        self._allowed_retries: float = math.inf if csot else 1
        self._deprioritized: list[Address] = []
        self._reported: AttemptFailure | None = None

    @property
    def reported_error(self) -> BaseException | None:
        """The error the operation ends with if no retry succeeds (``None`` before the first failure)."""
        reported = self._reported
        return None if reported is None else reported.error

    @property
    def deprioritized(self) -> tuple[Address, ...]:
        return tuple(self._deprioritized)

    def _overload_retry_enabled(self) -> bool:
        op = self.operation
        if op.transaction_command is not None:
            return True
        if op.kind is OperationKind.READ:
            return self.options.retry_reads
        if op.kind is OperationKind.WRITE:
            return self.options.retry_writes
        return self.options.retry_reads and self.options.retry_writes

    def _retryable_by_read_write_rules(self, failure: AttemptFailure) -> bool:
        op = self.operation
        if not op.retryable or not failure.reached_for_server:
            return False
        if op.transaction_command is not None:
            return failure.is_write_retryable
        if self.in_transaction:
            return False
        if op.kind is OperationKind.WRITE:
            return self.options.retry_writes and failure.is_write_retryable
        if op.kind is OperationKind.READ:
            return self.options.retry_reads and failure.is_read_retryable
        return False

    def _report(self, failure: AttemptFailure) -> None:
        # The most recent error that may have written wins; errors saying nothing was written never
        # replace an earlier error.
        if self._reported is None or failure.write_attempted:
            self._reported = failure

    def _stop(
        self, reason: str, add: frozenset[str], remove: frozenset[str], *, timed_out: bool = False
    ) -> RetryDecision:
        assert self._reported is not None
        error = self._reported.error
        if self.operation.kind is OperationKind.WRITE and self.operation.retryable:
            error = _retryable_writes_unsupported(error)
        if timed_out and not getattr(error, "timeout", False):
            error = timeout_error(error)
        return RetryDecision(False, error=error, add_labels=add, remove_labels=remove, reason=reason)

    def on_success(self) -> None:
        """Record that the current attempt succeeded (refills the token bucket)."""
        if self.token_bucket is not None:
            self.token_bucket.record_success(retried=self.attempt > 0)

    def on_failure(self, failure: AttemptFailure, *, remaining: float | None = None) -> RetryDecision:
        """Decide what follows the failure of the current attempt.

        ``remaining`` is the CSOT time left in seconds (``None`` when CSOT is off, ``math.inf`` without
        bound). A failure to select a server or check out a connection for a retry ends the operation
        with the previous error.
        """
        add, remove = labels_to_add(
            failure,
            is_write=self.operation.kind is OperationKind.WRITE and self.operation.retryable,
            retry_writes=self.options.retry_writes,
            in_transaction=self.in_transaction,
            transaction_command=self.operation.transaction_command,
        )
        failure = failure.with_labels(add)
        if remove:
            failure = dataclasses.replace(failure, labels=failure.labels - remove)
        self._report(failure)

        is_overload = failure.is_overload
        if self.token_bucket is not None and self.attempt > 0 and not is_overload:
            # A server healthy enough to answer with another error counts as a success for the budget.
            self.token_bucket.deposit(1)

        retryable = self._retryable_by_read_write_rules(failure) or (
            failure.is_retryable_overload and self._overload_retry_enabled()
        )
        if not retryable:
            return self._stop("the error is not retryable", add, remove)

        self.attempt += 1
        if is_overload:
            self._allowed_retries = self.options.max_adaptive_retries
        if self.attempt > self._allowed_retries:
            return self._stop(
                f"{self.attempt - 1} retries made, the limit is {self._allowed_retries}", add, remove
            )
        if remaining is not None and remaining <= 0:
            return self._stop("the operation's timeout expired", add, remove, timed_out=True)

        if failure.address is not None and (
            self.sharded or (is_overload and self.options.enable_overload_retargeting)
        ):
            self._deprioritized.append(failure.address)

        backoff = 0.0
        if is_overload:
            backoff = overload_backoff(self.attempt, self._rng.random(), failure.base_backoff_ms)
            if remaining is not None and backoff > remaining:
                return self._stop("the backoff would outlast the operation's timeout", add, remove)
            if self.token_bucket is not None and not self.token_bucket.consume(1):
                return self._stop("the retry token bucket is empty", add, remove)
        return RetryDecision(
            True,
            backoff=backoff,
            deprioritized=self.deprioritized,
            add_labels=add,
            remove_labels=remove,
            reason="overload retry" if is_overload else "retryable error",
        )

    def cannot_retry(self, reason: str = "no server can take the retry") -> RetryDecision:
        """End the operation after a retry was decided but cannot be made (the server selected for it does
        not support retryable writes, or the command cannot be rebuilt for it): raise the previous error."""
        return self._stop(reason, frozenset(), frozenset())
