"""The executor: the one place where an operation meets servers, connections, sessions, events and retries.

``await executor.execute(op, session)`` runs in the caller's task (no task is made per operation);
``execute_answered`` also gives the address of the server that answered. This module holds the retry loop and
the attempt; each step it delegates lives in a module named for its job (``docs/design/command-flow.md``
follows a command through them):

- ``execute`` / ``execute_answered``: the operation's :class:`~mongio.execution.operation_run.OperationRun`
  (what its attempts share); ``_execute`` opens the topology for this event loop when needed and sets the
  CSOT deadline :meth:`Executor._timeout_to_set` gives (none when a ``timeout()`` block set one already);
- ``_run``, the retry loop: attempts until one succeeds, or the failed attempt's error, judged by
  :mod:`mongio.execution.failed_attempts` (labels, the topology told, the retry rules of
  :class:`~mongio.execution.retry_policy.RetryState`), ends the operation; otherwise a backoff and the next
  attempt, avoiding the servers the decision names;
- ``_attempt``, one attempt (:class:`~mongio.execution.operation_run.Attempt`): select a server
  (synchronously when the current description already has a suitable one), check a connection out of its
  pool (or take a load-balanced transaction's or cursor's), then
- :class:`~mongio.execution.command_assembly.CommandAssembler`: the session and txnNumber, ``op.build(conn)``
  plus the fields the executor owns (``lsid``, ``txnNumber``, ``$clusterTime``, ``readConcern``,
  ``writeConcern``, ``$readPreference``, ``maxTimeMS``, ``$db``);
- :class:`~mongio.execution.exchange.CommandExchange`: send, receive, the command's started and
  succeeded/failed events and tracing span, then ``op.handle_response``.

What differs from one operation to another is declared on :class:`~mongio.operations.base.Operation`
(``transaction_command``, ``has_write_stage``, ``is_user_command``, ``write_concern_retry_error``,
``retrying``...); what a session adds to a command and takes from a reply, and its pinning, are the session's
(:class:`~mongio.sessions.operation_session.OperationSession` declares all the executor asks of it). The
connection always goes back to its pool and the server's operation count always comes down, whatever ends the
attempt, cancellation included. A server session taken for one operation (an implicit session) goes back to
the client's pool when the operation ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from mongio.backend import running_loop, sleep, timeout
from mongio.connection.auth.base import REAUTHENTICATION_REQUIRED
from mongio.connection.handshake import ServerApiLike, server_api_fields
from mongio.errors import (
    AutoReconnect,
    ClientClosedError,
    ConnectionFailure,
    InvalidOperation,
    MongioError,
    OperationFailure,
)
from mongio.events.command import CommandPublisher
from mongio.execution import deadline as csot
from mongio.execution.command_assembly import CommandAssembler
from mongio.execution.command_crypt import AUTO_ENCRYPTION_SPLIT_SIZE, CommandCrypt
from mongio.execution.exchange import CommandExchange
from mongio.execution.failed_attempts import (
    closed_while_running,
    cut_off_by_closing,
    new_retry_state,
    prepare_retry,
    streamed_reply_failed,
)
from mongio.execution.operation_run import Attempt, OperationIds, OperationRun
from mongio.execution.retry_policy import RetryOptions, TokenBucket
from mongio.operations.base import Command, CursorState, Operation
from mongio.sessions.cluster_time import ClusterClock
from mongio.sessions.server_session import ServerSession, ServerSessionPool
from mongio.topology.heartbeat_events import SERVER_SELECTION_LOGGER
from mongio.topology.server_type import ServerType
from mongio.topology.topology_description import TopologyDescription

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.execution.connection_pin import ConnectionPin
    from mongio.sessions.operation_session import OperationSession
    from mongio.topology.server_description import Address
    from mongio.topology.topology import PoolLike, Server, Topology
    from mongio.tracing.spans import Tracing

__all__ = ["Answered", "Executor"]

R = TypeVar("R")

_log = logging.getLogger("mongio.execution")
_DEBUG = logging.DEBUG
# An enum member every operation compares with, as a module constant: on Python 3.11 reading a member off
# its enum class is an unspecialized attribute lookup, several times the cost of reading a global.
_MONGOS = ServerType.Mongos
# Server selection for the commands of close() (endSessions): short, since the client is going away.
_CLOSE_TIMEOUT = 5.0

# asyncio's running loop, None outside asyncio: read first where every operation asks (the seam's
# running_loop() only when it is None, on trio).
_asyncio_loop = asyncio._get_running_loop


class Answered(NamedTuple, Generic[R]):
    """An operation's result and the address of the server whose reply made it."""

    result: R
    address: Address


