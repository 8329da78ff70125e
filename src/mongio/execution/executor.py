"""The executor: the one place where an operation meets servers, connections, sessions, events and retries.

``await executor.execute(op, session)`` runs in the caller's task (no task is made per operation);
``execute_answered`` also gives the address of the server that answered. Its functions, in call order:

- ``execute`` / ``execute_answered``: the operation's :class:`_Execution` (what its attempts share), then
  ``_execute_prepared``, the CSOT deadline (the one :func:`~mongio.execution.deadline.timeout_in_force`
  gives, unless a ``timeout()`` block already set one), skipped when there is none to set; then
- ``_run``, the retry loop: attempts until one succeeds, or ``_after_failure`` (the error labelled, the
  topology told, :class:`~mongio.execution.retry_policy.RetryState` asked) raises the operation's error;
  otherwise a backoff and the next attempt, avoiding the servers it names;
- ``_attempt``, one attempt: select a server (synchronously when the current description already has a
  suitable one), check a connection out of its pool (or take a load-balanced transaction's);
- ``_command_for``: the session and txnNumber, ``op.build(conn)`` plus the fields the executor owns
  (``lsid``, ``txnNumber``, ``$clusterTime``, ``readConcern``, ``writeConcern``, ``$readPreference``,
  ``maxTimeMS``, ``$db``);
- ``_exchange``: send, receive, the command's started and succeeded/failed events
  (:class:`~mongio.execution.command_events.CommandEvents`), then ``op.handle_response``.

What differs from one operation to another is declared on :class:`~mongio.operations.base.Operation`
(``transaction_command``, ``has_write_stage``, ``is_user_command``, ``write_concern_retry_error``,
``retrying``...); what a session adds to a command and takes from a reply, and its pinning, are
:class:`~mongio.sessions.client_session.ClientSession`'s. The connection always goes back to its pool and
the server's operation count always comes down, whatever ends the attempt, cancellation included. A server
session taken for one operation (an implicit session) goes back to the client's pool when the operation ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, NoReturn, Protocol, TypeVar

from mongio.connection.handshake import ServerApiLike, server_api_fields
from mongio.context_vars import reset
from mongio.errors import (
    AutoReconnect,
    ClientClosedError,
    ConfigurationError,
    ConnectionFailure,
    InvalidOperation,
    MongioError,
    OperationFailure,
    OperationTimeoutError,
)
from mongio.events.command import CommandPublisher
from mongio.execution import deadline as csot
from mongio.execution.command_events import CommandEvents
from mongio.execution.error_labels import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_TRANSACTION_COMMIT_RESULT,
    AttemptFailure,
    is_timeout,
    retryable_write_concern_error,
)
from mongio.execution.retry_policy import (
    OperationRetryability,
    RetryOptions,
    RetryState,
    TokenBucket,
)
from mongio.operations.base import NAMESPACE_NOT_FOUND, Command, CursorState, Operation, Retryability
from mongio.sessions.cluster_time import ClusterClock
from mongio.sessions.server_session import ServerSession, ServerSessionPool
from mongio.topology.heartbeat_events import SERVER_SELECTION_LOGGER
from mongio.topology.server_type import ServerType
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.execution.connection_pin import ConnectionPin
    from mongio.sessions.client_session import ClientSession
    from mongio.topology.server_description import Address, ServerDescription
    from mongio.topology.topology import PoolLike, Server, Topology
    from mongio.tracing.spans import CommandSpan, OperationSpan, Tracing

__all__ = ["Answered", "Executor", "read_preference_document"]

R = TypeVar("R")

_log = logging.getLogger("mongio.execution")
_DEBUG = logging.DEBUG
_MONGOS_LIKE = frozenset({ServerType.Mongos, ServerType.LoadBalancer})
# The enum members every operation compares with, as module constants: on Python 3.11 reading a member off
# its enum class is an unspecialized attribute lookup, several times the cost of reading a global.
_MONGOS = ServerType.Mongos
_STANDALONE = ServerType.Standalone
_SINGLE = TopologyType.Single
_RETRYABLE_WRITE = Retryability.WRITE
# Server selection for the commands of close() (endSessions): short, since the client is going away.
_CLOSE_TIMEOUT = 5.0
# The write commands that take a readConcern with afterClusterTime in a causally consistent session.
_CAUSAL_WRITE_COMMANDS = frozenset(
    {
        "insert",
        "update",
        "delete",
        "findAndModify",
        "bulkWrite",
        "create",
        "createIndexes",
        "drop",
        "dropDatabase",
        "dropIndexes",
    }
)
# The commands a snapshot session sends without its snapshot read concern.
_NO_SNAPSHOT_COMMANDS = frozenset({"getMore", "killCursors"})
_SNAPSHOT_MIN_WIRE_VERSION = 13  # MongoDB 5.0
_EXHAUST_MIN_WIRE_VERSION = 8  # MongoDB 4.2: getMore takes exhaustAllowed
_MONGOS_EXHAUST_MIN_WIRE_VERSION = 22  # MongoDB 7.1: a mongos goes on with an exhaust getMore's stream
# The operationId every command of one operation made of several shares (the batches of a bulk write), with
# the executor and the task it was taken for: a task started meanwhile inherits the variable, not the id.
_SHARED_OPERATION_ID: contextvars.ContextVar[tuple[Any, asyncio.Task[Any] | None, int] | None] = (
    contextvars.ContextVar("mongio_shared_operation_id", default=None)
)


class Answered(NamedTuple, Generic[R]):
    """An operation's result and the address of the server whose reply made it."""

    result: R
    address: Address


class ClientLike(Protocol):
    """What the executor needs of its client."""

    async def _open_topology(self) -> Topology: ...

    def _closed_error(self) -> ClientClosedError: ...


def read_preference_document(
    op: Operation[Any], description: ServerDescription, topology_type: TopologyType
) -> dict[str, Any] | None:
    """The ``$readPreference`` to send with ``op`` to a server, per the server selection specification.

    Mongos and load balancers get it unless it is primary (commands go in OP_MSG, where every other mode
    is sent, a plain secondaryPreferred included); a direct connection to a replica set member gets
    ``primaryPreferred`` for a primary read preference so any member answers; a standalone never gets it;
    replica set members get it unless it is primary. Writes carry none.
    """
    if op.takes_write_concern and not op.has_write_stage:
        return None
    read_preference = op.read_preference
    server_type = description.server_type
    if server_type in _MONGOS_LIKE:
        if read_preference is None or read_preference.mode == 0:
            return None
        return read_preference.document
    if topology_type is _SINGLE:
        if server_type is _STANDALONE:
            return None
        if read_preference is None or read_preference.mode == 0:
            return {"mode": "primaryPreferred"}
        return read_preference.document
    if read_preference is None or read_preference.mode == 0:
        return None
    return read_preference.document


