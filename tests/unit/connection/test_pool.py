"""The connection pool without a server: check-out and check-in rules, waiting, clearing, closing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from mongio.connection.pool import Pool, PoolClearedError, PoolClosedError, PoolState
from mongio.errors import InvalidOperation, WaitQueueTimeoutError
from tests.support.fake_pool import ADDRESS, FakeConnection, FakeFactory, Recorder, make_pool
from tests.support.virtual_clock import on_virtual_clock


def is_closed(conn: Any) -> bool:
    """The connection's state now (read through a call: the checker would keep an earlier narrowing)."""
    return bool(conn.closed)


def check_out_now(pool: Pool[FakeConnection]) -> FakeConnection:
    """Run check_out() without an event loop turn: fails if it would have suspended."""
    coro = pool.check_out()
    try:
        coro.send(None)
    except StopIteration as done:
        conn: FakeConnection = done.value
        return conn
    coro.close()
    raise AssertionError("check_out() suspended")


@on_virtual_clock
async def test_a_new_pool_is_paused_and_refuses_checkouts() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder, ready=False)
    assert pool.state == PoolState.PAUSED
    with pytest.raises(PoolClearedError, match=r"db\.example\.com:27017"):
        await pool.check_out()
    failed = recorder.of("ConnectionCheckOutFailedEvent")
    assert [event.reason for event in failed] == ["connectionError"]
    pool.ready()
    pool.ready()  # a second ready() is a no-op
    assert recorder.types().count("PoolReadyEvent") == 1
    conn = await pool.check_out()
    pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_check_out_of_an_idle_connection_does_not_suspend() -> None:
    pool = make_pool()
    first = await pool.check_out()
    pool.check_in(first)
    again = check_out_now(pool)
    assert again is first
    pool.check_in(again)
    async with pool.checkout() as conn:
        assert conn is first
        assert pool.in_use_connection_count == 1
    assert pool.in_use_connection_count == 0
    await pool.close()


@on_virtual_clock
async def test_idle_connections_are_reused_last_in_first_out() -> None:
    pool = make_pool()
    conns = [await pool.check_out() for _ in range(3)]
    for conn in conns:
        pool.check_in(conn)
    assert check_out_now(pool) is conns[2]
    assert check_out_now(pool) is conns[1]
    await pool.close()


@on_virtual_clock
async def test_stale_connections_are_closed_at_check_in_and_check_out() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    idle, busy = await pool.check_out(), await pool.check_out()
    pool.check_in(idle)
    pool.clear()
    assert pool.state == PoolState.PAUSED and pool.generation == 1
    # The idle one is closed by the clear itself, the busy one when it comes back.
    assert idle.closed and not busy.closed
    pool.check_in(busy)
    assert is_closed(busy)
    closed = recorder.of("ConnectionClosedEvent")
    assert [(event.connection_id, event.reason) for event in closed] == [
        (idle.id, "stale"),
        (busy.id, "stale"),
    ]
    pool.ready()
    fresh = await pool.check_out()
    assert fresh.generation == 1 and fresh not in (idle, busy)
    assert factory.open == pool.total_connection_count == 1
    pool.check_in(fresh)
    await pool.close()


@on_virtual_clock
async def test_idle_expired_connection_is_closed_at_check_out() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder, max_idle_time_seconds=0.01, background_task=False)
    conn = await pool.check_out()
    pool.check_in(conn)
    await asyncio.sleep(0.009)
    assert check_out_now(pool) is conn  # idle for less than maxIdleTimeMS: reused
    pool.check_in(conn)
    await asyncio.sleep(0.011)
    other = await pool.check_out()
    assert other is not conn and conn.closed
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["idle"]
    pool.check_in(other)
    await pool.close()


@on_virtual_clock
async def test_a_connection_the_peer_closed_while_idle_is_closed_at_check_out_and_not_handed_out() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    kept, broken = await pool.check_out(), await pool.check_out()
    pool.check_in(kept)
    pool.check_in(broken)  # the most recently used: the next check-out's first candidate
    # As the protocol marks a connection whose peer went away.
    broken.close("the server closed the connection")
    assert check_out_now(pool) is kept
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error"]
    assert pool.total_connection_count == 1
    pool.check_in(kept)
    await pool.close()


