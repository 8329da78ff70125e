"""The connection holder of a load-balanced cursor (load balancer specification, "Behaviour With Cursors")."""

from __future__ import annotations

import asyncio

import pytest

from mongio.execution.connection_pin import ConnectionPin
from tests.support.fake_pool import FakeFactory, Recorder, make_pool


def is_held(pin: ConnectionPin) -> bool:
    """Whether the pin holds a connection now (read through a call: the checker would keep an earlier
    narrowing)."""
    return pin.held


async def test_a_pin_holds_one_connection_counted_as_a_cursors_until_released() -> None:
    recorder = Recorder()
    pool = make_pool(FakeFactory(service_id=lambda connection_id: "A"), recorder=recorder, load_balanced=True)
    conn = await pool.check_out()
    pin = ConnectionPin()
    assert not pin.held and pin.connection_from(pool) is None
    pin.hold(pool, conn)
    assert is_held(pin) and pin.holds(conn) and pin.connection_from(pool) is conn
    assert pin.connection_from(make_pool()) is None  # another pool's command cannot take it
    with pytest.raises(RuntimeError):
        pin.hold(pool, conn)
    assert pool.in_use_connection_count == 1 and not pin.broken
    pin.release()
    assert not pin.held and pool.in_use_connection_count == 0 and not conn.closed
    assert len(recorder.of("ConnectionCheckedInEvent")) == 1
    pin.release()  # nothing held: nothing to give back
    assert len(recorder.of("ConnectionCheckedInEvent")) == 1
    await pool.close()


async def test_a_broken_connection_is_reported_and_closed_by_the_pool_when_released() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder, load_balanced=True)
    pin = ConnectionPin()
    pin.hold(pool, await pool.check_out())
    assert pin.connection_from(pool) is not None
    conn = pin.connection_from(pool)
    conn.in_exchange = True  # a getMore was cut off: its reply is unread
    assert pin.broken
    pin.release()
    assert conn.closed
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error"]
    await pool.close()


async def test_discard_closes_the_connection_and_release_soon_gives_it_back_on_the_next_loop_turn() -> None:
    pool = make_pool(load_balanced=True)
    pin = ConnectionPin()
    first = await pool.check_out()
    pin.hold(pool, first)
    pin.discard("abandoned")
    assert first.closed and pool.in_use_connection_count == 0
    second = await pool.check_out()
    pin.hold(pool, second)
    pin.release_soon()  # as a finalizer does: nothing touches the pool now
    assert second.closed and not pin.held and pool.in_use_connection_count == 1
    await asyncio.sleep(0)
    assert pool.in_use_connection_count == 0 and pool.total_connection_count == 0
    await pool.close()


def is_streaming(pin: ConnectionPin) -> bool:
    return pin.streaming


async def test_a_stream_held_alone_goes_back_to_the_pool_when_it_ends() -> None:
    pool = make_pool()
    conn = await pool.check_out()
    pin = ConnectionPin()
    conn.more_to_come = conn.in_exchange = True
    pin.hold_stream(pool, conn, {"getMore": 1})
    assert is_streaming(pin) and pin.held_for_stream_only and pin.stream() == (conn, {"getMore": 1})
    conn.more_to_come = conn.in_exchange = False  # the last reply was read
    assert not is_streaming(pin)
    pin.stream_ended()
    assert not pin.held and pool.in_use_connection_count == 0 and not conn.closed
    with pytest.raises(RuntimeError):
        pin.stream()
    await pool.close()


async def test_a_load_balanced_pin_keeps_its_connection_after_the_stream() -> None:
    pool = make_pool(load_balanced=True)
    conn = await pool.check_out()
    pin = ConnectionPin()
    pin.hold(pool, conn)
    conn.more_to_come = conn.in_exchange = True
    pin.hold_stream(pool, conn, {"getMore": 1})
    assert is_streaming(pin) and not pin.held_for_stream_only
    with pytest.raises(RuntimeError):
        pin.hold_stream(pool, await pool.check_out(), {"getMore": 2})  # not another connection
    conn.more_to_come = conn.in_exchange = False
    pin.stream_ended()
    assert pin.holds(conn) and not is_streaming(pin)
    pin.release()
    await pool.close()


async def test_a_stream_cut_short_is_never_pooled() -> None:
    recorder = Recorder()
    pool = make_pool(recorder=recorder)
    conn = await pool.check_out()
    pin = ConnectionPin()
    conn.more_to_come = conn.in_exchange = True
    pin.hold_stream(pool, conn, {"getMore": 1})
    pin.release()  # given back mid-stream: the pool closes it rather than serve its unread replies
    assert conn.closed and pool.in_use_connection_count == 0
    assert [event.reason for event in recorder.of("ConnectionClosedEvent")] == ["error"]
    await pool.close()
