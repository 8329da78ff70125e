"""``mongio.backend.to_thread_abandoning``: a blocking function of the user's run in a worker thread, given up on
when the caller is cancelled, and what it returns then handed to ``discard`` (a socket closed), on asyncio and on
trio; whichever of the worker and the caller comes second gets the result, so it is never lost nor kept twice.
And ``mongio.backend.is_async_callable``, which decides whether a user's callback is awaited or sent to a thread."""

from __future__ import annotations

import threading

import anyio
import pytest

from mongio import backend


async def test_the_result_reaches_the_caller_and_nothing_is_discarded() -> None:
    discarded: list[str] = []
    assert await backend.to_thread_abandoning(lambda: "socket", discarded.append) == "socket"
    assert discarded == []


async def test_an_exception_of_the_function_reaches_the_caller() -> None:
    def fails() -> str:
        raise LookupError("no route")

    with pytest.raises(LookupError, match="no route"):
        await backend.to_thread_abandoning(fails, lambda result: None)


async def test_a_cancelled_caller_returns_at_once_and_the_late_result_is_discarded() -> None:
    release, started, discarded_event = threading.Event(), threading.Event(), threading.Event()
    discarded: list[str] = []

    def blocks() -> str:
        started.set()
        release.wait(30)
        return "late socket"

    def discard(result: str) -> None:
        discarded.append(result)
        discarded_event.set()

    with anyio.move_on_after(0.2) as scope:
        await backend.to_thread_abandoning(blocks, discard)
    assert scope.cancelled_caught and started.is_set() and not release.is_set()
    assert discarded == []  # still running
    release.set()
    assert await anyio.to_thread.run_sync(discarded_event.wait, 30)
    assert discarded == ["late socket"]


def test_a_result_that_arrived_just_before_the_caller_gave_up_is_discarded_by_the_caller() -> None:
    discarded: list[str] = []
    handoff = backend._Handoff(lambda: "socket", discarded.append)
    handoff.run()  # the worker finished; then the caller's cancellation arrives before it took the result
    handoff.abandon()
    assert discarded == ["socket"]


class _AsyncCallable:
    async def __call__(self) -> str:
        return "awaited"


class _PlainCallable:
    def __call__(self) -> str:
        return "in a thread"


async def _coroutine_function() -> None:
    return None


def test_a_users_callback_is_awaited_only_when_calling_it_gives_a_coroutine() -> None:
    """How the seam's callers (credential providers, KMS connect callbacks, GridFS stream functions) choose
    between awaiting a callback and running it in a worker thread."""
    assert backend.is_async_callable(_coroutine_function)
    assert backend.is_async_callable(_AsyncCallable())
    assert backend.is_async_callable(_AsyncCallable().__call__)
    assert not backend.is_async_callable(_PlainCallable())
    assert not backend.is_async_callable(lambda: None)
    assert not backend.is_async_callable(print)
