"""The CSOT deadline: timeout() nesting (sync and async, across tasks), remaining time, maxTimeMS and expiry."""

from __future__ import annotations

import asyncio
import contextvars
import math
import types
from collections.abc import Generator

import pytest

from mongio.errors import ServerSelectionTimeoutError
from mongio.execution import deadline as csot
from mongio.execution.deadline import (
    OperationTimeoutError,
    TimeoutMode,
    checkout_timeout,
    connect_timeout,
    current_deadline,
    deadline_from_timeout_ms,
    establishing_until,
    establishment_deadline,
    is_enabled,
    level_timeout,
    max_time_ms_for,
    max_time_policy,
    raise_if_expired,
    remaining,
    selection_deadline,
    sending_max_time,
    timeout,
    timeout_error,
    timeout_seconds,
    within,
)


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_no_deadline_by_default() -> None:
    assert current_deadline() is None
    assert remaining() is None
    assert not is_enabled()
    assert max_time_ms_for(0.01) is None
    raise_if_expired()


def test_timeout_sets_and_restores_the_deadline() -> None:
    clock = FakeClock(100.0)
    with timeout(2.5, clock=clock):
        assert current_deadline() == 102.5
        assert remaining(now=101.0) == 1.5
        assert is_enabled()
    assert current_deadline() is None


def test_inner_timeout_shortens_but_never_extends() -> None:
    clock = FakeClock(100.0)
    with timeout(1.0, clock=clock):
        with timeout(10.0, clock=clock):
            assert current_deadline() == 101.0
        clock.now = 100.5
        with timeout(0.2, clock=clock):
            assert current_deadline() == 100.7
            with timeout(None):
                assert current_deadline() == 100.7
            with timeout(math.inf):
                assert current_deadline() == 100.7
        assert current_deadline() == 101.0
    assert current_deadline() is None


def test_infinite_timeout_enables_csot_without_bound() -> None:
    with timeout(math.inf):
        assert is_enabled()
        assert remaining() == math.inf
        assert max_time_ms_for(0.5) is None
        raise_if_expired()
        with timeout(3.0, clock=FakeClock(0.0)):
            assert current_deadline() == 3.0
    with timeout(None):
        assert not is_enabled()


def test_reentering_the_same_timeout_object_reads_the_clock_each_time() -> None:
    clock = FakeClock(0.0)
    block = timeout(5.0, clock=clock)
    with block:
        assert current_deadline() == 5.0
        clock.now = 1.0
        with block:
            assert current_deadline() == 5.0  # min(5.0, 6.0)
        assert current_deadline() == 5.0
    clock.now = 10.0
    with block:
        assert current_deadline() == 15.0
    assert current_deadline() is None


def test_deadline_restored_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), timeout(1.0):
        raise RuntimeError("inside")
    assert current_deadline() is None


@types.coroutine
def _suspend() -> Generator[None, None, None]:
    yield


@pytest.mark.parametrize("form", ["with", "async with"])
def test_a_coroutine_closed_outside_its_context_leaves_the_block_quietly(form: str) -> None:
    """A task destroyed with the loop it pended on has its coroutine closed later by the garbage collector,
    in some other context: leaving the block there must not raise (the block's context is gone)."""

    async def inside_a_block() -> None:
        if form == "with":
            with csot.timeout(5):
                await _suspend()
        else:
            async with csot.timeout(5):
                await _suspend()

    coroutine = inside_a_block()
    contextvars.copy_context().run(coroutine.send, None)  # suspended inside the block, in a context of its own
    coroutine.close()
    assert csot.current_deadline() is None


def test_an_error_leaving_the_block_in_the_wrong_context_is_still_raised() -> None:
    block = csot.timeout(5)
    contextvars.copy_context().run(block.__enter__)
    with pytest.raises(ValueError, match="different Context"):
        block.__exit__(None, None, None)


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_negative_or_nan_timeout_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        timeout(bad)