@on_virtual_clock
async def test_an_idle_connection_is_asked_whether_its_peer_hung_up_before_it_is_handed_out() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    kept, broken = await pool.check_out(), await pool.check_out()
    pool.check_in(kept)
    pool.check_in(broken)
    # A pull-based stream (trio) reads nothing while idle: the hang-up is found only when the pool asks.
    broken.peer_hung_up = True
    assert not is_closed(broken)
    assert check_out_now(pool) is kept
    assert is_closed(broken)
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error"]
    assert pool.total_connection_count == factory.open == 1
    pool.check_in(kept)
    await pool.close()


@on_virtual_clock
async def test_a_connection_broken_while_in_use_is_closed_at_check_in_and_not_reused() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    conn = await pool.check_out()
    task = asyncio.create_task(conn.command(10))
    await asyncio.sleep(0)
    task.cancel()  # the command is interrupted mid-exchange: the connection closes itself
    with pytest.raises(asyncio.CancelledError):
        await task
    pool.check_in(conn)
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error"]
    assert pool.total_connection_count == 0 and factory.open == 0
    again = await pool.check_out()
    assert again is not conn
    pool.check_in(again)
    await pool.close()


@on_virtual_clock
async def test_a_connection_returned_with_a_reply_unread_is_closed_not_reused() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    conn = await pool.check_out()
    conn.in_exchange = True  # a request went out and nobody read its reply
    pool.check_in(conn)
    assert conn.closed and conn.close_reason == "returned to the pool with a reply unread"
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error"]
    again = await pool.check_out()
    assert again is not conn
    pool.check_in(again)
    assert not again.closed  # an ordinary check-in keeps the connection
    await pool.close()


@on_virtual_clock
async def test_checking_in_a_connection_the_pool_did_not_hand_out_raises() -> None:
    pool = make_pool()
    conn = await pool.check_out()
    pool.check_in(conn)
    with pytest.raises(InvalidOperation, match="not checked out"):
        pool.check_in(conn)
    other = make_pool()
    foreign = await other.check_out()
    with pytest.raises(InvalidOperation):
        pool.check_in(foreign)
    other.check_in(foreign)
    await pool.close()
    await other.close()


@on_virtual_clock
async def test_a_pool_let_go_of_with_its_closed_loop_takes_late_check_ins_quietly() -> None:
    # A task of the closed loop, closed later by the garbage collector, gives back what it had checked out.
    pool = make_pool()
    conn = await pool.check_out()
    pool.let_go()
    assert is_closed(conn)
    pool.check_in(conn)
    assert pool.total_connection_count == 0 and pool.in_use_connection_count == 0


@on_virtual_clock
async def test_wait_queue_timeout_names_the_pool_and_the_limit() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder, max_pool_size=1, wait_queue_timeout=0.05)
    held = await pool.check_out()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(WaitQueueTimeoutError) as caught:
        await pool.check_out()
    assert loop.time() - started == pytest.approx(0.05)  # the clock is virtual: exactly waitQueueTimeoutMS
    message = str(caught.value)
    assert message.startswith(
        "Timed out while checking out a connection from connection pool db.example.com:27017"
    )
    assert "waitQueueTimeoutMS=50" in message and "maxPoolSize=1" in message and "1 in use" in message
    assert caught.value.timeout
    assert pool.wait_queue_length == 0
    failed = recorder.of("ConnectionCheckOutFailedEvent")
    assert [event.reason for event in failed] == ["timeout"]
    assert failed[0].duration == pytest.approx(0.05)
    # An explicit limit (the operation's remaining time) replaces waitQueueTimeoutMS.
    started = loop.time()
    with pytest.raises(WaitQueueTimeoutError, match="remaining timeout of 20 ms"):
        await pool.check_out(max_wait=0.02)
    assert loop.time() - started == pytest.approx(0.02)
    pool.check_in(held)
    await pool.close()


