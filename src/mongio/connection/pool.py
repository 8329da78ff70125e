"""The connection pool of one server, as the Connection Monitoring and Pooling specification describes it.

Every decision (which connection to hand out, whether a new one may be made, which waiter is next) is
made synchronously, without awaiting; only establishing a connection awaits. So a check-out that finds an
idle connection returns without a task switch, and a check-in is a plain function call that cancellation
cannot interrupt halfway.

- Idle connections are reused last-in first-out: the most recently used stay warm, the others age out
  under ``maxIdleTimeMS``.
- Waiters are futures in a FIFO :class:`~mongio.loop_runtime.wait_queue.WaitQueue`: a checked-in
  connection, or the right to open a new one, goes to the oldest waiter. A waiter that times out or is
  cancelled leaves the queue at once (in constant time, however many leave together), and a connection
  handed to a task that was cancelled before it could take it goes back to the pool.
- The pool does not know how connections are made: it calls the injected ``connect(connection_id,
  generation)`` factory (TCP, TLS, handshake and authentication live there) and needs only the small
  :class:`ConnectionLike` interface from what it returns.
- One background task per pool (only when ``minPoolSize`` or ``maxIdleTimeMS`` is set) keeps the pool at
  ``minPoolSize`` while it is ready and closes idle connections as they expire; it sleeps on an event,
  or until the next idle connection expires, and never polls.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from mongio.backend import (
    CancelScopeLike,
    EventLike,
    current_asyncio_task,
    current_task,
    is_cancellation,
    new_cancel_scope,
    new_event,
    running_loop,
    timeout,
)
from mongio.connection.pool_options import PoolOptions
from mongio.errors import (
    InvalidOperation,
    MongioError,
    PoolClearedError,
    PoolClosedError,
    WaitQueueTimeoutError,
)
from mongio.events.listeners import CmapPublisher
from mongio.events.reasons import Address, ConnectionCheckOutFailedReason, ConnectionClosedReason
from mongio.loop_runtime.wait_queue import WaitQueue

__all__ = [
    "ConnectFactory",
    "ConnectionLike",
    "Pool",
    "PoolClearedError",
    "PoolClosedError",
    "PoolState",
]

_LOGGER = logging.getLogger("mongio.connection.pool")

_STALE = ConnectionClosedReason.STALE
_IDLE = ConnectionClosedReason.IDLE
_ERROR = ConnectionClosedReason.ERROR
_POOL_CLOSED = ConnectionClosedReason.POOL_CLOSED
_FAILED_TIMEOUT = ConnectionCheckOutFailedReason.TIMEOUT
_FAILED_CLOSED = ConnectionCheckOutFailedReason.POOL_CLOSED
_FAILED_CONN = ConnectionCheckOutFailedReason.CONN_ERROR

# What conn.close() is told, so a task still using an interrupted connection learns why.
_CLOSE_TEXT = {
    _STALE: "the pool was cleared",
    _IDLE: "idle in the pool for longer than maxIdleTimeMS",
    _ERROR: "the connection was broken",
    _POOL_CLOSED: "the pool was closed",
}


class ConnectionLike(Protocol):
    """What the pool needs from a connection.

    ``generation`` is written by the pool in load-balanced mode, once the handshake has told it the
    connection's ``service_id``. ``closed`` turns true when the connection breaks or an exchange on it was
    interrupted; the pool then closes it instead of reusing it. ``close()`` must not block.
    """

    id: int
    generation: int
    service_id: Any
    last_used: float

    @property
    def closed(self) -> bool: ...

    @property
    def in_exchange(self) -> bool:
        """True while a request was sent and its reply (or the rest of an exhaust stream) is unread."""
        ...

    def close(self, reason: str = ...) -> None: ...

    def hung_up_while_idle(self) -> bool:
        """Whether the peer is found to have ended the connection while it sat idle (then ``closed`` is
        true); asked of an idle connection before it is handed out. Must not block."""
        ...


C = TypeVar("C", bound=ConnectionLike)

ConnectFactory = Callable[[int, int], Awaitable[C]]
"""``connect(connection_id, generation)``: open, handshake and authenticate one connection, or raise."""


class PoolState:
    """The pool's states (the specification's names)."""

    PAUSED = "paused"
    READY = "ready"
    CLOSED = "closed"


# The states check_out and check_in compare with, as module constants: on Python 3.11 an attribute read off a
# class object is not specialized, and these run for every operation.
_READY = PoolState.READY
_CLOSED_STATE = PoolState.CLOSED


class _Establishing:
    """A connection being established, so that a clear with ``interrupt_in_use_connections``, or a close that
    interrupts, can interrupt it: on asyncio by cancelling the task establishing it (``task``), on trio, whose
    tasks cannot be cancelled from outside, by cancelling the cancel scope around the establishment
    (``scope``). The establishing task then converts the cancellation into the error ``interrupted_by``
    names: ``_STALE`` for the clear, ``_POOL_CLOSED`` for the close. ``owner`` is the establishing task, which
    a clear or close it makes itself (a failed handshake clears the pool) leaves alone."""

    __slots__ = ("generation", "interrupted_by", "owner", "scope", "task")

    def __init__(
        self,
        task: asyncio.Task[Any] | None,
        scope: CancelScopeLike | None,
        owner: object | None,
        generation: int,
    ) -> None:
        self.task = task
        self.scope = scope
        self.owner = owner
        self.generation = generation
        self.interrupted_by: str | None = None

    def interrupt(self, reason: str) -> None:
        """Cancel the establishment, once; ``reason`` is why, for the error the cancellation becomes."""
        if self.interrupted_by is not None:
            return
        if self.task is not None:
            self.interrupted_by = reason
            self.task.cancel()
        elif self.scope is not None:
            self.interrupted_by = reason
            self.scope.cancel()

    def ended_by_interruption(self) -> bool:
        """Once the establishment raised: whether the interruption is what ended it (asyncio: no other
        cancellation of the task is left once the interruption's is taken back; trio: the scope caught its
        own cancellation, not one of an enclosing scope)."""
        if self.interrupted_by is None:
            return False
        if self.task is not None:
            return self.task.uncancel() == 0
        return self.scope is not None and self.scope.cancelled_caught


class _Grant:
    """What a waiter's future resolves to when it is not a connection."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