async def test_async_timeout_nests_and_follows_tasks() -> None:
    clock = FakeClock(50.0)
    seen: list[float | None] = []

    async def child() -> None:
        seen.append(current_deadline())
        async with timeout(0.5, clock=clock):
            seen.append(current_deadline())
        seen.append(current_deadline())

    async with timeout(2.0, clock=clock):
        await asyncio.gather(child(), child())
        assert current_deadline() == 52.0
        async with timeout(30.0, clock=clock):
            assert current_deadline() == 52.0
    assert current_deadline() is None
    assert seen.count(50.5) == 2 and seen.count(52.0) == 4


async def test_deadline_does_not_leak_between_concurrent_tasks() -> None:
    clock = FakeClock(0.0)
    started = asyncio.Event()
    release = asyncio.Event()
    observed: dict[str, float | None] = {}

    async def with_deadline() -> None:
        async with timeout(1.0, clock=clock):
            started.set()
            await release.wait()
            observed["inner"] = current_deadline()

    async def without_deadline() -> None:
        await started.wait()
        observed["other"] = current_deadline()
        release.set()

    await asyncio.gather(with_deadline(), without_deadline())
    assert observed == {"inner": 1.0, "other": None}


def test_max_time_ms_is_remaining_minus_min_rtt() -> None:
    with timeout(1.0, clock=FakeClock(0.0)):
        assert max_time_ms_for(0.0, now=0.0) == 1000
        assert max_time_ms_for(0.1, now=0.0) == 900
        assert max_time_ms_for(0.0123, now=0.5) == 487
        assert max_time_ms_for(0.0, now=0.9985) == 1


@pytest.mark.parametrize(("now", "rtt"), [(0.9, 0.1), (0.95, 0.1), (1.0, 0.0), (2.0, 0.0), (0.9995, 0.0)])
def test_max_time_ms_raises_before_sending_when_rtt_eats_the_time(now: float, rtt: float) -> None:
    with timeout(1.0, clock=FakeClock(0.0)), pytest.raises(OperationTimeoutError) as info:
        max_time_ms_for(rtt, now=now)
    assert info.value.timeout
    assert info.value.cause is None
    assert "round-trip time" in str(info.value)


def test_raise_if_expired() -> None:
    with timeout(1.0, clock=FakeClock(0.0)):
        raise_if_expired(now=0.999)
        with pytest.raises(OperationTimeoutError, match="operation timed out"):
            raise_if_expired(now=1.0)


def test_timeout_error_wraps_the_underlying_error_and_copies_labels() -> None:
    cause = ServerSelectionTimeoutError("no primary", error_labels=["TransientTransactionError"])
    error = timeout_error(cause)
    assert isinstance(error, OperationTimeoutError)
    assert error.cause is cause and error.__cause__ is cause
    assert "no primary" in str(error)
    assert error.has_error_label("TransientTransactionError")
    bare = timeout_error(detail="during server selection")
    assert "during server selection" in str(bare) and bare.cause is None


def test_deadline_from_timeout_ms() -> None:
    assert deadline_from_timeout_ms(None) is None
    assert deadline_from_timeout_ms(0) == math.inf
    assert deadline_from_timeout_ms(250, now=10.0) == 10.25
    with pytest.raises(ValueError):
        deadline_from_timeout_ms(-1)


def test_without_csot_the_legacy_timeouts_apply() -> None:
    deadline = selection_deadline(30.0, now=10.0)
    assert deadline == 40.0
    assert checkout_timeout(deadline, 2.0, now=39.0) == 2.0
    assert checkout_timeout(deadline, None, now=39.0) is None
    assert connect_timeout(deadline, 20.0, now=39.0) == 20.0


def test_csot_shorter_than_server_selection_timeout_bounds_selection_checkout_and_connect() -> None:
    with timeout(5.0, clock=FakeClock(10.0)):
        deadline = selection_deadline(30.0, now=10.0)
        assert deadline == 15.0
        # waitQueueTimeoutMS is ignored: the rest of the computed selection timeout applies to checkout.
        assert checkout_timeout(deadline, 100.0, now=12.0) == 3.0
        assert checkout_timeout(deadline, 100.0, now=16.0) == 0.0
        assert connect_timeout(deadline, 20.0, now=12.0) == 3.0
        assert connect_timeout(deadline, 1.0, now=12.0) == 1.0
        assert connect_timeout(deadline, None, now=14.5) == 0.5


