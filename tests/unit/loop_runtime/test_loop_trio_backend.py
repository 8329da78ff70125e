"""The trio side of the backend seam without a server: the loop façade's futures, timers and tasks, the
event, the lock, the time limits, the wait queue and the topology's change condition on trio, and the
asyncio side choosing asyncio's own primitives.

Each test drives its own trio run (the suite's asyncio plugin runs ``async def`` tests on asyncio).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from typing import Any

import pytest
import trio
import trio.testing

from mongio import backend
from mongio.backend.trio_loop import TrioFuture, TrioLoop, TrioTask
from mongio.loop_runtime.wait_queue import WaitQueue
from mongio.topology.change_condition import ChangeCondition


def test_import_mongio_loads_neither_trio_nor_anyio() -> None:
    code = (
        "import sys, mongio, mongio.backend; print(sorted({'trio', 'anyio', 'sniffio'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_outside_any_run_there_is_no_loop() -> None:
    with pytest.raises(RuntimeError, match="no running event loop"):
        backend.running_loop()


def test_on_asyncio_the_seam_is_asyncio_itself() -> None:
    async def body() -> list[Any]:
        loop = backend.running_loop()
        return [
            loop is asyncio.get_running_loop(),
            type(backend.new_event()),
            type(backend.new_lock()),
            backend.current_task() is asyncio.current_task(),
        ]

    assert asyncio.run(body()) == [True, asyncio.Event, asyncio.Lock, True]


def test_one_loop_per_trio_run() -> None:
    async def body() -> tuple[Any, Any]:
        first = backend.running_loop()
        return first, backend.running_loop()

    first, again = trio.run(body)
    other, _ = trio.run(body)
    assert isinstance(first, TrioLoop)
    assert first is again
    assert other is not first
    assert first.is_closed() and other.is_closed()


def test_futures_timers_and_callbacks() -> None:
    async def body() -> list[Any]:
        loop = backend.running_loop()
        seen: list[Any] = []
        future = loop.create_future()
        assert isinstance(future, TrioFuture)
        loop.call_later(0.02, seen.append, "late")
        loop.call_later(0.01, seen.append, "early")
        cancelled = loop.call_later(0.005, seen.append, "cancelled")
        cancelled.cancel()
        loop.call_soon(seen.append, "soon")
        loop.call_later(0.03, future.set_result, "resolved")
        seen.append(await future)
        return seen

    assert trio.run(body) == ["soon", "early", "late", "resolved"]


def test_a_trio_cancellation_cancels_the_awaited_future() -> None:
    async def body() -> tuple[bool, bool]:
        loop = backend.running_loop()
        future = loop.create_future()
        with trio.move_on_after(0.01) as scope:
            await future
        return scope.cancelled_caught, future.cancelled()

    assert trio.run(body) == (True, True)


def test_a_future_resolved_before_the_cancellation_arrives_delivers_its_result() -> None:
    async def body() -> list[Any]:
        loop = backend.running_loop()
        future = loop.create_future()
        outcome: list[Any] = []

        async def waiter(scope: Any) -> None:
            with scope:
                outcome.append(await future)
                await trio.lowlevel.checkpoint()
                outcome.append("not reached: the cancellation comes at the next checkpoint")

        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, scope)
            await trio.testing.wait_all_tasks_blocked()
            future.set_result("handed over")
            scope.cancel()  # after the result, before the waiter resumed
        return [*outcome, scope.cancelled_caught]

    assert trio.run(body) == ["handed over", True]


def test_tasks_run_finish_fail_and_cancel_without_raising_into_the_run() -> None:
    async def body() -> list[Any]:
        loop = backend.running_loop()

        async def value() -> int:
            await trio.lowlevel.checkpoint()
            return 7

        async def failing() -> None:
            await trio.lowlevel.checkpoint()
            raise ValueError("inside the task")

        async def forever() -> None:
            await trio.sleep_forever()

        done = loop.create_task(value(), name="value")
        failed = loop.create_task(failing())
        stopped = loop.create_task(forever())
        assert isinstance(done, TrioTask)
        await trio.sleep(0.01)
        assert stopped.cancel()
        results = await backend.gather(done, failed, stopped)
        return [results[0], type(results[1]), type(results[2]), stopped.cancelled(), done.get_name()]

    assert trio.run(body) == [7, ValueError, asyncio.CancelledError, True, "value"]


def test_timeouts_raise_timeout_error_and_trio_cancellation_is_recognised() -> None:
    async def body() -> list[Any]:
        seen: list[Any] = []
        loop = backend.running_loop()
        start = loop.time()
        try:
            async with backend.timeout(0.02):
                await trio.sleep_forever()
        except TimeoutError:
            seen.append(loop.time() - start >= 0.02)
        async with backend.timeout(None):
            await backend.sleep(0)
        try:
            async with backend.timeout_at(loop.time() - 1):
                await trio.lowlevel.checkpoint()
        except TimeoutError:
            seen.append("expired already")
        with trio.move_on_after(0):
            try:
                await trio.sleep(1)
            except BaseException as exc:
                seen.append(backend.is_cancellation(exc))
                raise
        return seen

    assert trio.run(body) == [True, "expired already", True]


def test_event_set_clear_and_wait() -> None:
    async def body() -> list[Any]:
        event = backend.new_event()
        seen: list[Any] = []

        async def waiter() -> None:
            seen.append(await event.wait())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            nursery.start_soon(waiter)
            await trio.sleep(0.01)
            assert seen == []
            event.set()
        event.clear()
        with trio.move_on_after(0.01) as scope:
            await event.wait()
        return [*seen, event.is_set(), scope.cancelled_caught]

    assert trio.run(body) == [True, True, False, True]


def test_the_lock_is_fair_and_never_lost_to_a_cancellation() -> None:
    async def body() -> list[Any]:
        lock = backend.new_lock()
        order: list[str] = []

        async def take(name: str, scope: Any) -> None:
            with scope:
                async with lock:
                    order.append(name)
                    await trio.lowlevel.checkpoint()

        await lock.acquire()
        scopes = {name: trio.CancelScope() for name in "abc"}
        async with trio.open_nursery() as nursery:
            for name in "abc":
                nursery.start_soon(take, name, scopes[name])
                await trio.testing.wait_all_tasks_blocked()
            scopes["b"].cancel()  # b leaves the queue
            lock.release()  # hands over to a
        return [*order, lock.locked()]

    assert trio.run(body) == ["a", "c", False]


def test_wait_queue_on_trio_futures() -> None:
    async def body() -> list[Any]:
        loop = backend.running_loop()
        queue: WaitQueue[str] = WaitQueue()
        got: list[Any] = []

        async def wait(name: str, waiter: Any, scope: Any) -> None:
            with scope:
                try:
                    got.append((name, await waiter))
                finally:
                    queue.leave(waiter)

        scopes = [trio.CancelScope() for _ in range(3)]
        async with trio.open_nursery() as nursery:
            for index, scope in enumerate(scopes):
                waiter = loop.create_future()
                queue.join(waiter)  # here: trio starts the tasks in no set order
                nursery.start_soon(wait, f"w{index}", waiter, scope)
            await trio.sleep(0.01)
            scopes[0].cancel()
            await trio.sleep(0.01)
            assert queue.serve_oldest("first grant")
            assert queue.serve_oldest("second grant")
            assert not queue.serve_oldest("nobody left")
        return [*sorted(got), queue.waiting]  # trio resumes the two in no set order

    assert trio.run(body) == [("w1", "first grant"), ("w2", "second grant"), 0]


def test_change_condition_on_trio() -> None:
    async def body() -> list[Any]:
        condition = ChangeCondition()
        woken: list[str] = []

        async def wait(name: str, scope: Any) -> None:
            with scope:
                async with condition:
                    await condition.wait()
                    woken.append(name)

        cancelled = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "a", trio.CancelScope())
            nursery.start_soon(wait, "b", cancelled)
            nursery.start_soon(wait, "c", trio.CancelScope())
            await trio.sleep(0.01)
            async with condition:
                cancelled.cancel()  # b is cancelled while the lock is held: it takes the lock back first
                await trio.sleep(0.01)
                condition.notify_all()
        return [*sorted(woken), condition.locked()]

    assert trio.run(body) == ["a", "c", False]


def test_a_refused_byte_stream_fails_with_the_same_error_on_both_runtimes() -> None:
    """The HTTP client's streams (KMS, OCSP, cloud credential endpoints) report a refused connection as
    ``ConnectionRefusedError`` on trio too, not as trio's summary of its attempts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once the probe closes

    async def body() -> str:
        try:
            await backend.open_byte_stream("127.0.0.1", port, None, None)
        except OSError as exc:
            return type(exc).__name__
        return "connected"

    assert [asyncio.run(body()), trio.run(body)] == ["ConnectionRefusedError", "ConnectionRefusedError"]
