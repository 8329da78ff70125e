"""What an error means: every question the driver asks about a failure is answered here.

The exception classes are in :mod:`mongio.errors`, where applications import them from; this module holds
the rules that read them, with the codes and labels the specifications give:

- **what an error is**: a network error or timeout, a timeout of any source, the server's
  ``MaxTimeMSExpired``, a "not writable primary" / "node is recovering" / "shutting down" state change, a
  failure an overloaded server may cause, a change stream error to resume after, a namespace that does not
  exist (:func:`is_network_error`, :func:`is_state_change_error`, :func:`is_resumable`...);
- **which exception a reply reports** (:func:`command_error_class`, :func:`write_error_class`,
  :func:`write_concern_error`);
- **what the retry rules see** in a failed attempt, and which labels the driver adds to it
  (:class:`AttemptFailure`, :func:`labels_to_add`, :func:`retryable_write_concern_error`);
- **what the topology does** about an operation's error: whether it is stale, marks the server Unknown,
  clears the pool, requests or cancels a check (:class:`ApplicationError`,
  :func:`application_error_decision`).

The server labels most errors itself (4.4+ adds ``RetryableWriteError``, every version adds
``TransientTransactionError`` to its own transaction errors); the driver adds labels only where the
specifications say it must: to errors the server never saw (network errors, pool clears, server selection)
and, for servers older than 4.4, to replies whose code is in the retryable-writes table.

Everything here is pure: no I/O, and no state but the values passed in.
"""

from __future__ import annotations

import dataclasses
import enum
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from mongio.errors import (
    MAX_TIME_MS_EXPIRED,
    BulkWriteError,
    ConnectionFailure,
    CursorNotFound,
    DuplicateKeyError,
    ExecutionTimeout,
    MongioError,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    OperationTimeoutError,
    PoolClearedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
    WriteError,
    WTimeoutError,
)

if TYPE_CHECKING:
    from mongio.connection.transport import Address
    from mongio.topology.server_description import ServerDescription
    from mongio.topology.topology_description import TopologyDescription

__all__ = [
    "CURSOR_NOT_FOUND",
    "DUPLICATE_KEY_CODES",
    "ILLEGAL_OPERATION",
    "MAX_TIME_MS_EXPIRED",
    "NAMESPACE_NOT_FOUND",
    "NOT_WRITABLE_PRIMARY_CODES",
    "NO_WRITES_PERFORMED",
    "OVERLOAD_LABELS",
    "RECOVERING_CODES",
    "RESUMABLE_CHANGE_STREAM_ERROR",
    "RESUMABLE_CODES",
    "RESUMABLE_LABEL_MIN_WIRE_VERSION",
    "RETRYABLE_ERROR",
    "RETRYABLE_READ_CODES",
    "RETRYABLE_WRITES_MIN_LABEL_WIRE_VERSION",
    "RETRYABLE_WRITE_CODES",
    "RETRYABLE_WRITE_ERROR",
    "SHUTDOWN_CODES",
    "SYSTEM_OVERLOADED_ERROR",
    "TLS_IO_ERRORS",
    "TRANSIENT_TRANSACTION_ERROR",
    "UNKNOWN_TRANSACTION_COMMIT_RESULT",
    "ApplicationError",
    "AttemptFailure",
    "ErrorDecision",
    "ErrorKind",
    "FailureKind",
    "application_error_decision",
    "command_error_class",
    "has_error_label",
    "is_duplicate_key",
    "is_max_time_ms_expired",
    "is_namespace_not_found",
    "is_network_error",
    "is_network_timeout",
    "is_not_writable_primary",
    "is_recovering",
    "is_resumable",
    "is_retryable_writes_unsupported",
    "is_shutdown",
    "is_state_change_error",
    "is_timeout",
    "is_unreported_timeout",
    "labels_to_add",
    "may_be_overload",
    "retryable_write_concern_error",
    "unpins_transaction",
    "write_concern_error",
    "write_error_class",
]


# -- labels and codes ----------------------------------------------------------------------------------------

