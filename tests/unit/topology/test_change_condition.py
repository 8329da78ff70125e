"""ChangeCondition: asyncio.Condition's interface and semantics, with waits that end in constant time."""

from __future__ import annotations

import asyncio

import pytest

from mongio.topology.change_condition import ChangeCondition


async def waiting(condition: ChangeCondition, woken: list[int], number: int) -> bool:
    async with condition:
        result = await condition.wait()
        assert condition.locked()  # the lock is held again when the wait returns
        woken.append(number)
        return result


async def test_notify_wakes_the_longest_waiting_first_and_notify_all_the_rest() -> None:
    condition = ChangeCondition()
    woken: list[int] = []
    tasks = [asyncio.create_task(waiting(condition, woken, number)) for number in range(5)]
    await asyncio.sleep(0)
    assert "waiters:5" in repr(condition) and "unlocked" in repr(condition)
    async with condition:
        condition.notify()
    await asyncio.sleep(0)
    assert woken == [0]
    async with condition:
        condition.notify(2)
    await asyncio.sleep(0)
    assert woken == [0, 1, 2]
    async with condition:
        condition.notify_all()
    assert await asyncio.gather(*tasks) == [True] * 5
    assert woken == [0, 1, 2, 3, 4]
    assert "waiters:0" in repr(condition)


async def test_waiters_cancelled_newest_first_leave_and_the_others_still_wake() -> None:
    condition = ChangeCondition()
    woken: list[int] = []
    tasks = [asyncio.create_task(waiting(condition, woken, number)) for number in range(200)]
    await asyncio.sleep(0)
    leaving = tasks[1::2]
    for task in reversed(leaving):
        task.cancel()
    for task in leaving:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not condition.locked()  # every cancelled wait took the lock back and its ``async with`` let it go
    assert "waiters:100" in repr(condition)
    async with condition:
        condition.notify(1)
    await asyncio.sleep(0)
    assert woken == [0]
    async with condition:
        condition.notify_all()
    await asyncio.gather(*tasks[::2])
    assert woken == list(range(0, 200, 2))


async def test_a_wait_cancelled_while_taking_the_lock_back_ends_holding_it() -> None:
    condition = ChangeCondition()
    woken: list[int] = []
    task = asyncio.create_task(waiting(condition, woken, 1))
    await asyncio.sleep(0)
    async with condition:
        condition.notify_all()
        await asyncio.sleep(0)  # the waiter is woken and now waits for the lock this task holds
        task.cancel()
        await asyncio.sleep(0)
        assert not task.done()  # it cannot end before it holds the lock again
    # Its ``async with`` released a lock it held: no RuntimeError, the cancellation is what it raises.
    with pytest.raises(asyncio.CancelledError):
        await task
    assert woken == [] and not condition.locked()


async def test_wait_for_waits_until_the_predicate_holds() -> None:
    condition = ChangeCondition()
    state = {"value": 0}

    async def wait_for_three() -> int:
        async with condition:
            await condition.wait_for(lambda: state["value"] >= 3)
            return state["value"]

    task = asyncio.create_task(wait_for_three())
    for value in (1, 2, 3):
        await asyncio.sleep(0)
        async with condition:
            state["value"] = value
            condition.notify_all()
    assert await task == 3


async def test_wait_and_notify_need_the_lock() -> None:
    condition = ChangeCondition()
    with pytest.raises(RuntimeError, match="un-acquired lock"):
        await condition.wait()
    with pytest.raises(RuntimeError, match="un-acquired lock"):
        condition.notify()
    with pytest.raises(RuntimeError, match="un-acquired lock"):
        condition.notify_all()
    assert isinstance(condition, asyncio.Condition)


async def test_a_wait_bounded_by_a_timeout_ends_and_leaves_no_waiter() -> None:
    condition = ChangeCondition()
    async with condition:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await condition.wait()
        assert condition.locked()
    assert "waiters:0" in repr(condition) and not condition.locked()