def test_server_selection_timeout_shorter_than_csot_wins() -> None:
    with timeout(60.0, clock=FakeClock(0.0)):
        deadline = selection_deadline(2.0, now=0.0)
        assert deadline == 2.0
        assert checkout_timeout(deadline, None, now=1.5) == 0.5


def test_server_selection_timeout_honoured_with_infinite_csot() -> None:
    with timeout(math.inf):
        deadline = selection_deadline(30.0, now=0.0)
        assert deadline == 30.0
        assert checkout_timeout(deadline, 5.0, now=1.0) == 29.0


def test_within_sets_an_absolute_deadline_never_later_than_the_enclosing_one() -> None:
    clock = FakeClock(100.0)
    with within(150.0):
        assert current_deadline() == 150.0
        with timeout(10.0, clock=clock):
            assert current_deadline() == 110.0
    with timeout(1.0, clock=clock):
        with within(150.0):
            assert current_deadline() == 101.0
        with within(None):
            assert current_deadline() == 101.0
    assert current_deadline() is None


def test_max_time_policy_is_send_unless_a_block_says_otherwise() -> None:
    assert max_time_policy() == "send"
    with sending_max_time("omit"):
        assert max_time_policy() == "omit"
        with sending_max_time("cap"):
            assert max_time_policy() == "cap"
        assert max_time_policy() == "omit"
    assert max_time_policy() == "send"


def test_timeout_seconds_and_level_timeout_map_zero_to_no_bound() -> None:
    assert timeout_seconds(None) is None
    assert timeout_seconds(0) == math.inf
    assert timeout_seconds(250) == 0.25
    with pytest.raises(ValueError):
        timeout_seconds(-1)
    assert level_timeout(None) is None
    assert level_timeout(0) == math.inf
    assert level_timeout(1.5) == 1.5
    for bad in (-0.5, math.nan, True, "1"):
        with pytest.raises(ValueError):
            level_timeout(bad)  # type: ignore[arg-type]


def test_timeout_mode_values_are_the_specification_names() -> None:
    assert TimeoutMode("cursorLifetime") is TimeoutMode.CURSOR_LIFETIME
    assert TimeoutMode("iteration") is TimeoutMode.ITERATION


def test_establishment_deadline_is_the_selection_end_during_checkout_under_csot() -> None:
    assert establishment_deadline() is None
    with establishing_until(5.0):  # CSOT off: nothing to bound
        assert establishment_deadline() is None
    with within(100.0):
        assert establishment_deadline() == 100.0
        with establishing_until(50.0):
            assert establishment_deadline() == 50.0
        assert establishment_deadline() == 100.0
    with timeout(math.inf):
        assert establishment_deadline() is None


def test_the_timeout_in_force_follows_one_order_of_precedence() -> None:
    # What is left of an enclosing deadline first, then the database's or collection's timeout, then the
    # session's default_timeout_ms, then the client's timeoutMS.
    assert csot.timeout_in_force(5.0, 3000, 1.0, deadline=110.0, now=100.0) == 10.0
    assert csot.timeout_in_force(5.0, 3000, 1.0, deadline=90.0, now=100.0) == 0.0
    assert csot.timeout_in_force(5.0, 3000, 1.0, deadline=math.inf) == math.inf
    assert csot.timeout_in_force(5.0, 3000, 1.0) == 5.0
    assert csot.timeout_in_force(None, 3000, 1.0) == 3.0
    assert csot.timeout_in_force(None, 0, 1.0) == math.inf
    assert csot.timeout_in_force(None, None, 1.0) == 1.0
    assert csot.timeout_in_force(None, None, None) is None