RETRYABLE_WRITE_ERROR = "RetryableWriteError"
TRANSIENT_TRANSACTION_ERROR = "TransientTransactionError"
UNKNOWN_TRANSACTION_COMMIT_RESULT = "UnknownTransactionCommitResult"
NO_WRITES_PERFORMED = "NoWritesPerformed"
RESUMABLE_CHANGE_STREAM_ERROR = "ResumableChangeStreamError"
# Client backpressure: the server (or the pool, for a connection an overloaded server refused) says so.
SYSTEM_OVERLOADED_ERROR = "SystemOverloadedError"
RETRYABLE_ERROR = "RetryableError"
OVERLOAD_LABELS = (SYSTEM_OVERLOADED_ERROR, RETRYABLE_ERROR)

ILLEGAL_OPERATION = 20
NAMESPACE_NOT_FOUND = 26
CURSOR_NOT_FOUND = 43
_WRITE_CONCERN_FAILED = 64
_UNKNOWN_REPL_WRITE_CONCERN = 79
# A write concern that can never be satisfied: retrying the commit would fail the same way.
_UNSATISFIABLE_WRITE_CONCERN = 100
# The codes of a duplicate key, from any command (a write, findAndModify, createIndexes...).
DUPLICATE_KEY_CODES = frozenset((11000, 11001, 12582))

# Server discovery and monitoring, "not writable primary" and "node is recovering" errors.
RECOVERING_CODES = frozenset({11600, 11602, 13436, 189, 91})
NOT_WRITABLE_PRIMARY_CODES = frozenset({10107, 13435, 10058})
# The "node is shutting down" errors, the only state-change errors that clear the pool.
SHUTDOWN_CODES = frozenset({11600, 91})

# The retryable-writes table: the SDAM state-change codes (without the legacy 10058) plus network and
# time-limit codes.
RETRYABLE_WRITE_CODES = frozenset({11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262})
# Reads also retry ReadConcernMajorityNotAvailableYet.
RETRYABLE_READ_CODES = RETRYABLE_WRITE_CODES | {134}
# From 4.4 (wire version 9) the server labels retryable write errors itself; the driver must not.
RETRYABLE_WRITES_MIN_LABEL_WIRE_VERSION = 9

# From wire version 9 (MongoDB 4.4) the server labels the errors a change stream may resume after; older
# servers are judged by the error code alone.
RESUMABLE_LABEL_MIN_WIRE_VERSION = 9
RESUMABLE_CODES = frozenset(
    {
        6,  # HostUnreachable
        7,  # HostNotFound
        63,  # StaleShardVersion
        89,  # NetworkTimeout
        91,  # ShutdownInProgress
        133,  # FailedToSatisfyReadPreference
        150,  # StaleEpoch
        189,  # PrimarySteppedDown
        234,  # RetryChangeStream
        262,  # ExceededTimeLimit
        9001,  # SocketException
        10107,  # NotWritablePrimary
        11600,  # InterruptedAtShutdown
        11602,  # InterruptedDueToReplStateChange
        13388,  # StaleConfig
        13435,  # NotPrimaryNoSecondaryOk
        13436,  # NotPrimaryOrSecondary
    }
)

TLS_IO_ERRORS = (ssl.SSLEOFError, ssl.SSLSyscallError, ssl.SSLZeroReturnError)
"""TLS errors that are I/O failures (a connection cut short), which an overloaded server can cause; other
``ssl.SSLError`` s are the peers' verdicts (a certificate refused, no common protocol), which it cannot."""


# -- what an error is -----------------------------------------------------------------------------------------


def has_error_label(error: BaseException, label: str) -> bool:
    """Whether ``error`` carries ``label``. Any exception may reach this (a ``with_transaction`` callback
    raises what it likes), and one of PyMongo's own errors answers by its ``has_error_label`` as ours does."""
    check = getattr(error, "has_error_label", None)
    return bool(check(label)) if callable(check) else False


def is_network_timeout(error: BaseException | None) -> bool:
    """A timeout waiting for the network (connecting, or waiting for a reply)."""
    return isinstance(error, NetworkTimeout | TimeoutError)


