"""The exchange: one command's round trip on a connection, with what observes it.

:meth:`CommandExchange.round_trip` sends the command (or, for an exhaust getMore, asks for a stream), receives
the reply (``{}`` for an unacknowledged write), publishes the command's started and succeeded/failed events
(:class:`~mongio.execution.command_events.CommandEvents`, which also write the command log messages) and ends
its tracing span, gives the reply to the cluster clock and the session, and makes it the operation's result.
Whatever cuts a round trip off, a cancellation included, a started command's events end with a failure.
:meth:`CommandExchange.streamed_reply` reads an exhaust cursor's next reply, which comes without a request,
with the same observers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.backend import is_cancellation
from mongio.error_classification import is_namespace_not_found, retryable_write_concern_error
from mongio.errors import ConnectionFailure, OperationFailure
from mongio.events.command import CommandPublisher
from mongio.execution import deadline as csot
from mongio.execution.command_crypt import (
    RAW_REPLY,
    CommandCrypt,
    decrypted_reply,
    encrypted_command,
    observed_reply,
)
from mongio.execution.command_events import CommandEvents
from mongio.operations.base import Command, Operation
from mongio.sessions.cluster_time import ClusterClock

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.execution.operation_run import Attempt, OperationIds, OperationRun
    from mongio.sessions.server_session import ServerSession
    from mongio.topology.server_description import Address
    from mongio.topology.topology import PoolLike, Topology
    from mongio.tracing.spans import CommandSpan

__all__ = ["CommandExchange"]

# The observers of a command nobody observes (no listener or log, no tracing).
_UNOBSERVED: tuple[None, None] = (None, None)


class CommandExchange:
    """The round trips of one client's commands; owned by its executor, which shares its cluster clock."""

    __slots__ = ("_crypt", "_encrypting", "_operation_ids", "cluster_clock", "publisher")

    def __init__(
        self,
        publisher: CommandPublisher,
        cluster_clock: ClusterClock,
        operation_ids: OperationIds,
        crypt: CommandCrypt | None = None,
    ) -> None:
        self.publisher = publisher
        self.cluster_clock = cluster_clock
        self._operation_ids = operation_ids
        # Automatic encryption (None without it): replies decrypted, commands encrypted unless bypassed.
        self._crypt = crypt
        self._encrypting = crypt is not None and crypt.encrypts_commands

    async def round_trip(
        self,
        topology: Topology,
        run: OperationRun[Any],
        attempt: Attempt,
        pool: PoolLike,
        conn: Connection,
        command: Command,
        server_session: ServerSession | None,
        exhaust: bool,
    ) -> Any:
        """Send the command, receive the reply, publish its events, give the reply to the clocks and the
        session, and make it the result (an ``ok: 0`` reply raises its error unless the operation ignores it).
        ``exhaust``: an exhaust getMore, whose connection stays with the cursor while the server streams."""
        op = run.op
        crypt = self._crypt
        observed = run.trace is not None or self.publisher.enabled
        body: Mapping[str, Any]
        body, sequences = command
        if crypt is not None and self._encrypting and not exhaust:  # exhaust: a getMore, which is never encrypted
            body, sequences, command = await encrypted_command(crypt, op, command, observed)
        events, span = self.observers(run, conn, attempt.server_address, command) if observed else _UNOBSERVED
        request_id = 0
        attempt.sent = True
        try:
            if exhaust or not run.acknowledged:
                request_id = await _send_waiting(run, attempt, conn, body, sequences, exhaust)
            else:  # written without waiting: the reply is awaited next
                request_id = conn.send_nowait(
                    op.database, body, document_sequences=sequences, codec_options=op.codec_options
                )
            # The transaction is under way once its first command is on the wire; a client-side error (an
            # unencodable document) leaves it starting.
            run.transaction_started = run.in_transaction
            if events is not None:
                events.started(request_id)
            reply: dict[str, Any] = {}
            if run.acknowledged:
                reply = await conn.receive(
                    codec_options=op.codec_options if crypt is None else RAW_REPLY,  # to decrypt: raw
                    check=False,
                    deadline=attempt.deadline,
                    lazy_batch=op.lazy_batch and not observed and crypt is None,  # observers get it whole
                )
        except BaseException as exc:
            _exchange_failed(run, attempt, exc, request_id, server_session, events, span)
            raise
        if crypt is None or not reply:
            error = self.take_reply(run, attempt.wire_version, reply, events, span)
        else:
            reply, error = await self._take_encrypted_reply(run, attempt.wire_version, reply, events, span)
        if error is not None:
            return _result_of_error(op, error)
        if run.txn_number is not None and "writeConcernError" in reply:
            await _raise_write_concern_retry(topology, run, attempt, reply, conn)
        result = op.handle_response(reply, conn)
        if exhaust and conn.more_to_come:
            assert run.pin is not None
            run.pin.hold_stream(pool, conn, command.body)
        return result

    async def _take_encrypted_reply(
        self,
        run: OperationRun[Any],
        wire_version: int | None,
        received: dict[str, Any],
        events: CommandEvents | None,
        span: CommandSpan | None,
    ) -> tuple[dict[str, Any], OperationFailure | None]:
        """A reply received raw under automatic encryption: its succeeded or failed event shows it as it
        came (still encrypted), then it is decrypted for the operation."""
        assert self._crypt is not None
        codec_options = run.op.codec_options
        if events is None and span is None:
            # Nothing observes it: decode only the decrypted reply (the fields read below are never encrypted).
            reply = await decrypted_reply(self._crypt, received, codec_options)
            return reply, self.take_reply(run, wire_version, reply, None, None)
        encrypted = observed_reply(received, codec_options)
        error = self.take_reply(run, wire_version, encrypted, events, span)
        if error is not None:
            return encrypted, error
        return await decrypted_reply(self._crypt, received, codec_options), None

    async def streamed_reply(
        self, run: OperationRun[Any], conn: Connection, address: Address, command: Command
    ) -> Any:
        """The next reply of an exhaust stream (nothing is sent), made into the operation's result, with the
        events and span of the getMore that opened the stream, as if it had been sent again."""
        op = run.op
        events, span = None, None
        if run.trace is not None or self.publisher.enabled:
            events, span = self.observers(run, conn, address, command)
        if events is not None:
            events.started(conn.request_id)
        codec_options = op.codec_options if self._crypt is None else RAW_REPLY
        try:
            reply = await conn.receive(codec_options=codec_options, check=False, deadline=csot.current_deadline())
        except BaseException as exc:
            if isinstance(exc, Exception) or is_cancellation(exc):
                if events is not None:
                    events.failed(exc)
                if span is not None:
                    span.failed(exc)
            raise
        if self._crypt is not None:
            reply, error = await self._take_encrypted_reply(run, conn.max_wire_version, reply, events, span)
        else:
            error = self.take_reply(run, conn.max_wire_version, reply, events, span)
        if error is not None:
            raise error
        return op.handle_response(reply, conn)

    def observers(
        self, run: OperationRun[Any], conn: Connection, address: Address | None, command: Command
    ) -> tuple[CommandEvents | None, CommandSpan | None]:
        """The command's events (when anyone listens or logs) and its span (when the client traces), for a
        command to ``address`` (the server selected: never None once an attempt sends)."""
        assert address is not None
        op = run.op
        body, sequences = command
        publisher = self.publisher
        events = None
        if publisher.enabled:
            events = CommandEvents(
                publisher,
                op.command_name,
                op.database,
                self._operation_ids.of(run),
                address,
                conn,
                body,
                sequences,
            )
        trace = run.trace
        span = None if trace is None else trace.command(op.command_name, op.database, body, sequences, conn)
        return events, span

    def take_reply(
        self,
        run: OperationRun[Any],
        wire_version: int | None,
        reply: dict[str, Any],
        events: CommandEvents | None,
        span: CommandSpan | None,
    ) -> OperationFailure | None:
        """What a received reply tells the cluster clock and the session, and the command's succeeded or failed
        event and span; returns the error of an ``ok: 0`` reply."""
        if reply:
            self.cluster_clock.advance_from_reply(reply)
            if run.session is not None:
                run.session.take_from_reply(reply, in_transaction=run.transaction_bound)
            if reply.get("ok", 1) != 1:
                error = _command_error(reply, wire_version)
                if events is not None:
                    events.failed(error)
                if span is not None:
                    span.failed(error)
                return error
        if events is not None:
            # A copy: handle_response may rework the reply a listener keeps.
            events.succeeded(dict(reply) if run.acknowledged else {"ok": 1})
        if span is not None:
            span.succeeded(reply)
        return None

    async def send_unmanaged(self, conn: Connection, name: str, command: dict[str, Any]) -> None:
        """Send a command outside any session and retry loop, with its command events."""
        events = None
        if self.publisher.enabled:
            operation_id = self._operation_ids.new()
            events = CommandEvents(self.publisher, name, "admin", operation_id, conn.address, conn, command)
        request_id = await conn.send("admin", command)
        if events is not None:
            events.started(request_id)
        try:
            reply = await conn.receive(check=True)
        except BaseException as exc:
            # A cancellation too: a started event never goes without its end.
            if events is not None and (isinstance(exc, Exception) or is_cancellation(exc)):
                events.failed(exc)
            raise
        if events is not None:
            events.succeeded(reply)


