"""Server sessions, the LIFO server session pool with its expiry rules, endSessions batching, and cluster time."""

from __future__ import annotations

import os
import uuid

import pytest

from mongio.bson import decode, encode
from mongio.bson.binary import Binary
from mongio.bson.int64 import Int64
from mongio.bson.timestamp import Timestamp
from mongio.sessions.cluster_time import (
    ClusterClock,
    cluster_time_value,
    compare_cluster_times,
    greater_cluster_time,
    greater_operation_time,
    session_read_concern,
    snapshot_time_from_reply,
)
from mongio.sessions.server_session import END_SESSIONS_BATCH_SIZE, ServerSession, ServerSessionPool


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


TIMEOUT_MINUTES = 30
MINUTE = 60.0


def test_session_id_is_a_v4_uuid_as_binary_subtype_4() -> None:
    session = ServerSession(5.0)
    identifier = session.session_id["id"]
    assert isinstance(identifier, Binary)
    assert identifier.subtype == 4
    assert uuid.UUID(bytes=bytes(identifier)).version == 4
    assert list(session.session_id) == ["id"]
    assert session.last_use == 5.0
    # It survives a BSON round trip as the same lsid document.
    assert decode(encode({"lsid": session.session_id}))["lsid"] == session.session_id
    assert ServerSession(0.0).session_id != session.session_id


def test_txn_number_increments_and_is_int64() -> None:
    session = ServerSession(0.0)
    assert session.txn_number == 0
    first = session.next_txn_number()
    second = session.next_txn_number()
    assert isinstance(first, Int64) and (first, second) == (1, 2)
    assert session.txn_number == 2


@pytest.mark.parametrize(
    ("idle", "expected"),
    [
        (0.0, False),
        (29 * MINUTE - 1, False),
        (29 * MINUTE, False),
        (29 * MINUTE + 0.001, True),
        (31 * MINUTE, True),
    ],
)
def test_about_to_expire_uses_the_one_minute_margin(idle: float, expected: bool) -> None:
    session = ServerSession(100.0)
    assert session.about_to_expire(100.0 + idle, TIMEOUT_MINUTES) is expected


def test_unknown_session_timeout_never_expires() -> None:
    assert not ServerSession(0.0).about_to_expire(1e9, None)


def test_pool_is_lifo() -> None:
    clock = FakeClock()
    pool = ServerSessionPool(clock)
    a, b, c = (pool.acquire(TIMEOUT_MINUTES) for _ in range(3))
    assert len({id(a), id(b), id(c)}) == 3
    for session in (a, b, c):
        pool.release(session, TIMEOUT_MINUTES)
    assert list(pool) == [c, b, a]
    assert pool.acquire(TIMEOUT_MINUTES) is c
    assert pool.acquire(TIMEOUT_MINUTES) is b
    pool.release(c, TIMEOUT_MINUTES)
    assert pool.acquire(TIMEOUT_MINUTES) is c
    assert pool.acquire(TIMEOUT_MINUTES) is a
    assert len(pool) == 0


def test_pool_preserves_txn_number_on_reuse() -> None:
    pool = ServerSessionPool(FakeClock())
    session = pool.acquire(TIMEOUT_MINUTES)
    session.next_txn_number()
    session.next_txn_number()
    pool.release(session, TIMEOUT_MINUTES)
    again = pool.acquire(TIMEOUT_MINUTES)
    assert again is session
    assert again.next_txn_number() == 3


def test_acquire_discards_sessions_about_to_expire() -> None:
    clock = FakeClock(0.0)
    pool = ServerSessionPool(clock)
    old = pool.acquire(TIMEOUT_MINUTES)
    pool.release(old, TIMEOUT_MINUTES)
    clock.now = 29 * MINUTE + 1
    fresh = pool.acquire(TIMEOUT_MINUTES)
    assert fresh is not old
    assert fresh.last_use == clock.now
    assert len(pool) == 0


def test_acquire_judges_expiry_at_the_time_the_caller_read() -> None:
    # The clock says the pooled session is fresh; the caller's reading (later) says it is about to expire.
    clock = FakeClock(0.0)
    pool = ServerSessionPool(clock)
    old = pool.acquire(TIMEOUT_MINUTES)
    pool.release(old, TIMEOUT_MINUTES)
    later = 29 * MINUTE + 1
    fresh = pool.acquire(TIMEOUT_MINUTES, now=later)
    assert fresh is not old
    assert fresh.last_use == later
    pool.release(fresh, TIMEOUT_MINUTES)
    assert pool.acquire(TIMEOUT_MINUTES, now=later) is fresh


