"""An event loop whose clock is virtual: timers fire at once when nothing else can happen, sockets stay real.

``VirtualClockLoop`` is a selector event loop whose ``time()`` starts at the real ``time.monotonic()`` and moves
only when the loop would otherwise sit idle: when no callback is ready and no file descriptor (a loopback
socket, the self-pipe a thread wakes the loop through) is ready within a moment of real time, the clock jumps
to the earliest timer and that timer runs. So ``await asyncio.sleep(30)``, ``asyncio.timeout``, a heartbeat
interval or ``waitQueueTimeoutMS`` cost no real time, while every exchange on real sockets still completes
before the clock moves: a loopback write is readable at the other end as soon as it was sent, so peers on the
same loop look infinitely fast. While a thread started with ``run_in_executor`` (``asyncio.to_thread``,
``getaddrinfo``) is working the loop waits for it in real time, so the clock cannot run past work it cannot
see. Peers must therefore run on the same loop, not on a loop of their own in another thread.

``on_virtual_clock`` turns an ``async def`` test into a plain test that runs on a fresh ``VirtualClockLoop``,
with ``time.monotonic`` reading the loop's clock meanwhile (the pool and server descriptions read that clock,
the monitors read ``loop.time()``: both must move together). A test that keeps the loop busy without end never
lets the clock move, so it is failed after ``REAL_SECONDS_LIMIT`` seconds of real time instead of hanging::

    @on_virtual_clock
    async def test_idle_connections_expire() -> None:
        ...
        await asyncio.sleep(60)  # returns at once, 60 virtual seconds later
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import selectors
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Executor
from typing import Any, ParamSpec, TypeVar, TypeVarTuple
from unittest import mock

__all__ = ["VirtualClockLoop", "on_virtual_clock", "run_on_virtual_clock"]

P = ParamSpec("P")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")

REAL_SECONDS_LIMIT = 60.0
"""Real time a test on the virtual clock may take before it is failed: a driver that keeps the loop busy
forever (retrying at once, without a timer) would otherwise hang the test instead of timing it out."""

SETTLE_SECONDS = 0.001
"""Real time a loop with nothing to do still watches its sockets before it moves the clock: a margin for a
loopback packet the kernel has not delivered yet (it usually has, the moment it was sent)."""


class _IdleAdvancingSelector(selectors.BaseSelector):
    """The loop's selector: a real selector underneath, with a wait for a timer replaced by a clock jump."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """``timeout`` is None (no timer: wait for a socket or a thread in real time), 0 (callbacks are ready:
        just poll) or the virtual seconds to the next timer (poll; when idle, jump the clock there)."""
        if timeout is None or timeout <= 0:
            return self._real.select(timeout)
        if self._loop.threads_working:
            events = self._real.select(timeout)
        else:
            events = self._real.select(SETTLE_SECONDS)
        if not events:
            self._loop.advance(timeout)
        return events


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a virtual clock (see the module documentation)."""

    def __init__(self) -> None:
        self._now = time.monotonic()
        self._threads_working = 0
        super().__init__(_IdleAdvancingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (timers now due run on the loop's next iteration)."""
        if seconds < 0:
            raise ValueError(f"the clock cannot go back ({seconds} s)")
        self._now += seconds

    @property
    def threads_working(self) -> int:
        """Calls handed to an executor that have not finished yet."""
        return self._threads_working

    def run_in_executor(
        self, executor: Executor | None, func: Callable[[*Ts], T], *args: *Ts
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self._threads_working += 1
        future.add_done_callback(self._thread_finished)
        return future

    def _thread_finished(self, future: asyncio.Future[Any]) -> None:
        self._threads_working -= 1


@contextlib.contextmanager
def virtual_monotonic(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """``time.monotonic()`` reads ``loop.time()`` inside the block."""
    with mock.patch("time.monotonic", loop.time):
        yield


def run_on_virtual_clock(main: Coroutine[Any, Any, T], real_seconds_limit: float = REAL_SECONDS_LIMIT) -> T:
    """Run ``main`` on a new ``VirtualClockLoop``, ``time.monotonic`` patched to its clock; fail it if it
    takes more than ``real_seconds_limit`` of real time."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner, virtual_monotonic(runner.get_loop()):
        return runner.run(_within_real_time(main, real_seconds_limit))


async def _within_real_time(main: Coroutine[Any, Any, T], limit: float) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        loop.call_soon_threadsafe(task.cancel)

    watchdog = threading.Timer(limit, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        return await main
    except asyncio.CancelledError:
        if expired.is_set():
            raise AssertionError(
                f"still running after {limit} s of real time: the virtual clock moves only when the loop is "
                "idle, and something kept it busy (a loop that never waits for a timer?)"
            ) from None
        raise
    finally:
        watchdog.cancel()


def on_virtual_clock(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """Run an ``async def`` test with ``run_on_virtual_clock``."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        run_on_virtual_clock(test(*args, **kwargs))

    return run