def _result_of_error(op: Operation[Any], error: OperationFailure) -> Any:
    """The result of an ``ok: 0`` reply: the operation's empty result when it ignores a missing namespace,
    else ``error`` raised."""
    if is_namespace_not_found(error) and op.ignores_namespace_not_found:
        return op.empty_result()
    raise error


async def _send_waiting(
    run: OperationRun[Any],
    attempt: Attempt,
    conn: Connection,
    body: Mapping[str, Any],
    sequences: Mapping[str, Any] | None,
    exhaust: bool,
) -> int:
    """Write an exhaust getMore or an unacknowledged write, waiting until it is written (under CSOT until the
    deadline, infinite for timeoutMS=0, instead of socketTimeoutMS); returns its request id."""
    op = run.op
    if exhaust:
        return await conn.send(
            op.database, body, codec_options=op.codec_options, exhaust_allowed=True, deadline=attempt.deadline
        )
    return await conn.send(
        op.database,
        body,
        document_sequences=sequences,
        codec_options=op.codec_options,
        more_to_come=True,
        deadline=attempt.deadline,
    )


def _exchange_failed(
    run: OperationRun[Any],
    attempt: Attempt,
    exc: BaseException,
    request_id: int,
    server_session: ServerSession | None,
    events: CommandEvents | None,
    span: CommandSpan | None,
) -> None:
    """What a send or a receive cut off by ``exc`` leaves (``request_id`` 0: nothing was written): a network
    error or a cancellation leaves the session's server state unknown (dirty); a started command's events end
    with a failure."""
    if not isinstance(exc, Exception) and not is_cancellation(exc):
        return  # KeyboardInterrupt and its kin: nothing to record
    if is_cancellation(exc):
        # Cut off once the command was on its way: like a network error, what the server did in this
        # session is unknown; the command's events still end, with a failure.
        if server_session is not None:
            server_session.mark_dirty()
        if events is not None and request_id:
            events.failed(exc)
    else:
        if isinstance(exc, ConnectionFailure):
            run.transaction_started = run.transaction_started or run.in_transaction
            if server_session is not None:
                server_session.mark_dirty()
        if not request_id:
            attempt.sent = False  # failed before the message was written: nothing was sent
        elif events is not None:
            events.failed(exc)
    if span is not None:
        span.failed(exc)


async def _raise_write_concern_retry(
    topology: Topology, run: OperationRun[Any], attempt: Attempt, reply: dict[str, Any], conn: Connection
) -> None:
    """A retryable write concern error in an ``ok: 1`` reply sends the write again (same txnNumber)
    before the reply counts as the result: raise the error that makes the retry loop go again."""
    concern_error = retryable_write_concern_error(
        reply, max_wire_version=attempt.wire_version, from_mongos=attempt.from_mongos
    )
    if concern_error is None:
        return
    error = run.op.write_concern_retry_error(reply, concern_error.error_labels)
    if error is None:
        raise concern_error
    assert attempt.server_address is not None
    await topology.handle_application_error(
        attempt.server_address, concern_error, attempt.generation, service_id=conn.service_id
    )
    raise error


def _command_error(reply: Mapping[str, Any], max_wire_version: int | None) -> OperationFailure:
    from mongio.connection.connection import check_command_reply

    try:
        check_command_reply(reply, max_wire_version)
    except OperationFailure as exc:
        return exc
    return OperationFailure(
        str(reply.get("errmsg", "command failed")), reply.get("code"), reply, max_wire_version
    )