def is_network_error(error: BaseException | None) -> bool:
    """A network error or timeout, as opposed to a command error or a driver-side problem."""
    if error is None or isinstance(error, OperationFailure):
        return False
    return isinstance(error, ConnectionFailure | OSError | TimeoutError)


def is_timeout(error: BaseException) -> bool:
    """A timeout of any source: a timeout error, or the server's MaxTimeMSExpired (code 50, checked by code
    alone) as the command's error, a write error or a write concern error."""
    if getattr(error, "timeout", False):
        return True
    if getattr(error, "code", None) == MAX_TIME_MS_EXPIRED:
        return True
    details = getattr(error, "details", None)
    if isinstance(details, Mapping):
        for write_error in details.get("writeErrors") or ():
            if isinstance(write_error, Mapping) and write_error.get("code") == MAX_TIME_MS_EXPIRED:
                return True
        for concern_error in (details.get("writeConcernError"), *(details.get("writeConcernErrors") or ())):
            if isinstance(concern_error, Mapping) and concern_error.get("code") == MAX_TIME_MS_EXPIRED:
                return True
    return False


def is_unreported_timeout(error: BaseException) -> bool:
    """A timeout (:func:`is_timeout`) that is not already the operation's own :class:`OperationTimeoutError`:
    under CSOT it is reported as one, wrapping it."""
    return is_timeout(error) and not isinstance(error, OperationTimeoutError)


def is_max_time_ms_expired(error: BaseException) -> bool:
    """The server's ``MaxTimeMSExpired`` (code 50), at top level or in a ``writeConcernError``; never the
    operation's own timeout, whichever PyMongo error class that also derives from."""
    if not isinstance(error, OperationFailure) or isinstance(error, OperationTimeoutError):
        return False
    if error.code == MAX_TIME_MS_EXPIRED:
        return True
    details = error.details or {}
    wce = details.get("writeConcernError")
    return isinstance(wce, Mapping) and wce.get("code") == MAX_TIME_MS_EXPIRED


def is_duplicate_key(error: BaseException) -> bool:
    """A duplicate key: a ``DuplicateKeyError``, or a bulk write that failed with one."""
    if isinstance(error, DuplicateKeyError):
        return True
    if isinstance(error, BulkWriteError):
        errors = error.details.get("writeErrors", ()) if isinstance(error.details, Mapping) else ()
        return any(item.get("code") in DUPLICATE_KEY_CODES for item in errors)
    return False


def is_namespace_not_found(error: OperationFailure) -> bool:
    """The server's ``NamespaceNotFound`` (code 26): the collection or database does not exist."""
    return error.code == NAMESPACE_NOT_FOUND


def is_recovering(message: str | None, code: int | None) -> bool:
    """A "node is recovering" error: by code when there is one, else by message."""
    if code:
        return code in RECOVERING_CODES
    text = message or ""
    return "not master or secondary" in text or "node is recovering" in text


def is_not_writable_primary(message: str | None, code: int | None) -> bool:
    """A "not writable primary" error: by code when there is one, else by message."""
    if code:
        return code in NOT_WRITABLE_PRIMARY_CODES
    if is_recovering(message, None):
        return False
    return "not master" in (message or "")


def is_shutdown(code: int | None) -> bool:
    """A "node is shutting down" error, the only state-change errors that clear the pool."""
    return bool(code) and code in SHUTDOWN_CODES


def is_state_change_error(message: str | None, code: int | None) -> bool:
    """A "not writable primary" or "node is recovering" error: the server is not what we believed."""
    return is_recovering(message, code) or is_not_writable_primary(message, code)


