"""Which error labels the driver adds to a failed attempt, and what a failure is as the retry rules see it.

The server labels most errors itself (4.4+ adds ``RetryableWriteError``, every version adds
``TransientTransactionError`` to its own transaction errors); the driver adds labels only where the
specifications say it must: to errors the server never saw (network errors, pool clears, server selection)
and, for servers older than 4.4, to replies whose code is in the retryable-writes table.

The "not writable primary" / "node is recovering" code lists belong to SDAM and live in
:mod:`mongio.topology.error_handling`; the tables here are the retryable-reads and -writes ones, which add
network and time-limit codes to those.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mongio.errors import (
    RETRYABLE_ERROR,
    SYSTEM_OVERLOADED_ERROR,
    ConnectionFailure,
    NetworkTimeout,
    OperationFailure,
    OperationTimeoutError,
    PoolClearedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
)
from mongio.operations.base import check_write_concern_reply
from mongio.topology.server_description import Address

__all__ = [
    "MAX_TIME_MS_EXPIRED",
    "NO_WRITES_PERFORMED",
    "RETRYABLE_ERROR",
    "RETRYABLE_READ_CODES",
    "RETRYABLE_WRITES_MIN_LABEL_WIRE_VERSION",
    "RETRYABLE_WRITE_CODES",
    "RETRYABLE_WRITE_ERROR",
    "SYSTEM_OVERLOADED_ERROR",
    "TRANSIENT_TRANSACTION_ERROR",
    "UNKNOWN_TRANSACTION_COMMIT_RESULT",
    "AttemptFailure",
    "FailureKind",
    "labels_to_add",
    "retryable_write_concern_error",
]

RETRYABLE_WRITE_ERROR = "RetryableWriteError"
TRANSIENT_TRANSACTION_ERROR = "TransientTransactionError"
UNKNOWN_TRANSACTION_COMMIT_RESULT = "UnknownTransactionCommitResult"
NO_WRITES_PERFORMED = "NoWritesPerformed"

MAX_TIME_MS_EXPIRED = 50
_WRITE_CONCERN_FAILED = 64
# A write concern that can never be satisfied: retrying the commit would fail the same way.
_UNSATISFIABLE_WRITE_CONCERN = 100
_UNKNOWN_REPL_WRITE_CONCERN = 79

# The retryable-writes table: the SDAM state-change codes (without the legacy 10058) plus network and
# time-limit codes.
RETRYABLE_WRITE_CODES = frozenset({11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262})
# Reads also retry ReadConcernMajorityNotAvailableYet.
RETRYABLE_READ_CODES = RETRYABLE_WRITE_CODES | {134}

# From 4.4 (wire version 9) the server labels retryable write errors itself; the driver must not.
RETRYABLE_WRITES_MIN_LABEL_WIRE_VERSION = 9


class FailureKind(enum.Enum):
    """Where an attempt failed; it decides the labels and whether the caller can infer that a write happened."""

    NETWORK = "network"  # the connection broke (also while connecting or authenticating)
    TIMEOUT = "timeout"  # a socket read or write timed out
    POOL_CLEARED = "pool_cleared"  # the pool was cleared while checking a connection out
    SELECTION = "selection"  # no server could be selected
    CLIENT = "client"  # any other client-side error before the command was sent
    SERVER = "server"  # the server answered with an error (ok: 0 or a writeConcernError)

    @property
    def command_sent(self) -> bool:
        """Whether the command may have reached the server (network errors may have happened mid-exchange)."""
        return self in (FailureKind.NETWORK, FailureKind.TIMEOUT, FailureKind.SERVER)


@dataclass(frozen=True)
class AttemptFailure:
    """One failed attempt of an operation, as the retry policy needs to see it.

    ``address`` is the server the attempt went to (``None`` when none was selected). ``sent`` is false when
    the failure happened before the command was written (while checking out or establishing a connection:
    a network error while connecting is still retryable, but cannot have written). ``code`` is the
    reply's top-level code, or for a write concern error its ``writeConcernError.code``
    (``write_concern_error`` is then true). ``labels`` are the labels the error carries now;
    ``base_backoff_ms`` is the server's ``baseBackoffMS`` hint on an overload error. ``max_wire_version``
    and ``from_mongos`` describe the server that answered.
    """

    error: BaseException
    kind: FailureKind
    address: Address | None = None
    code: int | None = None
    labels: frozenset[str] = frozenset()
    write_concern_error: bool = False
    max_wire_version: int | None = None
    from_mongos: bool = False
    base_backoff_ms: float | None = None
    sent: bool = True

    @classmethod
    def from_exception(
        cls,
        error: BaseException,
        *,
        address: Address | None = None,
        max_wire_version: int | None = None,
        from_mongos: bool = False,
        sent: bool = True,
    ) -> AttemptFailure:
        """Describe a raised error. ``sent`` is false for errors raised before the command was written."""
        labels = frozenset(getattr(error, "error_labels", ()) or ())
        if isinstance(error, OperationTimeoutError):
            # The operation's own deadline, whatever PyMongo class it also wears: never retried here.
            return cls(error=error, kind=FailureKind.CLIENT, address=address, labels=labels, sent=False)
        if isinstance(error, OperationFailure):
            details: Mapping[str, Any] = error.details or {}
            backoff = details.get("baseBackoffMS")
            wce = isinstance(error, WriteConcernError) or (
                details.get("ok") == 1 and isinstance(details.get("writeConcernError"), Mapping)
            )
            code = error.code
            if wce and code is None and isinstance(details.get("writeConcernError"), Mapping):
                code = details["writeConcernError"].get("code")
            return cls(
                error=error,
                kind=FailureKind.SERVER,
                address=address,
                code=code,
                labels=labels,
                write_concern_error=wce,
                max_wire_version=max_wire_version,
                from_mongos=from_mongos,
                base_backoff_ms=float(backoff) if isinstance(backoff, (int, float)) else None,
                sent=sent,
            )
        if isinstance(error, PoolClearedError):
            kind = FailureKind.POOL_CLEARED
        elif isinstance(error, ServerSelectionTimeoutError):
            kind = FailureKind.SELECTION
        elif isinstance(error, WaitQueueTimeoutError):
            kind = FailureKind.CLIENT
        elif isinstance(error, (NetworkTimeout, TimeoutError)):
            kind = FailureKind.TIMEOUT
        elif isinstance(error, (ConnectionFailure, OSError)):
            kind = FailureKind.NETWORK
        else:
            kind = FailureKind.CLIENT
        return cls(
            error=error,
            kind=kind,
            address=address,
            labels=labels,
            max_wire_version=max_wire_version,
            from_mongos=from_mongos,
            sent=sent and kind.command_sent,
        )

    @property
    def is_overload(self) -> bool:
        """The server said it is overloaded: back off before any retry."""
        return SYSTEM_OVERLOADED_ERROR in self.labels

    @property
    def is_retryable_overload(self) -> bool:
        """An overload error the server declares safe to retry whatever the command."""
        return self.is_overload and RETRYABLE_ERROR in self.labels

    @property
    def is_network(self) -> bool:
        return self.kind in (FailureKind.NETWORK, FailureKind.TIMEOUT)

    @property
    def write_attempted(self) -> bool:
        """Whether the caller must assume a write may have happened (for choosing which error to report)."""
        return self.sent and self.kind.command_sent and NO_WRITES_PERFORMED not in self.labels

    def with_labels(self, added: frozenset[str]) -> AttemptFailure:
        if added <= self.labels:
            return self
        return dataclasses.replace(self, labels=self.labels | added)


def _needs_retryable_write_label(failure: AttemptFailure) -> bool:
    if failure.kind in (FailureKind.NETWORK, FailureKind.TIMEOUT, FailureKind.POOL_CLEARED):
        return True
    if failure.kind is not FailureKind.SERVER or failure.code is None:
        return False
    wire = failure.max_wire_version
    if wire is not None and wire >= RETRYABLE_WRITES_MIN_LABEL_WIRE_VERSION:
        return False  # the server labels its own errors
    if failure.write_concern_error and failure.from_mongos:
        return False  # mongos has already retried; its writeConcernError codes are not to be trusted
    return failure.code in RETRYABLE_WRITE_CODES


def _unknown_commit_result(failure: AttemptFailure, labels: frozenset[str]) -> bool:
    if failure.kind in (
        FailureKind.NETWORK,
        FailureKind.TIMEOUT,
        FailureKind.SELECTION,
        FailureKind.POOL_CLEARED,
    ):
        return True
    if RETRYABLE_WRITE_ERROR in labels:
        return True
    if failure.kind is not FailureKind.SERVER:
        return False
    if failure.code == MAX_TIME_MS_EXPIRED or failure.code == _WRITE_CONCERN_FAILED:
        return True
    if failure.code in RETRYABLE_WRITE_CODES:
        return True
    return failure.write_concern_error and failure.code not in (
        _UNSATISFIABLE_WRITE_CONCERN,
        _UNKNOWN_REPL_WRITE_CONCERN,
    )


def retryable_write_concern_error(
    reply: Mapping[str, Any], *, max_wire_version: int | None, from_mongos: bool = False
) -> WriteConcernError | None:
    """The ``writeConcernError`` of an ``ok: 1`` reply to a retryable write (one sent with a ``txnNumber``
    outside a transaction), as an error labelled ``RetryableWriteError``, when the write may be retried
    for it: the server labelled it so, or (before 4.4) its code is in the table. ``None`` otherwise: the
    reply is then the operation's result, its write concern error reported with it."""
    if not isinstance(reply.get("writeConcernError"), Mapping):
        return None
    try:
        check_write_concern_reply(reply)
    except WriteConcernError as error:
        failure = AttemptFailure.from_exception(
            error, max_wire_version=max_wire_version, from_mongos=from_mongos
        )
        added, _ = labels_to_add(failure, is_write=True, retry_writes=True, in_transaction=False)
        if RETRYABLE_WRITE_ERROR not in failure.labels | added:
            return None
        for label in added:
            error._add_error_label(label)
        return error
    return None


