"""What a client keeps on one event loop, so that one client object works on any loop, and what decides
to let go of a loop that will never run again.

A :class:`~mongio.client.MongoClient` is loop-free: its options, its server session pool, its cluster time
and its last topology description can be used from anywhere. What asyncio ties to a loop (connections and
their pools, the monitor and round trip time tasks, SRV polling, the topology's condition, the cursor reaper's
task) lives in one :class:`LoopRuntime` per loop, made on the first operation there; a client keeps its
runtimes in a :class:`LoopRuntimes`.

Each runtime owns a *keeper* task. When the loop shuts down the way ``asyncio.run()`` (or any
``asyncio.Runner``) does, by cancelling the tasks still pending, the keeper's cancellation closes the
runtime while the loop can still run the closing: pools and monitoring connections are closed properly and
the queued cursor kills are sent. A loop closed without that, or a loop inherited from the parent by a forked
child, strands its runtime: the next use of the client (or its ``close()``) lets go of it with
:meth:`LoopRuntime.let_go`, which lets go of the loop's connections (their sockets closed directly), then of
the topology and the cursor reaper, and schedules nothing on the loop. No other object asks whether its loop
can still run: each exposes :meth:`~mongio.loop_runtime.bound.LoopBound.let_go` and is told.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from mongio.backend import ForeignLoop, LockLike, gather, new_lock, running_loop
from mongio.cursor_reaper import CursorReaper, KillCursors
from mongio.loop_runtime.background_closings import finish_background_closings
from mongio.loop_runtime.bound import loop_gone
from mongio.loop_runtime.fork import renew_in_forked_children
from mongio.loop_runtime.sockets import let_go_of_loop

if TYPE_CHECKING:
    from mongio.topology.topology import Topology

__all__ = ["EndSessions", "LoopRuntime", "LoopRuntimes", "cancel_from_anywhere"]

EndSessions = Callable[["Topology"], Awaitable[None]]
"""``end_sessions(topology)``: send ``endSessions`` for the client's pooled server sessions."""


_log = logging.getLogger("mongio.client")

# How long a runtime closing because its loop shuts down spends killing queued cursors.
_SHUTDOWN_FLUSH_TIMEOUT = 1.0


