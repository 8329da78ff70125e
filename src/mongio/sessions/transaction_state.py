"""The transaction state machine of a client session, and the transaction fields each command carries.

States: ``NO_TXN`` → (``start``) ``STARTING`` → (first command completes, even with an error)
``IN_PROGRESS`` → (``commit``) ``COMMITTED`` or (``abort``) ``ABORTED``. Committing or aborting from
``STARTING`` sends nothing: commit goes to ``COMMITTED_EMPTY``, abort to ``ABORTED``. From the three ended
states any other operation on the session first returns it to ``NO_TXN``; ``start`` may begin a new
transaction. An illegal call raises :class:`~mongio.errors.InvalidOperation` with the specification's
message and leaves the state as it was.

Pure: the session calls these methods around the commands the executor sends.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

from mongio.bson.int64 import Int64
from mongio.bson.timestamp import Timestamp
from mongio.errors import ConfigurationError, InvalidOperation
from mongio.options.read_concern import ReadConcern, as_read_concern
from mongio.options.read_preference import ReadPreferenceMode, as_read_preference
from mongio.options.write_concern import WriteConcern, as_write_concern

__all__ = [
    "COMMIT_RETRY_WTIMEOUT_MS",
    "ClientTransactionDefaults",
    "Transaction",
    "TransactionOptions",
    "TxnState",
    "check_no_operation_concerns",
    "check_read_preference",
]

# A commit retried with w: majority waits at most this long for the majority unless told otherwise.
COMMIT_RETRY_WTIMEOUT_MS = 10_000


class TxnState(enum.Enum):
    NO_TXN = "no transaction"
    STARTING = "starting transaction"
    IN_PROGRESS = "transaction in progress"
    COMMITTED = "transaction committed"
    COMMITTED_EMPTY = "transaction committed (nothing sent)"
    ABORTED = "transaction aborted"


_ENDED = (TxnState.COMMITTED, TxnState.COMMITTED_EMPTY, TxnState.ABORTED)


@dataclass(frozen=True)
class TransactionOptions:
    """Options for one transaction; any left ``None`` is inherited (session defaults, then the client).

    ``read_concern`` goes on the first command only; ``write_concern`` on ``commitTransaction`` and
    ``abortTransaction`` only; ``read_preference`` must be primary for reads; ``max_commit_time_ms``
    (deprecated in favour of ``timeoutMS``) becomes the commit's ``maxTimeMS``.
    """

    read_concern: ReadConcern | None = None
    write_concern: WriteConcern | None = None
    read_preference: ReadPreferenceMode | None = None
    max_commit_time_ms: int | None = None

    def __post_init__(self) -> None:
        # PyMongo's concern and read preference objects are taken as mongio's, so ported code passing them
        # to start_transaction works; anything else is refused by the conversions with a TypeError.
        if self.read_concern is not None:
            object.__setattr__(self, "read_concern", as_read_concern(self.read_concern))
        if self.write_concern is not None:
            object.__setattr__(self, "write_concern", as_write_concern(self.write_concern))
            _check_acknowledged(self.write_concern)
        if self.read_preference is not None:
            object.__setattr__(self, "read_preference", as_read_preference(self.read_preference))
        if self.max_commit_time_ms is not None and (
            isinstance(self.max_commit_time_ms, bool)
            or not isinstance(self.max_commit_time_ms, int)
            or self.max_commit_time_ms <= 0
        ):
            raise ConfigurationError(
                f"max_commit_time_ms must be a positive int, not {self.max_commit_time_ms!r}"
            )

    @classmethod
    def from_options(cls, value: Any) -> TransactionOptions:
        """``value`` as mongio's :class:`TransactionOptions`: itself, or the same four options read from another
        library's (PyMongo's ``TransactionOptions``). Anything else raises ``TypeError``."""
        if isinstance(value, cls):
            return value
        names = ("read_concern", "write_concern", "read_preference", "max_commit_time_ms")
        if type(value).__name__ == "TransactionOptions" and all(hasattr(value, name) for name in names):
            return cls(**{name: getattr(value, name) for name in names})
        raise TypeError(f"default_transaction_options must be a TransactionOptions, not {type(value).__name__}")

    def inherit(self, *defaults: TransactionOptions | ClientTransactionDefaults | None) -> TransactionOptions:
        """These options with each unset one taken from the first of ``defaults`` that sets it.

        Raises :class:`ConfigurationError` when the result's write concern is unacknowledged (a client's
        ``w=0`` is refused only when nothing before it sets an acknowledged one).
        """
        values: dict[str, Any] = {
            "read_concern": self.read_concern,
            "write_concern": self.write_concern,
            "read_preference": self.read_preference,
            "max_commit_time_ms": self.max_commit_time_ms,
        }
        for default in defaults:
            if default is None:
                continue
            for name, value in values.items():
                if value is None:
                    values[name] = getattr(default, name)
        return TransactionOptions(**values)


class ClientTransactionDefaults(NamedTuple):
    """The client's concerns and read preference, the last defaults a transaction's options inherit from.
    Unlike :class:`TransactionOptions` it takes an unacknowledged write concern: a client may write with
    ``w=0`` and still run transactions that set their own."""

    read_concern: ReadConcern | None = None
    write_concern: WriteConcern | None = None
    read_preference: ReadPreferenceMode | None = None
    max_commit_time_ms: int | None = None


def _check_acknowledged(write_concern: WriteConcern) -> None:
    if not write_concern.acknowledged:
        raise ConfigurationError(
            f"transactions do not support unacknowledged write concerns: {write_concern.document}"
        )


def check_read_preference(read_preference: ReadPreferenceMode) -> None:
    """Reads in a transaction must go to the primary (writes and ``start`` are not checked)."""
    if read_preference.mode != 0:
        raise InvalidOperation(
            f"read preference in a transaction must be primary, not: {read_preference.name}"
        )


def check_no_operation_concerns(*, read_concern: bool = False, write_concern: bool = False) -> None:
    """An operation inside a transaction may not bring its own read or write concern."""
    if read_concern:
        raise InvalidOperation("Cannot set read concern after starting a transaction.")
    if write_concern:
        raise InvalidOperation("Cannot set write concern after starting a transaction.")


class Transaction:
    """The transaction state of one client session.

    ``options`` are the resolved options of the current (or last) transaction. ``recovery_token`` is kept
    from replies on a sharded cluster and sent with commit and abort.
    """

    __slots__ = ("_commit_majority", "options", "recovery_token", "state")

    def __init__(self) -> None:
        self.state = TxnState.NO_TXN
        self.options = TransactionOptions()
        self.recovery_token: Any = None
        self._commit_majority = False

    @property
    def active(self) -> bool:
        """Starting or in progress: commands go inside the transaction."""
        return self.state in (TxnState.STARTING, TxnState.IN_PROGRESS)

    @property
    def starting(self) -> bool:
        return self.state is TxnState.STARTING

    @property
    def committed(self) -> bool:
        return self.state in (TxnState.COMMITTED, TxnState.COMMITTED_EMPTY)

    def start(self, options: TransactionOptions, *, snapshot: bool = False) -> None:
        """Begin a transaction with resolved ``options`` (the caller then increments the txnNumber)."""
        if snapshot:
            raise InvalidOperation("Transactions are not supported in snapshot sessions")
        if self.active:
            raise InvalidOperation("Transaction already in progress")
        self.state = TxnState.STARTING
        self.options = options
        self.recovery_token = None
        self._commit_majority = False

    def before_operation(self) -> None:
        """Any operation other than commit/abort leaves an ended transaction behind."""
        if self.state in _ENDED:
            self.state = TxnState.NO_TXN
            self.recovery_token = None

    def command_fields(
        self, txn_number: int, *, after_cluster_time: Timestamp | None = None
    ) -> dict[str, Any]:
        """The fields an ordinary command inside the transaction carries (``lsid`` is the caller's).

        The first command (state ``STARTING``) also starts the transaction and carries the read concern,
        with ``afterClusterTime`` for a causally consistent session.
        """
        fields: dict[str, Any] = {"txnNumber": Int64(txn_number)}
        if self.state is TxnState.STARTING:
            fields["startTransaction"] = True
            read_concern: dict[str, Any] = {}
            if self.options.read_concern is not None:
                read_concern = self.options.read_concern.document
            if after_cluster_time is not None:
                read_concern["afterClusterTime"] = after_cluster_time
            if read_concern:
                fields["readConcern"] = read_concern
        fields["autocommit"] = False
        return fields

    def first_command_done(self) -> None:
        """The first command finished (well or not, after any retries): the transaction is in progress.

        Not to be called between the attempts of an overload retry: the retried command is the first one
        again and keeps ``startTransaction``.
        """
        if self.state is TxnState.STARTING:
            self.state = TxnState.IN_PROGRESS

    def begin_commit(self) -> bool:
        """Move to the committed state; return whether a ``commitTransaction`` command must be sent.

        Committing again after a commit re-sends the command (with ``w: majority``); committing a
        transaction in which nothing was sent sends nothing.
        """
        if self.state is TxnState.NO_TXN:
            raise InvalidOperation("No transaction started")
        if self.state is TxnState.ABORTED:
            raise InvalidOperation("Cannot call commitTransaction after calling abortTransaction")
        if self.state in (TxnState.STARTING, TxnState.COMMITTED_EMPTY):
            self.state = TxnState.COMMITTED_EMPTY
            return False
        if self.state is TxnState.COMMITTED:
            self._commit_majority = True  # the application retries a commit whose outcome it does not know
        self.state = TxnState.COMMITTED
        return True

    def record_commit_failure(self, *, retryable_overload: bool) -> None:
        """A commit attempt failed. Unless it was a retryable overload error, later attempts use majority."""
        if not retryable_overload:
            self._commit_majority = True

    def commit_write_concern(self) -> dict[str, Any] | None:
        """The ``writeConcern`` for the next commit attempt, or ``None`` to send none."""
        base = self.options.write_concern
        document = base.document if base is not None else {}
        if self._commit_majority:
            document["w"] = "majority"
            document.setdefault("wtimeout", COMMIT_RETRY_WTIMEOUT_MS)
        return document or None

    def commit_command(self, txn_number: int) -> dict[str, Any]:
        """The ``commitTransaction`` command (for ``admin``) of the next attempt, without ``lsid``."""
        command: dict[str, Any] = {
            "commitTransaction": 1,
            "txnNumber": Int64(txn_number),
            "autocommit": False,
        }
        write_concern = self.commit_write_concern()
        if write_concern is not None:
            command["writeConcern"] = write_concern
        if self.options.max_commit_time_ms is not None:
            command["maxTimeMS"] = self.options.max_commit_time_ms
        if self.recovery_token is not None:
            command["recoveryToken"] = self.recovery_token
        return command

    def begin_abort(self) -> bool:
        """Move to the aborted state; return whether an ``abortTransaction`` command must be sent."""
        if self.state is TxnState.NO_TXN:
            raise InvalidOperation("No transaction started")
        if self.state in (TxnState.COMMITTED, TxnState.COMMITTED_EMPTY):
            raise InvalidOperation("Cannot call abortTransaction after calling commitTransaction")
        if self.state is TxnState.ABORTED:
            raise InvalidOperation("Cannot call abortTransaction twice")
        send = self.state is TxnState.IN_PROGRESS
        self.state = TxnState.ABORTED
        return send

    def abort_command(self, txn_number: int) -> dict[str, Any]:
        """The ``abortTransaction`` command (for ``admin``), without ``lsid``."""
        command: dict[str, Any] = {"abortTransaction": 1, "txnNumber": Int64(txn_number), "autocommit": False}
        write_concern = self.options.write_concern
        if write_concern is not None and not write_concern.is_server_default:
            command["writeConcern"] = write_concern.document
        if self.recovery_token is not None:
            command["recoveryToken"] = self.recovery_token
        return command

    def __repr__(self) -> str:
        return f"Transaction({self.state.name})"