def test_acquire_in_load_balanced_mode_reuses_even_expiring_sessions() -> None:
    clock = FakeClock(0.0)
    pool = ServerSessionPool(clock)
    old = pool.acquire(TIMEOUT_MINUTES)
    pool.release(old, TIMEOUT_MINUTES)
    clock.now = 29 * MINUTE + 1
    assert pool.acquire(TIMEOUT_MINUTES, load_balanced=True) is old


def test_release_prunes_expiring_sessions_from_the_back_and_stops_at_a_live_one() -> None:
    clock = FakeClock(0.0)
    pool = ServerSessionPool(clock)
    oldest, older, recent = (pool.acquire(TIMEOUT_MINUTES) for _ in range(3))
    pool.release(oldest, TIMEOUT_MINUTES)  # back of the queue
    pool.release(older, TIMEOUT_MINUTES)
    clock.now = 10 * MINUTE
    recent.mark_used(clock.now)
    pool.release(recent, TIMEOUT_MINUTES)  # front
    assert list(pool) == [recent, older, oldest]
    clock.now = 29 * MINUTE + 1  # oldest and older are now about to expire, recent is not
    returning = ServerSession(clock.now)
    pool.release(returning, TIMEOUT_MINUTES)
    assert list(pool) == [returning, recent]


def test_release_stops_pruning_at_the_first_live_session_from_the_back() -> None:
    # An expiring session in front of a live one is not inspected by release (only by acquire).
    clock = FakeClock(0.0)
    pool = ServerSessionPool(clock)
    live, stale = pool.acquire(TIMEOUT_MINUTES), pool.acquire(TIMEOUT_MINUTES)
    live.mark_used(20 * MINUTE)
    pool.release(live, TIMEOUT_MINUTES)
    clock.now = 1.0
    pool.release(stale, TIMEOUT_MINUTES)
    assert list(pool) == [stale, live]
    clock.now = 29 * MINUTE + 5
    pool.release(ServerSession(clock.now), TIMEOUT_MINUTES)
    assert stale in list(pool)


def test_release_drops_dirty_and_expiring_sessions() -> None:
    clock = FakeClock(0.0)
    pool = ServerSessionPool(clock)
    dirty = pool.acquire(TIMEOUT_MINUTES)
    dirty.mark_dirty()
    pool.release(dirty, TIMEOUT_MINUTES)
    assert len(pool) == 0
    expiring = pool.acquire(TIMEOUT_MINUTES)
    clock.now = 29 * MINUTE + 1
    pool.release(expiring, TIMEOUT_MINUTES)
    assert len(pool) == 0


def test_reset_forgets_sessions_and_refuses_those_checked_out_before() -> None:
    pool = ServerSessionPool(FakeClock())
    pooled, out = pool.acquire(TIMEOUT_MINUTES), pool.acquire(TIMEOUT_MINUTES)
    pool.release(pooled, TIMEOUT_MINUTES)
    pool.renew_after_fork()
    assert len(pool) == 0
    pool.release(out, TIMEOUT_MINUTES)
    assert len(pool) == 0
    new = pool.acquire(TIMEOUT_MINUTES)
    pool.release(new, TIMEOUT_MINUTES)
    assert list(pool) == [new]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available on this platform")
def test_a_forked_child_empties_every_pool_and_refuses_sessions_checked_out_before() -> None:
    """Driver sessions spec, Server Session Pool (prose tests 12 and 13): after a fork the child's pool is
    cleared without endSessions, and a session checked out before the fork is not returned to it; the
    parent's pool is untouched."""
    pool = ServerSessionPool(FakeClock())
    pooled = pool.acquire(30)
    checked_out = pool.acquire(30)
    pool.release(pooled, 30)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        ok = len(pool) == 0 and pool.end_sessions_commands() == []
        pool.release(checked_out, 30)
        ok = ok and len(pool) == 0
        fresh = pool.acquire(30)
        ok = ok and fresh.session_id != pooled.session_id
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [session.session_id for session in pool] == [pooled.session_id]
    pool.release(checked_out, 30)
    assert len(pool) == 2


