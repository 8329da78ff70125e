"""Cursors under a client-side operation timeout: which deadline and maxTimeMS rule each command of a cursor
runs under (CURSOR_LIFETIME, ITERATION, tailable cursors), the combinations the specification refuses, and
closing with a fresh timeout. Over the fake client of tests.support.fake_client, recording the CSOT context of each call."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

import mongio
from mongio.errors import ConfigurationError, InvalidOperation, OperationTimeoutError
from mongio.execution import deadline as csot
from mongio.operations.crud import CursorType
from tests.support.fake_client import CursorServer, FakeClient, QueuedReplies, documents


class Seen:
    """The command name, maxTimeMS policy and deadline each command ran under (every execute() call goes
    through execute_answered())."""

    def __init__(self, client: FakeClient) -> None:
        self.calls: list[tuple[str, str, float | None]] = []
        executor = client._executor
        original = executor.execute_answered

        async def recording(operation: Any, session: Any = None, **kwargs: Any) -> Any:
            deadline = csot.current_deadline()
            if deadline is None and kwargs.get("level_timeout") is not None:
                deadline = math.inf  # the executor would set the level's timeout itself
            self.calls.append((operation.command_name, csot.max_time_policy(), deadline))
            return await original(operation, session, **kwargs)

        executor.execute_answered = recording  # type: ignore[method-assign]

    def of(self, name: str) -> list[tuple[str, float | None]]:
        return [(policy, deadline) for command, policy, deadline in self.calls if command == name]


def setup(n: int = 5, timeout: float | None = 10.0) -> tuple[FakeClient, Seen, Any]:
    client = FakeClient(respond=CursorServer(documents(n)))
    seen = Seen(client)
    coll = client["db"]["coll"]
    if timeout is not None:
        coll = coll.with_options(timeout=timeout)
    return client, seen, coll


async def test_cursor_lifetime_shares_one_deadline_and_sends_max_time_ms_on_the_first_command_only() -> None:
    _, seen, coll = setup()
    with mongio.timeout(10.0):
        cursor = coll.find({}, batch_size=2)
    docs = await cursor.to_list()
    assert len(docs) == 5
    ((find_policy, find_deadline),) = seen.of("find")
    get_mores = seen.of("getMore")
    assert find_policy == "send"
    assert len(get_mores) == 2
    # Every getMore runs under the deadline the find had (the block the cursor was made in).
    assert all(policy == "omit" and deadline == find_deadline for policy, deadline in get_mores)


async def test_iteration_mode_gives_each_next_the_whole_timeout_and_no_max_time_ms() -> None:
    _, seen, coll = setup()
    cursor = coll.find({}, batch_size=2, timeout_mode=mongio.TimeoutMode.ITERATION)
    await cursor.to_list()
    ((find_policy, find_deadline),) = seen.of("find")
    assert find_policy == "omit"
    assert all(policy == "omit" for policy, _ in seen.of("getMore"))
    last = seen.of("getMore")[-1][1]
    assert find_deadline is not None and last is not None
    assert last > find_deadline  # counted afresh, not the first command's


async def test_tailable_cursors_send_no_max_time_ms_and_await_data_caps_the_await_time() -> None:
    _, seen, coll = setup()
    await coll.find({}, batch_size=2, cursor_type=CursorType.TAILABLE).to_list()
    assert {policy for command, policy, _ in seen.calls if command in ("find", "getMore")} == {"omit"}
    _, seen, coll = setup()
    cursor = coll.find({}, batch_size=2, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(50)
    await cursor.to_list()
    assert [policy for policy, _ in seen.of("find")] == ["send"]
    assert {policy for policy, _ in seen.of("getMore")} == {"cap"}


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"cursor_type": CursorType.TAILABLE, "timeout_mode": "cursorLifetime"}, InvalidOperation),
        ({"cursor_type": CursorType.TAILABLE_AWAIT, "timeout_mode": "cursorLifetime"}, InvalidOperation),
    ],
)
async def test_tailable_cursors_refuse_cursor_lifetime(kwargs: dict[str, Any], error: type[Exception]) -> None:
    _, seen, coll = setup()
    with pytest.raises(error):
        await coll.find({}, **kwargs)
    assert seen.calls == []


async def test_timeout_mode_needs_a_timeout() -> None:
    _, seen, coll = setup(timeout=None)
    with pytest.raises(ConfigurationError):
        await coll.find({}, timeout_mode="iteration")
    assert seen.calls == []


async def test_max_await_time_must_be_shorter_than_the_timeout() -> None:
    _, seen, coll = setup(timeout=0.1)
    cursor = coll.find({}, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(100)
    with pytest.raises(InvalidOperation):
        await cursor
    _, seen, coll = setup(timeout=0)  # no bound: any await time goes
    cursor = coll.find({}, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(100)
    await cursor
    assert seen.of("find")


async def test_an_aggregation_writing_out_refuses_iteration_mode() -> None:
    _, seen, coll = setup()
    with pytest.raises(InvalidOperation):
        await coll.aggregate([{"$out": "elsewhere"}], timeout_mode="iteration")
    with pytest.raises(InvalidOperation):
        await coll.aggregate([{"$merge": {"into": "elsewhere"}}], timeout_mode=mongio.TimeoutMode.ITERATION)
    assert seen.calls == []


async def test_close_kills_with_a_fresh_timeout_even_after_the_lifetime_deadline() -> None:
    _, seen, coll = setup()
    with mongio.timeout(10.0):
        cursor = await coll.find({}, batch_size=2)
    ((_, find_deadline),) = seen.of("find")
    await cursor.close()
    ((_, kill_deadline),) = seen.of("killCursors")
    assert find_deadline is not None and kill_deadline is not None
    assert kill_deadline > find_deadline  # refreshed, not the cursor's deadline


async def test_find_one_runs_its_find_under_the_collection_timeout_and_kills_a_left_open_cursor_afresh() -> None:
    client = FakeClient(respond=QueuedReplies(find={"cursor": {"id": 7, "ns": "db.coll", "firstBatch": [{"_id": 1}]}}))
    seen = Seen(client)
    coll = client["db"]["coll"].with_options(timeout=10.0)
    before = time.monotonic()
    assert await coll.find_one({}) == {"_id": 1}
    # The find gets the collection's timeout from the executor, with maxTimeMS sent, as a cursor's first
    # command does; the killCursors of the cursor the server kept gets that timeout afresh.
    assert seen.of("find") == [("send", math.inf)]
    ((kill_policy, kill_deadline),) = seen.of("killCursors")
    assert kill_policy == "send"
    assert kill_deadline is not None and before + 10.0 <= kill_deadline <= time.monotonic() + 10.0


async def test_find_one_in_a_timeout_block_kills_a_left_open_cursor_within_the_block() -> None:
    client = FakeClient(respond=QueuedReplies(find={"cursor": {"id": 7, "ns": "db.coll", "firstBatch": []}}))
    seen = Seen(client)
    with mongio.timeout(5.0):
        block = csot.current_deadline()
        assert await client["db"]["coll"].find_one({}) is None
    assert seen.of("find") == [("send", block)]
    assert seen.of("killCursors") == [("send", block)]


async def test_a_timed_out_get_more_leaves_the_cursor_open() -> None:
    client, seen, coll = setup()
    cursor = await coll.find({}, batch_size=2)
    executor = client._executor
    recording = executor.execute

    async def timing_out(operation: Any, session: Any = None, **kwargs: Any) -> Any:
        if operation.command_name == "getMore":
            raise OperationTimeoutError("operation timed out: the deadline passed")
        return await recording(operation, session, **kwargs)

    executor.execute = timing_out  # type: ignore[method-assign]
    await cursor.next()
    await cursor.next()
    with pytest.raises(OperationTimeoutError):
        await cursor.next()
    assert cursor.alive and seen.of("killCursors") == []
    executor.execute = recording  # type: ignore[method-assign]
    assert len(await cursor.to_list()) == 3  # the next call tries again


def test_clone_keeps_the_timeout_settings() -> None:
    _, _, coll = setup(timeout=2.5)
    cursor = coll.find({}, timeout_mode="iteration")
    other = cursor.clone()
    assert other._level_timeout == 2.5
    assert other._timeout_mode is mongio.TimeoutMode.ITERATION
