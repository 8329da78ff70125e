"""What a client keeps on one event loop, so that one client object works on any loop.

A :class:`~mongio.client.MongoClient` is loop-free: its options, its server session pool, its cluster time
and its last topology description can be used from anywhere. What asyncio ties to a loop (connections and
their pools, the monitor and round trip time tasks, SRV polling, the topology's condition, the cursor reaper's
task) lives in one :class:`LoopRuntime` per loop, made on the first operation there.

Each runtime owns a *keeper* task. When the loop shuts down the way ``asyncio.run()`` (or any
``asyncio.Runner``) does, by cancelling the tasks still pending, the keeper's cancellation closes the
runtime while the loop can still run the closing: pools and monitoring connections are closed properly and
the queued cursor kills are sent. A loop closed without that leaves its runtime behind; the client then lets
go of it with :meth:`LoopRuntime.close_on_closed_loop`, which closes the sockets directly and schedules
nothing on the closed loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import os
from collections.abc import Awaitable, Callable

from mongio.connection.loop_sockets import close_sockets_of_closed_loop
from mongio.cursor_reaper import CursorReaper, KillCursors
from mongio.event_loops import loop_gone
from mongio.topology.topology import Topology

__all__ = ["LoopRuntime"]

_log = logging.getLogger("mongio.client")

# How long a runtime closing because its loop shuts down spends killing queued cursors.
_SHUTDOWN_FLUSH_TIMEOUT = 1.0


class LoopRuntime:
    """One client's topology (monitors, round trip time tasks, pools, SRV polling) and cursor reaper on one
    event loop, with the keeper task that closes them when the loop shuts down (see the module docstring).

    ``on_released(runtime)`` is told once the runtime closed, however it closed, so the client forgets it.
    All methods but :meth:`close_on_closed_loop` and :meth:`close_threadsafe` run on ``loop``.
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
        self._open_lock: asyncio.Lock | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._stop: asyncio.Future[None] | None = None
        self._released = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("open" if self.topology is not None else "opening")
        return f"<LoopRuntime {state} on {self.loop!r}>"

    def loop_gone(self) -> bool:
        """The runtime's loop can never run its tasks here: it is closed, or this process is a child forked
        from the one the runtime was made in (the loop, even one that was running then, is the parent's)."""
        return loop_gone(self.loop, self._pid)

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
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self.topology is None:
                topology = await make_topology()
                await topology.open()
                self.topology = topology
                self._start_keeper()
            return self.topology

    def _start_keeper(self) -> None:
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

    async def close(
        self, flush_timeout: float, end_sessions: Callable[[Topology], Awaitable[None]] | None = None
    ) -> None:
        """Close on the runtime's own loop: send the queued cursor kills (for at most ``flush_timeout``
        seconds), then ``end_sessions(topology)`` when given, then stop every task and close every connection
        (operations still running on one fail). Raises nothing but a cancellation: a step that fails (on
        something a server sent, say) is logged at debug level and the next one runs."""
        stop, keeper = self._stop, self._keeper
        if stop is not None and not stop.done():
            stop.set_result(None)
        await self._close(flush_timeout, end_sessions)
        if keeper is not None and keeper is not asyncio.current_task():
            await keeper

    async def _close(
        self, flush_timeout: float, end_sessions: Callable[[Topology], Awaitable[None]] | None
    ) -> None:
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
        self, flush_timeout: float, end_sessions: Callable[[Topology], Awaitable[None]] | None = None
    ) -> concurrent.futures.Future[None]:
        """:meth:`close` from another thread while the runtime's loop runs there; returns the closing's
        future."""
        return asyncio.run_coroutine_threadsafe(self.close(flush_timeout, end_sessions), self.loop)

    def close_on_closed_loop(self) -> None:
        """Let go of a runtime whose loop is gone (see :meth:`loop_gone`), from anywhere: sockets are closed
        directly, tasks are forgotten (the loop can no longer run them), and nothing is scheduled on the
        loop."""
        if self.topology is not None:
            self.topology.close_on_closed_loop()
        # The connections still opening, which no pool or monitor holds yet (those of other clients too: none
        # of them can be used again).
        close_sockets_of_closed_loop(self.loop)
        self.cursor_reaper.forget()
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