def may_be_overload(error: BaseException) -> bool:
    """Whether a failure to connect may be an overloaded server's doing (client backpressure: such failures
    get :data:`OVERLOAD_LABELS`): false when ``error`` or one of its causes is a TLS verdict rather than I/O."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLError) and not isinstance(cause, TLS_IO_ERRORS):
            return False
        cause = cause.__cause__
    return True


def is_resumable(error: BaseException, max_wire_version: int | None) -> bool:
    """Whether a change stream may resume after ``error`` from a ``getMore`` (never after one from its
    ``aggregate``): any network error, ``CursorNotFound``, and server errors with the
    ``ResumableChangeStreamError`` label (or, before wire version 9, one of :data:`RESUMABLE_CODES`).
    Never after the operation's own timeout, whichever PyMongo error class that also derives from."""
    if isinstance(error, OperationTimeoutError):
        return False
    if isinstance(error, OperationFailure):
        if error.code == CURSOR_NOT_FOUND:
            return True
        if max_wire_version is None or max_wire_version >= RESUMABLE_LABEL_MIN_WIRE_VERSION:
            return error.has_error_label(RESUMABLE_CHANGE_STREAM_ERROR)
        return error.code in RESUMABLE_CODES
    return isinstance(error, ConnectionFailure)


def is_retryable_writes_unsupported(error: BaseException) -> TypeGuard[OperationFailure]:
    """A server whose storage engine has no transactions (MMAPv1) refusing a ``txnNumber``: IllegalOperation
    "Transaction numbers are only allowed on..."."""
    if not isinstance(error, OperationFailure) or error.code != ILLEGAL_OPERATION:
        return False
    details = error.details or {}
    return str(details.get("errmsg", "")).startswith("Transaction numbers")


def unpins_transaction(error: MongioError, transaction_command: str | None = None) -> bool:
    """Whether a sharded transaction's session gives up the mongos it is pinned to after ``error`` (before
    a retry, or when a commit fails): after an unknown commit result or a transient transaction error, and
    after any error of ``abortTransaction`` (``transaction_command``)."""
    return (
        transaction_command == "abortTransaction"
        or error.has_error_label(UNKNOWN_TRANSACTION_COMMIT_RESULT)
        or error.has_error_label(TRANSIENT_TRANSACTION_ERROR)
    )


# -- which exception a reply reports ---------------------------------------------------------------------------


def command_error_class(code: Any) -> type[OperationFailure]:
    """The exception an ``ok: 0`` reply with ``code`` raises: ``ExecutionTimeout`` for MaxTimeMSExpired,
    ``CursorNotFound``, ``DuplicateKeyError``, else ``OperationFailure``."""
    if code == MAX_TIME_MS_EXPIRED:
        return ExecutionTimeout
    if code == CURSOR_NOT_FOUND:
        return CursorNotFound
    if code in DUPLICATE_KEY_CODES:
        return DuplicateKeyError
    return OperationFailure


def write_error_class(code: Any) -> type[WriteError]:
    """The exception a write error (an entry of ``writeErrors``) with ``code`` raises."""
    return DuplicateKeyError if code in DUPLICATE_KEY_CODES else WriteError


def write_concern_error(reply: Mapping[str, Any]) -> WriteConcernError | None:
    """The reply's write concern error, if it has one: ``WTimeoutError`` when it timed out, else
    ``WriteConcernError``, keeping the reply's top-level error labels (the ones retryable writes look at)."""
    concern_error = reply.get("writeConcernError")
    if not concern_error:
        return None
    details = dict(concern_error)
    labels = reply.get("errorLabels")
    if labels and "errorLabels" not in details:
        details["errorLabels"] = list(labels)
    error_class = WTimeoutError if (concern_error.get("errInfo") or {}).get("wtimeout") else WriteConcernError
    return error_class(
        str(concern_error.get("errmsg", "write concern error")), concern_error.get("code"), details
    )


# -- what the retry rules see ----------------------------------------------------------------------------------


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