@pytest.mark.parametrize("count", [0, 1, 9_999, 10_000, 10_001, 25_000])
def test_end_sessions_commands_batch_10000_ids(count: int) -> None:
    pool = ServerSessionPool(FakeClock())
    sessions = [ServerSession(1000.0) for _ in range(count)]
    for session in sessions:
        pool.release(session, TIMEOUT_MINUTES)
    commands = pool.end_sessions_commands()
    assert len(pool) == 0
    expected_batches = -(-count // END_SESSIONS_BATCH_SIZE)
    assert len(commands) == expected_batches
    assert all(list(command) == ["endSessions"] for command in commands)
    assert all(len(command["endSessions"]) <= 10_000 for command in commands)
    sent = [lsid["id"] for command in commands for lsid in command["endSessions"]]
    assert sorted(sent) == sorted(session.session_id["id"] for session in sessions)
    assert len(set(sent)) == count


def test_end_sessions_custom_batch_size() -> None:
    pool = ServerSessionPool(FakeClock())
    for _ in range(5):
        pool.release(ServerSession(1000.0), None)
    assert [len(c["endSessions"]) for c in pool.end_sessions_commands(batch_size=2)] == [2, 2, 1]
    with pytest.raises(ValueError):
        pool.end_sessions_commands(batch_size=0)


def _ct(time: int, inc: int, key: int = 0) -> dict[str, object]:
    return {
        "clusterTime": Timestamp(time, inc),
        "signature": {"hash": Binary(bytes(20)), "keyId": Int64(key)},
    }


def test_cluster_times_compare_by_timestamp_only() -> None:
    assert compare_cluster_times(_ct(5, 1), _ct(5, 2)) < 0
    assert compare_cluster_times(_ct(6, 0), _ct(5, 99)) > 0
    assert compare_cluster_times(_ct(5, 1, key=1), _ct(5, 1, key=2)) == 0
    assert compare_cluster_times(None, _ct(0, 1)) < 0
    assert compare_cluster_times(_ct(0, 1), None) > 0
    assert compare_cluster_times(None, None) == 0
    assert cluster_time_value(_ct(7, 3)) == Timestamp(7, 3)
    with pytest.raises(TypeError):
        cluster_time_value({"clusterTime": 5})


def test_greater_cluster_time_keeps_the_winners_signature() -> None:
    low, high = _ct(5, 1, key=1), _ct(5, 2, key=2)
    assert greater_cluster_time(low, high) is high
    assert greater_cluster_time(high, low) is high
    assert greater_cluster_time(None, low) is low
    assert greater_cluster_time(low, None) is low
    equal = _ct(5, 1, key=9)
    assert greater_cluster_time(low, equal) is low


def test_cluster_clock_only_moves_forward() -> None:
    assert ClusterClock().cluster_time is None
    clock = ClusterClock()
    assert clock.advance(_ct(5, 2))
    assert not clock.advance(_ct(5, 1))
    assert not clock.advance(_ct(5, 2, key=7))
    assert clock.cluster_time == _ct(5, 2)
    assert not clock.advance(None)
    assert clock.advance_from_reply({"ok": 1, "$clusterTime": _ct(6, 0)})
    assert not clock.advance_from_reply({"ok": 1})
    assert cluster_time_value(clock.cluster_time) == Timestamp(6, 0)


def test_greater_operation_time() -> None:
    assert greater_operation_time(None, Timestamp(1, 1)) == Timestamp(1, 1)
    assert greater_operation_time(Timestamp(2, 0), Timestamp(1, 9)) == Timestamp(2, 0)
    assert greater_operation_time(Timestamp(1, 1), Timestamp(1, 2)) == Timestamp(1, 2)
    assert greater_operation_time(Timestamp(1, 1), None) == Timestamp(1, 1)


def test_causal_read_concern_merges_after_cluster_time() -> None:
    t = Timestamp(10, 2)
    assert session_read_concern(None) is None
    assert session_read_concern({}, causal_consistency=True) is None  # no operation time yet
    assert session_read_concern(None, causal_consistency=True, operation_time=t) == {"afterClusterTime": t}
    assert session_read_concern({"level": "majority"}, causal_consistency=True, operation_time=t) == {
        "level": "majority",
        "afterClusterTime": t,
    }
    assert session_read_concern({"level": "local"}, operation_time=t) == {"level": "local"}


def test_snapshot_read_concern() -> None:
    t = Timestamp(7, 1)
    assert session_read_concern({"level": "majority"}, snapshot=True) == {"level": "snapshot"}
    assert session_read_concern(None, snapshot=True, snapshot_time=t, operation_time=Timestamp(9, 9)) == {
        "level": "snapshot",
        "atClusterTime": t,
    }


def test_snapshot_time_from_reply() -> None:
    t = Timestamp(5, 5)
    assert snapshot_time_from_reply({"ok": 1, "cursor": {"id": 0, "atClusterTime": t}}) == t
    assert snapshot_time_from_reply({"ok": 1, "values": [], "atClusterTime": t}) == t
    assert snapshot_time_from_reply({"ok": 1, "cursor": {"id": 0}}) is None
