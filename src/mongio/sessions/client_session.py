"""``ClientSession``: a logical session, for causal consistency, snapshot reads and transactions.

Made by :meth:`mongio.client.MongoClient.start_session`::

    async with client.start_session() as session:
        await coll.insert_one({"x": 1}, session=session)
        doc = await coll.find_one({"x": 1}, session=session)  # reads its own write

        async with session.start_transaction():
            await coll.insert_one({"y": 1}, session=session)
            await other.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
        # committed here; aborted instead if the block raised or the task was cancelled

        await session.with_transaction(callback)  # retried on transient errors, within 120 s

A session takes its server session (the ``lsid`` the server knows it by) from the client's pool the first
time it sends a command (or starts a transaction), and gives it back when it ends. A session is bound to the
client that made it and, like its server-side counterpart, serves one operation at a time: do not run two
operations of one session concurrently (``asyncio.gather`` over one session), least of all in a transaction.
Sessions do not survive ``os.fork()``: a child process makes its own client and sessions (the server sessions
pooled before the fork are dropped in the child, without ending them on the server).

Unacknowledged writes (``w=0``) and sessions: a ``w=0`` write given an explicit ``session=`` raises
:class:`~mongio.errors.InvalidOperation` (nothing is sent), and one without a session is sent with no session
id at all, since the server could still be running it when the id is next used. Inside a transaction the
collection's or client's write concern does not apply: every write is acknowledged and the transaction's
write concern goes on the commit. Causal consistency rests on the ``operationTime`` of acknowledged replies,
so a causally consistent session's reads are not causally consistent with unacknowledged writes.

Inside a transaction, a command error (a duplicate key, say) may make the server abort the whole
transaction: committing it afterwards fails with ``NoSuchTransaction``. Let such errors end the transaction
(``async with session.start_transaction()`` aborts on them) rather than catching them and going on.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from mongio.backend import sleep as _sleep
from mongio.bson.timestamp import Timestamp, as_timestamp
from mongio.context_vars import reset
from mongio.error_classification import unpins_transaction
from mongio.errors import ConfigurationError, InvalidOperation, MongioError
from mongio.event_loops import bind_to_running_loop
from mongio.execution import deadline as csot
from mongio.operations.transaction_commands import AbortTransaction, CommitTransaction
from mongio.options.read_concern import as_read_concern
from mongio.options.read_preference import as_read_preference
from mongio.options.write_concern import as_write_concern
from mongio.sessions.cluster_time import (
    ClusterClock,
    greater_operation_time,
    session_read_concern,
    snapshot_time_from_reply,
)
from mongio.sessions.server_session import ServerSession
from mongio.sessions.transaction_state import (
    ClientTransactionDefaults,
    Transaction,
    TransactionOptions,
    check_read_preference,
)
from mongio.sessions.with_transaction_policy import (
    NextStep,
    WithTransactionRetry,
    callback_ended_transaction,
)

if TYPE_CHECKING:
    from mongio.client import MongoClient
    from mongio.operations.base import Operation
    from mongio.options.protocols import (
        ReadConcernLike,
        ReadPreferenceLike,
        TimestampLike,
        TransactionOptionsLike,
        WriteConcernLike,
    )
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import ReadPreferenceMode
    from mongio.options.write_concern import WriteConcern
    from mongio.topology.server_description import Address

T = TypeVar("T")

__all__ = ["ClientSession", "SessionOptions", "TransactionContext", "check_session_argument"]


class SessionOptions:
    """The options of a session: ``causal_consistency`` (default True unless ``snapshot``), ``snapshot``,
    ``snapshot_time`` (the point in time a snapshot session reads at, instead of its first read's),
    ``default_transaction_options`` and ``default_timeout_ms`` (the ``timeoutMS`` of its operations when
    none is in force, in place of the client's)."""

    __slots__ = (
        "_causal_consistency",
        "_default_timeout_ms",
        "_default_transaction_options",
        "_snapshot",
        "_snapshot_time",
    )

    def __init__(
        self,
        causal_consistency: bool | None = None,
        default_transaction_options: TransactionOptions | TransactionOptionsLike | None = None,
        snapshot: bool | None = False,
        default_timeout_ms: float | None = None,
        snapshot_time: Timestamp | TimestampLike | None = None,
    ) -> None:
        if default_timeout_ms is not None and default_timeout_ms < 0:
            raise ValueError(f"default_timeout_ms must be non-negative, not {default_timeout_ms}")
        self._default_timeout_ms = default_timeout_ms
        snapshot = bool(snapshot)
        if snapshot and causal_consistency:
            raise InvalidOperation("a session cannot be both causally consistent and a snapshot session")
        if snapshot_time is not None:
            if not snapshot:
                raise InvalidOperation("snapshot_time requires snapshot=True")
            given, snapshot_time = snapshot_time, as_timestamp(snapshot_time)
            if snapshot_time is None:
                raise TypeError(f"snapshot_time must be a Timestamp, not {type(given).__name__}")
        if default_transaction_options is not None:
            default_transaction_options = TransactionOptions.from_options(default_transaction_options)
        self._snapshot_time = snapshot_time
        self._causal_consistency = (not snapshot) if causal_consistency is None else bool(causal_consistency)
        self._default_transaction_options = default_transaction_options
        self._snapshot = snapshot

    @property
    def causal_consistency(self) -> bool:
        """Whether reads in the session see the session's earlier writes."""
        return self._causal_consistency

    @property
    def default_transaction_options(self) -> TransactionOptions | None:
        """The options of transactions the session starts, or ``None``."""
        return self._default_transaction_options

    @property
    def snapshot(self) -> bool:
        """Whether the session reads from one snapshot."""
        return self._snapshot

    @property
    def default_timeout_ms(self) -> float | None:
        """The ``timeoutMS`` of the session's operations when none is in force, or ``None``."""
        return self._default_timeout_ms

    @property
    def snapshot_time(self) -> Timestamp | None:
        """The time of the session's snapshot, once its first read has set it."""
        return self._snapshot_time


class ClientSession:
    """A logical session of one client. Use it as ``async with client.start_session() as s:`` or end it
    with ``await s.end_session()``; pass it to operations as ``session=s``."""

    def __init__(self, client: MongoClient[Any], options: SessionOptions, *, implicit: bool = False) -> None:
        self._client = client
        self._options = options
        self._implicit = implicit
        self._server_session: ServerSession | None = None
        self._ended = False
        self._clock = ClusterClock()
        self._operation_time: Timestamp | None = None
        self._snapshot_time: Timestamp | None = options.snapshot_time
        self._transaction = Transaction()
        # The mongos a sharded transaction runs on, from its first command until the next transaction or
        # the next operation outside one.
        self._pinned_address: Address | None = None
        # Load balanced: the pool and connection a transaction's commands all go through, from its first.
        self._pinned_connection: tuple[Any, Any] | None = None
        self._transaction_rng: random.Random | None = None
        self._with_transaction_deadline: float | None = None
        # The OpenTelemetry span of the transaction under way, when the client traces: the parent of the
        # operations run in it, ended by commit or abort.
        self._transaction_span: Any = None
        # The event loop of the session's first operation: its transaction state and pinned connection
        # belong there.
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        state = "ended" if self._ended else "active"
        kind = "implicit" if self._implicit else "explicit"
        return f"<ClientSession {kind} {state} id={self.session_id if self._server_session else None}>"

    # -- what the application reads --------------------------------------------------------------------------

    @property
    def client(self) -> MongoClient[Any]:
        """The client this session belongs to."""
        return self._client

    @property
    def options(self) -> SessionOptions:
        """The options the session was started with."""
        return self._options

    @property
    def implicit(self) -> bool:
        """True for a session the driver made for an operation or a cursor (never shown to the application)."""
        return self._implicit

    @property
    def has_ended(self) -> bool:
        """Whether ``end_session()`` was called (or the ``async with`` block left)."""
        return self._ended

    @property
    def session_id(self) -> Mapping[str, Any]:
        """The ``lsid`` document; taking it gives the session its server session if it had none yet."""
        return self.checked_server_session().session_id

    @property
    def cluster_time(self) -> Mapping[str, Any] | None:
        """The highest ``$clusterTime`` this session has seen."""
        return self._clock.cluster_time

    @property
    def operation_time(self) -> Timestamp | None:
        """The ``operationTime`` of the latest reply in this session (causal consistency waits for it)."""
        return self._operation_time

    @property
    def in_transaction(self) -> bool:
        """True from :meth:`start_transaction` until the transaction is committed or aborted."""
        return self._transaction.active

    @property
    def snapshot_time(self) -> Timestamp | None:
        """The point in time a snapshot session reads at: the ``snapshot_time`` it was started with, else the
        ``atClusterTime`` of its first read (``None`` before that). Raises :class:`InvalidOperation` on a
        session that is not a snapshot session."""
        if not self._options.snapshot:
            raise InvalidOperation("snapshot_time is only available on a snapshot session (snapshot=True)")
        return self._snapshot_time

    def advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        """Raise this session's cluster time (e.g. to the ``cluster_time`` of another session)."""
        if not isinstance(cluster_time, Mapping):
            raise TypeError(
                "cluster_time must be a mapping like {'clusterTime': Timestamp, 'signature': ...}"
            )
        if as_timestamp(cluster_time.get("clusterTime")) is None:
            found = type(cluster_time.get("clusterTime")).__name__
            raise TypeError(f"cluster_time must have a Timestamp 'clusterTime', not {found}")
        self._clock.advance(cluster_time)

    def advance_operation_time(self, operation_time: Timestamp | TimestampLike) -> None:
        """Raise this session's operation time (e.g. to the ``operation_time`` of another session)."""
        timestamp = as_timestamp(operation_time)
        if timestamp is None:
            raise TypeError("operation_time must be a Timestamp")
        self._operation_time = greater_operation_time(self._operation_time, timestamp)

    # -- transactions -----------------------------------------------------------------------------------------

    def start_transaction(
        self,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        max_commit_time_ms: int | None = None,
    ) -> TransactionContext:
        """Start a transaction; the operations given ``session=self`` from now on run in it.

        Options left ``None`` come from the session's ``default_transaction_options``, then from the client.
        Nothing is sent yet: the first operation starts the transaction on the server. Use the result as an
        async context manager, which commits when the block ends normally and aborts when it raises or the
        task is cancelled::

            async with session.start_transaction():
                await orders.insert_one(order, session=session)
                await stock.update_one({"sku": sku}, {"$inc": {"qty": -1}}, session=session)

        or call :meth:`commit_transaction` / :meth:`abort_transaction` yourself. ``await
        session.start_transaction()`` also works (it returns the same context manager), as in PyMongo.
        """
        self._check_not_ended()
        if self._options.snapshot:
            raise InvalidOperation("Transactions are not supported in snapshot sessions")
        if self._transaction.active:
            raise InvalidOperation("Transaction already in progress")
        client = self._client
        if client.executor.sessions_known_unsupported():
            raise ConfigurationError(
                "Transactions are not supported by this deployment: its servers do not support sessions "
                "(they report no logicalSessionTimeoutMinutes)"
            )
        options = TransactionOptions(
            read_concern=None if read_concern is None else as_read_concern(read_concern),
            write_concern=None if write_concern is None else as_write_concern(write_concern),
            read_preference=None if read_preference is None else as_read_preference(read_preference),
            max_commit_time_ms=max_commit_time_ms,
        ).inherit(
            self._options.default_transaction_options,
            ClientTransactionDefaults(
                read_concern=client.read_concern,
                write_concern=client.write_concern,
                read_preference=client.read_preference,
            ),
        )
        server_session = self.checked_server_session()
        self.unpin()
        self._transaction.start(options)
        server_session.next_txn_number()
        tracing = client.executor.tracing
        if tracing is not None:
            self._end_transaction_span()
            self._transaction_span = tracing.start_transaction()
        return TransactionContext(self)

    async def commit_transaction(self) -> None:
        """Commit the transaction. A transaction in which no operation ran commits without a command.

        The command is retried once on a retryable error (with ``w: "majority"``). An error labelled
        ``UnknownTransactionCommitResult`` means the outcome is unknown: calling this again retries the commit.
        """
        self._check_not_ended()
        transaction = self._transaction
        if not transaction.begin_commit():
            self._end_transaction_span()
            return
        server_session = self.checked_server_session()
        operation = CommitTransaction(transaction, server_session.txn_number)
        try:
            await self._client.executor.execute(operation, self)
        except MongioError as exc:
            if unpins_transaction(exc):
                self.unpin()
            raise
        finally:
            self._end_transaction_span()

    async def abort_transaction(self) -> None:
        """Abort the transaction. The server's errors are not raised (it gives the transaction up anyway,
        after its ``transactionLifetimeLimitSeconds``); the command is retried once on a retryable error."""
        self._check_not_ended()
        transaction = self._transaction
        if not transaction.begin_abort():
            self.unpin()
            self._end_transaction_span()
            return
        server_session = self.checked_server_session()
        operation = AbortTransaction(transaction, server_session.txn_number)
        try:
            await self._client.executor.execute(operation, self)
        except MongioError:
            pass
        finally:
            self.unpin()
            self._end_transaction_span()

    async def with_transaction(
        self,
        callback: Callable[[ClientSession], Awaitable[T]],
        read_concern: ReadConcern | None = None,
        write_concern: WriteConcern | None = None,
        read_preference: ReadPreferenceMode | None = None,
        max_commit_time_ms: int | None = None,
    ) -> T:
        """Run ``await callback(session)`` in a transaction and commit it, retrying as the server advises.

        The whole transaction (the callback included) runs again after an error labelled
        ``TransientTransactionError``, after a short jittered backoff; the commit alone runs again after an
        ``UnknownTransactionCommitResult``. **The callback may therefore run several times**: keep it free of
        side effects other than the operations it runs with ``session=session``. Retrying stops after 120
        seconds, or at the ``timeoutMS`` in force (a ``timeout()`` block, the session's
        ``default_timeout_ms`` or the client's), with a timeout error that carries the last error and its
        labels. Any other error of the callback aborts the transaction and is raised as it is; a callback that
        commits or aborts the transaction itself ends the call. Returns the callback's result.

        The callback must not silently swallow the errors of its commands: a command error may have aborted
        the transaction on the server, and committing it would then fail with ``NoSuchTransaction`` (a
        transient error, so the loop would go on until the time limit). Let such errors propagate, or re-raise
        them after handling; to handle errors your own way, use :meth:`start_transaction` and
        :meth:`commit_transaction` directly.

        If the awaiting task is cancelled, a transaction still open is aborted before the cancellation goes on.
        """
        self._check_not_ended()
        timeout = self._operation_timeout()
        if timeout is not None and csot.current_deadline() is None:
            with csot.timeout(timeout):
                return await self._with_transaction(
                    callback, read_concern, write_concern, read_preference, max_commit_time_ms
                )
        return await self._with_transaction(
            callback, read_concern, write_concern, read_preference, max_commit_time_ms
        )

    async def _with_transaction(
        self,
        callback: Callable[[ClientSession], Awaitable[T]],
        read_concern: ReadConcern | None,
        write_concern: WriteConcern | None,
        read_preference: ReadPreferenceMode | None,
        max_commit_time_ms: int | None,
    ) -> T:
        left = csot.remaining()
        retry = WithTransactionRetry(time.monotonic(), left, rng=self._transaction_rng)
        # Under CSOT the callback's operations share this deadline; one that brings its own is refused.
        self._with_transaction_deadline = csot.current_deadline()
        try:
            return await self._with_transaction_loop(
                retry, left, callback, read_concern, write_concern, read_preference, max_commit_time_ms
            )
        finally:
            self._with_transaction_deadline = None

    async def _with_transaction_loop(
        self,
        retry: WithTransactionRetry,
        abort_seconds: float | None,
        callback: Callable[[ClientSession], Awaitable[T]],
        read_concern: ReadConcern | None,
        write_concern: WriteConcern | None,
        read_preference: ReadPreferenceMode | None,
        max_commit_time_ms: int | None,
    ) -> T:
        while True:
            backoff = retry.before_transaction(time.monotonic())
            if backoff > 0:
                await _sleep(backoff)
            self.start_transaction(read_concern, write_concern, read_preference, max_commit_time_ms)
            try:
                result = await callback(self)
            except BaseException as exc:
                if self._transaction.active:
                    await self._abort_with_fresh_timeout(abort_seconds)
                if not isinstance(exc, Exception):
                    raise
                decision = retry.after_callback_error(exc, time.monotonic())
                if decision.step is NextStep.RETRY_TRANSACTION:
                    continue
                if decision.error is None or decision.error is exc:
                    raise
                raise decision.error from None
            if callback_ended_transaction(self._transaction.state):
                return result
            while True:
                try:
                    await self.commit_transaction()
                    return result
                except Exception as exc:
                    decision = retry.after_commit_error(exc, time.monotonic())
                    if decision.step is NextStep.RETRY_COMMIT:
                        continue
                    if decision.step is NextStep.RETRY_TRANSACTION:
                        break
                    if decision.error is None or decision.error is exc:
                        raise
                    raise decision.error from None

    async def _abort_with_fresh_timeout(self, seconds: float | None) -> None:
        """Abort after the callback failed; under CSOT the abort gets the whole timeout again (the CSOT
        specification's rule), even when the callback used it all up."""
        if seconds is None or math.isinf(seconds):
            await self.abort_transaction()
            return
        saved = self._with_transaction_deadline
        self._with_transaction_deadline = None
        # A deliberate reset past the enclosing deadline, which csot.timeout() blocks never allow.
        token = csot._DEADLINE.set(time.monotonic() + seconds)
        try:
            await self.abort_transaction()
        finally:
            reset(csot._DEADLINE, token)
            self._with_transaction_deadline = saved

    def _operation_timeout(self) -> float | None:
        """The seconds the session's operations may take when no ``timeout()`` block is in force."""
        return self._client.executor.operation_timeout(None, self)

    # -- ending ------------------------------------------------------------------------------------------

    async def end_session(self) -> None:
        """End the session: a transaction still open is aborted, and its server session goes back to the
        client's pool. Ending twice is harmless."""
        if self._ended:
            return
        if self._transaction.active:
            await self.abort_transaction()
        self._ended = True
        self.unpin()
        server_session, self._server_session = self._server_session, None
        if server_session is not None:
            self._client.executor.release_server_session(server_session)

    async def __aenter__(self) -> ClientSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.end_session()

    def __await__(self) -> Generator[Any, None, ClientSession]:
        """``await client.start_session()`` (PyMongo's async API and Motor) gives the session itself."""
        return self._itself().__await__()

    async def _itself(self) -> ClientSession:
        return self

    # -- for the executor: what OperationSession declares (public within the package, not API) ---------------

    def check_usable(self, client: object) -> None:
        """Raise unless an operation of ``client`` may run in this session now: the session has not ended, was
        started by ``client``, and the operation sets no timeout of its own inside ``with_transaction``; binds
        the session to the running event loop."""
        self._check_not_ended()
        bound = self._with_transaction_deadline
        current = csot.current_deadline()
        # A millisecond of slack: a cursor re-deriving the same deadline from the time left may round.
        if bound is not None and (current is None or abs(current - bound) > 0.001):
            raise InvalidOperation(
                "an operation in with_transaction's session cannot set its own timeout (timeoutMS or a "
                "timeout() block): with_transaction's timeout covers the whole callback"
            )
        if client is not self._client:
            raise InvalidOperation(
                f"this session was started by another client ({self._client!r}); a session can only be "
                "used with the client that created it"
            )
        self._loop = bind_to_running_loop(
            self._loop, "this session", "start a session with client.start_session() on this loop"
        )

    def begin_operation(self, op: Operation[Any]) -> bool:
        """Before the first attempt of an operation other than commit and abort: whether it runs inside the
        transaction. A transaction that ended is left behind (and its pinning with it); inside one, a read
        preference other than primary is refused, and the operation's own write concern gives way to the
        transaction's (which goes on commit and abort only), so every write is acknowledged."""
        transaction = self._transaction
        transaction.before_operation()
        if not transaction.active:
            self.unpin()
            return False
        if not op.takes_write_concern and transaction.options.read_preference is not None:
            check_read_preference(transaction.options.read_preference)
        if op.is_user_command and op.read_preference is not None:
            check_read_preference(op.read_preference)
        if op.takes_write_concern:
            op.use_transaction_write_concern()
        return True

    def transaction_fields(self) -> dict[str, Any]:
        """What a command inside the transaction carries besides ``lsid``: ``txnNumber``, ``autocommit`` and,
        on the first, ``startTransaction`` with the read concern (``afterClusterTime`` when causal)."""
        server_session = self.checked_server_session()
        after = self._operation_time if self._options.causal_consistency else None
        return self._transaction.command_fields(server_session.txn_number, after_cluster_time=after)

    def transaction_sent(self) -> None:
        """The operation whose command started the transaction is over (after all its attempts)."""
        self._transaction.first_command_done()

    def transaction_server(self) -> Address | None:
        """The mongos a sharded transaction runs on, once its first command chose one."""
        return self._pinned_address

    def pinned_connection_from(self, pool: object) -> Any:
        """A load-balanced transaction's connection when it belongs to ``pool`` (else ``None``)."""
        pinned = self._pinned_connection
        return pinned[1] if pinned is not None and pinned[0] is pool else None

    def has_pinned_connection(self) -> bool:
        """Whether a load-balanced transaction holds a connection."""
        return self._pinned_connection is not None

    def pin_transaction(self, address: Address | None = None, pool: Any = None, conn: Any = None) -> None:
        """Pin the transaction to the mongos at ``address`` (sharded) or to ``conn`` of ``pool`` (load
        balanced), unless it is pinned already: every later command of the transaction goes there."""
        if address is not None and self._pinned_address is None:
            self._pinned_address = address
        if conn is not None and self._pinned_connection is None:
            self._pinned_connection = (pool, conn)
            pool.pin(conn, "transaction")

    def take_from_reply(self, reply: Mapping[str, Any], *, in_transaction: bool) -> None:
        """What a reply tells the session: its cluster and operation times, a snapshot session's point in
        time (from its first read), a sharded transaction's recovery token."""
        self._advance_from_reply(reply)
        if self._options.snapshot and self._snapshot_time is None:
            self._snapshot_time = snapshot_time_from_reply(reply)
        if in_transaction:
            recovery_token = reply.get("recoveryToken")
            if recovery_token is not None:
                self._transaction.recovery_token = recovery_token

    def read_concern_for(self, document: dict[str, Any] | None, *, standalone: bool) -> dict[str, Any] | None:
        """The read concern of a read outside a transaction: ``document`` (the operation's) with this
        session's ``afterClusterTime`` (causal consistency; never for a standalone, which has no cluster
        times) or its snapshot (``level: snapshot``, with ``atClusterTime`` once known)."""
        options = self._options
        if not (options.causal_consistency or options.snapshot):
            return document
        return session_read_concern(
            document,
            causal_consistency=options.causal_consistency and not standalone,
            operation_time=self._operation_time,
            snapshot=options.snapshot,
            snapshot_time=self._snapshot_time,
        )

    def after_cluster_time(self) -> Timestamp | None:
        """The ``afterClusterTime`` a causally consistent session's commands wait for (``None``: none)."""
        return self._operation_time if self._options.causal_consistency else None

    def abandon(self) -> ServerSession | None:
        """Internal, not part of the API (the client calls it): the cursor holding this implicit session was
        abandoned, so the session ends at once, without a command or an await (this may run in a finalizer).
        Returns its server session, for the pool, when it had one (and was not ended already); else ``None``
        and the session is left as it is."""
        server_session = self._server_session
        if server_session is None or self._ended:
            return None
        self._server_session = None
        self._ended = True
        return server_session

    def transaction_trace(self) -> Any:
        """The OpenTelemetry span of the transaction under way (the parent of its operations' spans), or
        ``None``."""
        return self._transaction_span

    def _end_transaction_span(self) -> None:
        span, self._transaction_span = self._transaction_span, None
        if span is not None:
            span.end()

    def unpin(self) -> None:
        """Forget the mongos of a sharded transaction and give back a load-balanced transaction's connection."""
        self._pinned_address = None
        pinned, self._pinned_connection = self._pinned_connection, None
        if pinned is not None:
            pool, conn = pinned
            pool.check_in(conn)

    def holds(self, conn: object) -> bool:
        """Whether ``conn`` is this session's pinned connection (the executor must not check it in)."""
        pinned = self._pinned_connection
        return pinned is not None and pinned[1] is conn

    def _check_not_ended(self) -> None:
        if self._ended:
            # PyMongo's words first, for code that matches them; then what ended it and what to do.
            raise InvalidOperation(
                "Cannot use ended session: end_session() was called or its async with block exited; "
                "start a new one with client.start_session()"
            )

    def checked_server_session(self) -> ServerSession:
        """The server session the session's commands carry, taken from the client's pool at the first one;
        raises once the session has ended."""
        self._check_not_ended()
        if self._server_session is None:
            self._server_session = self._client.executor.acquire_server_session()
        return self._server_session

    @property
    def _causal(self) -> bool:
        return self._options.causal_consistency

    @property
    def _snapshot(self) -> bool:
        return self._options.snapshot

    def _advance_from_reply(self, reply: Mapping[str, Any]) -> None:
        self._clock.advance_from_reply(reply)
        operation_time = as_timestamp(reply.get("operationTime"))
        if operation_time is not None:
            self._operation_time = greater_operation_time(self._operation_time, operation_time)


class TransactionContext:
    """What :meth:`ClientSession.start_transaction` returns: ``async with`` it to commit when the block ends
    normally and abort when it raises or is cancelled (a transaction the block already committed or aborted
    is left as it is). Awaiting it returns it, for code written as ``async with await s.start_transaction()``.
    """

    __slots__ = ("_session",)

    def __init__(self, session: ClientSession) -> None:
        self._session = session

    @property
    def session(self) -> ClientSession:
        return self._session

    def __await__(self) -> Generator[Any, None, TransactionContext]:
        return self._itself().__await__()

    async def _itself(self) -> TransactionContext:
        return self

    async def __aenter__(self) -> TransactionContext:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        session = self._session
        if not session.in_transaction:
            return
        if exc_type is None:
            await session.commit_transaction()
        else:
            await session.abort_transaction()


def check_session_argument(session: object) -> None:
    """Refuse a ``session=`` that is neither None nor a :class:`ClientSession` (before anything is sent: it would
    otherwise fail deep inside the operation). TypeError, where PyMongo raises ValueError (see differences.yaml)."""
    if session is not None and not isinstance(session, ClientSession):
        raise TypeError(f"session must be a ClientSession (AsyncClientSession) or None, not {type(session).__name__}")