class Executor:
    """Runs operations for one client. Made by the client; see the module docstring for what one call does."""

    def __init__(
        self,
        client: ClientLike,
        *,
        retry_options: RetryOptions,
        publisher: CommandPublisher,
        timeout: float | None = None,
        server_selection_timeout: float = 30.0,
        wait_queue_timeout: float | None = None,
        server_api: ServerApiLike | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._client = client
        # OpenTelemetry spans (None when the client does not trace: its cost is then an `is None` or two).
        self._tracing = tracing
        # The stable API fields go on every command (getMore and transaction commands included).
        self._api_fields = server_api_fields(server_api)
        self._topology: Topology | None = None
        self._retry_options = retry_options
        self._retry_writes = retry_options.retry_writes
        self._token_bucket = TokenBucket() if retry_options.adaptive_retries else None
        # The jitter of overload backoffs (``random()`` in [0, 1)) and the sleep that waits a backoff out;
        # tests put in their own to see the exact delays.
        self.retry_random: random.Random = random.Random()
        self.backoff_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self._publisher = publisher
        self._timeout = timeout
        self._selection_timeout = server_selection_timeout
        self._wait_queue_timeout = wait_queue_timeout
        self.cluster_clock = ClusterClock()
        self.session_pool = ServerSessionPool()
        self._operation_ids = itertools.count(1)
        # The last server selected without waiting, for a topology of one server: (description, read
        # preference, is_write, server). Selection is pure, so an unchanged description needs none.
        self._last_selection: tuple[TopologyDescription, Any, bool, Server] | None = None

    # -- the topology ----------------------------------------------------------------------------------------

    def attach(self, topology: Topology) -> None:
        """Run operations on ``topology`` from now on (the client calls this once it opened it); an operation
        on another event loop than the topology's asks the client for that loop's topology."""
        self._topology = topology

    @property
    def publisher(self) -> CommandPublisher:
        return self._publisher

    @property
    def tracing(self) -> Tracing | None:
        """The client's OpenTelemetry tracing, ``None`` when it does not trace."""
        return self._tracing

    # -- server sessions ---------------------------------------------------------------------------------------

    def _session_timeout(self) -> float | None:
        topology = self._topology
        return None if topology is None else topology.description.logical_session_timeout_minutes

    def acquire_server_session(self) -> ServerSession:
        """A server session from the client's pool (for an explicit session's first command)."""
        topology = self._topology
        load_balanced = topology is not None and topology.settings.load_balanced
        return self.session_pool.acquire(self._session_timeout(), load_balanced=load_balanced)

    def sessions_known_unsupported(self) -> bool:
        """True once the deployment is known not to support sessions: its data-bearing servers were discovered
        and one reports no ``logicalSessionTimeoutMinutes`` (never in load-balanced mode). False while nothing
        is known yet: the first command then tells."""
        topology = self._topology
        if topology is None or topology.closed or topology.settings.load_balanced:
            return False
        description = topology.description
        if description.logical_session_timeout_minutes is not None:
            return False
        return any(server.is_data_bearing for server in description.server_descriptions().values())

    def release_server_session(self, server_session: ServerSession) -> None:
        """Give a server session back to the client's pool (dirty or expiring ones are dropped)."""
        topology = self._topology
        if topology is None:
            self.session_pool.release(server_session, None)
        elif not topology.closed:
            self.session_pool.release(server_session, topology.description.logical_session_timeout_minutes)

    # -- running operations ------------------------------------------------------------------------------------

    def execute(
        self,
        operation: Operation[R],
        session: ClientSession | None = None,
        *,
        address: Address | None = None,
        level_timeout: float | None = None,
        pin: ConnectionPin | None = None,
    ) -> Coroutine[Any, Any, R]:
        """Run ``operation`` and return its result (await the coroutine returned): :meth:`execute_answered`
        without the server."""
        return self._execute(
            _Execution(operation, session, address, self._operation_id()), level_timeout, pin
        )

    async def execute_answered(
        self,
        operation: Operation[R],
        session: ClientSession | None = None,
        *,
        address: Address | None = None,
        level_timeout: float | None = None,
        pin: ConnectionPin | None = None,
    ) -> Answered[R]:
        """Run ``operation``; return its result with the address of the server whose reply made it (where a
        cursor's ``getMore`` and ``killCursors`` must go).

        ``session`` is the caller's session (explicit, or a cursor's implicit one); without one, a server
        session is taken for this operation alone when the deployment supports sessions. ``address`` pins the
        operation to that server (a cursor's ``getMore`` and ``killCursors``). ``level_timeout`` is the
        ``timeoutMS`` of the database or collection (seconds, ``math.inf`` for 0) when it set one. ``pin`` is a
        cursor's connection holder: in load-balanced mode a command that leaves a server cursor open keeps
        its connection there, and a command given a pin that holds one is sent over that connection.
        """
        run = _Execution(operation, session, address, self._operation_id())
        result = await self._execute(run, level_timeout, pin)
        assert run.server_address is not None  # the address of the attempt that succeeded
        return Answered(result, run.server_address)

    def _execute(
        self, run: _Execution[R], level_timeout: float | None, pin: ConnectionPin | None
    ) -> Coroutine[Any, Any, R]:
        """The coroutine that runs ``run``: the retry loop itself when the topology is open on this loop and
        there is nothing to check nor any deadline to set (the common case: one coroutine less that every
        resume goes through), else :meth:`_execute_prepared`, which opens the topology and sets the deadline
        first."""
        topology = self._topology
        if (
            run.session is None
            and topology is not None
            and not topology.closed
            and topology.loop is asyncio.get_running_loop()
            and (csot.current_deadline() is not None or (level_timeout is None and self._timeout is None))
        ):
            # What _timeout_to_set answers without a session: None (a deadline in force, or no timeout).
            return self._run(topology, run, pin)
        return self._execute_prepared(run, level_timeout, pin)

    async def _execute_prepared(
        self, run: _Execution[R], level_timeout: float | None, pin: ConnectionPin | None
    ) -> R:
        """The topology opened (for this event loop) and the CSOT deadline set (the one
        :func:`~mongio.execution.deadline.timeout_in_force` gives, unless a ``timeout()`` block already set one)
        around the retry loop."""
        topology = self._topology
        if topology is None or topology.loop is not asyncio.get_running_loop() or topology.closed:
            topology = await self._client._open_topology()
        timeout = self._timeout_to_set(run.session, level_timeout)
        if timeout is None:
            return await self._run(topology, run, pin)
        with csot.timeout(timeout):
            return await self._run(topology, run, pin)

    async def receive_streamed(
        self,
        operation: Operation[R],
        session: ClientSession | None,
        pin: ConnectionPin,
        address: Address,
        *,
        level_timeout: float | None = None,
    ) -> R:
        """The next reply of the exhaust stream on the connection ``pin`` holds, made into ``operation``'s
        result (``operation`` is the getMore the cursor would otherwise send; nothing is sent).

        Each streamed batch publishes the events of the getMore that opened the stream, as if it had been
        sent again (started, then succeeded or failed; the request id is that getMore's), and its reply
        updates the cluster time and the session as any reply does. An error (a network error, an ``ok: 0``
        reply) is handled as a getMore's would be: the topology is told. A timeout (``socketTimeoutMS``, or
        the client-side operation timeout in force) or a cancellation closes the connection, whose further
        replies cannot be read any more. Once the stream has ended, a connection held for it alone goes back
        to its pool. Once the client was closed, the stream's connection is closed and ``ClientClosedError``
        raised, as for any operation."""
        topology = self._topology
        if topology is None or topology.closed:
            pin.discard("the client was closed")
            raise self._client._closed_error()
        timeout = self._timeout_to_set(session, level_timeout)
        if timeout is None:
            return await self._receive_streamed(operation, session, pin, address)
        with csot.timeout(timeout):
            return await self._receive_streamed(operation, session, pin, address)

    async def _receive_streamed(
        self, op: Operation[R], session: ClientSession | None, pin: ConnectionPin, address: Address
    ) -> R:
        conn, command = pin.stream()
        run = _Execution(op, session, address, self._operation_id())
        run.generation = conn.generation
        run.wire_version = conn.max_wire_version
        if self._tracing is not None:
            run.trace = self._tracing.start_operation(op, session)
        events: CommandEvents | None = None
        span: CommandSpan | None = None
        if run.trace is not None or self._publisher.enabled:
            events, span = self._observers(run, conn, address, Command(command))
        if events is not None:
            events.started(conn.request_id)
        try:
            try:
                reply = await conn.receive(
                    codec_options=op.codec_options, check=False, deadline=csot.current_deadline()
                )
            except (Exception, asyncio.CancelledError) as exc:
                if events is not None:
                    events.failed(exc)
                if span is not None:
                    span.failed(exc)
                raise
            error = self._take_reply(run, reply, events, span)
            if error is not None:
                raise error
            return op.handle_response(reply, conn)
        except BaseException as exc:
            if run.trace is not None:
                run.trace.failed(exc)
            if isinstance(exc, MongioError):
                topology = self._topology
                if topology is not None and topology.closed and _cut_off_by_closing(exc):
                    raise _closed_while_running(op.command_name, exc) from exc
                await self._streamed_reply_failed(exc, address, run.generation, conn)
            raise
        finally:
            if not conn.more_to_come:
                pin.stream_ended()
            if run.trace is not None:
                run.trace.end()

    async def _streamed_reply_failed(
        self, exc: MongioError, address: Address, generation: int, conn: Connection
    ) -> None:
        """A streamed reply's error, as a getMore's: the topology is told (its pool cleared when the error
        calls for it, before the connection goes back); under CSOT a timeout is the operation's timeout."""
        topology = self._topology
        if topology is not None:
            await topology.handle_application_error(address, exc, generation, service_id=conn.service_id)
        if csot.is_enabled() and is_timeout(exc) and not isinstance(exc, OperationTimeoutError):
            raise csot.timeout_error(exc) from exc

    def _timeout_to_set(self, session: ClientSession | None, level_timeout: float | None) -> float | None:
        """Check that ``session`` may run an operation; return the timeout to set for it (``None``: none,
        CSOT being off or an enclosing ``timeout()`` block in force)."""
        if session is not None:
            session._check_usable(self._client)
        if csot.current_deadline() is not None:
            return None
        if level_timeout is None and session is None:
            return self._timeout  # what timeout_in_force gives without a level or a session
        return self.operation_timeout(level_timeout, session)

    def operation_timeout(
        self, timeout: float | None, session: ClientSession | None, *, deadline: float | None = None
    ) -> float | None:
        """The ``timeoutMS`` (in seconds, ``math.inf`` for 0) an operation gets, by
        :func:`~mongio.execution.deadline.timeout_in_force`: what is left until ``deadline`` when one is
        given, else the database's or collection's ``timeout`` when it set one, else the session's
        ``default_timeout_ms``, else the client's ``timeoutMS``; ``None`` when CSOT is off."""
        session_timeout_ms = None if session is None else session.options.default_timeout_ms
        return csot.timeout_in_force(timeout, session_timeout_ms, self._timeout, deadline=deadline)

    @contextlib.contextmanager
    def timeout_scope(
        self, level_timeout: float | None, session: ClientSession | None, operation_name: str | None = None
    ) -> Iterator[None]:
        """``with executor.timeout_scope(...):`` one deadline for an operation made of several commands
        (the batches of a bulk write), as :meth:`execute` would give a single command, one operationId
        for all their command events (command monitoring specification), and one tracing span (named
        ``operation_name``, else after the first command)."""
        token = _SHARED_OPERATION_ID.set((self, asyncio.current_task(), next(self._operation_ids)))
        tracing = self._tracing
        traced = contextlib.nullcontext() if tracing is None else tracing.operation_scope(operation_name)
        try:
            with traced:
                if csot.current_deadline() is not None:
                    yield
                else:
                    with csot.timeout(self.operation_timeout(level_timeout, session)):
                        yield
        finally:
            reset(_SHARED_OPERATION_ID, token)

    async def _select(
        self,
        topology: Topology,
        op: Operation[Any],
        address: Address | None,
        deprioritized: tuple[Address, ...],
        in_transaction: bool = False,
        operation_id: int | None = None,
    ) -> Server:
        if address is not None:
            server = topology.get_server(address)
            if server is None:
                raise AutoReconnect(f"the server {address[0]}:{address[1]} is no longer part of the topology")
            server.operation_count += 1
            return server
        # Inside a transaction every command goes to the primary (a non-primary one was refused before).
        read_preference = None if in_transaction else op.read_preference
        is_write = op.takes_write_concern
        if in_transaction:
            pass
        elif op.has_write_stage and op.may_use_secondary:
            # $out/$merge may run on a secondary only when every server is 5.0+ (wire version 13).
            common = topology.description.common_wire_version
            is_write = common is None or common < 13
        elif is_write:
            read_preference = None
        if not SERVER_SELECTION_LOGGER.isEnabledFor(_DEBUG):
            description = topology.description
            last = self._last_selection
            if (
                last is not None
                and last[0] is description
                and last[1] is read_preference
                and last[2] == is_write
                and not deprioritized
                and not topology.closed
            ):
                # A description is immutable: with a single server, the same one answers the same question.
                server = last[3]
                server.operation_count += 1
                return server
            server = topology.select_server_nowait(
                read_preference, is_write=is_write, deprioritized=deprioritized
            )
            if server is not None:
                if (
                    not deprioritized
                    and type(description) is TopologyDescription
                    and len(description.server_descriptions()) == 1
                ):
                    self._last_selection = (description, read_preference, is_write, server)
                return server
        limit = self._selection_timeout
        left = csot.remaining()
        if left is not None and left < limit:
            limit = max(left, 0.0)
        return await topology.select_server(
            read_preference,
            is_write=is_write,
            deprioritized=deprioritized,
            timeout=limit,
            operation=op.command_name,
            operation_id=operation_id,
        )

    def _retryability(self, op: Operation[Any], txn_number_assigned: bool) -> OperationRetryability:
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

    def _operation_id(self) -> int:
        """The operationId of the command events: the one shared by the commands of a bulk write (see
        :meth:`timeout_scope`), else a new one."""
        shared = _SHARED_OPERATION_ID.get()
        if shared is not None and shared[0] is self and shared[1] is asyncio.current_task():
            return shared[2]
        return next(self._operation_ids)

    # -- the retry loop and one attempt ----------------------------------------------------------------------

    async def _run(self, topology: Topology, run: _Execution[R], pin: ConnectionPin | None) -> R:
        """The retry loop: attempts until one succeeds or the retry rules end the operation. Returns the
        result; ``run.server_address`` is then the server that gave it."""
        op = run.op
        session = run.session
        if self._tracing is not None:
            run.trace = self._tracing.start_operation(op, session)
        if pin is not None and (topology.settings.load_balanced or op.exhaust):
            run.pin = pin
        try:
            if session is not None:
                _enter_session(run, session)
            while True:
                try:
                    result = await self._attempt(topology, run)
                except MongioError as exc:
                    if topology.closed and _cut_off_by_closing(exc):
                        # Never retried: every server is gone, and the cause is the client's close().
                        raise _closed_while_running(op.command_name, exc) from exc
                    if run.retry_state is not None and exc is run.retry_state.reported_error:
                        raise  # a retry could not be made: the previous attempt's error, already judged
                    await self._after_failure(topology, run, exc)
                    continue
                if run.retry_state is not None:
                    run.retry_state.on_success()
                elif self._token_bucket is not None:
                    self._token_bucket.record_success(retried=False)
                return result
        except BaseException as exc:
            if run.trace is not None:
                run.trace.failed(exc)
            raise
        finally:
            if run.transaction_started and session is not None:
                session._transaction_sent()
            if run.implicit is not None:
                self.release_server_session(run.implicit)
            if run.trace is not None:
                run.trace.end()

    async def _attempt(self, topology: Topology, run: _Execution[R]) -> R:
        """One attempt: select a server (``run.server_address``), check a connection out (or take the
        transaction's), run the command on it. The connection goes back to its pool and the server's operation
        count comes down whatever ends the attempt, cancellation included. Returns the result."""
        # CSOT's computedServerSelectionTimeout: selection, then checkout and any connection opened for it,
        # end by min(serverSelectionTimeoutMS, the time left). Without CSOT neither bounds the checkout.
        run.deadline = csot.current_deadline()
        csot_on = run.deadline is not None
        selection_end = csot.selection_deadline(self._selection_timeout) if csot_on else 0.0
        server = await self._select(
            topology, run.op, run.address, run.deprioritized, run.transaction_bound, run.operation_id
        )
        try:
            run.server_address = server.address
            # The server as selected: every decision of this attempt is judged on this description (and on the
            # connection's own handshake), never on one that changed while a connection was awaited.
            described = topology.description
            description = described.get(server.address) or server.description
            run.from_mongos = description.server_type is _MONGOS
            pool = server.pool
            if pool is None:
                raise ConnectionFailure(f"no connection pool for {server.address}")
            session = run.session
            pin = run.pin
            # Load balanced: every command of a transaction on its first connection, every command of a
            # cursor on the connection its first command used.
            conn = (
                session._pinned_connection_from(pool)
                if session is not None and run.transaction_bound
                else None
            )
            if conn is None and pin is not None:
                conn = pin.connection_from(pool)
            if conn is None:
                if csot_on:
                    wait = csot.checkout_timeout(selection_end, self._wait_queue_timeout)
                    with csot.establishing_until(selection_end):
                        conn = await pool.check_out(wait)
                else:
                    conn = await pool.check_out(self._wait_queue_timeout)
            try:
                command, server_session, exhaust = self._command_for(
                    topology, run, server, pool, conn, described, description
                )
                result = await self._exchange(topology, run, pool, conn, command, server_session, exhaust)
                if (
                    pin is not None
                    and _keeps_cursor_open(result)
                    and not pin.holds(conn)
                    and (session is None or not session._holds(conn))
                    and topology.settings.load_balanced
                ):
                    pin.hold(pool, conn)
            except MongioError as exc:
                if run.sent:
                    # The pool is cleared (when the error calls for it) before this connection goes back in.
                    await topology.handle_application_error(
                        server.address, exc, run.generation, service_id=conn.service_id
                    )
                raise
            finally:
                # A load-balanced transaction or cursor keeps its connection beyond this command.
                if (session is None or not session._holds(conn)) and (pin is None or not pin.holds(conn)):
                    pool.check_in(conn)
        finally:
            server.operation_finished()
        return result

    def _command_for(
        self,
        topology: Topology,
        run: _Execution[R],
        server: Server,
        pool: PoolLike,
        conn: Connection,
        described: TopologyDescription,
        description: ServerDescription,
    ) -> tuple[Command, ServerSession | None, bool]:
        """The command for ``conn`` (to ``server``, described by ``description`` in ``described``, both as
        they were when the server was selected): its session and txnNumber, the build, and the fields the
        executor owns. Returns it with its server session and whether it may open an exhaust stream.

        Which facts each decision rests on. The server as selected (``description``, ``described``): session
        support, a retryable write's eligibility (the retryable writes specification judges the server selected
        for the attempt: sessions supported and not a standalone; a step-down while the attempt waited for a
        connection does not make it ineligible, the server's refusal is then retried), ``$readPreference``, the
        read concern's standalone rule, a transaction's pinning, and the round-trip time ``maxTimeMS`` leaves
        for. The connection's own handshake (``conn``): the wire version for features (``$clusterTime``,
        snapshot reads, exhaust getMores, the command's build), compression, and a load balancer's service id.
        """
        op = run.op
        # Sessions only now that a connection is ours: operations waiting for one hold no server session.
        # One clock reading: the pool's expiry check and the session's last use (it is about to be sent).
        now = time.monotonic()
        server_session = self._server_session_for(topology, described, run, description, now)
        if op.retryability is _RETRYABLE_WRITE:
            self._decide_txn_number(run, description, server_session)
        run.generation = conn.generation
        run.wire_version = conn.max_wire_version
        command = op.build(conn)
        body = command.body
        if run.txn_number is not None and op.retryability is not _RETRYABLE_WRITE:
            # The build found statements that cannot be retried (a multi-document write).
            run.txn_number = None
        if server_session is not None:
            body["lsid"] = server_session.session_id
            server_session.mark_used(now)
        if run.txn_number is not None:
            body["txnNumber"] = run.txn_number
        if run.in_transaction and run.session is not None and server_session is not None:
            body.update(run.session._transaction_fields())
            sharded = described.topology_type is TopologyType.Sharded
            load_balanced = topology.settings.load_balanced
            run.session._pin(server.address if sharded else None, pool, conn if load_balanced else None)
        self._add_fields(
            body,
            op,
            run.session,
            description,
            conn.max_wire_version,
            described.topology_type,
            in_transaction=run.transaction_bound,
            csot_on=run.deadline is not None,
        )
        body["$db"] = op.database
        exhaust = run.pin is not None and op.exhaust and not run.in_transaction and _may_stream(conn, description)
        return command, server_session, exhaust

    def _server_session_for(
        self,
        topology: Topology,
        description: TopologyDescription,
        run: _Execution[Any],
        server: ServerDescription,
        now: float,
    ) -> ServerSession | None:
        """The server session the command carries: the caller's session's, else one taken (at ``now``, a
        ``time.monotonic()`` reading) for this operation alone (not for an unacknowledged write); ``None`` when
        the deployment supports no sessions (as the topology's ``description`` says)."""
        minutes = description.logical_session_timeout_minutes
        if minutes is None and not description.knows_a_data_bearing_server:
            # The topology lost sight of every data-bearing server after this operation selected one (every
            # mongos just marked Unknown, say): the selected server's own hello still answers the question,
            # and a retryable write sent without its session could be applied twice.
            minutes = server.logical_session_timeout_minutes
        supported = minutes is not None or topology.settings.load_balanced
        session = run.session
        if session is not None:
            if supported:
                return session._checked_server_session()
            if not session.implicit:
                raise ConfigurationError(
                    "this deployment does not support sessions (its servers report no "
                    "logicalSessionTimeoutMinutes); run the operation without session="
                )
            return None
        if not (run.acknowledged and supported):
            return None
        if run.implicit is None:
            run.implicit = self.session_pool.acquire(
                minutes, load_balanced=topology.settings.load_balanced, now=now
            )
        return run.implicit

    def _decide_txn_number(
        self, run: _Execution[Any], description: ServerDescription, server_session: ServerSession | None
    ) -> None:
        """For a retryable write (only: no other operation takes one): the first attempt to get a connection
        takes the txnNumber every retry reuses; a retry on a server that cannot take it ends the operation
        with the previous error."""
        if not run.txn_decided:
            run.txn_decided = True
            if (
                self._retry_writes
                and server_session is not None
                and description.retryable_writes_supported
                and not run.in_transaction
            ):
                run.txn_number = server_session.next_txn_number()
        elif run.txn_number is not None and not description.retryable_writes_supported:
            assert run.retry_state is not None
            decision = run.retry_state.cannot_retry(
                "the server selected for the retry does not support retryable writes"
            )
            assert decision.error is not None
            raise decision.error

    async def _exchange(
        self,
        topology: Topology,
        run: _Execution[R],
        pool: PoolLike,
        conn: Connection,
        command: Command,
        server_session: ServerSession | None,
        exhaust: bool,
    ) -> R:
        """Send the command, receive the reply (``{}`` for an unacknowledged write), publish its events, take
        what the reply tells the clocks and the session, and make the reply the result (an ``ok: 0`` reply
        raises its error, unless a NamespaceNotFound the operation ignores). ``exhaust`` sends the command
        with that flag (an exhaust cursor's getMore): further replies may follow the first, and the connection
        then stays with the cursor's pin."""
        op = run.op
        body, sequences = command
        events: CommandEvents | None = None
        span: CommandSpan | None = None
        if run.trace is not None or self._publisher.enabled:
            assert run.server_address is not None
            events, span = self._observers(run, conn, run.server_address, command)
        # Under CSOT the deadline (infinite for timeoutMS=0) replaces socketTimeoutMS.
        deadline = run.deadline
        request_id = 0
        run.sent = True
        try:
            if exhaust:
                request_id = await conn.send(
                    op.database, body, codec_options=op.codec_options, exhaust_allowed=True, deadline=deadline
                )
            elif run.acknowledged:
                request_id = conn.send_nowait(
                    op.database, body, document_sequences=sequences, codec_options=op.codec_options
                )
            else:
                request_id = await conn.send(
                    op.database,
                    body,
                    document_sequences=sequences,
                    codec_options=op.codec_options,
                    more_to_come=True,
                    deadline=deadline,
                )
            # The transaction is under way once its first command is on the wire; a client-side error (an
            # unencodable document) leaves it starting.
            run.transaction_started = run.in_transaction
            if events is not None:
                events.started(request_id)
            reply: dict[str, Any] = {}
            if run.acknowledged:
                # Command events and spans are given the reply whole: its batch is decoded then.
                lazy_batch = op.lazy_batch and events is None and span is None
                reply = await conn.receive(
                    codec_options=op.codec_options, check=False, deadline=deadline, lazy_batch=lazy_batch
                )
        except (Exception, asyncio.CancelledError) as exc:
            _exchange_failed(run, exc, request_id, server_session, events, span)
            raise
        error = self._take_reply(run, reply, events, span)
        if error is not None:
            if error.code == NAMESPACE_NOT_FOUND and op.ignores_namespace_not_found:
                return op.empty_result()
            raise error
        if run.txn_number is not None and "writeConcernError" in reply:
            await self._raise_write_concern_retry(topology, run, reply, conn)
        result = op.handle_response(reply, conn)
        if exhaust and conn.more_to_come:
            # The server streams the next batches: the connection stays with the cursor until the last.
            assert run.pin is not None
            run.pin.hold_stream(pool, conn, body)
        return result

    def _observers(
        self, run: _Execution[Any], conn: Connection, address: Address, command: Command
    ) -> tuple[CommandEvents | None, CommandSpan | None]:
        """The command's events (when anyone listens or logs) and its span (when the client traces)."""
        op = run.op
        body, sequences = command
        publisher = self._publisher
        events = None
        if publisher.enabled:
            events = CommandEvents(
                publisher, op.command_name, op.database, run.operation_id, address, conn, body, sequences
            )
        trace = run.trace
        span = None if trace is None else trace.command(op.command_name, op.database, body, sequences, conn)
        return events, span

    def _take_reply(
        self, run: _Execution[Any], reply: dict[str, Any], events: CommandEvents | None, span: CommandSpan | None
    ) -> OperationFailure | None:
        """What a received reply tells the cluster clock and the session, and the command's succeeded or failed
        event and span; returns the error of an ``ok: 0`` reply."""
        if reply:
            self.cluster_clock.advance_from_reply(reply)
            if run.session is not None:
                run.session._take_from_reply(reply, in_transaction=run.transaction_bound)
            if reply.get("ok", 1) != 1:
                error = _command_error(reply, run.wire_version)
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

    async def _raise_write_concern_retry(
        self, topology: Topology, run: _Execution[Any], reply: dict[str, Any], conn: Connection
    ) -> None:
        """A retryable write concern error in an ``ok: 1`` reply sends the write again (same txnNumber)
        before the reply counts as the result: raise the error that makes the retry loop go again."""
        concern_error = retryable_write_concern_error(
            reply, max_wire_version=run.wire_version, from_mongos=run.from_mongos
        )
        if concern_error is None:
            return
        error = run.op.write_concern_retry_error(reply, concern_error.error_labels)
        if error is None:
            raise concern_error
        assert run.server_address is not None
        await topology.handle_application_error(
            run.server_address, concern_error, run.generation, service_id=conn.service_id
        )
        raise error

    async def _after_failure(self, topology: Topology, run: _Execution[Any], exc: MongioError) -> None:
        """Label the failed attempt's error and let the retry rules decide: raise the operation's error, or
        prepare the next attempt (the transaction unpinned if it must be, the backoff waited out)."""
        op = run.op
        retry_state = run.retry_state
        if retry_state is None:
            retry_state = run.retry_state = self._retry_state(topology, run)
        failure = AttemptFailure.from_exception(
            exc,
            address=run.server_address,
            max_wire_version=run.wire_version,
            from_mongos=run.from_mongos,
            sent=run.sent,
        )
        decision = retry_state.on_failure(failure, remaining=csot.remaining())
        for label in decision.add_labels:
            exc._add_error_label(label)
        for label in decision.remove_labels:
            exc._remove_error_label(label)
        if not decision.retry:
            _raise_operation_error(run, exc, decision.error if decision.error is not None else exc)
        run.attempt += 1
        op.retrying(after_overload=failure.is_retryable_overload)
        session = run.session
        if (
            session is not None
            and (run.pinned_by_session or session._has_pinned_connection())
            and _unpins_for_retry(op.transaction_command, exc)
        ):
            # The transactions specification: unpin before selecting a server for the retry.
            session._unpin()
            run.address = None
            run.pinned_by_session = False
        run.deprioritized = decision.deprioritized
        run.new_attempt()
        if _log.isEnabledFor(_DEBUG):
            _log.debug(
                "retrying %s (operation %d, retry %d) after %s: %s; backoff %.3f s",
                op.command_name,
                run.operation_id,
                run.attempt,
                type(exc).__name__,
                decision.reason,
                decision.backoff,
            )
        if decision.backoff > 0:
            await self.backoff_sleep(decision.backoff)

    def _retry_state(self, topology: Topology, run: _Execution[Any]) -> RetryState:
        """The retry bookkeeping, made at the first failure. Failed before a connection was ours, a retryable
        write is judged by whether it would get a txnNumber."""
        op = run.op
        if run.txn_decided:
            assigned = run.txn_number is not None
        else:
            assigned = (
                op.retryability is Retryability.WRITE
                and self._retry_writes
                and not run.in_transaction
                and (run.session is not None or run.acknowledged)
            )
        return RetryState(
            self._retryability(op, assigned),
            self._retry_options,
            csot=csot.is_enabled(),
            in_transaction=run.in_transaction,
            sharded=topology.description.topology_type is TopologyType.Sharded,
            token_bucket=self._token_bucket,
            rng=self.retry_random,
        )

    # -- the fields the executor owns --------------------------------------------------------------------------

    def _add_fields(
        self,
        body: dict[str, Any],
        op: Operation[Any],
        session: ClientSession | None,
        description: ServerDescription,
        wire_version: int,
        topology_type: TopologyType,
        *,
        in_transaction: bool = False,
        csot_on: bool = False,
    ) -> None:
        """Add ``$clusterTime``, the concerns, ``$readPreference``, the stable API fields and ``maxTimeMS``
        (``csot_on``: a CSOT deadline is in force), for the server ``description`` selected and a connection
        whose handshake gave ``wire_version``."""
        cluster_time = self.cluster_clock.cluster_time
        if session is not None:
            own = session.cluster_time
            if own is not None and (cluster_time is None or own["clusterTime"] > cluster_time["clusterTime"]):
                cluster_time = own
        if cluster_time is not None and wire_version >= 6:
            body["$clusterTime"] = cluster_time
        # A transaction's read concern goes on its first command only (already in the body). Without a session,
        # only an operation that takes a read concern can get one.
        if not in_transaction and (session is not None or op.takes_read_concern) and "readConcern" not in body:
            _add_read_concern(body, op, session, description, wire_version)
        if csot_on or op.takes_write_concern:
            _add_write_concern(body, op, in_transaction, csot_on)
        if "$readPreference" not in body:
            if in_transaction:
                read_preference = _transaction_read_preference(op, description, topology_type)
            else:
                read_preference = read_preference_document(op, description, topology_type)
            if read_preference is not None:
                body["$readPreference"] = read_preference
        if self._api_fields and "apiVersion" not in body:
            body.update(self._api_fields)
        if csot_on:
            _add_max_time(body, op, description)

    def renew_locks_after_fork(self) -> None:
        """In the child of a fork: see :meth:`TokenBucket.renew_lock_after_fork` (the session pool renews its
        own)."""
        if self._token_bucket is not None:
            self._token_bucket.renew_lock_after_fork()

    # -- closing -------------------------------------------------------------------------------------------

    async def end_sessions(self, topology: Topology, *, discover: bool = False) -> None:
        """Send ``endSessions`` for every pooled server session, for the client's close(), to the primary,
        else any server the topology knows of now. ``discover``: the topology was opened only for this and
        knows no server yet, so wait (briefly) for one.

        Never raises but a cancellation: whatever fails (the network, a reply that cannot be decoded, limits
        a server announced that the command cannot meet) is logged at debug level, with the exception."""
        from mongio.options.read_preference import PrimaryPreferred

        if not len(self.session_pool) or topology.closed or not topology.opened:
            return
        try:
            if discover:
                server: Server | None = await topology.select_server(
                    PrimaryPreferred(), timeout=_CLOSE_TIMEOUT, operation="endSessions"
                )
            else:
                server = topology.select_server_nowait(PrimaryPreferred())
        except Exception as exc:
            _log_cleanup_failure("selecting a server for endSessions", exc)
            return
        commands = self.session_pool.end_sessions_commands()
        if server is None or server.pool is None or not commands:
            if server is not None:
                server.operation_finished()
            return
        pool: Any = server.pool
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                conn = await pool.check_out()
                try:
                    for command in commands:
                        command["$readPreference"] = {"mode": "primaryPreferred"}
                        command["$db"] = "admin"
                        command.update(self._api_fields)
                        await self._send_unmanaged(conn, "endSessions", command)
                finally:
                    pool.check_in(conn)
        except Exception as exc:
            _log_cleanup_failure("endSessions", exc)
        finally:
            server.operation_finished()

    async def _send_unmanaged(self, conn: Connection, name: str, command: dict[str, Any]) -> None:
        """Send a command outside any session and retry loop, with its command events."""
        operation_id = next(self._operation_ids)
        events = None
        if self._publisher.enabled:
            events = CommandEvents(self._publisher, name, "admin", operation_id, conn.address, conn, command)
        request_id = await conn.send("admin", command)
        if events is not None:
            events.started(request_id)
        try:
            reply = await conn.receive(check=True)
        except (Exception, asyncio.CancelledError) as exc:
            # A cancellation too: a started event never goes without its end.
            if events is not None:
                events.failed(exc)
            raise
        if events is not None:
            events.succeeded(reply)


def _may_stream(conn: Connection, description: ServerDescription) -> bool:
    """Whether the server behind ``conn`` answers a getMore with an exhaust stream: MongoDB 4.2 (wire version
    8) and later (OP_MSG specification, exhaustAllowed); a mongos from 7.1 (wire version 22) only (older ones do
    not go on with the stream). Elsewhere the cursor sends ordinary getMores, as the
    find/getMore/killCursors specification allows."""
    wire_version = conn.max_wire_version
    if description.server_type is ServerType.Mongos:
        return wire_version >= _MONGOS_EXHAUST_MIN_WIRE_VERSION
    return wire_version >= _EXHAUST_MIN_WIRE_VERSION


def _keeps_cursor_open(result: object) -> bool:
    """Whether ``result`` is a cursor the server still holds (its connection stays with the cursor)."""
    return isinstance(result, CursorState) and result.alive


def _unpins_for_retry(transaction_command: str | None, error: MongioError) -> bool:
    """Whether a sharded transaction's session is unpinned before a retry after ``error``: always for
    abortTransaction, after an unknown commit result, and after a transient transaction error."""
    return (
        transaction_command == "abortTransaction"
        or error.has_error_label(UNKNOWN_TRANSACTION_COMMIT_RESULT)
        or error.has_error_label(TRANSIENT_TRANSACTION_ERROR)
    )


def _command_error(reply: Mapping[str, Any], max_wire_version: int | None) -> OperationFailure:
    from mongio.connection.connection import check_command_reply

    try:
        check_command_reply(reply, max_wire_version)
    except OperationFailure as exc:
        return exc
    return OperationFailure(
        str(reply.get("errmsg", "command failed")), reply.get("code"), reply, max_wire_version
    )


class _Execution(Generic[R]):
    """One operation across its attempts: what the retry loop and each attempt share."""

    __slots__ = (
        "acknowledged",
        "address",
        "attempt",
        "deadline",
        "deprioritized",
        "from_mongos",
        "generation",
        "implicit",
        "in_transaction",
        "op",
        "operation_id",
        "pin",
        "pinned_by_session",
        "retry_state",
        "sent",
        "server_address",
        "session",
        "trace",
        "transaction_bound",
        "transaction_started",
        "txn_decided",
        "txn_number",
        "wire_version",
    )

    def __init__(
        self, op: Operation[R], session: ClientSession | None, address: Address | None, operation_id: int
    ) -> None:
        self.op = op
        self.session = session
        self.address = address  # the server every attempt goes to, when one is imposed
        self.operation_id = operation_id
        self.trace: OperationSpan | None = None  # the operation's tracing span, when the client traces
        self.acknowledged = op.acknowledged
        # An ordinary command inside the session's transaction; ``transaction_bound`` also covers the
        # commands that end it: both go to the transaction's server, with no concern of their own.
        self.in_transaction = False
        self.transaction_bound = op.transaction_command is not None
        self.transaction_started = False
        self.pinned_by_session = False  # ``address`` is the mongos the session's transaction is pinned to
        self.pin: ConnectionPin | None = None  # a load-balanced cursor's connection holder
        self.implicit: ServerSession | None = None
        self.txn_number: Any = None
        self.txn_decided = False  # whether a retryable write's txnNumber was decided (_decide_txn_number)
        self.retry_state: RetryState | None = None
        self.deprioritized: tuple[Address, ...] = ()
        self.attempt = 0
        # The attempt under way (see new_attempt); the CSOT deadline in force is read once per attempt.
        self.deadline: float | None = None
        self.server_address: Address | None = None
        self.wire_version: int | None = None
        self.from_mongos = False
        self.sent = False
        self.generation = 0

    def new_attempt(self) -> None:
        """Forget what the previous attempt learned of its server and connection."""
        self.server_address = None
        self.wire_version = None
        self.from_mongos = False
        self.sent = False
        self.generation = 0


def _exchange_failed(
    run: _Execution[Any],
    exc: BaseException,
    request_id: int,
    server_session: ServerSession | None,
    events: CommandEvents | None,
    span: CommandSpan | None,
) -> None:
    """What a send or a receive cut off by ``exc`` leaves (``request_id`` 0: nothing was written): a network
    error or a cancellation leaves the session's server state unknown (dirty); a started command's events end
    with a failure."""
    if isinstance(exc, asyncio.CancelledError):
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
            run.sent = False  # failed before the message was written: nothing was sent
        elif events is not None:
            events.failed(exc)
    if span is not None:
        span.failed(exc)


def _log_cleanup_failure(what: str, exc: Exception) -> None:
    """A failure of what closing the client sends, which must not make the closing fail: a debug record
    carrying the exception (so a bug in the driver stays traceable)."""
    _log.debug("%s failed while closing the client: %s: %s", what, type(exc).__name__, exc, exc_info=exc)


def _cut_off_by_closing(exc: MongioError) -> bool:
    """Whether ``exc``, raised once the topology closed, is the closing's doing (a connection closed under
    the operation, a pool or selection that refused it), not an answer the server gave before."""
    return not isinstance(exc, OperationFailure)


def _closed_while_running(command_name: str, exc: MongioError) -> ClientClosedError:
    """The error of an operation that the client's ``close()`` cut off (``exc``: how it was cut off)."""
    return ClientClosedError(
        f"{command_name} did not complete: the client was closed while it was running ({exc})"
    )


def _enter_session(run: _Execution[Any], session: ClientSession) -> None:
    """Before the first attempt: whether the operation runs in the session's transaction (then it goes to
    the transaction's server and is acknowledged), and a refusal of unacknowledged writes in an explicit
    session."""
    op = run.op
    if op.transaction_command is None and session._begin_operation(op):
        run.in_transaction = run.transaction_bound = True
        run.acknowledged = True
    if run.transaction_bound and run.address is None:
        run.address = session._transaction_server()
        run.pinned_by_session = run.address is not None
    if not run.acknowledged and not session.implicit:
        raise InvalidOperation("an unacknowledged write (w=0) cannot be run in an explicit session")


def _raise_operation_error(run: _Execution[Any], exc: MongioError, reported: BaseException) -> NoReturn:
    """End the operation with ``reported`` (``exc``, the last attempt's error, or an earlier one the retry
    rules chose). Under CSOT every timeout is reported as the operation's timeout, wrapping its cause."""
    session = run.session
    if (
        run.in_transaction
        and session is not None
        and isinstance(reported, MongioError)
        and reported.has_error_label(TRANSIENT_TRANSACTION_ERROR)
    ):
        session._unpin()
    if csot.is_enabled() and is_timeout(reported) and not isinstance(reported, OperationTimeoutError):
        # A socket read, selection, checkout, or the server's MaxTimeMSExpired.
        raise csot.timeout_error(reported) from reported
    if reported is exc:
        raise exc
    raise reported from None


def _add_read_concern(
    body: dict[str, Any],
    op: Operation[Any],
    session: ClientSession | None,
    description: ServerDescription,
    wire_version: int,
) -> None:
    """The read concern outside a transaction: a snapshot session's on every command but getMore and
    killCursors; a read's own, with the causally consistent session's ``afterClusterTime``; and for the
    writes that take one, ``afterClusterTime`` alone in a causally consistent session."""
    if session is not None and session.options.snapshot:
        standalone = description.server_type is ServerType.Standalone
        if wire_version < _SNAPSHOT_MIN_WIRE_VERSION:
            raise ConfigurationError("Snapshot reads require MongoDB 5.0 or later")
        if op.command_name not in _NO_SNAPSHOT_COMMANDS:
            body["readConcern"] = session._read_concern(None, standalone=standalone)
        return
    if op.takes_read_concern:
        read_concern = op.read_concern
        document = read_concern.document if read_concern is not None else None
        if session is not None:
            standalone = description.server_type is ServerType.Standalone
            document = session._read_concern(document, standalone=standalone)
        if document:
            body["readConcern"] = document
        return
    if (
        session is not None
        and description.server_type is not ServerType.Standalone
        and op.command_name in _CAUSAL_WRITE_COMMANDS
        and not op.is_user_command
    ):
        after = session._after_cluster_time()
        if after is not None:
            body["readConcern"] = {"afterClusterTime": after}


def _add_write_concern(body: dict[str, Any], op: Operation[Any], in_transaction: bool, csot_on: bool) -> None:
    """The operation's write concern (none inside a transaction: the transaction's goes on commit and
    abort); under CSOT (``csot_on``: a deadline is in force) without ``wtimeout``, which ``timeoutMS`` replaces (a caller's own command document
    is sent as it is)."""
    if op.takes_write_concern and "writeConcern" not in body and not in_transaction:
        write_concern = op.write_concern
        if write_concern is not None and not write_concern.is_server_default:
            body["writeConcern"] = write_concern.document
    if not csot_on:
        return
    concern = body.get("writeConcern")
    if isinstance(concern, Mapping) and "wtimeout" in concern and not op.is_user_command:
        concern = {key: value for key, value in concern.items() if key != "wtimeout"}
        if concern:
            body["writeConcern"] = concern
        else:
            del body["writeConcern"]


def _transaction_read_preference(
    op: Operation[Any], description: ServerDescription, topology_type: TopologyType
) -> dict[str, Any] | None:
    """A transaction reads from the primary: only a direct connection to a replica set member is told."""
    if (
        not op.takes_write_concern
        and topology_type is TopologyType.Single
        and description.server_type is not ServerType.Standalone
    ):
        return {"mode": "primaryPreferred"}
    return None


def _add_max_time(body: dict[str, Any], op: Operation[Any], description: ServerDescription) -> None:
    """``maxTimeMS`` from the CSOT deadline, per the command's policy; computed even when none is sent, so
    that too little time left fails before anything is written."""
    policy = csot.max_time_policy()
    if policy == "send" and op.command_name == "getMore":
        # A getMore never takes the operation's maxTimeMS; an awaitData one's maxAwaitTimeMS is capped.
        policy = "cap"
    max_time_ms = csot.max_time_ms_for(description.min_round_trip_time)
    if max_time_ms is None or policy == "omit":
        return
    if policy == "send":
        # timeoutMS replaces the deprecated maxTimeMS option.
        body["maxTimeMS"] = max_time_ms
    elif "maxTimeMS" in body:
        body["maxTimeMS"] = min(body["maxTimeMS"], max_time_ms)