@on_virtual_clock
async def test_clear_fails_waiters_at_once_and_close_fails_later_ones() -> None:
    pool = make_pool(max_pool_size=1, wait_queue_timeout=30)
    held = await pool.check_out()
    waiters = [asyncio.create_task(pool.check_out()) for _ in range(3)]
    await asyncio.sleep(0)
    assert pool.wait_queue_length == 3
    pool.clear(error=ConnectionResetError("boom"))
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(result, PoolClearedError) for result in results)
    assert "another operation failed with: boom" in str(results[0])
    pool.ready()
    waiter = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0)
    await pool.close()
    with pytest.raises(PoolClosedError, match=r"closed connection pool db\.example\.com:27017"):
        await waiter
    with pytest.raises(PoolClosedError):
        await pool.check_out()
    pool.check_in(held)
    assert held.closed


@on_virtual_clock
async def test_close_closes_idle_connections_and_later_check_ins() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    idle, busy = await pool.check_out(), await pool.check_out()
    pool.check_in(idle)
    await pool.close()
    assert idle.closed and not busy.closed
    pool.check_in(busy)
    assert is_closed(busy) and factory.open == 0
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["poolClosed", "poolClosed"]
    pool.ready()  # a closed pool stays closed
    assert pool.state == PoolState.CLOSED


@on_virtual_clock
async def test_max_connecting_limits_concurrent_establishment() -> None:
    factory = FakeFactory(delay=0.01)
    pool = make_pool(factory, max_pool_size=20, max_connecting=3)
    conns = await asyncio.gather(*(pool.check_out() for _ in range(12)))
    assert factory.max_establishing == 3
    assert len({conn.id for conn in conns}) == 12
    for conn in conns:
        pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_connection_ids_follow_creation_order() -> None:
    pool = make_pool()
    conns = [await pool.check_out() for _ in range(4)]
    assert [conn.id for conn in conns] == [1, 2, 3, 4]
    for conn in conns:
        pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_a_failed_establishment_is_reported_before_its_closed_event_and_frees_its_slot() -> None:
    recorder = Recorder()
    failure = ConnectionRefusedError("refused")
    reported: list[tuple[BaseException, int, list[str]]] = []

    def on_connect_error(error: BaseException, generation: int) -> None:
        reported.append((error, generation, recorder.types()))
        pool.clear(error=error)

    factory = FakeFactory(error=failure)
    pool = make_pool(factory, recorder=recorder, on_connect_error=on_connect_error, max_pool_size=1)
    with pytest.raises(ConnectionRefusedError):
        await pool.check_out()
    assert reported and reported[0][0] is failure and reported[0][1] == 0
    assert "ConnectionClosedEvent" not in reported[0][2]
    assert recorder.types()[-4:] == [
        "ConnectionCreatedEvent",
        "PoolClearedEvent",
        "ConnectionClosedEvent",
        "ConnectionCheckOutFailedEvent",
    ]
    assert recorder.of("ConnectionClosedEvent")[0].reason == "error"
    assert recorder.of("ConnectionCheckOutFailedEvent")[0].reason == "connectionError"
    assert pool.total_connection_count == 0 and pool.pending_connection_count == 0
    factory.error = None
    pool.ready()
    conn = await pool.check_out()  # the one slot (maxPoolSize=1) is free again
    pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_interrupting_clear_closes_connections_in_use() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder)
    conn = await pool.check_out()
    command = asyncio.create_task(conn.command(10))
    await asyncio.sleep(0)
    pool.clear(interrupt_in_use_connections=True)
    assert conn.closed and "interrupted" in (conn.close_reason or "")
    command.cancel()  # the fake's sleep does not notice a close; a real connection's read fails at once
    with pytest.raises(asyncio.CancelledError):
        await command
    pool.check_in(conn)
    cleared = recorder.of("PoolClearedEvent")
    assert cleared[0].interrupt_connections is True
    assert recorder.of("ConnectionClosedEvent")[-1].reason == "stale"
    await pool.close()