def labels_to_add(
    failure: AttemptFailure,
    *,
    is_write: bool,
    retry_writes: bool,
    in_transaction: bool,
    transaction_command: str | None = None,
) -> tuple[frozenset[str], frozenset[str]]:
    """The labels the driver adds to a failed attempt and those it removes, as ``(add, remove)``.

    ``is_write`` is true for a retryable write command (one that carries a ``txnNumber`` outside a
    transaction) and for ``commitTransaction``/``abortTransaction`` (``transaction_command``), which are
    retryable writes even when ``retryWrites`` is off. Inside a transaction no other command gets
    ``RetryableWriteError``; network, pool-clear and selection errors get ``TransientTransactionError``,
    except on ``commitTransaction``, where the outcome is unknown instead.
    """
    add: set[str] = set()
    remove: set[str] = set()
    is_commit = transaction_command == "commitTransaction"
    writes_retryable = retry_writes or transaction_command is not None
    counts_as_write = is_write or transaction_command is not None
    if (
        counts_as_write
        and writes_retryable
        and (not in_transaction or transaction_command is not None)
        and _needs_retryable_write_label(failure)
    ):
        add.add(RETRYABLE_WRITE_ERROR)
    if (
        in_transaction
        and not is_commit
        and failure.kind
        in (
            FailureKind.NETWORK,
            FailureKind.TIMEOUT,
            FailureKind.POOL_CLEARED,
            FailureKind.SELECTION,
        )
    ):
        add.add(TRANSIENT_TRANSACTION_ERROR)
    if is_commit and _unknown_commit_result(failure, failure.labels | add):
        add.add(UNKNOWN_TRANSACTION_COMMIT_RESULT)
        if failure.kind is not FailureKind.SERVER:
            # Whether a commit that never got an answer happened is unknown, so it is not "transient".
            remove.add(TRANSIENT_TRANSACTION_ERROR)
    return frozenset(add - failure.labels), frozenset(remove & failure.labels)