def _failure_kind(error: BaseException) -> FailureKind:
    """The kind of an error that is neither the operation's timeout nor a server's answer."""
    if isinstance(error, PoolClearedError):
        return FailureKind.POOL_CLEARED
    if isinstance(error, ServerSelectionTimeoutError):
        return FailureKind.SELECTION
    if isinstance(error, WaitQueueTimeoutError):
        return FailureKind.CLIENT
    if isinstance(error, (NetworkTimeout, TimeoutError)):
        return FailureKind.TIMEOUT
    if isinstance(error, (ConnectionFailure, OSError)):
        return FailureKind.NETWORK
    return FailureKind.CLIENT


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
            return cls._from_server_error(
                error,
                labels,
                address=address,
                max_wire_version=max_wire_version,
                from_mongos=from_mongos,
                sent=sent,
            )
        kind = _failure_kind(error)
        return cls(
            error=error,
            kind=kind,
            address=address,
            labels=labels,
            max_wire_version=max_wire_version,
            from_mongos=from_mongos,
            sent=sent and kind.command_sent,
        )

    @classmethod
    def _from_server_error(
        cls,
        error: OperationFailure,
        labels: frozenset[str],
        *,
        address: Address | None,
        max_wire_version: int | None,
        from_mongos: bool,
        sent: bool,
    ) -> AttemptFailure:
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
    def reached_for_server(self) -> bool:
        """Whether the attempt got as far as a server's connection: false for a server selection failure and
        for client-side errors (a checkout timeout, the operation's own timeout), which no retry rule retries."""
        return self.kind not in (FailureKind.SELECTION, FailureKind.CLIENT)

    @property
    def is_read_retryable(self) -> bool:
        """A retryable read's error that the retryable-reads rules retry: a network error, timeout or pool
        clear, or a server error whose code is in :data:`RETRYABLE_READ_CODES`."""
        if self.kind is FailureKind.SERVER:
            return self.code in RETRYABLE_READ_CODES
        return self.kind in (FailureKind.NETWORK, FailureKind.TIMEOUT, FailureKind.POOL_CLEARED)

    @property
    def is_write_retryable(self) -> bool:
        """The error carries ``RetryableWriteError`` (the server's, or one :func:`labels_to_add` gave)."""
        return RETRYABLE_WRITE_ERROR in self.labels

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


def retryable_write_concern_error(
    reply: Mapping[str, Any], *, max_wire_version: int | None, from_mongos: bool = False
) -> WriteConcernError | None:
    """The ``writeConcernError`` of an ``ok: 1`` reply to a retryable write (one sent with a ``txnNumber``
    outside a transaction), as an error labelled ``RetryableWriteError``, when the write may be retried
    for it: the server labelled it so, or (before 4.4) its code is in the table. ``None`` otherwise: the
    reply is then the operation's result, its write concern error reported with it."""
    if not isinstance(reply.get("writeConcernError"), Mapping):
        return None
    error = write_concern_error(reply)
    if error is None:
        return None
    failure = AttemptFailure.from_exception(error, max_wire_version=max_wire_version, from_mongos=from_mongos)
    added, _ = labels_to_add(failure, is_write=True, retry_writes=True, in_transaction=False)
    if RETRYABLE_WRITE_ERROR not in failure.labels | added:
        return None
    for label in added:
        error.add_error_label(label)
    return error


# -- what the topology does ------------------------------------------------------------------------------------


class ErrorKind(enum.Enum):
    """How an operation failed, as far as the topology cares."""

    NETWORK = "network"  # a network error other than a timeout
    TIMEOUT = "timeout"  # a network timeout
    COMMAND = "command"  # the server answered with an error (ok: 0 or a writeConcernError)