class ClientLike(Protocol):
    """What the executor needs of its client (:class:`~mongio.MongoClient` provides it). The methods are public
    within the package, not part of the user API (``tests/docs/public_api.py`` lists them among the
    package-internal members of ``MongoClient``)."""

    async def open_topology(self) -> Topology: ...

    def closed_error(self) -> ClientClosedError: ...


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
        command_crypt: CommandCrypt | None = None,
    ) -> None:
        self._client = client
        # OpenTelemetry spans (None when the client does not trace: its cost is then an `is None` or two).
        self._tracing = tracing
        # The stable API fields go on every command (getMore and transaction commands included).
        self._api_fields = server_api_fields(server_api)
        self._topology: Topology | None = None
        self._retry_options = retry_options
        self._token_bucket = TokenBucket() if retry_options.adaptive_retries else None
        # The jitter of overload backoffs (``random()`` in [0, 1)) and the sleep that waits a backoff out;
        # tests put in their own to see the exact delays.
        self.retry_random: random.Random = random.Random()
        self.backoff_sleep: Callable[[float], Awaitable[None]] = sleep
        self._timeout = timeout
        self._selection_timeout = server_selection_timeout
        self._wait_queue_timeout = wait_queue_timeout
        self.cluster_clock = ClusterClock()
        self.session_pool = ServerSessionPool()
        # Automatic encryption, the operation hook (None without it): every command encrypted before it is
        # sent (write batches cut smaller for it) and every reply decrypted (mongio.execution.command_crypt).
        encrypting = command_crypt is not None and command_crypt.encrypts_commands
        self._commands = CommandAssembler(
            self.cluster_clock,
            self.session_pool,
            self._api_fields,
            retry_options.retry_writes,
            write_split_size=AUTO_ENCRYPTION_SPLIT_SIZE if encrypting else None,
        )
        self._operation_ids = OperationIds()
        self._exchange = CommandExchange(publisher, self.cluster_clock, self._operation_ids, command_crypt)
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
        """Where the command events of this client's operations go."""
        return self._exchange.publisher

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
        session: OperationSession | None = None,
        *,
        address: Address | None = None,
        level_timeout: float | None = None,
        pin: ConnectionPin | None = None,
    ) -> Coroutine[Any, Any, R]:
        """Run ``operation`` and return its result (await the coroutine returned): :meth:`execute_answered`
        without the server."""
        return self._execute(OperationRun(operation, session, address), level_timeout, pin)

    async def execute_answered(
        self,
        operation: Operation[R],
        session: OperationSession | None = None,
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
        run = OperationRun(operation, session, address)
        result = await self._execute(run, level_timeout, pin)
        assert run.server_address is not None  # the address of the attempt that succeeded
        return Answered(result, run.server_address)

    def _execute(
        self, run: OperationRun[R], level_timeout: float | None, pin: ConnectionPin | None
    ) -> Coroutine[Any, Any, R]:
        """The coroutine that runs ``run``: the retry loop itself when the topology is open on this loop, no
        session is to be checked and there is no deadline to set (the common case: one coroutine less that
        every resume goes through), else the loop inside :meth:`_execute_prepared`, which opens the topology,
        checks the session and sets the deadline first."""
        topology = self._topology
        if (
            run.session is None
            and topology is not None
            and not topology.closed
            and topology.loop is (_asyncio_loop() or running_loop())
            and self._timeout_to_set(None, level_timeout) is None
        ):
            return self._run(topology, run, pin)
        return self._execute_prepared(run, level_timeout, pin)

    async def _execute_prepared(
        self, run: OperationRun[R], level_timeout: float | None, pin: ConnectionPin | None
    ) -> R:
        """The topology opened (for this event loop) and the CSOT deadline of :meth:`_timeout_to_set` set
        around the retry loop."""
        topology = self._topology
        if topology is None or topology.loop is not running_loop() or topology.closed:
            topology = await self._client.open_topology()
        timeout = self._timeout_to_set(run.session, level_timeout)
        if timeout is None:
            return await self._run(topology, run, pin)
        with csot.timeout(timeout):
            return await self._run(topology, run, pin)

    def _timeout_to_set(self, session: OperationSession | None, level_timeout: float | None) -> float | None:
        """Check that ``session`` may run an operation; return the timeout to set for it (``None``: none,
        CSOT being off or an enclosing ``timeout()`` block in force). The one place that decides whether an
        operation gets a deadline of its own."""
        if session is not None:
            session.check_usable(self._client)
        if csot.current_deadline() is not None:
            return None
        if level_timeout is None and session is None:
            return self._timeout  # what timeout_in_force gives without a level or a session
        return self.operation_timeout(level_timeout, session)

    def operation_timeout(
        self, timeout: float | None, session: OperationSession | None, *, deadline: float | None = None
    ) -> float | None:
        """The ``timeoutMS`` (in seconds, ``math.inf`` for 0) an operation gets, by
        :func:`~mongio.execution.deadline.timeout_in_force`: what is left until ``deadline`` when one is
        given, else the database's or collection's ``timeout`` when it set one, else the session's
        ``default_timeout_ms``, else the client's ``timeoutMS``; ``None`` when CSOT is off."""
        session_timeout_ms = None if session is None else session.options.default_timeout_ms
        return csot.timeout_in_force(timeout, session_timeout_ms, self._timeout, deadline=deadline)

    @contextlib.contextmanager
    def timeout_scope(
        self, level_timeout: float | None, session: OperationSession | None, operation_name: str | None = None
    ) -> Iterator[None]:
        """``with executor.timeout_scope(...):`` one deadline for an operation made of several commands
        (the batches of a bulk write), as :meth:`execute` would give a single command, one operationId
        for all their command events (command monitoring specification), and one tracing span (named
        ``operation_name``, else after the first command)."""
        token = self._operation_ids.share()
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
            self._operation_ids.unshare(token)

    # -- an exhaust cursor's streamed replies --------------------------------------------------------------------

    async def receive_streamed(
        self,
        operation: Operation[R],
        session: OperationSession | None,
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
            raise self._client.closed_error()
        timeout = self._timeout_to_set(session, level_timeout)
        if timeout is None:
            return await self._receive_streamed(operation, session, pin, address)
        with csot.timeout(timeout):
            return await self._receive_streamed(operation, session, pin, address)

    async def _receive_streamed(
        self, op: Operation[R], session: OperationSession | None, pin: ConnectionPin, address: Address
    ) -> R:
        conn, command = pin.stream()
        run = OperationRun(op, session, address)
        if self._tracing is not None:
            run.trace = self._tracing.start_operation(op, session)
        try:
            result: R = await self._exchange.streamed_reply(run, conn, address, Command(command))
            return result
        except BaseException as exc:
            if run.trace is not None:
                run.trace.failed(exc)
            if isinstance(exc, MongioError):
                topology = self._topology
                if topology is not None and topology.closed and cut_off_by_closing(exc):
                    raise closed_while_running(op.command_name, exc) from exc
                await streamed_reply_failed(topology, exc, address, conn.generation, conn)
            raise
        finally:
            if not conn.more_to_come:
                pin.stream_ended()
            if run.trace is not None:
                run.trace.end()

    # -- the retry loop and one attempt ----------------------------------------------------------------------

    async def _run(self, topology: Topology, run: OperationRun[R], pin: ConnectionPin | None) -> R:
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
                # CSOT: the deadline in force is read once per attempt.
                attempt = Attempt(csot.current_deadline())
                try:
                    result = await self._attempt(topology, run, attempt)
                except MongioError as exc:
                    if topology.closed and cut_off_by_closing(exc):
                        # Never retried: every server is gone, and the cause is the client's close().
                        raise closed_while_running(op.command_name, exc) from exc
                    if run.retry_state is not None and exc is run.retry_state.reported_error:
                        raise  # a retry could not be made: the previous attempt's error, already judged
                    await self._after_failure(topology, run, attempt, exc)
                    continue
                if run.retry_state is not None:
                    run.retry_state.on_success()
                elif self._token_bucket is not None:
                    self._token_bucket.record_success(retried=False)
                run.server_address = attempt.server_address
                return result
        except BaseException as exc:
            if run.trace is not None:
                run.trace.failed(exc)
            raise
        finally:
            if run.transaction_started and session is not None:
                session.transaction_sent()
            if run.implicit is not None:
                self.release_server_session(run.implicit)
            if run.trace is not None:
                run.trace.end()

    async def _attempt(self, topology: Topology, run: OperationRun[R], attempt: Attempt) -> R:
        """One attempt: select a server (``attempt.server_address``), check a connection out (or take the
        transaction's or the cursor's), run the command on it. The connection goes back to its pool and the
        server's operation count comes down whatever ends the attempt, cancellation included."""
        # CSOT's computedServerSelectionTimeout: selection, then checkout and any connection opened for it,
        # end by min(serverSelectionTimeoutMS, the time left). Without CSOT neither bounds the checkout.
        selection_end = 0.0 if attempt.deadline is None else csot.selection_deadline(self._selection_timeout)
        server = self._select_now(topology, run)
        if server is None:
            server = await self._select_waiting(topology, run)
        try:
            attempt.server_address = server.address
            # The server as selected: every decision of this attempt is judged on this description (and on the
            # connection's own handshake), never on one that changed while a connection was awaited.
            described = topology.description
            description = described.get(server.address) or server.description
            attempt.from_mongos = description.server_type is _MONGOS
            pool = server.pool
            if pool is None:
                raise ConnectionFailure(f"no connection pool for {server.address}")
            holders = run.pin is not None or run.session is not None
            conn = _held_connection(run, pool) if holders else None
            if conn is None:
                if attempt.deadline is None:
                    conn = await pool.check_out(self._wait_queue_timeout)
                else:
                    conn = await self._check_out_by(pool, selection_end)
            try:
                command, server_session, exhaust = self._commands.command_for(
                    topology, run, attempt, server, pool, conn, described, description
                )
                try:
                    result: R = await self._exchange.round_trip(
                        topology, run, attempt, pool, conn, command, server_session, exhaust
                    )
                except OperationFailure as exc:
                    if exc.code != REAUTHENTICATION_REQUIRED or not conn.can_reauthenticate:
                        raise
                    result = await self._reauthenticated(topology, run, attempt, server, pool, conn, described)
                if run.pin is not None:
                    _keep_for_cursor(topology, run, pool, conn, result)
            except MongioError as exc:
                if attempt.sent:
                    # The pool is cleared (when the error calls for it) before this connection goes back in.
                    await topology.handle_application_error(
                        server.address, exc, attempt.generation, service_id=conn.service_id
                    )
                raise
            finally:
                if not holders or not _held(run, conn):
                    pool.check_in(conn)
        finally:
            server.operation_finished()
        return result

    async def _reauthenticated(
        self,
        topology: Topology,
        run: OperationRun[R],
        attempt: Attempt,
        server: Server,
        pool: PoolLike,
        conn: Connection,
        described: TopologyDescription,
    ) -> R:
        """After ReauthenticationRequired (391, auth.md): ``conn`` authenticates again (MONGODB-OIDC) and the
        command, assembled anew for it, runs once more on it, retryable or not."""
        await conn.reauthenticate(attempt.deadline)
        description = described.get(server.address) or server.description
        command, server_session, exhaust = self._commands.command_for(
            topology, run, attempt, server, pool, conn, described, description
        )
        result: R = await self._exchange.round_trip(
            topology, run, attempt, pool, conn, command, server_session, exhaust
        )
        return result

    async def _check_out_by(self, pool: PoolLike, selection_end: float) -> Connection:
        """A connection of ``pool`` checked out, and any connection opened for it established, under CSOT by
        ``selection_end``."""
        wait = csot.checkout_timeout(selection_end, self._wait_queue_timeout)
        with csot.establishing_until(selection_end):
            return await pool.check_out(wait)

    async def _after_failure(
        self, topology: Topology, run: OperationRun[Any], attempt: Attempt, exc: MongioError
    ) -> None:
        """The failed attempt judged (:func:`~mongio.execution.failed_attempts.prepare_retry` raises the
        operation's error or prepares the next attempt), then the backoff waited out."""
        if run.retry_state is None:
            run.retry_state = new_retry_state(
                run, topology, self._retry_options, self._token_bucket, self.retry_random
            )
        backoff = prepare_retry(run, attempt, exc, self._operation_ids)
        if backoff > 0:
            await self.backoff_sleep(backoff)

    # -- server selection ------------------------------------------------------------------------------------------

    def _select_now(self, topology: Topology, run: OperationRun[Any]) -> Server | None:
        """The server for the attempt when no waiting is needed: the one imposed (a cursor's, a transaction's
        mongos), else a suitable one of the current description; ``None``: :meth:`_select_waiting` must wait
        for one (or log the selection, which only it does). With a single server the answer is kept for the
        description it was given for: a description is immutable, and answers the same question alike."""
        if run.address is not None:
            server = topology.get_server(run.address)
            if server is None:
                address = run.address
                raise AutoReconnect(f"the server {address[0]}:{address[1]} is no longer part of the topology")
            server.operation_count += 1
            return server
        if SERVER_SELECTION_LOGGER.isEnabledFor(_DEBUG):
            return None
        read_preference, is_write = _selection_criteria(topology, run)
        description = topology.description
        deprioritized = run.deprioritized
        last = self._last_selection
        if (
            last is not None
            and last[0] is description
            and last[1] is read_preference
            and last[2] == is_write
            and not deprioritized
            and not topology.closed
        ):
            kept = last[3]
            kept.operation_count += 1
            return kept
        server = topology.select_server_nowait(
            read_preference, is_write=is_write, deprioritized=deprioritized
        )
        if (
            server is not None
            and not deprioritized
            and type(description) is TopologyDescription
            and len(description.server_descriptions()) == 1
        ):
            self._last_selection = (description, read_preference, is_write, server)
        return server

    async def _select_waiting(self, topology: Topology, run: OperationRun[Any]) -> Server:
        """A server the operation's read preference selects, waiting for one (bounded by
        serverSelectionTimeoutMS and the CSOT time left)."""
        read_preference, is_write = _selection_criteria(topology, run)
        limit = self._selection_timeout
        left = csot.remaining()
        if left is not None and left < limit:
            limit = max(left, 0.0)
        return await topology.select_server(
            read_preference,
            is_write=is_write,
            deprioritized=run.deprioritized,
            timeout=limit,
            operation=run.op.command_name,
            operation_id=self._operation_ids.of(run),
        )

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
            async with timeout(_CLOSE_TIMEOUT):
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
        await self._exchange.send_unmanaged(conn, name, command)


def _selection_criteria(topology: Topology, run: OperationRun[Any]) -> tuple[Any, bool]:
    """The read preference and write-ness the server of ``run``'s next attempt is selected by."""
    op = run.op
    if run.transaction_bound:
        # Inside a transaction every command goes to the primary (a non-primary one was refused before).
        return None, op.takes_write_concern
    if op.has_write_stage and op.may_use_secondary:
        # $out/$merge may run on a secondary only when every server is 5.0+ (wire version 13).
        common = topology.description.common_wire_version
        return op.read_preference, common is None or common < 13
    if op.takes_write_concern:
        return None, True
    return op.read_preference, False


def _held_connection(run: OperationRun[Any], pool: PoolLike) -> Any:
    """A load-balanced transaction's or cursor's own connection of ``pool`` (every command of a transaction
    goes on its first connection, every command of a cursor on the one its first command used), else
    ``None``."""
    session = run.session
    conn = session.pinned_connection_from(pool) if session is not None and run.transaction_bound else None
    if conn is None and run.pin is not None:
        conn = run.pin.connection_from(pool)
    return conn


def _held(run: OperationRun[Any], conn: Connection) -> bool:
    """Whether a load-balanced transaction or cursor keeps ``conn`` beyond this command (it does not go back
    to its pool)."""
    session = run.session
    pin = run.pin
    return (session is not None and session.holds(conn)) or (pin is not None and pin.holds(conn))


def _keep_for_cursor(
    topology: Topology, run: OperationRun[Any], pool: PoolLike, conn: Connection, result: object
) -> None:
    """Load balanced: a command that leaves a server cursor open keeps its connection for the cursor's
    getMores and killCursors (unless the cursor or the session's transaction holds it already)."""
    pin = run.pin
    if pin is None or not (isinstance(result, CursorState) and result.alive) or pin.holds(conn):
        return
    session = run.session
    if (session is None or not session.holds(conn)) and topology.settings.load_balanced:
        pin.hold(pool, conn)


def _log_cleanup_failure(what: str, exc: Exception) -> None:
    """A failure of what closing the client sends, which must not make the closing fail: a debug record
    carrying the exception (so a bug in the driver stays traceable)."""
    _log.debug("%s failed while closing the client: %s: %s", what, type(exc).__name__, exc, exc_info=exc)


def _enter_session(run: OperationRun[Any], session: OperationSession) -> None:
    """Before the first attempt: whether the operation runs in the session's transaction (then it goes to
    the transaction's server and is acknowledged), and a refusal of unacknowledged writes in an explicit
    session."""
    op = run.op
    if op.transaction_command is None and session.begin_operation(op):
        run.in_transaction = run.transaction_bound = True
        run.acknowledged = True
    if run.transaction_bound and run.address is None:
        run.address = session.transaction_server()
        run.pinned_by_session = run.address is not None
    if not run.acknowledged and not session.implicit:
        raise InvalidOperation("an unacknowledged write (w=0) cannot be run in an explicit session")
