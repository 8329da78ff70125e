"""spec_runner.loop_thread.LoopThread: the asyncio loop in a thread of its own that the harness's proxies, the
stand-in query analyser and the tests' fakes entered from trio run on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import anyio
import pytest
from spec_runner.loop_thread import LoopThread


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    loop_thread = LoopThread("test loop thread", limit=5.0)
    yield loop_thread
    loop_thread.close()


def test_call_runs_in_the_loops_thread_and_hands_back_result_and_error(loop_thread: LoopThread) -> None:
    assert not loop_thread.is_current()
    assert loop_thread.call(lambda: (loop_thread.is_current(), threading.current_thread().name)) == (
        True,
        "test loop thread",
    )

    def fail() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        loop_thread.call(fail)


def test_run_blocking_runs_the_coroutine_on_the_threads_loop(loop_thread: LoopThread) -> None:
    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert loop_thread.run_blocking(where()) == "test loop thread"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_awaits_from_any_backend_and_its_cancellation_cancels_the_coroutine(backend: str) -> None:
    loop_thread = LoopThread("test loop thread", limit=5.0)
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def double(value: int) -> int:
        await asyncio.sleep(0)
        return 2 * value

    async def main() -> int:
        with anyio.move_on_after(0.2):
            await loop_thread.run(forever())
        return await loop_thread.run(double(21))

    try:
        assert anyio.run(main, backend=backend) == 42
        assert cancelled.wait(5)
    finally:
        loop_thread.close()


def test_close_ends_the_thread_and_may_be_repeated() -> None:
    loop_thread = LoopThread("test loop thread", limit=5.0)
    states = [loop_thread.running]
    loop_thread.close()
    states.append(loop_thread.running)
    loop_thread.close()
    assert states == [True, False]