_PERMIT = _Grant("permission to open a connection")  # a pending slot was reserved for the waiter
_TIMED_OUT = _Grant("timed out")
_CLEARED = _Grant("pool cleared")
_CLOSED = _Grant("pool closed")


def _format_address(address: Address) -> str:
    host, port = address
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Pool(Generic[C]):
    """The connections to one server: check one out, use it, check it back in.

    ::

        async with pool.checkout() as conn:
            reply = await conn.command("admin", {"ping": 1})

    A pool starts *paused*: check-outs fail with :class:`PoolClearedError` until the server monitor's first
    successful check calls :meth:`ready`. :meth:`clear` pauses it again (and makes every existing
    connection stale); :meth:`close` shuts it for good. All methods must be called from the event loop
    the pool is used on.
    """

    def __init__(
        self,
        address: Address,
        connect: ConnectFactory[C],
        options: PoolOptions | None = None,
        *,
        on_connect_error: Callable[[BaseException, int], None] | None = None,
        background_task: bool = True,
    ) -> None:
        """``connect`` makes connections; ``on_connect_error(error, generation)`` is told (before the failed
        connection's ``ConnectionClosedEvent``) when establishing one fails, which is where the topology's
        error handling for pre-handshake errors plugs in. ``background_task=False`` runs the pool without its
        background task (``minPoolSize`` is then not maintained, and expired idle connections are closed only
        when a check-out meets them), for tests that observe check-out alone."""
        self.address: Address = address
        self.options = options if options is not None else PoolOptions()
        self._connect = connect
        self._on_connect_error = on_connect_error
        self._publish = CmapPublisher(address, self.options.event_listeners)
        self._where = _format_address(address)

        opts = self.options
        self._max_size = opts.max_pool_size or sys.maxsize
        self._min_size = opts.min_pool_size
        self._max_connecting = opts.max_connecting
        self._max_idle = opts.max_idle_time_seconds
        self._wait_timeout = opts.wait_queue_timeout
        self._load_balanced = opts.load_balanced
        # Neither load-balanced nor with an idle limit: a connection's generation and state alone say whether
        # it is usable (see _perished).
        self._plain = not self._load_balanced and self._max_idle is None

        self._state = PoolState.PAUSED
        self._generation = 0
        # Load-balanced mode: serviceId -> [generation, number of connections].
        self._service_generations: dict[Any, list[int]] = {}
        self._idle: deque[tuple[C, float]] = deque()  # (connection, monotonic time it became idle)
        self._in_use: set[C] = set()
        # Load-balanced mode: the connections in use that a cursor or a transaction holds, by purpose, for the
        # wait queue timeout's message (the load balancer specification's connection tracking).
        self._pinned: dict[C, str] = {}
        # Connections in use that a clear interrupted: closed for being stale, not for an error of theirs.
        self._interrupted: set[C] = set()
        self._total = 0  # idle + in use + pending (pending includes slots granted to waiters)
        self._pending = 0
        self._establishing: set[_Establishing] = set()
        # Set once let_go() dropped the connections still checked out.
        self._let_go = False
        # Check-outs waiting for a connection or for the right to open one, served oldest first.
        self._queue: WaitQueue[Any] = WaitQueue()
        self._next_id = 1
        self._clear_cause: BaseException | None = None

        self._wake: EventLike | None = None
        self._background: asyncio.Task[None] | None = None
        self._needs_background = background_task and (self._min_size > 0 or self._max_idle is not None)

        self._publish.pool_created(opts.non_default_options)

    def __repr__(self) -> str:
        return (
            f"<Pool {self._where} {self._state} generation={self._generation} total={self._total} "
            f"idle={len(self._idle)} in_use={len(self._in_use)} pending={self._pending} "
            f"waiting={self._queue.waiting}>"
        )

    # Introspection.

    @property
    def state(self) -> str:
        """``"paused"``, ``"ready"`` or ``"closed"`` (see :class:`PoolState`)."""
        return self._state

    @property
    def generation(self) -> int:
        """The pool's generation: bumped by every :meth:`clear`."""
        return self._generation

    def generation_for(self, service_id: Any = None) -> int:
        """The current generation for connections to ``service_id`` (load-balanced mode) or of the pool."""
        if self._load_balanced and service_id is not None:
            entry = self._service_generations.get(service_id)
            return entry[0] if entry is not None else 0
        return self._generation

    @property
    def total_connection_count(self) -> int:
        """Connections idle, in use and being established."""
        return self._total

    @property
    def available_connection_count(self) -> int:
        return len(self._idle)

    @property
    def pending_connection_count(self) -> int:
        """Connections being established (or about to be, by a waiter that was just given the go-ahead)."""
        return self._pending

    @property
    def in_use_connection_count(self) -> int:
        return len(self._in_use)

    @property
    def wait_queue_length(self) -> int:
        return self._queue.waiting

    # State changes.

    def ready(self) -> None:
        """Mark the pool ready: check-outs may proceed and ``minPoolSize`` connections are opened in the
        background. Does nothing on a pool that is already ready or closed."""
        if self._state != PoolState.PAUSED:
            return
        self._state = PoolState.READY
        self._clear_cause = None
        self._publish.pool_ready()
        if self._needs_background:
            self._start_background()

    def clear(
        self,
        interrupt_in_use_connections: bool = False,
        service_id: Any = None,
        *,
        error: BaseException | None = None,
    ) -> None:
        """Make every existing connection stale and pause the pool until :meth:`ready` is called again.

        Idle connections are closed now, connections in use when they are checked in, and tasks waiting for
        a connection fail at once with :class:`PoolClearedError`. With ``interrupt_in_use_connections``
        the connections in use and those being established are interrupted too (after a server monitor
        timeout). In load-balanced mode only the connections to ``service_id`` are affected and the pool
        is not paused. ``error`` is the failure that caused the clear, quoted to waiters.
        """
        if self._state == PoolState.CLOSED:
            return
        if self._load_balanced:
            self._clear_service(service_id, interrupt_in_use_connections)
            return
        previous = self._generation
        self._generation += 1
        was_ready = self._state == PoolState.READY
        self._state = PoolState.PAUSED
        self._clear_cause = error
        if was_ready:
            self._publish.pool_cleared(None, interrupt_in_use_connections)
        self._fail_waiters(_CLEARED)
        if interrupt_in_use_connections:
            self._interrupt(previous, None)
        self._prune_idle()

    def _clear_service(self, service_id: Any, interrupt: bool) -> None:
        if service_id is None:
            self._generation += 1
            for entry in self._service_generations.values():
                entry[0] += 1
        else:
            service = self._service_generations.get(service_id)
            if service is not None:
                service[0] += 1
        self._publish.pool_cleared(service_id, interrupt)
        if interrupt:
            self._interrupt(None, service_id)
        self._prune_idle()
        self._dispatch()

    def _interrupt(self, up_to_generation: int | None, service_id: Any) -> None:
        """Close in-use connections and cancel establishments that the clear made stale."""
        current = current_task()
        for conn in list(self._in_use):
            if self._perished_generation(conn, up_to_generation, service_id):
                self._interrupted.add(conn)
                conn.close(
                    f"interrupted: the pool for {self._where} was cleared after a server monitor timeout"
                )
        for record in list(self._establishing):
            if record.owner is current:
                continue
            # An establishing connection's service is unknown until its handshake ends: interrupt them all.
            if up_to_generation is None or record.generation <= up_to_generation:
                record.interrupt(_STALE)

    def _perished_generation(self, conn: C, up_to_generation: int | None, service_id: Any) -> bool:
        if up_to_generation is not None:
            return conn.generation <= up_to_generation
        return service_id is None or conn.service_id == service_id

    async def close(self, interrupt_in_use_connections: bool = False) -> None:
        """Close the pool: idle connections now, connections in use when they come back; pending check-outs
        and later ones fail with :class:`PoolClosedError`. Stops the background task and waits for it.

        ``interrupt_in_use_connections`` (the client is closing) also closes the connections in use now, so a
        task waiting on one for a reply gets ``AutoReconnect`` saying the pool was closed instead of waiting
        on; their ``ConnectionClosedEvent`` (``poolClosed``) still comes when they are checked in, as the
        specification has it. Connections being established are interrupted too: their check-outs fail with
        :class:`PoolClosedError`.
        """
        if self._state != PoolState.CLOSED:
            self._state = PoolState.CLOSED
            idle, self._idle = self._idle, deque()
            for conn, _since in idle:
                self._discard(conn, _POOL_CLOSED)
            self._fail_waiters(_CLOSED)
            self._publish.pool_closed()
        if interrupt_in_use_connections:
            self._interrupt_for_close()
        task, self._background = self._background, None
        if task is not None and task is not current_task():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = current_asyncio_task()
                if current is not None and current.cancelling():
                    raise

    def _interrupt_for_close(self) -> None:
        """Close every connection in use and cancel every establishment (see :meth:`close`)."""
        current = current_task()
        for conn in list(self._in_use):
            conn.close(f"interrupted: the pool for {self._where} was closed")
        for record in list(self._establishing):
            if record.owner is not current:
                record.interrupt(_POOL_CLOSED)

    def let_go(self) -> None:
        """:meth:`close` for a pool whose event loop will never run again (see
        :class:`~mongio.loop_runtime.bound.LoopBound`): every connection it still counts is closed at once
        with its ``ConnectionClosedEvent`` (the runtime let go of their protocols first, so their sockets are
        closed directly), the background task and the waiters of that loop are forgotten, not cancelled or
        failed, and nothing is scheduled on the loop."""
        if self._state == PoolState.CLOSED and not self._in_use:
            return
        was_open = self._state != PoolState.CLOSED
        self._state = PoolState.CLOSED
        self._let_go = True
        # First: discarding below (under minPoolSize) would wake the background task through the loop.
        self._background = self._wake = None
        idle, self._idle = self._idle, deque()
        in_use, self._in_use = list(self._in_use), set()
        for conn in [conn for conn, _since in idle] + in_use:
            self._discard(conn, _POOL_CLOSED)
        self._queue.drain()
        self._establishing.clear()
        if was_open:
            self._publish.pool_closed()

    # Check-out and check-in.

    def checkout(self, max_wait: float | None = None) -> _CheckedOut[C]:
        """``async with pool.checkout() as conn:`` check a connection out and always back in.

        ``max_wait`` (seconds) replaces ``waitQueueTimeoutMS`` for this check-out (the operation's
        remaining time, under client-side operation timeouts).
        """
        return _CheckedOut(self, max_wait)

    async def check_out(self, max_wait: float | None = None) -> C:
        """Check a connection out; give it back with :meth:`check_in`.

        Returns without suspending when an idle connection is available and nobody is waiting. Otherwise
        opens a new connection if ``maxPoolSize`` and ``maxConnecting`` allow, or waits in line.

        Raises :class:`~mongio.errors.WaitQueueTimeoutError` after ``max_wait`` (default:
        ``waitQueueTimeoutMS``) seconds of waiting, :class:`PoolClearedError` if the pool is paused or is
        cleared meanwhile, :class:`PoolClosedError` if it is closed, or the error that establishing a
        new connection failed with.
        """
        publish = self._publish
        # Asked once for the started and checked-out events, so a check-out publishes both or neither.
        observed = publish.enabled
        started = 0.0
        if observed:
            started = time.monotonic()
            publish.connection_check_out_started()
        if self._state is _READY and not self._queue.waiting and self._idle:
            conn = self._take_idle()
            if conn is not None:
                self._in_use.add(conn)
                if observed:
                    publish.connection_checked_out(conn.id, started)
                return conn
        if not observed:
            # Only a check-out that fails, opens a connection or waits needs its start time without events.
            started = time.monotonic()
        if self._state != PoolState.READY:
            raise self._refused(started)
        if not self._queue.waiting and self._may_open_another():
            self._pending += 1
            self._total += 1
            return await self._open_for_checkout(started)
        return await self._wait(started, max_wait, observed)

    def pin(self, conn: C, purpose: str) -> None:
        """Record that a cursor or a transaction (``purpose``: ``"cursor"`` or ``"transaction"``) holds the
        checked-out ``conn`` across commands (load-balanced mode); :meth:`check_in` forgets it."""
        if conn in self._in_use:
            self._pinned[conn] = purpose

    def check_in(self, conn: C) -> None:
        """Give a checked-out connection back. A connection that is closed or broken (its exchange was
        interrupted), stale, or returned to a closed pool is closed rather than reused. Never suspends."""
        try:
            self._in_use.remove(conn)
        except KeyError:
            if self._let_go:
                # The pool let go of every connection when its loop was found closed; this comes from a
                # coroutine of that loop that the garbage collector is closing.
                return
            raise InvalidOperation(
                f"connection {conn.id} is not checked out of the pool for {self._where}"
            ) from None
        if self._pinned:
            self._pinned.pop(conn, None)
        self._publish.connection_checked_in(conn.id)
        if conn.in_exchange:
            # The unread reply would be the next command's answer: this connection cannot be reused.
            conn.close("returned to the pool with a reply unread")
        if not self._release(conn) and self._queue.waiting:
            self._dispatch()  # closed, not handed over: its slot may go to a waiter

    async def _wait(self, started: float, max_wait: float | None, observed: bool) -> C:
        timeout = self._wait_timeout if max_wait is None else max_wait
        loop = running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self._queue.join(waiter)
        # Waiters ahead may be cancelled ones not yet gone, with capacity free behind them. With nothing free
        # (the usual reason to wait) there is nothing to hand out: the call is saved.
        if self._idle or self._may_open_another():
            self._dispatch()
        timer = None
        if timeout is not None:
            timer = loop.call_at(loop.time() + timeout - (time.monotonic() - started), self._expire, waiter)
        try:
            grant = await waiter
        except BaseException as exc:
            if not is_cancellation(exc):
                raise
            if timer is not None:
                timer.cancel()
            if waiter.done() and not waiter.cancelled():
                # Granted just before the cancellation arrived: the grant must not be lost.
                self._give_back(waiter.result())
            else:
                self._queue.leave(waiter)
            self._publish.connection_check_out_failed(_FAILED_CONN, started)
            raise
        if timer is not None:
            timer.cancel()

        if not isinstance(grant, _Grant) and self._state == PoolState.READY:
            conn: C = grant
            if observed:
                self._publish.connection_checked_out(conn.id, started)
            return conn
        if grant is _TIMED_OUT and timeout is not None:
            error = self._timeout_error(started, timeout)
            self._publish.connection_check_out_failed(_FAILED_TIMEOUT, started)
            raise error
        if isinstance(grant, _Grant) and grant is not _PERMIT:
            raise self._refused(started)
        if self._state != PoolState.READY:  # cleared or closed after the grant, before this task resumed
            self._give_back(grant)
            raise self._refused(started)
        return await self._open_for_checkout(started)  # the grant is _PERMIT

    async def _open_for_checkout(self, started: float) -> C:
        """Establish a connection in a slot already reserved (``_pending``/``_total``) and check it out."""
        conn = await self._establish(started)
        if self._state == PoolState.CLOSED:
            self._discard(conn, _POOL_CLOSED)
            raise self._refused(started)
        self._in_use.add(conn)
        self._publish.connection_checked_out(conn.id, started)
        if self._queue.waiting:
            self._dispatch()  # the pending slot is free again
        return conn

    # Establishing connections.

    async def _establish(self, checkout_started: float | None) -> C:
        """Create and establish one connection in a reserved slot. On failure the slot is released, the
        failure reported (``on_connect_error``, then the events) and the error raised."""
        connection_id = self._next_id
        self._next_id += 1
        generation = self._generation
        created = time.monotonic()
        self._publish.connection_created(connection_id)
        task = current_asyncio_task()
        if task is not None:
            record = _Establishing(task, None, task, generation)
        else:
            # On trio, whose tasks cannot be cancelled from outside, a cancel scope of its own.
            record = _Establishing(None, new_cancel_scope(), current_task(), generation)
        self._establishing.add(record)
        try:
            if task is not None:
                conn = await self._connect(connection_id, generation)
            else:
                conn = await self._connect_in_scope(record, connection_id, generation)
        except BaseException as exc:
            self._establishing.discard(record)
            self._pending -= 1
            self._total -= 1
            cause = record.interrupted_by
            if cause is not None and record.ended_by_interruption():
                error: BaseException = self._interrupted_error(cause)
                self._publish.connection_closed(connection_id, cause, error)
            else:
                cause = None
                error = exc
                if isinstance(exc, Exception):
                    self._report_connect_error(exc, generation)
                self._publish.connection_closed(connection_id, _ERROR, error)
            if checkout_started is not None:
                failed = _FAILED_CLOSED if cause == _POOL_CLOSED else _FAILED_CONN
                self._publish.connection_check_out_failed(failed, checkout_started, error)
                self._wake_background()
            if self._queue.waiting:
                self._dispatch()
            if error is exc:
                raise
            raise error from None

        self._establishing.discard(record)
        self._pending -= 1
        cause = record.interrupted_by
        if cause is not None:
            # The factory swallowed the interrupting cancellation (or it came too late) and finished anyway.
            if task is not None:
                task.uncancel()
            self._total -= 1
            conn.close(_CLOSE_TEXT[cause])
            error = self._interrupted_error(cause)
            self._publish.connection_closed(connection_id, cause, error)
            if checkout_started is not None:
                failed = _FAILED_CLOSED if cause == _POOL_CLOSED else _FAILED_CONN
                self._publish.connection_check_out_failed(failed, checkout_started, error)
            if self._queue.waiting:
                self._dispatch()
            raise error
        if self._load_balanced:
            entry = self._service_generations.setdefault(conn.service_id, [0, 0])
            conn.generation = entry[0]
            entry[1] += 1
        self._publish.connection_ready(connection_id, created)
        if self._total < self._min_size:
            self._wake_background()  # a maxConnecting slot is free for the filler again
        return conn

    async def _connect_in_scope(self, record: _Establishing, connection_id: int, generation: int) -> C:
        """``_connect`` inside the record's cancel scope (trio); an interruption raises the error its cause
        names."""
        assert record.scope is not None
        with record.scope:
            return await self._connect(connection_id, generation)
        assert record.interrupted_by is not None  # only an interruption cancels the scope
        raise self._interrupted_error(record.interrupted_by)

    def _report_connect_error(self, error: Exception, generation: int) -> None:
        if self._on_connect_error is None:
            return
        try:
            self._on_connect_error(error, generation)
        except Exception:
            _LOGGER.exception("the connection error handler of the pool for %s failed", self._where)

    def _interrupted_error(self, cause: str) -> PoolClearedError | PoolClosedError:
        """The error of a connection whose establishment a clear (``_STALE``) or a close interrupted."""
        if cause == _POOL_CLOSED:
            return PoolClosedError(
                f"Connection to {self._where} interrupted: the connection pool was closed", self.address
            )
        return PoolClearedError(
            f"Connection to {self._where} interrupted due to server monitor timeout", self.address
        )

    # Synchronous bookkeeping.

    def _perished(self, conn: C, idle_since: float | None) -> str | None:
        """Why ``conn`` may not be used any more, or ``None``: the pool's one test of a connection, run at
        every check-out and check-in. ``idle_since`` is when it became idle (``None``: it is in use).

        The usual case (open, of the pool's generation, no idle limit, not load-balanced) is answered by the
        first test alone, as cheaply as the test can be written."""
        if conn.generation == self._generation and self._plain and not conn.closed:
            return None
        if conn.closed:
            # Broken by an error of its own, which (not the pool clear the error may have caused) closes it;
            # unless a clear interrupted it.
            return _STALE if conn in self._interrupted else _ERROR
        if self._load_balanced:
            entry = self._service_generations.get(conn.service_id)
            current = entry[0] if entry is not None else 0
        else:
            current = self._generation
        if conn.generation != current:
            return _STALE
        # Written as _next_expiry computes it, so the background task never finds an expiry due that
        # this test does not see as expired.
        if (
            idle_since is not None
            and self._max_idle is not None
            and idle_since + self._max_idle <= time.monotonic()
        ):
            return _IDLE
        return None

    def _may_open_another(self) -> bool:
        """Whether ``maxPoolSize`` and ``maxConnecting`` leave room to open one more connection now."""
        return self._total < self._max_size and self._pending < self._max_connecting

    def _take_idle(self) -> C | None:
        """The most recently used idle connection that is still usable; perished ones met on the way are
        closed."""
        idle = self._idle
        while idle:
            conn, since = idle.pop()
            reason = self._perished(conn, since)
            if reason is None:
                if not conn.hung_up_while_idle():
                    return conn
                reason = _ERROR
            self._discard(conn, reason)
        return None

    def _release(self, conn: C) -> bool:
        """Hand a connection that is no longer in use to the oldest waiter, or put it back among the idle
        ones, or close it. True when a waiter got it.

        A waiter gets it straight away, as :meth:`_dispatch` would have given it after its short stay among
        the idle ones (it would be the most recent, so the first taken). Nothing else is left to serve then:
        every change that frees a connection or a slot dispatches at once, so while a task waits nothing is
        idle and no slot is free, and handing this connection over changes neither.
        """
        if self._state is _CLOSED_STATE:
            self._discard(conn, _POOL_CLOSED)
            return False
        reason = self._perished(conn, None)
        if reason is not None:
            self._discard(conn, reason)
            return False
        if self._queue.waiting and self._queue.serve_oldest(conn):
            self._in_use.add(conn)
            return True
        if self._max_idle is None:
            self._idle.append((conn, 0.0))
            return False
        self._idle.append((conn, time.monotonic()))
        if len(self._idle) == 1:
            self._wake_background()  # the expiry timer has something to watch again
        return False

    def _discard(self, conn: C, reason: str, error: BaseException | None = None) -> None:
        """Close a connection that counted toward the pool's total."""
        self._total -= 1
        self._interrupted.discard(conn)
        if self._load_balanced:
            entry = self._service_generations.get(conn.service_id)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._service_generations[conn.service_id]
        conn.close(_CLOSE_TEXT[reason])
        self._publish.connection_closed(conn.id, reason, error)
        if self._total < self._min_size:
            self._wake_background()

    def _prune_idle(self) -> None:
        """Close every idle connection that is stale, expired or broken."""
        if not self._idle:
            return
        keep: deque[tuple[C, float]] = deque()
        drop: list[tuple[C, str]] = []
        for conn, since in self._idle:
            reason = self._perished(conn, since if self._max_idle is not None else None)
            if reason is None:
                keep.append((conn, since))
            else:
                drop.append((conn, reason))
        self._idle = keep  # before closing anything, so the idle list is right even if a close() fails
        for conn, reason in drop:
            self._discard(conn, reason)

    def _dispatch(self) -> None:
        """Serve waiters in arrival order: an idle connection, else a slot to open one, while either is
        available."""
        queue = self._queue
        while queue.oldest() is not None:
            if self._idle:
                conn = self._take_idle()
                if conn is not None:
                    queue.serve_oldest(conn)
                    self._in_use.add(conn)
                    continue
            if self._may_open_another():
                queue.serve_oldest(_PERMIT)
                self._pending += 1
                self._total += 1
                continue
            return

    def _give_back(self, grant: Any) -> None:
        """Undo a grant whose waiter will not use it."""
        if grant is _PERMIT:
            self._pending -= 1
            self._total -= 1
            self._wake_background()
        elif not isinstance(grant, _Grant):
            self._in_use.discard(grant)
            self._release(grant)
        else:
            return
        if self._queue.waiting:
            self._dispatch()

    def _expire(self, waiter: asyncio.Future[Any]) -> None:
        if not waiter.done():
            self._queue.leave(waiter)
            waiter.set_result(_TIMED_OUT)

    def _fail_waiters(self, grant: _Grant) -> None:
        for waiter in self._queue.drain():
            waiter.set_result(grant)

    def _refused(self, started: float) -> MongioError:
        """The error for a check-out the pool's state refuses, its failure event published."""
        if self._state == PoolState.CLOSED:
            closed = PoolClosedError(
                f"Attempted to check out a connection from closed connection pool {self._where}", self.address
            )
            self._publish.connection_check_out_failed(_FAILED_CLOSED, started)
            return closed
        if self._clear_cause is not None:
            message = (
                f"Connection pool for {self._where} was cleared because another operation failed with: "
                f"{self._clear_cause}"
            )
        else:
            message = f"Connection pool for {self._where} is paused until its server is checked successfully"
        cleared = PoolClearedError(message, self.address)
        self._publish.connection_check_out_failed(_FAILED_CONN, started, cleared)
        return cleared

    def _timeout_error(self, started: float, timeout: float) -> WaitQueueTimeoutError:
        limit = (
            f"waitQueueTimeoutMS={timeout * 1000:g}"
            if timeout == self._wait_timeout
            else f"the operation's remaining timeout of {timeout * 1000:g} ms"
        )
        size = "unlimited" if self._max_size == sys.maxsize else str(self._max_size)
        message = (
            f"Timed out while checking out a connection from connection pool {self._where} after "
            f"{(time.monotonic() - started) * 1000:.0f} ms ({limit}); maxPoolSize={size}, "
            f"{len(self._in_use)} in use, {self._pending} being established, {self._queue.waiting} still waiting"
        )
        if self._load_balanced:
            message += ". " + self._in_use_by_purpose(size)
        return WaitQueueTimeoutError(message)

    def _in_use_by_purpose(self, size: str) -> str:
        """Who holds the connections in use, in the load balancer specification's words."""
        cursors = sum(1 for purpose in self._pinned.values() if purpose == "cursor")
        transactions = len(self._pinned) - cursors
        others = len(self._in_use) - len(self._pinned)
        return (
            f"Timeout waiting for connection from the connection pool. maxPoolSize: {size}, connections in use "
            f"by cursors: {cursors}, connections in use by transactions: {transactions}, connections in use by "
            f"other operations: {others}"
        )

    # The background task.

    def _start_background(self) -> None:
        if self._wake is None:
            self._wake = new_event()
        if self._background is None or self._background.done():
            # A fresh context: the task must not inherit the client-side timeout of the operation that
            # happened to start it.
            self._background = running_loop().create_task(
                self._run_background(self._wake),
                name=f"mongio pool {self._where}",
                context=contextvars.Context(),
            )
        self._wake.set()

    def _wake_background(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _next_expiry(self) -> float | None:
        """Seconds until the oldest idle connection expires, or ``None`` when nothing will."""
        if self._max_idle is None or not self._idle:
            return None
        return self._idle[0][1] + self._max_idle - time.monotonic()

    async def _run_background(self, wake: EventLike) -> None:
        while self._state != PoolState.CLOSED:
            delay = self._next_expiry()
            if delay is None:
                await wake.wait()
            elif delay > 0:
                try:
                    async with timeout(delay):
                        await wake.wait()
                except TimeoutError:
                    pass
            wake.clear()
            if self._state == PoolState.CLOSED:
                return
            try:
                self._prune_idle()
                if self._queue.waiting:
                    self._dispatch()
                await self._fill()
            except Exception:
                # A connection's close() or a listener failing must not end the pool's upkeep for good.
                _LOGGER.exception("the background task of the pool for %s failed a run", self._where)

    async def _fill(self) -> None:
        """Open connections one at a time until ``minPoolSize`` is met; stop at the first failure (the
        error handler pauses the pool, and the next ``ready()`` starts again)."""
        while (
            self._state == PoolState.READY
            and self._total < self._min_size
            and self._total < self._max_size
            and self._pending < self._max_connecting
        ):
            self._pending += 1
            self._total += 1
            try:
                conn = await self._establish(None)
            except Exception:
                return
            self._release(conn)
            if self._queue.waiting:
                self._dispatch()


class _CheckedOut(Generic[C]):
    """The ``async with`` form of check-out; the check-in on exit is synchronous, so it always completes."""

    __slots__ = ("_conn", "_max_wait", "_pool")

    def __init__(self, pool: Pool[C], max_wait: float | None) -> None:
        self._pool = pool
        self._max_wait = max_wait
        self._conn: C | None = None

    async def __aenter__(self) -> C:
        self._conn = await self._pool.check_out(self._max_wait)
        return self._conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.check_in(conn)
