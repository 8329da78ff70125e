"""WaitQueue: fair (oldest first) and cancellation-safe waiting, shared by the pool and the change condition."""

from __future__ import annotations

import asyncio

from mongio.loop_runtime.wait_queue import WaitQueue


def _futures(loop: asyncio.AbstractEventLoop, count: int) -> list[asyncio.Future[str]]:
    return [loop.create_future() for _ in range(count)]


async def test_the_oldest_waiter_still_waiting_is_served_first() -> None:
    queue: WaitQueue[str] = WaitQueue()
    first, second, third, fourth = _futures(asyncio.get_running_loop(), 4)
    for waiter in (first, second, third, fourth):
        queue.join(waiter)
    queue.leave(first)
    second.cancel()  # its task is leaving the queue, and has not yet
    assert queue.waiting == 3
    assert queue.oldest() is third
    assert queue.serve_oldest("a connection")
    assert third.result() == "a connection" and queue.waiting == 2
    assert list(queue) == [fourth]  # the cancelled one is passed over, the served one gone
    assert queue.drain() == [fourth]
    assert queue.waiting == 0 and queue.oldest() is None and not queue.serve_oldest("nothing")


async def test_waiters_leaving_newest_first_keep_the_queue_bounded_by_those_still_waiting() -> None:
    queue: WaitQueue[str] = WaitQueue()
    waiters = _futures(asyncio.get_running_loop(), 3000)
    for waiter in waiters:
        queue.join(waiter)
    staying = waiters[::3]
    for waiter in reversed([waiter for index, waiter in enumerate(waiters) if index % 3]):
        queue.leave(waiter)
    assert queue.waiting == len(staying) == 1000
    # The entries of waiters that left are dropped in bulk once they outnumber the others.
    assert len(queue._order) <= 2 * len(staying) + 32
    assert list(queue) == staying
    served = []
    while queue.oldest() is not None:
        served.append(queue.oldest())
        queue.serve_oldest("served")
    assert served == staying
