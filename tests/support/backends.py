"""Running tests on more than one backend: which tests run only on asyncio, and why (under ``pytest --backend
trio`` they are skipped with the reason), and where the tests' asyncio servers run when the test runs on trio
(:class:`AsyncioServer`: on an asyncio loop in a thread of their own). Which tasks are running is
``spec_runner.task_census``'s (the soak uses it too).

A test is listed in ``ASYNCIO_ONLY`` when what it checks is asyncio's own machinery (the loop's call_later, a
Task's cancel(), the loop's exception handler, closing or replacing an event loop, uvloop) or a library that runs
only on asyncio (aiohttp), so it has no trio counterpart as written; the behaviour itself is covered on trio by the
tests written for both backends. Entries are node id prefixes (a module, or one test of it).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import anyio
import sniffio
from spec_runner.loop_thread import LoopThread

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="AsyncioServer")

# The aiohttp example's tests: aiohttp runs only on asyncio.
AIOHTTP = "aiohttp runs only on asyncio (on trio: the FastAPI example, test_examples_trio.py and the FastAPI tests here)"

ASYNCIO_ONLY: dict[str, str] = {
    "tests/integration/api/test_event_loops.py": "one client on successive asyncio loops, a loop per thread and "
    "pytest-asyncio's loops (a client on asyncio then trio then asyncio: tests/integration/api/test_client_trio.py)",
    "tests/integration/server/test_connection_stress.py": "tasks cancelled through Task.cancel() and the loop's "
    "call_later (on trio: the cancellation storm, test_pool_cancellation_storm.py)",
    "tests/integration/server/test_pool_cancellation.py": "the pool's waiters cancelled through Task.cancel() and "
    "the loop's call_later (on trio: the cancellation storm, test_pool_cancellation_storm.py)",
    "tests/integration/api/test_examples.py::test_aiohttp_app_serves_the_books_api_and_closes_its_client": AIOHTTP,
    "tests/integration/api/test_examples.py::test_aiohttp_app_rejects_a_body_that_is_not_json": AIOHTTP,
    "tests/integration/api/test_gridfs.py::test_a_cancelled_upload_leaves_no_chunks": "the upload's task "
    "cancelled through Task.cancel() (on trio: test_an_upload_cut_by_a_cancel_scope_leaves_no_chunks)",
    "tests/integration/api/test_tracing.py::test_cancelled_operation_ends_its_spans_with_the_cancellation": "the "
    "operation's task cancelled through Task.cancel() (on trio: "
    "test_an_operation_cut_by_a_cancel_scope_ends_its_spans_with_the_cancellation)",
}


def asyncio_only_reason(nodeid: str) -> str | None:
    """Why the test ``nodeid`` runs only on asyncio (``None``: it runs on every backend)."""
    for prefix, reason in ASYNCIO_ONLY.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return reason
    return None


def on_asyncio() -> bool:
    """Whether the calling task runs on asyncio (pytest-asyncio's loop, or anyio's asyncio backend)."""
    return sniffio.current_async_library() == "asyncio"


class AsyncioServer:
    """Base of the tests' asyncio servers (``start()``/``stop()`` coroutines). Entered with ``async with`` from
    asyncio, the server runs in the test's own loop, exactly as it always did; entered from trio, it runs on a
    :class:`~spec_runner.loop_thread.LoopThread` of its own, and the methods marked :func:`served` /
    :func:`served_sync` reach it there."""

    _server_loop: LoopThread | None = None

    async def start(self) -> Self:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        if on_asyncio():
            return await self.start()
        server_loop = LoopThread("asyncio test server")
        try:
            await server_loop.run(self.start())
        except BaseException:
            server_loop.close()
            raise
        self._server_loop = server_loop
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        server_loop = self._server_loop
        if server_loop is None:
            await self.stop()
            return
        try:
            with anyio.CancelScope(shield=True):
                await server_loop.run(self.stop())
        finally:
            self._server_loop = None
            server_loop.close()


def served(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """Mark a coroutine method of an :class:`AsyncioServer` that a test awaits: it runs on the server's loop."""

    async def on_server_loop(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        server_loop = self._server_loop
        if server_loop is None or server_loop.is_current():
            return await method(self, *args, **kwargs)
        return await server_loop.run(method(self, *args, **kwargs))

    functools.update_wrapper(on_server_loop, method)
    return on_server_loop


def served_sync(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """Mark a method of an :class:`AsyncioServer` that touches its loop's objects (streams, events): called
    from another thread, it runs in the server loop's thread."""

    def on_server_loop(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        server_loop = self._server_loop
        if server_loop is None or server_loop.is_current():
            return method(self, *args, **kwargs)
        return server_loop.call(functools.partial(method, self, *args, **kwargs))

    functools.update_wrapper(on_server_loop, method)
    return on_server_loop


async def gather_outcomes(*awaitables: Awaitable[T]) -> list[T | Exception]:
    """Await every one of ``awaitables`` at once, each in a task of a task group, and return their results or
    the exceptions they raised, in order: ``asyncio.gather(..., return_exceptions=True)`` on any backend."""
    outcomes: list[T | Exception] = [RuntimeError("not awaited")] * len(awaitables)

    async def outcome(index: int, awaitable: Awaitable[T]) -> None:
        try:
            outcomes[index] = await awaitable
        except Exception as error:  # the outcome of this one
            outcomes[index] = error

    async with anyio.create_task_group() as group:
        for index, awaitable in enumerate(awaitables):
            group.start_soon(outcome, index, awaitable)
    return outcomes
