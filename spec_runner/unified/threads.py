"""Thread entities: each runs the operations ``runOnThread`` hands it, in order, beside the test's own task.

A thread is one asyncio task reading a queue (not a task per operation); ``join`` tells it no more operations
are coming, waits for it, and raises the first error any of its operations raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from spec_runner.unified.errors import MatchError

_STOP: Any = object()


class ThreadEntity:
    """A test runner "thread". ``run_operation`` is the coroutine function that runs one operation."""

    def __init__(self, name: str, run_operation: Callable[[Any], Awaitable[Any]]) -> None:
        self.name = name
        self._run_operation = run_operation
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._error: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._work(), name=f"unified-thread-{name}")

    async def _work(self) -> None:
        while True:
            operation = await self._queue.get()
            if operation is _STOP:
                return
            if self._error is not None:
                continue  # the thread already failed: later operations are not run
            try:
                await self._run_operation(operation)
            except Exception as exc:
                self._error = exc

    def schedule(self, operation: Any) -> None:
        """Queue ``operation``; it starts as soon as the thread's earlier operations are done."""
        if self._task.done():
            raise MatchError(f"thread {self.name}", "cannot run an operation on a thread that was joined")
        self._queue.put_nowait(operation)

    async def join(self, within: float = 10.0) -> None:
        """Stop after the queued operations; ``MatchError`` if they take longer than ``within`` seconds or one
        of them failed."""
        if not self._task.done():
            self._queue.put_nowait(_STOP)
        try:
            async with asyncio.timeout(within):
                await asyncio.shield(self._task)
        except TimeoutError:
            raise MatchError(
                f"waitForThread {self.name}", f"the thread did not finish within {within}s"
            ) from None
        if self._error is not None:
            raise MatchError(
                f"thread {self.name}", f"an operation failed: {type(self._error).__name__}: {self._error}"
            ) from self._error

    async def close(self) -> None:
        """Stop the thread at once (end of test); what it was running is cancelled."""
        if not self._task.done():
            self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            if not self._task.cancelled():
                raise