@dataclass(frozen=True)
class ApplicationError:
    """An operation's failure as SDAM error handling needs to see it.

    ``generation`` is the pool generation of the connection the error happened on (for a failure while
    connecting, the pool's generation when the attempt started). ``completed_handshake`` is false when the
    error happened while establishing the connection (handshake or authentication).
    """

    kind: ErrorKind
    generation: int
    completed_handshake: bool
    code: int | None = None
    message: str = ""
    topology_version: Mapping[str, Any] | None = None
    labels: frozenset[str] = frozenset()
    service_id: Any = None
    error: BaseException | None = None

    @classmethod
    def from_reply(
        cls,
        reply: Mapping[str, Any],
        *,
        generation: int,
        completed_handshake: bool = True,
        service_id: Any = None,
        error: BaseException | None = None,
        labels: frozenset[str] = frozenset(),
    ) -> ApplicationError | None:
        """The error a command reply reports, or ``None`` when it reports none that SDAM looks at.

        An ``ok: 0`` reply is judged by its code and message; an ``ok: 1`` reply by its
        ``writeConcernError``. Errors inside ``writeErrors`` never count.
        """
        if not reply.get("ok"):
            source: Mapping[str, Any] = reply
        elif isinstance(reply.get("writeConcernError"), Mapping):
            source = reply["writeConcernError"]
        else:
            return None
        code = source.get("code")
        topology_version = reply.get("topologyVersion") or source.get("topologyVersion")
        labels = (
            labels | frozenset(reply.get("errorLabels") or ()) | frozenset(source.get("errorLabels") or ())
        )
        return cls(
            kind=ErrorKind.COMMAND,
            generation=generation,
            completed_handshake=completed_handshake,
            code=int(code) if code is not None else None,
            message=str(source.get("errmsg", "")),
            topology_version=topology_version,
            labels=labels,
            service_id=service_id,
            error=error,
        )

    @classmethod
    def from_exception(
        cls,
        error: BaseException,
        *,
        generation: int,
        completed_handshake: bool = True,
        service_id: Any = None,
    ) -> ApplicationError | None:
        """Classify a raised error; ``None`` for errors that never affect the topology."""
        if isinstance(error, OperationTimeoutError):
            return None  # the operation ran out of its own time: nothing new about the server
        labels = frozenset(getattr(error, "error_labels", ()) or ())
        if isinstance(error, OperationFailure):
            return cls.from_reply(
                _reply_of(error),
                generation=generation,
                completed_handshake=completed_handshake,
                service_id=service_id,
                error=error,
                labels=labels,
            )
        if isinstance(error, NotPrimaryError):
            # Raised for a state-change reply; its ``errors`` holds that reply.
            reply = error.errors if isinstance(error.errors, Mapping) else {}
            code = reply.get("code")
            return cls(
                kind=ErrorKind.COMMAND,
                generation=generation,
                completed_handshake=completed_handshake,
                code=int(code) if code is not None else None,
                message=str(reply.get("errmsg", "")) or str(error),
                topology_version=reply.get("topologyVersion"),
                labels=labels,
                service_id=service_id,
                error=error,
            )
        if isinstance(error, WaitQueueTimeoutError | PoolClearedError):
            return None  # the pool was busy or already cleared: nothing new about the server
        if isinstance(error, (NetworkTimeout, TimeoutError)):
            kind = ErrorKind.TIMEOUT
        elif isinstance(error, (ConnectionFailure, OSError)):
            kind = ErrorKind.NETWORK
        else:
            return None
        return cls(
            kind=kind,
            generation=generation,
            completed_handshake=completed_handshake,
            message=str(error),
            labels=labels,
            service_id=service_id,
            error=error,
        )


def _reply_of(error: OperationFailure) -> dict[str, Any]:
    """The reply an ``OperationFailure`` reports, for :meth:`ApplicationError.from_reply`: its ``details``
    (the whole reply, or for a WriteConcernError the writeConcernError document), completed as ``ok: 0``
    with the error's code and message when it has neither ``ok`` nor a ``writeConcernError``."""
    details = dict(error.details or {})
    if "ok" not in details and "writeConcernError" not in details:
        details["ok"] = 0
    if not details.get("ok"):
        details.setdefault("code", error.code)
        details.setdefault("errmsg", str(error))
    return details


@dataclass(frozen=True)
class ErrorDecision:
    """What the topology does about one application error. Every field false/``None`` means: nothing.

    ``mark_unknown`` is the Unknown description to process through the normal update rules.
    ``clear_pool`` clears the server's pool (only the connections of ``service_id`` when it is set, in
    load-balanced mode). ``request_check`` wakes the server's monitor; ``cancel_check`` interrupts the
    check it may be running.
    """

    stale: bool = False
    mark_unknown: ServerDescription | None = None
    clear_pool: bool = False
    service_id: Any = None
    request_check: bool = False
    cancel_check: bool = False
    reason: str = field(default="", compare=False)

    @property
    def acts(self) -> bool:
        """Whether the decision asks the topology to do anything."""
        return self.mark_unknown is not None or self.clear_pool or self.request_check or self.cancel_check


