"""Checks for code that runs one client on several event loops: every loop's unhandled errors are recorded
(a future whose exception was never retrieved, a callback that raised, a destroyed pending task), and the
warnings raised meanwhile (an unclosed socket's ResourceWarning, a coroutine never awaited) are collected
after a garbage collection, so a test can assert there were none."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from mongio.events import ConnectionPoolListener

T = TypeVar("T")


class LoopErrors:
    """The exception handler installed on every loop a test runs (thread-safe); ``messages`` is what they
    reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages: list[str] = []

    def handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        text = str(context.get("message", ""))
        exception = context.get("exception")
        if exception is not None:
            text += f": {type(exception).__name__}: {exception}"
        with self._lock:
            self.messages.append(text)

    def install(self) -> None:
        """Install the handler on the running loop."""
        asyncio.get_running_loop().set_exception_handler(self.handler)

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """``asyncio.run(main())`` on a new loop that reports to this recorder."""

        async def recorded() -> T:
            self.install()
            return await main()

        return asyncio.run(recorded())


@contextlib.contextmanager
def collected_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised in the block (``always``), including those of finalizers run by a final
    ``gc.collect()``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
        gc.collect()
        gc.collect()


def loop_problems(errors: LoopErrors, caught: list[warnings.WarningMessage]) -> list[str]:
    """What a test of several loops must not see: loop errors, ResourceWarnings and RuntimeWarnings (a
    coroutine never awaited)."""
    problems = list(errors.messages)
    for warning in caught:
        if issubclass(warning.category, (ResourceWarning, RuntimeWarning)):
            problems.append(f"{warning.category.__name__}: {warning.message}")
    return problems


class PoolEventCounts(ConnectionPoolListener):
    """Counts of the CMAP events that must balance once a client is closed (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def _count(self, event: Any) -> None:
        name = type(event).__name__
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1

    pool_created = pool_closed = connection_created = connection_closed = _count
    connection_checked_out = connection_checked_in = _count

    def count(self, name: str) -> int:
        return self.counts.get(name, 0)
