"""The pool under many concurrent tasks: the size limit, fairness, and cancellation at random points."""

from __future__ import annotations

import asyncio
import random

import pytest

from mongio.connection.pool import Pool
from tests.support.fake_pool import FakeConnection, FakeFactory, make_pool


def assert_consistent(pool: Pool[FakeConnection], factory: FakeFactory) -> None:
    assert pool.total_connection_count == (
        pool.available_connection_count + pool.in_use_connection_count + pool.pending_connection_count
    )
    # Every connection the factory made is either counted by the pool or closed.
    assert factory.open == pool.available_connection_count + pool.in_use_connection_count


async def test_500_tasks_on_10_connections_are_served_in_arrival_order() -> None:
    factory = FakeFactory()
    pool = make_pool(factory, max_pool_size=10, wait_queue_timeout=30)
    warm = [await pool.check_out() for _ in range(10)]
    for conn in warm:
        pool.check_in(conn)
    rng = random.Random(1)
    arrived: list[int] = []
    served: list[int] = []
    most_in_use = 0

    async def worker(number: int) -> None:
        nonlocal most_in_use
        arrived.append(number)
        async with pool.checkout() as conn:
            served.append(number)
            most_in_use = max(most_in_use, pool.in_use_connection_count)
            assert pool.total_connection_count <= 10
            await conn.command(rng.random() * 0.002)

    tasks = []
    for number in range(500):
        tasks.append(asyncio.create_task(worker(number)))
        if number % 50 == 0:
            await asyncio.sleep(0)  # let some start while others are still arriving
    await asyncio.gather(*tasks)
    assert len(served) == 500
    assert (
        served == arrived
    )  # no connection was created after warm-up: every hand-off went to the oldest waiter
    assert most_in_use == 10
    assert factory.max_open == 10 and len(factory.made) == 10
    assert pool.in_use_connection_count == 0 and pool.available_connection_count == 10
    assert_consistent(pool, factory)
    await pool.close()
    assert factory.open == 0


async def test_500_tasks_on_a_cold_pool_never_open_more_than_10_connections() -> None:
    rng = random.Random(2)
    factory = FakeFactory(delay=lambda: rng.random() * 0.003)
    pool = make_pool(factory, max_pool_size=10, max_connecting=4, wait_queue_timeout=30)

    async def worker() -> None:
        async with pool.checkout() as conn:
            assert pool.total_connection_count <= 10
            await conn.command(rng.random() * 0.002)

    await asyncio.gather(*(worker() for _ in range(500)))
    assert factory.max_open <= 10
    assert factory.max_establishing <= 4
    assert pool.in_use_connection_count == 0 and pool.wait_queue_length == 0
    assert_consistent(pool, factory)
    await pool.close()


@pytest.mark.parametrize("seed", [3, 4])
async def test_cancelling_1000_tasks_at_random_points_loses_no_connection(seed: int) -> None:
    rng = random.Random(seed)
    factory = FakeFactory(delay=lambda: rng.random() * 0.004)
    pool = make_pool(factory, max_pool_size=10, max_connecting=3, wait_queue_timeout=30)
    loop = asyncio.get_running_loop()
    outcomes = {"done": 0, "cancelled": 0}
    cancelled_in = {"waiting": 0, "using": 0}
    # Each task is spared, cancelled at its first wait (queued for a connection, or while one is being made
    # for it: only the first tasks find the pool below its size), cancelled while using its connection, or
    # cancelled by a timer at a random moment. The first three are decided here, not by the clock, so a
    # slow machine changes only which timer cancellations land where.
    kinds = [rng.choice(("spare", "spare", "wait", "use", "timer")) for _ in range(1000)]

    async def worker(kind: str) -> None:
        holding = False
        try:
            async with pool.checkout() as conn:
                holding = True
                if kind == "use":
                    current = asyncio.current_task()
                    assert current is not None
                    current.cancel()  # interrupts the command below
                await conn.command(rng.random() * 0.004)
        except asyncio.CancelledError:
            outcomes["cancelled"] += 1
            cancelled_in["using" if holding else "waiting"] += 1
            raise
        outcomes["done"] += 1

    tasks = []
    for kind in kinds:
        task = asyncio.create_task(worker(kind))
        tasks.append(task)
        if kind == "wait":
            loop.call_soon(task.cancel)  # runs after the task's first step, which waits in checkout()
        elif kind == "timer":
            loop.call_later(rng.random() * 0.2, task.cancel)
    await asyncio.gather(*tasks, return_exceptions=True)
    assert outcomes["done"] + outcomes["cancelled"] == 1000
    assert outcomes["done"] >= kinds.count("spare")
    assert outcomes["cancelled"] >= kinds.count("wait") + kinds.count("use")
    assert cancelled_in["using"] >= kinds.count("use") > 100
    assert cancelled_in["waiting"] >= kinds.count("wait") - 10 > 100, cancelled_in
    assert pool.in_use_connection_count == 0
    assert pool.pending_connection_count == 0
    assert pool.wait_queue_length == 0
    assert factory.max_open <= 10
    assert_consistent(pool, factory)

    # Still serving, at full size.
    async def ping() -> int:
        async with pool.checkout() as conn:
            await conn.command(0.001)
            return conn.id

    ids = await asyncio.gather(*(ping() for _ in range(50)))
    assert len(set(ids)) <= 10
    assert_consistent(pool, factory)
    await pool.close()
    assert factory.open == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}
