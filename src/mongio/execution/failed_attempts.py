"""What follows a failed attempt: the error labelled, the retry rules asked, and either the operation's error
raised or the next attempt prepared.

The rules themselves are :class:`~mongio.execution.retry_policy.RetryState`'s (pure: it returns a decision);
this module applies a decision to the operation: the labels it adds or removes, the error it reports (under
CSOT every timeout is reported as the operation's timeout), a sharded or load-balanced transaction unpinned
before its retry, the servers the next selection avoids, and the backoff to wait out. It also names the error of
an operation the client's ``close()`` cut off.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any, NoReturn

from mongio.error_classification import (
    TRANSIENT_TRANSACTION_ERROR,
    AttemptFailure,
    has_error_label,
    is_unreported_timeout,
    unpins_transaction,
)
from mongio.errors import (
    ClientClosedError,
    MongioError,
    OperationFailure,
)
from mongio.execution import deadline as csot
from mongio.execution.retry_policy import OperationRetryability, RetryOptions, RetryState, TokenBucket
from mongio.operations.base import Operation, Retryability
from mongio.topology.topology_type import TopologyType

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.execution.operation_run import Attempt, OperationIds, OperationRun
    from mongio.topology.server_description import Address
    from mongio.topology.topology import Topology

__all__ = [
    "closed_while_running",
    "cut_off_by_closing",
    "new_retry_state",
    "prepare_retry",
    "streamed_reply_failed",
]

_log = logging.getLogger("mongio.execution")
_DEBUG = logging.DEBUG


def new_retry_state(
    run: OperationRun[Any],
    topology: Topology,
    options: RetryOptions,
    token_bucket: TokenBucket | None,
    rng: random.Random,
) -> RetryState:
    """The retry bookkeeping, made at the first failure. Failed before a connection was ours, a retryable
    write is judged by whether it would get a txnNumber."""
    op = run.op
    if run.txn_decided:
        assigned = run.txn_number is not None
    else:
        assigned = (
            op.retryability is Retryability.WRITE
            and options.retry_writes
            and not run.in_transaction
            and (run.session is not None or run.acknowledged)
        )
    return RetryState(
        _retryability(op, assigned),
        options,
        csot=csot.is_enabled(),
        in_transaction=run.in_transaction,
        sharded=topology.description.topology_type is TopologyType.Sharded,
        token_bucket=token_bucket,
        rng=rng,
    )


def prepare_retry(
    run: OperationRun[Any], attempt: Attempt, exc: MongioError, operation_ids: OperationIds
) -> float:
    """Label the failed attempt's error and let the retry rules (``run.retry_state``) decide: raise the
    operation's error, or prepare the next attempt (the transaction unpinned if it must be, the servers to
    avoid noted) and return the backoff to wait first, in seconds."""
    op = run.op
    retry_state = run.retry_state
    assert retry_state is not None
    failure = AttemptFailure.from_exception(
        exc,
        address=attempt.server_address,
        max_wire_version=attempt.wire_version,
        from_mongos=attempt.from_mongos,
        sent=attempt.sent,
    )
    decision = retry_state.on_failure(failure, remaining=csot.remaining())
    for label in decision.add_labels:
        exc.add_error_label(label)
    for label in decision.remove_labels:
        exc.remove_error_label(label)
    if not decision.retry:
        _raise_operation_error(run, exc, decision.error if decision.error is not None else exc)
    op.retrying(after_overload=failure.is_retryable_overload)
    session = run.session
    if (
        session is not None
        and (run.pinned_by_session or session.has_pinned_connection())
        and unpins_transaction(exc, op.transaction_command)
    ):
        # The transactions specification: unpin before selecting a server for the retry.
        session.unpin()
        run.address = None
        run.pinned_by_session = False
    run.deprioritized = decision.deprioritized
    if _log.isEnabledFor(_DEBUG):
        _log.debug(
            "retrying %s (operation %d, retry %d) after %s: %s; backoff %.3f s",
            op.command_name,
            operation_ids.of(run),
            retry_state.attempt,
            type(exc).__name__,
            decision.reason,
            decision.backoff,
        )
    return decision.backoff


def _retryability(op: Operation[Any], txn_number_assigned: bool) -> OperationRetryability:
    """What the retry rules need to know of ``op``; a retryable write counts as one only once it has a
    txnNumber (``txn_number_assigned``)."""
    if op.transaction_command == "commitTransaction":
        return OperationRetryability.commit_transaction()
    if op.transaction_command == "abortTransaction":
        return OperationRetryability.abort_transaction()
    retryability = op.retryability
    if retryability is Retryability.READ:
        return OperationRetryability.read(True)
    if retryability is Retryability.WRITE:
        return OperationRetryability.write(txn_number_assigned)
    if op.is_user_command:
        return OperationRetryability.run_command()
    if op.takes_write_concern:
        return OperationRetryability.write(False)
    return OperationRetryability.read(False)


def _raise_operation_error(run: OperationRun[Any], exc: MongioError, reported: BaseException) -> NoReturn:
    """End the operation with ``reported`` (``exc``, the last attempt's error, or an earlier one the retry
    rules chose). Under CSOT every timeout is reported as the operation's timeout, wrapping its cause."""
    session = run.session
    if (
        run.in_transaction
        and session is not None
        and has_error_label(reported, TRANSIENT_TRANSACTION_ERROR)
    ):
        session.unpin()
    if csot.is_enabled() and is_unreported_timeout(reported):
        # A socket read, selection, checkout, or the server's MaxTimeMSExpired.
        raise csot.timeout_error(reported) from reported
    if reported is exc:
        raise exc
    raise reported from None


async def streamed_reply_failed(
    topology: Topology | None, exc: MongioError, address: Address, generation: int, conn: Connection
) -> None:
    """A streamed reply's error, as a getMore's: the topology is told (its pool cleared when the error
    calls for it, before the connection goes back); under CSOT a timeout is the operation's timeout."""
    if topology is not None:
        await topology.handle_application_error(address, exc, generation, service_id=conn.service_id)
    if csot.is_enabled() and is_unreported_timeout(exc):
        raise csot.timeout_error(exc) from exc


def cut_off_by_closing(exc: MongioError) -> bool:
    """Whether ``exc``, raised once the topology closed, is the closing's doing (a connection closed under
    the operation, a pool or selection that refused it), not an answer the server gave before."""
    return not isinstance(exc, OperationFailure)


def closed_while_running(command_name: str, exc: MongioError) -> ClientClosedError:
    """The error of an operation that the client's ``close()`` cut off (``exc``: how it was cut off)."""
    return ClientClosedError(
        f"{command_name} did not complete: the client was closed while it was running ({exc})"
    )