@on_virtual_clock
async def test_interrupting_clear_stops_a_pending_establishment_without_leaving_the_task_cancelled() -> None:
    recorder = Recorder()
    factory = FakeFactory(delay=30)
    pool = make_pool(factory, recorder=recorder)
    cancelling_after: list[int] = []

    async def check_out() -> None:
        try:
            await pool.check_out()
        finally:
            task = asyncio.current_task()
            assert task is not None
            cancelling_after.append(task.cancelling())

    task = asyncio.create_task(check_out())
    await asyncio.sleep(0.01)
    assert pool.pending_connection_count == 1
    pool.clear(interrupt_in_use_connections=True)
    with pytest.raises(PoolClearedError, match="interrupted due to server monitor timeout"):
        await task
    assert cancelling_after == [0]
    assert pool.total_connection_count == 0 and pool.pending_connection_count == 0
    assert recorder.types()[-3:] == [
        "PoolClearedEvent",
        "ConnectionClosedEvent",
        "ConnectionCheckOutFailedEvent",
    ]
    await pool.close()


def _interrupt_a_pending_establishment_on_trio(
    interrupt: Callable[[Pool[FakeConnection]], Awaitable[None]],
) -> Any:
    """Check out on trio while the only connection takes an hour to establish, interrupt it with
    ``interrupt``, and return the check-out's error and what the pool publishes and counts then."""

    async def body() -> dict[str, Any]:
        recorder = Recorder()
        pool = make_pool(FakeFactory(delay=3600), recorder=recorder)
        failures: list[BaseException] = []

        async def check_out() -> None:
            try:
                await pool.check_out()
            except Exception as exc:
                failures.append(exc)

        with trio.fail_after(30):  # the establishment would take an hour: only the interruption ends it
            async with trio.open_nursery() as nursery:
                nursery.start_soon(check_out)
                await trio.testing.wait_all_tasks_blocked()
                assert pool.pending_connection_count == 1
                await interrupt(pool)
        result = {
            "failures": failures,
            "events": recorder.types(),
            "counts": (pool.total_connection_count, pool.pending_connection_count),
        }
        await pool.close()
        return result

    return trio.run(body)


def test_interrupting_clear_stops_a_pending_establishment_on_trio() -> None:
    async def clear(pool: Pool[FakeConnection]) -> None:
        pool.clear(interrupt_in_use_connections=True)

    result = _interrupt_a_pending_establishment_on_trio(clear)
    (failure,) = result["failures"]
    assert isinstance(failure, PoolClearedError)
    assert "interrupted due to server monitor timeout" in str(failure)
    assert result["counts"] == (0, 0)
    assert result["events"][-3:] == [
        "PoolClearedEvent",
        "ConnectionClosedEvent",
        "ConnectionCheckOutFailedEvent",
    ]


def test_interrupting_close_stops_a_pending_establishment_on_trio() -> None:
    async def close(pool: Pool[FakeConnection]) -> None:
        await pool.close(interrupt_in_use_connections=True)

    result = _interrupt_a_pending_establishment_on_trio(close)
    (failure,) = result["failures"]
    assert isinstance(failure, PoolClosedError)
    assert result["counts"] == (0, 0)
    assert result["events"][-3:] == [
        "PoolClosedEvent",
        "ConnectionClosedEvent",
        "ConnectionCheckOutFailedEvent",
    ]


def test_a_trio_cancel_scope_around_a_pending_establishment_still_cancels_its_task() -> None:
    """The pool's own scope around the establishment does not swallow an enclosing scope's cancellation."""

    async def body() -> tuple[bool, tuple[int, int]]:
        pool = make_pool(FakeFactory(delay=3600))
        with trio.move_on_after(0.05) as scope:
            await pool.check_out()
        await pool.close()
        return scope.cancelled_caught, (pool.total_connection_count, pool.pending_connection_count)

    assert trio.run(body) == (True, (0, 0))


@on_virtual_clock
async def test_a_cancelled_establishment_frees_its_slot() -> None:
    factory = FakeFactory(delay=30)
    pool = make_pool(factory, max_pool_size=1)
    task = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.total_connection_count == 0 and pool.pending_connection_count == 0
    factory.delay = 0
    conn = await pool.check_out()
    pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_a_connection_handed_to_a_task_cancelled_before_it_resumed_goes_back() -> None:
    pool = make_pool(max_pool_size=1)
    held = await pool.check_out()
    waiter = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0)
    assert pool.wait_queue_length == 1
    pool.check_in(held)  # handed to the waiter, which has not run yet
    assert pool.wait_queue_length == 0 and pool.in_use_connection_count == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pool.in_use_connection_count == 0 and pool.available_connection_count == 1
    assert check_out_now(pool) is held
    pool.check_in(held)
    await pool.close()


