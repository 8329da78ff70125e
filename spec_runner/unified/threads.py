"""Thread entities: each runs the operations ``runOnThread`` hands it, in order, beside the test's own task.

A thread is an ``OperationWorker``: one task reading a stream of operations (not a task per operation),
started in the task group the test owns (``thread_tasks``), so threads run the same way on asyncio and on
trio. ``join`` tells it no more operations are coming, waits for it, and raises the first error any of its
operations raised. The CMAP format's threads are workers too.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup

from spec_runner.unified.errors import MatchError


@asynccontextmanager
async def thread_tasks() -> AsyncIterator[TaskGroup]:
    """The task group a test's workers run in. Every worker is closed before the block ends and no worker
    raises, so an error leaving the block is the block's own: it is raised as it is, not inside the
    exception group a task group wraps it in."""
    try:
        async with anyio.create_task_group() as group:
            yield group
    except BaseExceptionGroup as errors:
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise


class WorkerFinished(Exception):
    """An operation was handed to a worker that was told no more were coming."""


class OperationWorker:
    """One task of ``tasks`` running the operations handed to it, in order, with ``run_operation``. It stops
    running them at the first error, which it keeps (``error``); it never raises into its task group."""

    def __init__(self, name: str, run_operation: Callable[[Any], Awaitable[Any]], tasks: TaskGroup) -> None:
        self.name = name
        self.error: Exception | None = None
        self._run_operation = run_operation
        self._send, self._receive = anyio.create_memory_object_stream[Any](math.inf)
        self._finished = anyio.Event()
        self._scope = anyio.CancelScope()
        tasks.start_soon(self._work, name=name)

    async def _work(self) -> None:
        try:
            with self._scope, self._receive:
                async for operation in self._receive:
                    if self.error is not None:
                        continue  # the worker already failed: later operations are not run
                    try:
                        await self._run_operation(operation)
                    except Exception as exc:
                        self.error = exc
        finally:
            self._finished.set()

    def schedule(self, operation: Any) -> None:
        """Queue ``operation``; it starts as soon as the earlier ones are done. ``WorkerFinished`` once
        ``finish`` or ``close`` was called."""
        try:
            self._send.send_nowait(operation)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise WorkerFinished(f"{self.name} takes no more operations") from None

    async def finish(self) -> None:
        """Take no more operations and wait until the queued ones are done (or skipped after an error)."""
        self._send.close()
        await self._finished.wait()

    async def close(self) -> None:
        """Stop at once; the operation running is cancelled."""
        self._send.close()
        self._scope.cancel()
        await self._finished.wait()


class ThreadEntity:
    """A test runner "thread". ``run_operation`` is the coroutine function that runs one operation."""

    def __init__(self, name: str, run_operation: Callable[[Any], Awaitable[Any]], tasks: TaskGroup) -> None:
        self.name = name
        self._worker = OperationWorker(f"unified-thread-{name}", run_operation, tasks)

    def schedule(self, operation: Any) -> None:
        """Queue ``operation``; it starts as soon as the thread's earlier operations are done."""
        try:
            self._worker.schedule(operation)
        except WorkerFinished:
            raise MatchError(f"thread {self.name}", "cannot run an operation on a thread that was joined") from None

    async def join(self, within: float = 10.0) -> None:
        """Stop after the queued operations; ``MatchError`` if they take longer than ``within`` seconds or one
        of them failed."""
        try:
            with anyio.fail_after(within):
                await self._worker.finish()
        except TimeoutError:
            raise MatchError(
                f"waitForThread {self.name}", f"the thread did not finish within {within}s"
            ) from None
        error = self._worker.error
        if error is not None:
            raise MatchError(f"thread {self.name}", f"an operation failed: {type(error).__name__}: {error}") from error

    async def close(self) -> None:
        """Stop the thread at once (end of test); what it was running is cancelled."""
        await self._worker.close()
