"""Killing the server cursors of cursors that were dropped while still open.

A :class:`~mongio.cursor.Cursor` that is garbage-collected (or whose task was cancelled mid-fetch) while the
server still holds its results cannot await anything: a finalizer may run at any point of any task, or in
another thread. It hands the cursor id to the client's :class:`CursorReaper` instead, which queues it and wakes
one background task on the client's event loop; that task sends ``killCursors`` for everything queued, one
command per server and namespace. The task is started at the first abandoned cursor, sleeps on an event
between wake-ups (no polling), and is stopped by the client's ``close()``, which sends what is still queued.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mongio.backend import EventLike, current_asyncio_task, new_event, timeout

__all__ = ["CursorReaper"]

_log = logging.getLogger(__name__)

KillCursors = Callable[[Any, str, Sequence[int]], Awaitable[None]]
"""Sends ``killCursors`` for cursor ids of one namespace (``"db.coll"``) to one server address."""


class CursorReaper:
    """The queue of abandoned server cursors and the one task that kills them (see the module docstring)."""

    def __init__(self, kill_cursors: KillCursors) -> None:
        self._kill_cursors = kill_cursors
        self._pending: collections.deque[tuple[Any, str, int]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: EventLike | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Use ``loop`` (the client's) for the task; called when the client starts."""
        self._loop = loop

    @property
    def pending(self) -> int:
        """Cursors queued and not yet killed."""
        return len(self._pending)

    def abandon(self, address: Any, namespace: str, cursor_id: int) -> None:
        """Queue a server cursor to kill. Safe from a finalizer, from any thread, and without a running loop
        (when the client's loop is gone the server's idle timeout reclaims the cursor)."""
        loop = self._loop
        if self._closed or loop is None or not cursor_id or address is None:
            return
        self._pending.append((address, namespace, cursor_id))
        try:
            # An empty context: the task must not inherit the deadline or session of whatever code happened
            # to drop the cursor.
            loop.call_soon_threadsafe(self._wake, context=contextvars.Context())
        except RuntimeError:  # the loop is closed
            pass

    def _wake(self) -> None:
        if self._closed or self._loop is None:
            return
        if self._wakeup is None:
            self._wakeup = new_event()
        if self._task is None:
            self._task = self._loop.create_task(
                self._run(), name="mongio-cursor-reaper", context=contextvars.Context()
            )
        self._wakeup.set()

    async def _run(self) -> None:
        wakeup = self._wakeup
        assert wakeup is not None
        while not self._closed:
            await wakeup.wait()
            wakeup.clear()
            await self.flush()

    async def flush(self) -> None:
        """Kill every queued cursor now: one ``killCursors`` per server and namespace. Errors are logged and
        dropped (the server reclaims idle cursors itself)."""
        while self._pending:
            groups: dict[tuple[Any, str], list[int]] = {}
            while self._pending:
                address, namespace, cursor_id = self._pending.popleft()
                groups.setdefault((address, namespace), []).append(cursor_id)
            for (address, namespace), cursor_ids in groups.items():
                try:
                    await self._kill_cursors(address, namespace, cursor_ids)
                except Exception as exc:
                    # Whatever the server sent (or failed to send): the closing and the task carry on.
                    _log.debug(
                        "killCursors for abandoned cursors %s on %s failed: %s: %s",
                        cursor_ids,
                        address,
                        type(exc).__name__,
                        exc,
                        exc_info=exc,
                    )

    def let_go(self) -> None:
        """Stop for good without sending anything: the loop will never run the task again (see
        :class:`~mongio.loop_runtime.bound.LoopBound`)."""
        self._closed = True
        self._pending.clear()
        self._task = self._wakeup = None
        self._loop = None

    async def close(self, flush_timeout: float) -> None:
        """Send what is still queued, taking at most ``flush_timeout`` seconds, and stop the task. Cursors
        abandoned afterwards are left to the server."""
        self._closed = True
        task, self._task = self._task, None
        try:
            async with timeout(flush_timeout):
                if task is not None:
                    # Let the task finish what it is sending and take the rest; it stops once closed.
                    assert self._wakeup is not None
                    self._wakeup.set()
                    await asyncio.shield(task)
                await self.flush()
        except TimeoutError:
            pass
        finally:
            self._pending.clear()
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    current = current_asyncio_task()
                    if current is not None and current.cancelling():
                        raise  # close() itself is being cancelled
