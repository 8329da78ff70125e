"""What one operation carries through the executor: :class:`OperationRun`, made when the operation starts and
kept across its attempts, and :class:`Attempt`, made for each attempt and dropped when the next begins; and
:class:`OperationIds`, which gives an operation its operationId (command monitoring) when first asked."""

from __future__ import annotations

import contextvars
import itertools
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mongio.backend import current_task
from mongio.context_vars import reset

if TYPE_CHECKING:
    from mongio.execution.connection_pin import ConnectionPin
    from mongio.execution.retry_policy import RetryState
    from mongio.operations.base import Operation
    from mongio.sessions.operation_session import OperationSession
    from mongio.sessions.server_session import ServerSession
    from mongio.topology.server_description import Address
    from mongio.tracing.spans import OperationSpan

__all__ = ["Attempt", "OperationIds", "OperationRun"]

R = TypeVar("R")

# The operationId every command of one operation made of several shares (the batches of a bulk write), with
# the OperationIds that gave it and the task it was given for: a task started meanwhile inherits the variable,
# not the id.
_SHARED_OPERATION_ID: contextvars.ContextVar[tuple[OperationIds, object | None, int] | None] = (
    contextvars.ContextVar("mongio_shared_operation_id", default=None)
)


class OperationRun(Generic[R]):
    """One operation from its first attempt to its end: the operation, its session and transaction, where
    it must go, its txnNumber, its tracing span and its retry bookkeeping (made at the first failure)."""

    __slots__ = (
        "acknowledged",
        "address",
        "deprioritized",
        "implicit",
        "in_transaction",
        "op",
        "operation_id",
        "pin",
        "pinned_by_session",
        "retry_state",
        "server_address",
        "session",
        "trace",
        "transaction_bound",
        "transaction_started",
        "txn_decided",
        "txn_number",
    )

    def __init__(self, op: Operation[R], session: OperationSession | None, address: Address | None) -> None:
        self.op = op
        self.session = session
        self.address = address  # the server every attempt goes to, when one is imposed
        self.operation_id = 0  # none yet: OperationIds.of gives one when an event or a log first needs it
        self.trace: OperationSpan | None = None  # the operation's tracing span, when the client traces
        self.acknowledged = op.acknowledged
        # An ordinary command inside the session's transaction; ``transaction_bound`` also covers the
        # commands that end it: both go to the transaction's server, with no concern of their own.
        self.in_transaction = False
        self.transaction_bound = op.transaction_command is not None
        self.transaction_started = False
        self.pinned_by_session = False  # ``address`` is the mongos the session's transaction is pinned to
        self.pin: ConnectionPin | None = None  # a load-balanced or exhaust cursor's connection holder
        self.implicit: ServerSession | None = None  # a server session taken for this operation alone
        self.txn_number: Any = None
        self.txn_decided = False  # whether a retryable write's txnNumber was decided
        self.retry_state: RetryState | None = None
        self.deprioritized: tuple[Address, ...] = ()  # the servers the next selection avoids
        self.server_address: Address | None = None  # the server whose reply made the result


class Attempt:
    """One attempt of an operation: its CSOT deadline (read once, when the attempt begins) and what it
    learned of the server and connection it went to, which judge its failure."""

    __slots__ = ("deadline", "from_mongos", "generation", "sent", "server_address", "wire_version")

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.server_address: Address | None = None
        self.wire_version: int | None = None
        self.from_mongos = False
        self.sent = False  # whether the command may have been written (judged by the retry rules)
        self.generation = 0  # the pool generation of the attempt's connection


class OperationIds:
    """The operationIds of one client's operations, which their command events and logs carry: one per
    operation, shared by the commands of an operation made of several (:meth:`share`). An operation takes its
    id when first asked (:meth:`of`), so one that nobody observes costs none."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def of(self, run: OperationRun[Any]) -> int:
        """The operationId of ``run``: the shared one when a :meth:`share` block of its task is open, else a
        new one; the same for all its commands. Call it in the operation's own task."""
        operation_id = run.operation_id
        if not operation_id:
            shared = _SHARED_OPERATION_ID.get()
            if shared is not None and shared[0] is self and shared[1] is current_task():
                operation_id = shared[2]
            else:
                operation_id = next(self._next)
            run.operation_id = operation_id
        return operation_id

    def new(self) -> int:
        """A new operationId (for a command sent outside any operation)."""
        return next(self._next)

    def share(self) -> contextvars.Token[Any]:
        """Give the operations the current task runs from now on one operationId, until :meth:`unshare`."""
        return _SHARED_OPERATION_ID.set((self, current_task(), next(self._next)))

    def unshare(self, token: contextvars.Token[Any]) -> None:
        """End what :meth:`share` (which returned ``token``) began."""
        reset(_SHARED_OPERATION_ID, token)