@on_virtual_clock
async def test_check_in_hands_the_connection_to_the_oldest_waiter_still_waiting() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder, max_pool_size=1)
    held = await pool.check_out()
    cancelled = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0)
    oldest_alive = asyncio.create_task(pool.check_out())
    last = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0)
    assert pool.wait_queue_length == 3
    cancelled.cancel()  # cancelled, but its task has not run yet to leave the queue
    del recorder.events[:]
    pool.check_in(held)
    # Straight to the waiter behind the cancelled one: never idle, no slot for a new connection taken.
    assert pool.available_connection_count == 0 and pool.in_use_connection_count == 1
    assert pool.total_connection_count == 1 and pool.pending_connection_count == 0
    assert await oldest_alive is held
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not last.done() and pool.wait_queue_length == 1
    assert recorder.types() == [
        "ConnectionCheckedInEvent",
        "ConnectionCheckOutFailedEvent",  # the cancelled check-out
        "ConnectionCheckedOutEvent",
    ]
    assert recorder.of("ConnectionCheckedOutEvent")[0].connection_id == held.id
    pool.check_in(held)
    assert await last is held
    pool.check_in(held)
    await pool.close()


@on_virtual_clock
async def test_a_connection_checked_in_while_only_cancelled_tasks_wait_goes_idle() -> None:
    pool = make_pool(max_pool_size=1)
    held = await pool.check_out()
    waiters = [asyncio.create_task(pool.check_out()) for _ in range(2)]
    await asyncio.sleep(0)
    for waiter in waiters:
        waiter.cancel()
    pool.check_in(held)
    assert pool.available_connection_count == 1 and pool.in_use_connection_count == 0
    for waiter in waiters:
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert pool.wait_queue_length == 0
    assert check_out_now(pool) is held
    pool.check_in(held)
    await pool.close()


@on_virtual_clock
async def test_waiters_cancelled_last_first_leave_the_queue_and_the_rest_keep_their_order() -> None:
    pool = make_pool(max_pool_size=1, wait_queue_timeout=30)
    held = await pool.check_out()
    waiters = [asyncio.create_task(pool.check_out()) for _ in range(300)]
    await asyncio.sleep(0)
    assert pool.wait_queue_length == 300
    # Every third waiter stays; the others are cancelled, the newest first (each one far from the front).
    staying = waiters[::3]
    leaving = [waiter for index, waiter in enumerate(waiters) if index % 3]
    for waiter in reversed(leaving):
        waiter.cancel()
    for waiter in leaving:
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert pool.wait_queue_length == len(staying) == 100
    served = []
    for expected in staying:
        pool.check_in(held)
        held = await expected
        served.append(expected)
        assert pool.wait_queue_length == len(staying) - len(served)
    assert served == staying  # in arrival order, none of the cancelled ones given the connection
    pool.check_in(held)
    assert pool.available_connection_count == 1 and pool.in_use_connection_count == 0
    await pool.close()


@on_virtual_clock
async def test_timed_out_and_cancelled_waiters_are_not_counted_as_waiting() -> None:
    pool = make_pool(max_pool_size=1, wait_queue_timeout=30)
    held = await pool.check_out()
    patient = [asyncio.create_task(pool.check_out()) for _ in range(2)]
    hasty = [asyncio.create_task(pool.check_out(max_wait=0.01 * (index + 1))) for index in range(40)]
    cancelled = [asyncio.create_task(pool.check_out()) for _ in range(40)]
    await asyncio.sleep(0)
    assert pool.wait_queue_length == 82
    for waiter in cancelled:
        waiter.cancel()
    await asyncio.gather(*cancelled, return_exceptions=True)
    assert pool.wait_queue_length == 42
    results = await asyncio.gather(*hasty, return_exceptions=True)
    assert all(isinstance(result, WaitQueueTimeoutError) for result in results)
    # Each message counts the waiters still in line when it timed out: the patient two and the later hasty.
    assert "2 still waiting" in str(results[-1]) and "41 still waiting" in str(results[0])
    assert pool.wait_queue_length == 2
    pool.check_in(held)
    assert await patient[0] is held
    pool.check_in(held)
    assert await patient[1] is held
    pool.check_in(held)
    await pool.close()


