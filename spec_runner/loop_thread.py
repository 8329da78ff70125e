"""An asyncio event loop running in a thread of its own: the home of the test-side servers written for asyncio
(the cluster harness's proxies, the stand-in query analyser, the tests' fakes entered from trio), so they keep
serving whatever loop, backend or thread the code under test runs on, and a test blocked on the driver never
stalls them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio.to_thread

T = TypeVar("T")

# How long a caller waits for the loop to start, stop or finish one call before giving up.
DEFAULT_LIMIT = 30.0


class LoopThread:
    """An asyncio loop in a daemon thread named ``name``, running until :meth:`close`."""

    def __init__(self, name: str, limit: float = DEFAULT_LIMIT) -> None:
        self._loop = asyncio.new_event_loop()
        self._limit = limit
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the loop's thread still runs (False once closed)."""
        return self._thread.is_alive()

    def is_current(self) -> bool:
        """Whether the caller runs in the loop's thread."""
        return threading.current_thread() is self._thread

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """Call ``function(*args)`` in the loop's thread, between its callbacks, and return its result (from
        another thread: the caller blocks until then)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def in_loop() -> None:
            try:
                future.set_result(function(*args))
            except BaseException as error:  # handed to the caller
                future.set_exception(error)

        self._loop.call_soon_threadsafe(in_loop)
        return future.result(self._limit)

    def run_blocking(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and return its result, blocking the calling thread until then."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(self._limit)

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop; the calling task (on any backend) waits without blocking its own
        loop, and its cancellation cancels the coroutine."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        finally:
            future.cancel()  # a no-op once it finished

    def close(self) -> None:
        """Stop the loop, wait for its thread, and close the loop once the thread has ended."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self._limit)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()
