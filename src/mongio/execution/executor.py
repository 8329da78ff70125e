"""The executor: the one place where an operation meets servers, connections, sessions, events and retries.

``await executor.execute(op, session)`` runs in the caller's task (no task is made per operation):

1. the CSOT deadline (the client's ``timeoutMS`` unless a ``timeout()`` block already set one);
2. a loop of attempts: select a server (synchronously when the current description already has a suitable
   one, else by awaiting the topology), check a connection out of its pool (synchronously when one is idle),
   ``op.build(conn)`` plus the fields the executor owns (``lsid``, ``txnNumber``, ``$clusterTime``,
   ``readConcern``, ``writeConcern``, ``$readPreference``, ``maxTimeMS``, ``$db``), the started event,
   the exchange, the succeeded/failed event, ``op.handle_response``;
3. on an error: label it, tell the topology, and let :class:`~mongio.execution.retry_policy.RetryState`
   decide whether to raise or to go again (after a backoff, avoiding the servers it names).

The connection always goes back to its pool and the server's operation count always comes down, whatever
ends the attempt, cancellation included. A server session taken for one operation (an implicit session)
goes back to the client's pool when the operation ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mongio.connection.handshake import ServerApiLike, server_api_fields
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
from mongio.events.command import CommandPublisher, is_sensitive
from mongio.execution import deadline as csot
from mongio.execution.error_labels import (
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_TRANSACTION_COMMIT_RESULT,
    AttemptFailure,
    retryable_write_concern_error,
)
from mongio.execution.retry_policy import (
    OperationRetryability,
    RetryOptions,
    RetryState,
    TokenBucket,
)
from mongio.operations.base import NAMESPACE_NOT_FOUND, Operation, Retryability
from mongio.operations.run_command import RunCommand
from mongio.sessions.cluster_time import (
    ClusterClock,
    session_read_concern,
    snapshot_time_from_reply,
)
from mongio.sessions.server_session import ServerSession, ServerSessionPool
from mongio.sessions.transaction_state import check_read_preference
from mongio.topology.heartbeat_events import SERVER_SELECTION_LOGGER
from mongio.topology.server_type import ServerType
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.sessions.client_session import ClientSession
    from mongio.topology.server_description import Address, ServerDescription
    from mongio.topology.topology import Server, Topology

__all__ = ["Executor", "read_preference_document"]

R = TypeVar("R")

_log = logging.getLogger("mongio.execution")
_DEBUG = logging.DEBUG
_MONGOS_LIKE = frozenset({ServerType.Mongos, ServerType.LoadBalancer})
_SECONDARY_PREFERRED = 3
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
# The operationId every command of one operation made of several shares (the batches of a bulk write), with
# the executor and the task it was taken for: a task started meanwhile inherits the variable, not the id.
_SHARED_OPERATION_ID: contextvars.ContextVar[tuple[Any, asyncio.Task[Any] | None, int] | None] = (
    contextvars.ContextVar("mongio_shared_operation_id", default=None)
)


class ClientLike(Protocol):
    """What the executor needs of its client."""

    async def _open_topology(self) -> Topology: ...

    def _closed_error(self) -> ClientClosedError: ...


def read_preference_document(
    op: Operation[Any], description: ServerDescription, topology_type: TopologyType
) -> dict[str, Any] | None:
    """The ``$readPreference`` to send with ``op`` to a server, per the server selection specification.

    Mongos and load balancers get it unless it is primary (or a plain secondaryPreferred, which they
    assume); a direct connection to a replica set member gets ``primaryPreferred`` for a primary read
    preference so any member answers; a standalone never gets it; replica set members get it unless it is
    primary. Writes carry none.
    """
    if op.takes_write_concern and not getattr(op, "has_write_stage", False):
        return None
    read_preference = op.read_preference
    server_type = description.server_type
    if server_type in _MONGOS_LIKE:
        if read_preference is None or read_preference.mode == 0:
            return None
        if (
            read_preference.mode == _SECONDARY_PREFERRED
            and read_preference.max_staleness == -1
            and read_preference.hedge is None
            and not any(read_preference.tag_sets or ())
        ):
            return None
        return read_preference.document
    if topology_type is TopologyType.Single:
        if server_type is ServerType.Standalone:
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
    ) -> None:
        self._client = client
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
        """Run operations on ``topology`` from now on (the client calls this once it opened it)."""
        self._topology = topology

    @property
    def publisher(self) -> CommandPublisher:
        return self._publisher

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
        if self._topology is not None and self._topology.closed:
            return
        self.session_pool.release(server_session, self._session_timeout())

    # -- running operations ------------------------------------------------------------------------------------

    async def execute(
        self,
        operation: Operation[R],
        session: ClientSession | None = None,
        *,
        address: Address | None = None,
        answered_by: list[Address] | None = None,
        level_timeout: float | None = None,
    ) -> R:
        """Run ``operation`` and return its result.

        ``session`` is the caller's session (explicit, or a cursor's implicit one); without one, a server
        session is taken for this operation alone when the deployment supports sessions. ``address`` pins the
        operation to that server (a cursor's ``getMore`` and ``killCursors``). ``answered_by``, when given,
        receives the address of the server whose reply made the result. ``level_timeout`` is the ``timeoutMS``
        of the database or collection (seconds, ``math.inf`` for 0) when it set one.
        """
        topology = self._topology
        if topology is None or topology.closed:
            topology = await self._client._open_topology()
        if session is not None:
            session._check_usable(self._client)
        timeout = self.operation_timeout(level_timeout, session)
        if timeout is not None and csot.current_deadline() is None:
            with csot.timeout(timeout):
                return await self._run(topology, operation, session, address, answered_by)
        return await self._run(topology, operation, session, address, answered_by)

    def operation_timeout(self, timeout: float | None, session: ClientSession | None) -> float | None:
        """The ``timeoutMS`` (in seconds, ``math.inf`` for 0) an operation gets when no ``timeout()`` block
        is in force: the database's or collection's ``timeout`` when it set one, else the session's
        ``default_timeout_ms``, else the client's ``timeoutMS``; ``None`` when CSOT is off."""
        if timeout is not None:
            return timeout
        if session is not None:
            session_timeout_ms = session.options.default_timeout_ms
            if session_timeout_ms is not None:
                return csot.timeout_seconds(session_timeout_ms)
        return self._timeout

    @contextlib.contextmanager
    def timeout_scope(self, level_timeout: float | None, session: ClientSession | None) -> Iterator[None]:
        """``with executor.timeout_scope(...):`` one deadline for an operation made of several commands
        (the batches of a bulk write), as :meth:`execute` would give a single command, and one operationId
        for all their command events (command monitoring specification)."""
        token = _SHARED_OPERATION_ID.set((self, asyncio.current_task(), next(self._operation_ids)))
        try:
            if csot.current_deadline() is not None:
                yield
            else:
                with csot.timeout(self.operation_timeout(level_timeout, session)):
                    yield
        finally:
            _SHARED_OPERATION_ID.reset(token)

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
        elif getattr(op, "has_write_stage", False) and op.may_use_secondary:
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

    def _retryability(self, op: Operation[Any], txn_number: Any) -> OperationRetryability:
        transaction_command = getattr(op, "transaction_command", None)
        if transaction_command == "commitTransaction":
            return OperationRetryability.commit_transaction()
        if transaction_command == "abortTransaction":
            return OperationRetryability.abort_transaction()
        retryability = op.retryability
        if retryability is Retryability.READ:
            return OperationRetryability.read(True)
        if retryability is Retryability.WRITE:
            return OperationRetryability.write(txn_number is not None)
        if isinstance(op, RunCommand):
            return OperationRetryability.run_command()
        if op.takes_write_concern:
            return OperationRetryability.write(False)
        return OperationRetryability.read(False)

    async def _run(
        self,
        topology: Topology,
        op: Operation[R],
        session: ClientSession | None,
        address: Address | None,
        answered_by: list[Address] | None = None,
    ) -> R:
        implicit: ServerSession | None = None
        retry_state: RetryState | None = None
        deprioritized: tuple[Address, ...] = ()
        txn_number: Any = None
        attempt = 0
        shared = _SHARED_OPERATION_ID.get()
        if shared is not None and shared[0] is self and shared[1] is asyncio.current_task():
            operation_id = shared[2]
        else:
            operation_id = next(self._operation_ids)
        acknowledged = op.acknowledged
        # Transactions: commitTransaction/abortTransaction, or a command inside the session's transaction.
        transaction_command = getattr(op, "transaction_command", None)
        transaction = session._transaction if session is not None else None
        in_txn = False
        transaction_started = False
        txn_decided = False
        if session is not None and transaction is not None and not transaction_command:
            transaction.before_operation()
            in_txn = transaction.active
            if not in_txn:
                session._unpin()
            else:
                if not op.takes_write_concern and transaction.options.read_preference is not None:
                    check_read_preference(transaction.options.read_preference)
                if isinstance(op, RunCommand) and op.read_preference is not None:
                    check_read_preference(op.read_preference)
                # The transaction's write concern goes on commit/abort only, so every write is acknowledged
                # and reports its result, whatever the collection's or client's own write concern says.
                if op.takes_write_concern:
                    op.use_transaction_write_concern()
                acknowledged = True
        pinned_by_session = False
        if (in_txn or transaction_command) and address is None and session is not None:
            address = session._pinned_address
            pinned_by_session = address is not None
        if session is not None and not acknowledged and not session.implicit:
            raise InvalidOperation("an unacknowledged write (w=0) cannot be run in an explicit session")
        try:
            while True:
                server_address: Address | None = None
                wire_version: int | None = None
                from_mongos = False
                sent = False
                generation = 0
                conn: Connection | None = None
                handled: BaseException | None = None
                try:
                    # CSOT's computedServerSelectionTimeout: selection, then checkout and any connection
                    # opened for it, end by min(serverSelectionTimeoutMS, the time left).
                    selection_end = csot.selection_deadline(self._selection_timeout)
                    server = await self._select(
                        topology,
                        op,
                        address,
                        deprioritized,
                        in_txn or bool(transaction_command),
                        operation_id=operation_id,
                    )
                    try:
                        server_address = server.address
                        description = server.description
                        from_mongos = description.server_type is ServerType.Mongos
                        pool: Any = server.pool
                        if pool is None:
                            raise ConnectionFailure(f"no connection pool for {server_address}")
                        wait = csot.checkout_timeout(selection_end, self._wait_queue_timeout)
                        pinned_connection = (
                            session._pinned_connection
                            if session is not None and (in_txn or transaction_command)
                            else None
                        )
                        if pinned_connection is not None and pinned_connection[0] is pool:
                            # Load balanced: every command of a transaction on its first connection.
                            conn = pinned_connection[1]
                        else:
                            with csot.establishing_until(selection_end):
                                conn = await pool.check_out(wait)
                        assert conn is not None
                        try:
                            # Sessions, only now that a connection is ours: operations waiting for a
                            # connection hold no server session, so fewer are made.
                            server_session: ServerSession | None = None
                            sessions_supported = (
                                topology.description.logical_session_timeout_minutes is not None
                                or topology.settings.load_balanced
                            )
                            if session is not None:
                                if sessions_supported:
                                    server_session = session._checked_server_session()
                                elif not session.implicit:
                                    raise ConfigurationError(
                                        "this deployment does not support sessions (its servers report no "
                                        "logicalSessionTimeoutMinutes); run the operation without session="
                                    )
                            elif acknowledged and sessions_supported:
                                if implicit is None:
                                    implicit = self.session_pool.acquire(
                                        topology.description.logical_session_timeout_minutes,
                                        load_balanced=topology.settings.load_balanced,
                                    )
                                server_session = implicit
                            if not txn_decided:
                                # The first attempt to get this far takes the txnNumber every retry reuses.
                                txn_decided = True
                                if (
                                    op.retryability is Retryability.WRITE
                                    and self._retry_writes
                                    and server_session is not None
                                    and description.retryable_writes_supported
                                    and not in_txn
                                ):
                                    txn_number = server_session.next_txn_number()
                            elif txn_number is not None and not description.retryable_writes_supported:
                                assert retry_state is not None
                                decision = retry_state.cannot_retry(
                                    "the server selected for the retry does not support retryable writes"
                                )
                                assert decision.error is not None
                                raise decision.error
                            generation = conn.generation
                            wire_version = conn.max_wire_version
                            command = op.build(conn)
                            body = command.body
                            if txn_number is not None and op.retryability is not Retryability.WRITE:
                                # The build found statements that cannot be retried (a multi-document write).
                                txn_number = None
                            if server_session is not None:
                                body["lsid"] = server_session.session_id
                                server_session.mark_used(time.monotonic())
                            if txn_number is not None:
                                body["txnNumber"] = txn_number
                            if in_txn and session is not None and server_session is not None:
                                assert transaction is not None
                                body.update(
                                    transaction.command_fields(
                                        server_session.txn_number,
                                        after_cluster_time=session.operation_time if session._causal else None,
                                    )
                                )
                                if (
                                    topology.description.topology_type is TopologyType.Sharded
                                    and session._pinned_address is None
                                ):
                                    session._pinned_address = server_address
                                if topology.settings.load_balanced and session._pinned_connection is None:
                                    session._pinned_connection = (pool, conn)
                            self._add_fields(
                                body,
                                op,
                                session,
                                description,
                                topology,
                                in_transaction=in_txn or bool(transaction_command),
                            )
                            body["$db"] = op.database
                            sequences = command.sequences
                            publisher = self._publisher
                            publishing = publisher.enabled
                            started = 0.0
                            if publishing:
                                shown = body
                                if sequences:
                                    shown = dict(body)
                                    for identifier, sequence in sequences.items():
                                        shown[identifier] = sequence.documents
                                started = time.monotonic()
                            # Under CSOT the deadline (infinite for timeoutMS=0) replaces socketTimeoutMS.
                            deadline = csot.current_deadline()
                            request_id = 0
                            sent = True
                            try:
                                request_id = await conn.send(
                                    op.database,
                                    body,
                                    document_sequences=sequences,
                                    codec_options=op.codec_options,
                                    more_to_come=not acknowledged,
                                    deadline=deadline,
                                )
                                # The transaction is under way once its first command is on the wire; a
                                # client-side error (an unencodable document) leaves it starting.
                                transaction_started = in_txn
                                if publishing:
                                    publisher.started(
                                        shown,
                                        op.command_name,
                                        op.database,
                                        request_id,
                                        operation_id,
                                        server_address,
                                        conn.id,
                                        conn.server_connection_id,
                                        conn.service_id,
                                    )
                                if acknowledged:
                                    reply = await conn.receive(
                                        codec_options=op.codec_options, check=False, deadline=deadline
                                    )
                                else:
                                    reply = {}
                            except asyncio.CancelledError:
                                # Cut off once the command was on its way: like a network error, what the
                                # server did in this session is unknown.
                                if server_session is not None:
                                    server_session.mark_dirty()
                                raise
                            except Exception as exc:
                                if isinstance(exc, ConnectionFailure):
                                    transaction_started = transaction_started or in_txn
                                    if server_session is not None:
                                        server_session.mark_dirty()
                                if not request_id:
                                    # Failed before the message was written: nothing was sent.
                                    sent = False
                                elif publishing:
                                    publisher.failed(
                                        exc,
                                        time.monotonic() - started,
                                        op.command_name,
                                        op.database,
                                        request_id,
                                        operation_id,
                                        server_address,
                                        conn.id,
                                        conn.server_connection_id,
                                        conn.service_id,
                                        sensitive=is_sensitive(op.command_name, body),
                                    )
                                raise
                            if reply:
                                self.cluster_clock.advance_from_reply(reply)
                                if session is not None:
                                    session._advance_from_reply(reply)
                                    if session._snapshot and session._snapshot_time is None:
                                        session._snapshot_time = snapshot_time_from_reply(reply)
                                    if (in_txn or transaction_command) and transaction is not None:
                                        recovery_token = reply.get("recoveryToken")
                                        if recovery_token is not None:
                                            transaction.recovery_token = recovery_token
                            ok = reply.get("ok", 1) == 1 if reply else True
                            if not ok:
                                error = _command_error(reply, wire_version)
                                if publishing:
                                    publisher.failed(
                                        error,
                                        time.monotonic() - started,
                                        op.command_name,
                                        op.database,
                                        request_id,
                                        operation_id,
                                        server_address,
                                        conn.id,
                                        conn.server_connection_id,
                                        conn.service_id,
                                        sensitive=is_sensitive(op.command_name, body),
                                    )
                                if error.code == NAMESPACE_NOT_FOUND and op.ignores_namespace_not_found:
                                    return op.empty_result()
                                raise error
                            if publishing:
                                # A copy: handle_response may rework the reply a listener keeps.
                                publisher.succeeded(
                                    dict(reply) if acknowledged else {"ok": 1},
                                    time.monotonic() - started,
                                    op.command_name,
                                    op.database,
                                    request_id,
                                    operation_id,
                                    server_address,
                                    conn.id,
                                    conn.server_connection_id,
                                    conn.service_id,
                                    sensitive=is_sensitive(op.command_name, body),
                                )
                            if txn_number is not None and "writeConcernError" in reply:
                                # A retryable write concern error sends the write again (same txnNumber)
                                # before this reply counts as the result.
                                concern_error = retryable_write_concern_error(
                                    reply, max_wire_version=wire_version, from_mongos=from_mongos
                                )
                                if concern_error is not None:
                                    make_error = getattr(op, "write_concern_retry_error", None)
                                    if make_error is None:
                                        raise concern_error
                                    await topology.handle_application_error(
                                        server_address, concern_error, generation, service_id=conn.service_id
                                    )
                                    raise make_error(reply, concern_error.error_labels)
                            result = op.handle_response(reply, conn)
                        except MongioError as exc:
                            if sent:
                                # The pool is cleared (when the error calls for it) before this connection
                                # goes back into it.
                                handled = exc
                                await topology.handle_application_error(
                                    server_address, exc, generation, service_id=conn.service_id
                                )
                            raise
                        finally:
                            if session is None or not session._holds(conn):
                                pool.check_in(conn)
                    finally:
                        server.operation_finished()
                    if retry_state is not None:
                        retry_state.on_success()
                    elif self._token_bucket is not None:
                        self._token_bucket.record_success(retried=False)
                    if answered_by is not None:
                        answered_by.append(server.address)
                    return result
                except Exception as exc:
                    if not isinstance(exc, MongioError) or (
                        retry_state is not None and exc is _last_error(retry_state)
                    ):
                        raise
                    if conn is not None and server_address is not None and sent and exc is not handled:
                        await topology.handle_application_error(
                            server_address, exc, generation, service_id=conn.service_id
                        )
                    if retry_state is None:
                        # Failed before a connection was ours: judge a retryable write by whether it will
                        # get a txnNumber.
                        pending = (
                            op.retryability is Retryability.WRITE
                            and self._retry_writes
                            and not in_txn
                            and (session is not None or acknowledged)
                        )
                        retry_state = RetryState(
                            self._retryability(op, txn_number if txn_decided else (1 if pending else None)),
                            self._retry_options,
                            csot=csot.is_enabled(),
                            in_transaction=in_txn,
                            sharded=topology.description.topology_type is TopologyType.Sharded,
                            token_bucket=self._token_bucket,
                            rng=self.retry_random,
                        )
                    failure = AttemptFailure.from_exception(
                        exc,
                        address=server_address,
                        max_wire_version=wire_version,
                        from_mongos=from_mongos,
                        sent=sent,
                    )
                    decision = retry_state.on_failure(failure, remaining=csot.remaining())
                    for label in decision.add_labels:
                        exc._add_error_label(label)
                    for label in decision.remove_labels:
                        exc._remove_error_label(label)
                    if not decision.retry:
                        reported = decision.error if decision.error is not None else exc
                        if (
                            in_txn
                            and session is not None
                            and isinstance(reported, MongioError)
                            and reported.has_error_label(TRANSIENT_TRANSACTION_ERROR)
                        ):
                            session._unpin()
                        if (
                            csot.is_enabled()
                            and _is_timeout(reported)
                            and not isinstance(reported, OperationTimeoutError)
                        ):
                            # Under CSOT every timeout (a socket read, selection, checkout, the server's
                            # MaxTimeMSExpired) is reported as the operation's timeout, wrapping its cause.
                            raise csot.timeout_error(reported) from reported
                        if reported is exc:
                            raise
                        raise reported from None
                    attempt += 1
                    retrying = getattr(op, "retrying", None)
                    if retrying is not None:
                        retrying(after_overload=failure.is_retryable_overload)
                    if (
                        session is not None
                        and (pinned_by_session or session._pinned_connection is not None)
                        and _unpins_for_retry(transaction_command, exc)
                    ):
                        # The transactions specification: unpin before selecting a server for the retry.
                        session._unpin()
                        address = None
                        pinned_by_session = False
                    deprioritized = decision.deprioritized
                    if _log.isEnabledFor(_DEBUG):
                        _log.debug(
                            "retrying %s (operation %d, retry %d) after %s: %s; backoff %.3f s",
                            op.command_name,
                            operation_id,
                            attempt,
                            type(exc).__name__,
                            decision.reason,
                            decision.backoff,
                        )
                    if decision.backoff > 0:
                        await self.backoff_sleep(decision.backoff)
        finally:
            if transaction_started and transaction is not None:
                transaction.first_command_done()
            if implicit is not None:
                self.release_server_session(implicit)

    def _add_fields(
        self,
        body: dict[str, Any],
        op: Operation[Any],
        session: ClientSession | None,
        description: ServerDescription,
        topology: Topology,
        *,
        in_transaction: bool = False,
    ) -> None:
        cluster_time = self.cluster_clock.cluster_time
        if session is not None:
            own = session.cluster_time
            if own is not None and (cluster_time is None or own["clusterTime"] > cluster_time["clusterTime"]):
                cluster_time = own
        if cluster_time is not None and description.max_wire_version >= 6:
            body["$clusterTime"] = cluster_time
        if in_transaction or "readConcern" in body:
            pass  # a transaction's read concern goes on its first command only (already in the body)
        elif session is not None and session._snapshot:
            if description.max_wire_version < _SNAPSHOT_MIN_WIRE_VERSION:
                raise ConfigurationError("Snapshot reads require MongoDB 5.0 or later")
            if op.command_name not in _NO_SNAPSHOT_COMMANDS:
                body["readConcern"] = session_read_concern(
                    None, snapshot=True, snapshot_time=session._snapshot_time
                )
        elif (
            not op.takes_read_concern
            and session is not None
            and session._causal
            and session.operation_time is not None
            and description.server_type is not ServerType.Standalone
            and op.command_name in _CAUSAL_WRITE_COMMANDS
            and not isinstance(op, RunCommand)
        ):
            body["readConcern"] = {"afterClusterTime": session.operation_time}
        elif op.takes_read_concern:
            read_concern = op.read_concern
            document = read_concern.document if read_concern is not None else None
            if session is not None and (session._causal or session._snapshot):
                document = session_read_concern(
                    document,
                    # A standalone has no cluster times: it never gets afterClusterTime (causal consistency
                    # specification), even after advance_operation_time.
                    causal_consistency=session._causal and description.server_type is not ServerType.Standalone,
                    operation_time=session.operation_time,
                    snapshot=session._snapshot,
                    snapshot_time=session._snapshot_time,
                )
            if document:
                body["readConcern"] = document
        if op.takes_write_concern and "writeConcern" not in body and not in_transaction:
            write_concern = op.write_concern
            if write_concern is not None and not write_concern.is_server_default:
                body["writeConcern"] = write_concern.document
        concern = body.get("writeConcern")
        # timeoutMS replaces the deprecated wTimeoutMS (a command document given by the caller is sent as is).
        if (
            isinstance(concern, Mapping)
            and "wtimeout" in concern
            and csot.is_enabled()
            and not isinstance(op, RunCommand)
        ):
            concern = {key: value for key, value in concern.items() if key != "wtimeout"}
            if concern:
                body["writeConcern"] = concern
            else:
                del body["writeConcern"]
        if "$readPreference" not in body:
            if in_transaction:
                # The primary: only a direct connection to a replica set member needs to be told.
                read_preference = None
                if (
                    not op.takes_write_concern
                    and topology.description.topology_type is TopologyType.Single
                    and description.server_type is not ServerType.Standalone
                ):
                    read_preference = {"mode": "primaryPreferred"}
            else:
                read_preference = read_preference_document(op, description, topology.description.topology_type)
            if read_preference is not None:
                body["$readPreference"] = read_preference
        if self._api_fields and "apiVersion" not in body:
            body.update(self._api_fields)
        if csot.is_enabled():
            policy = csot.max_time_policy()
            if policy == "send" and op.command_name == "getMore":
                # A getMore never takes the operation's maxTimeMS; an awaitData one's maxAwaitTimeMS is capped.
                policy = "cap"
            # Computed even when none is sent: too little time left fails before anything is written.
            max_time_ms = csot.max_time_ms_for(description.min_round_trip_time)
            if max_time_ms is not None and policy != "omit":
                if policy == "send":
                    # timeoutMS replaces the deprecated maxTimeMS option.
                    body["maxTimeMS"] = max_time_ms
                elif "maxTimeMS" in body:
                    body["maxTimeMS"] = min(body["maxTimeMS"], max_time_ms)

    # -- closing -------------------------------------------------------------------------------------------

    async def end_sessions(self, topology: Topology) -> None:
        """Send ``endSessions`` for every pooled server session (errors ignored), for the client's close()."""
        from mongio.options.read_preference import PrimaryPreferred

        commands = self.session_pool.end_sessions_commands()
        if not commands or topology.closed or not topology.opened:
            return
        try:
            server = topology.select_server_nowait(PrimaryPreferred())
        except MongioError:
            return
        if server is None or server.pool is None:
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
        except (MongioError, OSError, TimeoutError) as exc:
            _log.debug("endSessions failed while closing the client: %s", exc)
        finally:
            server.operation_finished()

    async def _send_unmanaged(self, conn: Connection, name: str, command: dict[str, Any]) -> None:
        """Send a command outside any session and retry loop, with its command events."""
        publisher = self._publisher
        publishing = publisher.enabled
        operation_id = next(self._operation_ids)
        request_id = await conn.send("admin", command)
        context = (name, "admin", request_id, operation_id, conn.address, conn.id)
        ids = (conn.server_connection_id, conn.service_id)
        if publishing:
            publisher.started(command, *context, *ids)
        started = time.monotonic()
        try:
            reply = await conn.receive(check=True)
        except Exception as exc:
            if publishing:
                publisher.failed(exc, time.monotonic() - started, *context, *ids)
            raise
        if publishing:
            publisher.succeeded(reply, time.monotonic() - started, *context, *ids)


_MAX_TIME_MS_EXPIRED = 50


def _is_timeout(error: BaseException) -> bool:
    """A timeout of any source: a timeout error, or the server's MaxTimeMSExpired (code 50, checked by code
    alone) as the command's error, a write error or a write concern error."""
    if getattr(error, "timeout", False):
        return True
    if getattr(error, "code", None) == _MAX_TIME_MS_EXPIRED:
        return True
    details = getattr(error, "details", None)
    if isinstance(details, Mapping):
        for write_error in details.get("writeErrors") or ():
            if isinstance(write_error, Mapping) and write_error.get("code") == _MAX_TIME_MS_EXPIRED:
                return True
        for concern_error in (details.get("writeConcernError"), *(details.get("writeConcernErrors") or ())):
            if isinstance(concern_error, Mapping) and concern_error.get("code") == _MAX_TIME_MS_EXPIRED:
                return True
    return False


def _unpins_for_retry(transaction_command: str | None, error: MongioError) -> bool:
    """Whether a sharded transaction's session is unpinned before a retry after ``error``: always for
    abortTransaction, after an unknown commit result, and after a transient transaction error."""
    return (
        transaction_command == "abortTransaction"
        or error.has_error_label(UNKNOWN_TRANSACTION_COMMIT_RESULT)
        or error.has_error_label(TRANSIENT_TRANSACTION_ERROR)
    )


def _last_error(retry_state: RetryState) -> BaseException | None:
    reported = retry_state._reported
    return None if reported is None else reported.error


def _command_error(reply: Mapping[str, Any], max_wire_version: int | None) -> OperationFailure:
    from mongio.connection.connection import check_command_reply

    try:
        check_command_reply(reply, max_wire_version)
    except OperationFailure as exc:
        return exc
    return OperationFailure(
        str(reply.get("errmsg", "command failed")), reply.get("code"), reply, max_wire_version
    )