@on_virtual_clock
async def test_a_check_out_whose_coroutine_is_cancelled_by_hand_is_never_handed_a_connection() -> None:
    # Cancelled by a runner other than a Task: the waiter it suspended on is left pending.
    pool = make_pool(max_pool_size=1, wait_queue_timeout=30)
    held = await pool.check_out()
    coro = pool.check_out()
    waiter = coro.send(None)
    assert isinstance(waiter, asyncio.Future) and not waiter.done()
    assert pool.wait_queue_length == 1
    with pytest.raises(asyncio.CancelledError):
        coro.throw(asyncio.CancelledError())
    assert pool.wait_queue_length == 0
    pool.check_in(held)
    assert not waiter.done()  # nobody awaits it any more: given the connection, it would have lost it
    assert pool.available_connection_count == 1 and pool.in_use_connection_count == 0
    assert check_out_now(pool) is held
    # The same with the connection broken: the slot it frees is not granted to the abandoned waiter either.
    coro = pool.check_out()
    waiter = coro.send(None)
    with pytest.raises(asyncio.CancelledError):
        coro.throw(asyncio.CancelledError())
    held.close("broken")
    pool.check_in(held)
    assert not waiter.done()
    assert pool.total_connection_count == 0 and pool.pending_connection_count == 0
    await pool.close()


@on_virtual_clock
async def test_clear_fails_only_the_waiters_still_in_line() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder, max_pool_size=1, wait_queue_timeout=30)
    held = await pool.check_out()
    waiters = [asyncio.create_task(pool.check_out()) for _ in range(100)]
    await asyncio.sleep(0)
    for waiter in reversed(waiters[1::2]):
        waiter.cancel()
    await asyncio.gather(*waiters[1::2], return_exceptions=True)
    del recorder.events[:]
    pool.clear(error=ConnectionResetError("boom"))
    results = await asyncio.gather(*waiters[::2], return_exceptions=True)
    assert all(isinstance(result, PoolClearedError) for result in results)
    assert pool.wait_queue_length == 0
    # One failed check-out per waiter still in line: none for those that had left it.
    failed = recorder.of("ConnectionCheckOutFailedEvent")
    assert len(failed) == 50
    pool.ready()
    pool.check_in(held)
    assert check_out_now(pool) is not None
    await pool.close()


@on_virtual_clock
async def test_a_permit_granted_to_a_task_cancelled_before_it_resumed_is_released() -> None:
    factory = FakeFactory()
    pool = make_pool(factory, max_pool_size=1)
    held = await pool.check_out()
    waiter = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0)
    assert pool.wait_queue_length == 1
    held.close("broken")
    pool.check_in(held)  # closed, so its slot is granted to the waiter as the right to open a new one
    assert pool.wait_queue_length == 0 and pool.pending_connection_count == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pool.pending_connection_count == 0 and pool.total_connection_count == 0
    assert len(factory.made) == 1
    conn = check_out_now(pool)  # the slot is free again (a new connection, made without suspending)
    assert conn is not held
    pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_min_pool_size_is_filled_in_the_background_only_while_ready() -> None:
    recorder = Recorder()
    factory = FakeFactory(delay=0.001)
    pool = make_pool(factory, recorder=recorder, ready=False, min_pool_size=3)
    await asyncio.sleep(0.02)
    assert pool.total_connection_count == 0  # paused: nothing is made
    pool.ready()
    await asyncio.sleep(0.1)
    assert pool.available_connection_count == 3
    types = recorder.types()
    assert types.index("PoolReadyEvent") < types.index("ConnectionCreatedEvent")
    pool.clear()
    assert pool.total_connection_count == 0
    await asyncio.sleep(0.02)
    assert pool.total_connection_count == 0  # paused again: no refill
    pool.ready()
    await asyncio.sleep(0.1)
    assert pool.available_connection_count == 3 and factory.open == 3
    await pool.close()
    assert factory.open == 0


