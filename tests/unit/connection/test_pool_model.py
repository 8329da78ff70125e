"""Random sequences of pool operations, checking the pool's bookkeeping and its events after every step."""

from __future__ import annotations

import asyncio
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from mongio.connection.pool import Pool, PoolClearedError, PoolState
from mongio.errors import WaitQueueTimeoutError
from tests.support.fake_pool import FakeConnection, FakeFactory, Recorder, make_pool

OPERATIONS = st.lists(
    st.one_of(
        st.just(("out", 0)),
        st.tuples(st.just("in"), st.integers(0, 7)),
        st.tuples(st.just("break"), st.integers(0, 7)),
        st.just(("clear", 0)),
        st.just(("interrupt", 0)),
        st.just(("ready", 0)),
    ),
    max_size=40,
)


def check(
    pool: Pool[FakeConnection],
    factory: FakeFactory,
    recorder: Recorder,
    max_size: int,
    held: list[FakeConnection],
) -> None:
    total = pool.total_connection_count
    assert (
        total
        == pool.available_connection_count + pool.in_use_connection_count + pool.pending_connection_count
    )
    assert total <= max_size
    assert pool.pending_connection_count == 0 and pool.wait_queue_length == 0
    # A connection closed while in use still counts until it is checked in.
    assert factory.open + sum(1 for conn in held if conn.closed) == total
    seen = Counter(recorder.types())
    assert seen["ConnectionCheckOutStartedEvent"] == (
        seen["ConnectionCheckedOutEvent"] + seen["ConnectionCheckOutFailedEvent"]
    )
    assert seen["ConnectionCreatedEvent"] - seen["ConnectionClosedEvent"] == total
    assert (
        seen["ConnectionCheckedOutEvent"] - seen["ConnectionCheckedInEvent"] == pool.in_use_connection_count
    )


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS, max_size=st.integers(1, 4))
def test_random_operations_keep_the_pool_consistent(operations: list[tuple[str, int]], max_size: int) -> None:
    async def scenario() -> None:
        recorder = Recorder()
        factory = FakeFactory()
        pool = make_pool(factory, recorder=recorder, max_pool_size=max_size)
        held: list[FakeConnection] = []
        for name, index in operations:
            if name == "out":
                try:
                    conn = await pool.check_out(max_wait=0)
                except PoolClearedError:
                    assert pool.state == PoolState.PAUSED
                except WaitQueueTimeoutError:
                    assert pool.in_use_connection_count == max_size
                else:
                    assert not conn.closed and conn.generation == pool.generation
                    held.append(conn)
            elif name == "in" and held:
                pool.check_in(held.pop(index % len(held)))
            elif name == "break" and held:
                held[index % len(held)].close("broken")
            elif name == "clear":
                pool.clear()
            elif name == "interrupt":
                pool.clear(interrupt_in_use_connections=True)
                assert all(conn.closed for conn in held)
            elif name == "ready":
                pool.ready()
            check(pool, factory, recorder, max_size, held)
            # Idle connections are always usable ones: stale and broken ones never wait in the pool.
            idle = [conn for conn, _since in pool._idle]
            assert all(not conn.closed and conn.generation == pool.generation for conn in idle)
        while held:
            pool.check_in(held.pop())
        check(pool, factory, recorder, max_size, held)
        await pool.close()
        assert factory.open == 0

    asyncio.run(scenario())