class LoopRuntime:
    """One client's topology (monitors, round trip time tasks, pools, SRV polling) and cursor reaper on one
    event loop, with the keeper task that closes them when the loop shuts down (see the module docstring).

    ``on_released(runtime)`` is told once the runtime closed, however it closed, so the client forgets it.
    All methods but :meth:`let_go`, :meth:`close_from` and the properties run on ``loop``.
    """

    __slots__ = (
        "_keeper",
        "_on_released",
        "_open_lock",
        "_pid",
        "_released",
        "_stop",
        "cursor_reaper",
        "loop",
        "topology",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        kill_cursors: KillCursors,
        on_released: Callable[[LoopRuntime], None],
    ) -> None:
        self.loop = loop
        self._pid = os.getpid()
        self.topology: Topology | None = None
        self.cursor_reaper = CursorReaper(kill_cursors)
        self.cursor_reaper.bind(loop)
        self._on_released = on_released
        self._open_lock: LockLike | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._stop: asyncio.Future[None] | None = None
        self._released = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("open" if self.topology is not None else "opening")
        return f"<LoopRuntime {state} on {self.loop!r}>"

    @property
    def stranded(self) -> bool:
        """The runtime's loop can never run its tasks here: it is closed, or this process is a child forked
        from the one the runtime was made in (the loop, even one that was running then, is the parent's)."""
        return loop_gone(self.loop, self._pid)

    @property
    def running(self) -> bool:
        """The runtime's loop runs now (in some thread of this process), so it can run a closing."""
        return not self.stranded and self.loop.is_running()

    @property
    def idle(self) -> bool:
        """The runtime's loop is open but runs nowhere now: it can still run a closing, if someone runs it."""
        return not self.stranded and not self.loop.is_running()

    @property
    def closed(self) -> bool:
        """True once the runtime closed (or its loop was found closed)."""
        return self._released or (self.topology is not None and self.topology.closed)

    async def open(self, make_topology: Callable[[], Awaitable[Topology]]) -> Topology:
        """The runtime's topology, made with ``make_topology`` and opened by the first caller (others wait)."""
        topology = self.topology
        if topology is not None:
            return topology
        if self._open_lock is None:
            self._open_lock = new_lock()
        async with self._open_lock:
            if self.topology is None:
                topology = await make_topology()
                await topology.open()
                self.topology = topology
                self._start_keeper()
            return self.topology

    def _start_keeper(self) -> None:
        if isinstance(self.loop, ForeignLoop):
            # A trio run cancels no task of ours when it ends; its loop runs the closing then instead.
            self.loop.on_shutdown(self._close_at_run_end)
            return
        self._stop = self.loop.create_future()
        # A fresh context: the keeper must not inherit the deadline or session of the first operation.
        self._keeper = self.loop.create_task(
            self._keep(self._stop), name="mongio loop runtime", context=contextvars.Context()
        )

    async def _keep(self, stop: asyncio.Future[None]) -> None:
        try:
            await stop
        except asyncio.CancelledError:
            # The loop is shutting down (asyncio.run cancels what is still pending): close while it still
            # runs. The cancellation is taken as handled, so the closing's own waits are not cut short.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await self._close(_SHUTDOWN_FLUSH_TIMEOUT, None)

    async def _close_at_run_end(self) -> None:
        await self._close(_SHUTDOWN_FLUSH_TIMEOUT, None)

    def close_from(
        self, caller: asyncio.AbstractEventLoop | None, flush_timeout: float, end_sessions: EndSessions | None
    ) -> Awaitable[None] | None:
        """Close the runtime from the ``caller``'s loop (``None``: no loop runs in the calling thread), the
        way its own loop allows: on the caller's loop, :meth:`close`; on another thread's running loop,
        :meth:`close_threadsafe` (awaitable from ``caller``); a stranded runtime is let go of at once
        (:meth:`let_go`). A loop that is open but not running (:attr:`idle`) is run until the runtime closed
        when no loop runs in the calling thread (Motor's ``client.close()`` between ``run_until_complete``
        calls, before ``loop.close()``), so that nothing of it is left pending; from another running loop it
        cannot be run, and closes its runtime when it shuts down. Returns what ``caller`` is to await, if
        anything."""
        if self.stranded:
            self.let_go()
            return None
        if self.loop is caller:
            return self.close(flush_timeout, end_sessions)
        if self.loop.is_running():
            closing = self.close_threadsafe(flush_timeout, end_sessions)
            return None if caller is None else asyncio.wrap_future(closing, loop=caller)
        if caller is None:
            run_on_idle_loop(self.loop, self.close(flush_timeout, end_sessions))
        return None

    async def close(self, flush_timeout: float, end_sessions: EndSessions | None = None) -> None:
        """Close on the runtime's own loop: send the queued cursor kills (for at most ``flush_timeout``
        seconds), then ``end_sessions(topology)`` when given, then stop every task and close every connection
        (operations still running on one fail). Raises nothing but a cancellation: a step that fails (on
        something a server sent, say) is logged at debug level and the next one runs."""
        stop, keeper = self._stop, self._keeper
        if stop is not None and not stop.done():
            stop.set_result(None)
        if isinstance(self.loop, ForeignLoop):
            self.loop.forget_shutdown(self._close_at_run_end)
        await self._close(flush_timeout, end_sessions)
        if keeper is not None and keeper is not asyncio.current_task():
            await keeper

    async def _close(self, flush_timeout: float, end_sessions: EndSessions | None) -> None:
        topology = self.topology
        try:
            await _quietly("killing the abandoned cursors", self.cursor_reaper.close(flush_timeout))
            if end_sessions is not None and topology is not None:
                await _quietly("ending the server sessions", end_sessions(topology))
        finally:
            if topology is not None:
                await _quietly("closing the topology", topology.close())
            self._release()

    def close_threadsafe(
        self, flush_timeout: float, end_sessions: EndSessions | None = None
    ) -> concurrent.futures.Future[None]:
        """:meth:`close` from another thread while the runtime's loop runs there; returns the closing's
        future."""
        return asyncio.run_coroutine_threadsafe(self.close(flush_timeout, end_sessions), self.loop)

    def let_go(self) -> None:
        """Let go of a stranded runtime (see :attr:`stranded`), from anywhere: every connection of the loop
        first (their sockets closed directly, those still opening included, other clients' too: none of them
        can be used again), so that the topology, its pools and its monitors then find them ended and touch
        nothing of the loop; then the topology and the cursor reaper, whose tasks are forgotten. Nothing is
        scheduled on the loop."""
        let_go_of_loop(self.loop)
        if self.topology is not None:
            self.topology.let_go()
        self.cursor_reaper.let_go()
        self._keeper = self._stop = None
        self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._on_released(self)


async def _quietly(step: str, closing: Awaitable[None]) -> None:
    """Await one step of closing; an error is logged at debug level with the exception (so a bug stays
    traceable) rather than raised, so the steps after it still run. A cancellation goes through."""
    try:
        await closing
    except Exception as exc:
        _log.debug("%s failed while closing the client: %s: %s", step, type(exc).__name__, exc, exc_info=exc)