@on_virtual_clock
async def test_idle_connections_expire_in_the_background_and_min_pool_size_is_restored() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder, max_idle_time_seconds=0.03, min_pool_size=1)
    conns = [await pool.check_out() for _ in range(3)]
    for conn in conns:
        pool.check_in(conn)
    await asyncio.sleep(0.029)
    assert not any(conn.closed for conn in conns)  # not idle for maxIdleTimeMS yet
    await asyncio.sleep(0.002)
    assert all(conn.closed for conn in conns)
    assert {event.reason for event in recorder.of("ConnectionClosedEvent")} == {"idle"}
    # minPoolSize keeps one fresh connection, replaced as each one expires.
    assert pool.total_connection_count == 1 and factory.open == 1
    await pool.close()


@on_virtual_clock
async def test_load_balanced_clear_affects_one_service_and_does_not_pause() -> None:
    recorder = Recorder()
    factory = FakeFactory(service_id=lambda connection_id: "A" if connection_id % 2 else "B")
    pool = make_pool(factory, recorder=recorder, load_balanced=True)
    conns = [await pool.check_out() for _ in range(4)]
    a1, b2, a3, b4 = conns
    for conn in (a1, b2):
        pool.check_in(conn)
    pool.clear(service_id="A")
    assert pool.state == PoolState.READY
    assert a1.closed and not b2.closed
    assert recorder.of("PoolClearedEvent")[0].service_id == "A"
    assert pool.generation_for("A") == 1 and pool.generation_for("B") == 0
    pool.check_in(a3)
    pool.check_in(b4)
    assert a3.closed and not b4.closed
    new = await pool.check_out()
    assert new is b4  # the stale connections to A are gone, B's are reused
    pool.check_in(new)
    await pool.close()


@on_virtual_clock
async def test_close_stops_the_background_task_and_leaves_no_task_running() -> None:
    pool = make_pool(FakeFactory(delay=0.001), min_pool_size=2, max_idle_time_seconds=60)
    await asyncio.sleep(0.02)
    current = asyncio.current_task()
    names = [task.get_name() for task in asyncio.all_tasks() if task is not current]
    assert names == ["mongio pool db.example.com:27017"]
    conn = await pool.check_out()
    pool.check_in(conn)
    await pool.close()
    assert asyncio.all_tasks() == {current}
    await pool.close()  # closing again is harmless


@on_virtual_clock
async def test_close_while_the_filler_is_establishing() -> None:
    factory = FakeFactory(delay=30)
    pool = make_pool(factory, min_pool_size=1)
    await asyncio.sleep(0.01)
    assert pool.pending_connection_count == 1
    await pool.close()
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert pool.total_connection_count == 0


@on_virtual_clock
async def test_a_listener_that_raises_does_not_break_the_pool(caplog: pytest.LogCaptureFixture) -> None:
    class Faulty(Recorder):
        def connection_checked_out(self, event: Any) -> None:
            raise RuntimeError("listener bug")

    pool = make_pool(recorder=Faulty())
    conn = await pool.check_out()
    assert pool.in_use_connection_count == 1
    pool.check_in(conn)
    assert "listener bug" in caplog.text
    await pool.close()


def test_address_of_a_unix_socket_and_an_ipv6_host() -> None:
    unix: Pool[FakeConnection] = Pool(("/tmp/mongodb-27017.sock", None), FakeFactory())
    assert "/tmp/mongodb-27017.sock " in repr(unix)
    ipv6: Pool[FakeConnection] = Pool(("::1", 27017), FakeFactory())
    assert "[::1]:27017" in repr(ipv6)
    assert ADDRESS == ("db.example.com", 27017)


@on_virtual_clock
async def test_load_balanced_wait_queue_timeout_counts_connections_held_by_cursors_and_transactions() -> None:
    factory = FakeFactory(service_id=lambda connection_id: "A")
    pool = make_pool(factory, load_balanced=True, max_pool_size=3, wait_queue_timeout=0.01)
    cursor, transaction, other = [await pool.check_out() for _ in range(3)]
    pool.pin(cursor, "cursor")
    pool.pin(transaction, "transaction")
    with pytest.raises(WaitQueueTimeoutError) as caught:
        await pool.check_out()
    assert (
        "Timeout waiting for connection from the connection pool. maxPoolSize: 3, connections in use by cursors: 1, "
        "connections in use by transactions: 1, connections in use by other operations: 1"
    ) in str(caught.value)
    # A check-in forgets what held the connection.
    pool.check_in(cursor)
    again = await pool.check_out()
    with pytest.raises(WaitQueueTimeoutError, match="by cursors: 0, connections in use by transactions: 1, "):
        await pool.check_out()
    for conn in (again, transaction, other):
        pool.check_in(conn)
    await pool.close()