_IGNORE = ErrorDecision(reason="the error says nothing about the server's state")


def application_error_decision(
    topology_description: TopologyDescription,
    address: Address,
    error: ApplicationError,
    pool_generation: int,
) -> ErrorDecision:
    """Decide how an application error updates the topology, per the SDAM error-handling rules.

    Errors from connections older than the pool's current generation, and state-change errors whose
    topologyVersion is not newer than the server's, are stale and change nothing. A state-change error
    marks the server Unknown (keeping the error's topologyVersion) and requests a check, and clears the pool
    only when the server is shutting down. A network error after the handshake, or any error before it
    completes, marks the server Unknown, clears the pool and cancels the running check, unless the pool
    labelled it ``SystemOverloadedError``. A network timeout after the handshake may be a slow operation,
    not a dead server: it changes nothing. Load-balanced topologies never mark the load balancer Unknown.
    """
    # Imported here, not above: the topology's modules import the connection's, which import this one.
    from mongio.topology.server_description import ServerDescription
    from mongio.topology.topology_description import compare_topology_version
    from mongio.topology.topology_type import TopologyType

    current = topology_description.get(address)
    if current is None:
        return ErrorDecision(stale=True, reason="the server is no longer in the topology")
    if error.generation < pool_generation:
        return ErrorDecision(stale=True, reason="the connection predates the last pool clear")
    if compare_topology_version(current.topology_version, error.topology_version) >= 0:
        return ErrorDecision(stale=True, reason="the server's topologyVersion is at least the error's")

    load_balanced = topology_description.topology_type == TopologyType.LoadBalanced
    if load_balanced and error.service_id is None:
        # Before or during the handshake (load balancer specification, "Initial Handshake Errors").
        return ErrorDecision(reason="load balanced: the error came before the handshake named the service")
    cause = error.error if error.error is not None else _describe(error)

    if error.kind == ErrorKind.COMMAND and is_state_change_error(error.message, error.code):
        unknown = None
        if not load_balanced:
            unknown = ServerDescription(address, error=cause, topology_version=error.topology_version)
        shutting_down = is_shutdown(error.code)
        return ErrorDecision(
            mark_unknown=unknown,
            clear_pool=shutting_down,
            service_id=error.service_id if load_balanced else None,
            request_check=not load_balanced,
            reason="node is shutting down" if shutting_down else "state change error",
        )

    if error.kind == ErrorKind.NETWORK or not error.completed_handshake:
        if SYSTEM_OVERLOADED_ERROR in error.labels:
            return ErrorDecision(reason="the pool marked the error as server overload")
        if not load_balanced:
            return ErrorDecision(
                mark_unknown=ServerDescription(address, error=cause),
                clear_pool=True,
                cancel_check=True,
                reason="network error" if error.completed_handshake else "error while connecting",
            )
        if error.service_id is not None:
            return ErrorDecision(clear_pool=True, service_id=error.service_id, reason="network error")
        return _IGNORE

    return _IGNORE


def _describe(error: ApplicationError) -> BaseException:
    """The exception an Unknown description carries for an error given as a reply, not raised."""
    if error.kind == ErrorKind.COMMAND:
        details: dict[str, Any] = {"ok": 0, "errmsg": error.message, "code": error.code}
        if error.topology_version is not None:
            details["topologyVersion"] = error.topology_version
        if error.code is not None and is_state_change_error(error.message, error.code):
            return NotPrimaryError(error.message or f"state change error {error.code}", details)
        return OperationFailure(error.message, error.code, details)
    if error.kind == ErrorKind.TIMEOUT:
        return NetworkTimeout(error.message or "network timeout")
    return ConnectionFailure(error.message or "network error")