class LoopRuntimes:
    """A client's runtimes, one per event loop it was used on; safe to use from any thread.

    Stranded runtimes are let go of when the client next makes a runtime, and by :meth:`close_all`.
    ``kill_cursors`` is what each runtime's cursor reaper sends.
    """

    __slots__ = ("__weakref__", "_by_loop", "_kill_cursors", "_last", "_lock")

    def __init__(self, kill_cursors: KillCursors) -> None:
        self._kill_cursors = kill_cursors
        # The runtime used last (the fast path), and every live one by loop (changed under the lock only).
        self._last: LoopRuntime | None = None
        self._by_loop: dict[asyncio.AbstractEventLoop, LoopRuntime] = {}
        self._lock = threading.Lock()
        renew_in_forked_children(self)

    def __len__(self) -> int:
        return len(self._by_loop)

    def renew_after_fork(self) -> None:
        """In the child of a fork: the lock may have been held by a thread of the parent, which the child
        does not have."""
        self._lock = threading.Lock()

    def for_loop(self, loop: asyncio.AbstractEventLoop) -> LoopRuntime:
        """The runtime of ``loop``, made when it has none (or it closed); stranded runtimes are let go of
        first."""
        runtime = self._last
        if runtime is not None and runtime.loop is loop and not runtime.closed:
            return runtime
        runtime = self._by_loop.get(loop)
        if runtime is None or runtime.closed:
            with self._lock:
                stranded = [other for other in self._by_loop.values() if other.stranded]
                for other in stranded:
                    del self._by_loop[other.loop]
                runtime = self._by_loop.get(loop)
                if runtime is None or runtime.closed:
                    runtime = LoopRuntime(loop, self._kill_cursors, self._forget)
                    self._by_loop[loop] = runtime
            for other in stranded:
                other.let_go()
        self._last = runtime
        return runtime

    @property
    def last(self) -> LoopRuntime | None:
        """The runtime used last, on whichever loop."""
        return self._last

    def current(self) -> LoopRuntime | None:
        """The running loop's runtime, else the one used last; from any thread, a finalizer included."""
        try:
            loop = running_loop()
        except RuntimeError:
            return self._last
        return self._by_loop.get(loop) or self._last

    def close_all(
        self, caller: asyncio.AbstractEventLoop | None, flush_timeout: float, end_sessions: EndSessions
    ) -> tuple[list[Awaitable[None]], bool]:
        """Close every runtime from the ``caller``'s loop (see :meth:`LoopRuntime.close_from`). Returns what
        ``caller`` is to await, and whether one of the runtimes sends ``endSessions``: the caller's, else one
        on another thread's running loop, or (when ``caller`` is None) one on an idle loop run for the closing
        (stranded runtimes cannot)."""
        with self._lock:
            runtimes = list(self._by_loop.values())
        senders = [runtime for runtime in runtimes if runtime.running]
        if caller is None:
            # No loop runs here: idle loops are run until their runtime closed (see LoopRuntime.close_from).
            senders += [runtime for runtime in runtimes if runtime.idle]
        sender = next((runtime for runtime in senders if runtime.loop is caller), None) or next(iter(senders), None)
        closings: list[Awaitable[None]] = []
        for runtime in runtimes:
            closing = runtime.close_from(caller, flush_timeout, end_sessions if runtime is sender else None)
            if closing is not None:
                closings.append(closing)
        return closings, sender is not None

    def let_go_of_stranded(self) -> None:
        """Let go of every runtime whose loop can never run again (see :meth:`LoopRuntime.let_go`)."""
        with self._lock:
            stranded = [runtime for runtime in self._by_loop.values() if runtime.stranded]
        for runtime in stranded:
            runtime.let_go()

    def _forget(self, runtime: LoopRuntime) -> None:
        with self._lock:
            if self._by_loop.get(runtime.loop) is runtime:
                del self._by_loop[runtime.loop]


def cancel_from_anywhere(
    task: asyncio.Task[Any], caller: asyncio.AbstractEventLoop | None
) -> Awaitable[None] | None:
    """Cancel ``task`` from the ``caller``'s loop (``None``: no loop runs in the calling thread): directly
    on its own loop (returns what ``caller`` awaits for it to end), through its loop from another thread,
    and not at all when its loop will never run again (the task is only forgotten)."""
    task_loop = task.get_loop()
    if task_loop is caller:
        task.cancel()
        return _ended(task)
    if loop_gone(task_loop):
        return None
    if caller is None and not task_loop.is_running():
        # Its loop is idle and none runs here: run it until the task ended (see LoopRuntime.close_from).
        task.cancel()
        if run_on_idle_loop(task_loop, _ended(task)):
            return None
    task_loop.call_soon_threadsafe(task.cancel)
    return None


def run_on_idle_loop(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, None]) -> bool:
    """Run ``loop`` (open, running nowhere) from this thread, where no loop runs, until ``work`` is done, and
    the closings left in the background there (see :mod:`~mongio.loop_runtime.background_closings`). Returns False, with ``work`` closed unrun, when the loop started running in another thread meanwhile
    (asyncio refuses to run it twice)."""
    if loop.is_running():
        work.close()
        return False
    run = _then_background_closings(work)
    try:
        loop.run_until_complete(run)
    except RuntimeError:
        if loop.is_running():
            run.close()
            work.close()
            return False
        raise
    return True


async def _then_background_closings(work: Coroutine[Any, Any, None]) -> None:
    """``work``, then the loop's closings left in the background (close() without await): the loop is run
    now, maybe for the last time."""
    await work
    await finish_background_closings()


async def _ended(task: asyncio.Task[Any]) -> None:
    """Wait for ``task`` to end, whatever its outcome (it was cancelled; its errors are its own to log)."""
    await gather(task)