@on_virtual_clock
async def test_a_connection_broken_by_an_error_is_closed_for_the_error_even_after_the_clear_it_caused() -> (
    None
):
    recorder = Recorder()
    factory = FakeFactory(service_id=lambda connection_id: "A")
    pool = make_pool(factory, recorder=recorder, load_balanced=True)
    broken, healthy = await pool.check_out(), await pool.check_out()
    broken.close("network error")
    pool.clear(service_id="A")  # what the network error calls for
    pool.check_in(broken)
    pool.check_in(healthy)
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error", "stale"]
    await pool.close()


@on_virtual_clock
async def test_a_connection_a_clear_interrupted_is_closed_as_stale() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder)
    conn = await pool.check_out()
    pool.clear(interrupt_in_use_connections=True)
    assert conn.closed
    pool.check_in(conn)
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["stale"]
    await pool.close()


@on_virtual_clock
async def test_an_interrupting_close_closes_connections_in_use_now_and_reports_them_at_check_in() -> None:
    recorder = Recorder()
    factory = FakeFactory()
    pool = make_pool(factory, recorder=recorder)
    idle, busy = await pool.check_out(), await pool.check_out()
    pool.check_in(idle)
    await pool.close(interrupt_in_use_connections=True)
    assert idle.closed and busy.closed
    assert "the pool for db.example.com:27017 was closed" in (busy.close_reason or "")
    # The specification's events: the busy connection's ConnectionClosed comes when it is checked in.
    assert recorder.types()[-2:] == ["ConnectionClosedEvent", "PoolClosedEvent"]
    pool.check_in(busy)
    assert factory.open == 0
    assert recorder.types()[-2:] == ["ConnectionCheckedInEvent", "ConnectionClosedEvent"]
    closed = recorder.of("ConnectionClosedEvent")
    assert [(event.connection_id, event.reason) for event in closed] == [
        (idle.id, "poolClosed"),
        (busy.id, "poolClosed"),
    ]


@on_virtual_clock
async def test_an_interrupting_close_stops_a_pending_establishment_with_pool_closed() -> None:
    recorder = Recorder()
    factory = FakeFactory(delay=30)
    pool = make_pool(factory, recorder=recorder)
    cancelling_after: list[int] = []

    async def check_out() -> None:
        try:
            await pool.check_out()
        finally:
            task = asyncio.current_task()
            assert task is not None
            cancelling_after.append(task.cancelling())

    task = asyncio.create_task(check_out())
    await asyncio.sleep(0.01)
    assert pool.pending_connection_count == 1
    await pool.close(interrupt_in_use_connections=True)
    with pytest.raises(PoolClosedError, match="interrupted: the connection pool was closed"):
        await task
    assert cancelling_after == [0]  # the interruption is the pool's, not a cancellation of the task
    assert pool.total_connection_count == 0 and pool.pending_connection_count == 0
    assert recorder.types()[-3:] == [
        "PoolClosedEvent",
        "ConnectionClosedEvent",
        "ConnectionCheckOutFailedEvent",
    ]
    assert recorder.of("ConnectionClosedEvent")[-1].reason == "poolClosed"
    assert recorder.of("ConnectionCheckOutFailedEvent")[-1].reason == "poolClosed"


@on_virtual_clock
async def test_a_close_that_does_not_interrupt_leaves_connections_in_use_and_establishing_alone() -> None:
    factory = FakeFactory(delay=0.05)
    pool = make_pool(factory)
    busy = await pool.check_out()
    establishing = asyncio.create_task(pool.check_out())
    await asyncio.sleep(0.01)
    await pool.close()
    assert not busy.closed
    # The establishment runs to its end; the pool, closed meanwhile, then refuses the connection.
    with pytest.raises(PoolClosedError, match="closed connection pool"):
        await establishing
    pool.check_in(busy)
    assert is_closed(busy)
