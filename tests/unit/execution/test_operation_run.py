"""The per-operation records of the executor: an operation's id is taken when first asked, once, and shared by
the operations a ``share`` block of the same task runs; an attempt starts knowing nothing of its server."""

from __future__ import annotations

import asyncio
from typing import Any

from mongio.execution.operation_run import Attempt, OperationIds, OperationRun
from mongio.operations.run_command import RunCommand


def run() -> OperationRun[Any]:
    return OperationRun(RunCommand("db", "ping"), None, None)


async def test_an_operation_takes_its_id_when_first_asked_and_keeps_it() -> None:
    ids = OperationIds()
    first, second = run(), run()
    assert first.operation_id == 0  # nothing taken while nobody asks
    assert ids.of(second) == 1
    assert ids.of(first) == 2 and ids.of(first) == 2
    assert ids.new() == 3


async def test_operations_in_a_share_block_of_their_task_get_its_id() -> None:
    ids, other_ids = OperationIds(), OperationIds()
    token = ids.share()
    try:
        a, b, foreign = run(), run(), run()
        assert ids.of(a) == ids.of(b) == 1
        assert other_ids.of(foreign) == 1  # another client's ids are its own
        in_another_task = await asyncio.ensure_future(_id_in_this_task(ids))
        assert in_another_task == 2  # a task started inside the block inherits the variable, not the id
    finally:
        ids.unshare(token)
    assert ids.of(run()) == 3


async def _id_in_this_task(ids: OperationIds) -> int:
    return ids.of(run())


def test_an_attempt_starts_with_the_deadline_and_nothing_sent() -> None:
    attempt = Attempt(12.5)
    assert (attempt.deadline, attempt.server_address, attempt.wire_version) == (12.5, None, None)
    assert not attempt.sent and not attempt.from_mongos and attempt.generation == 0
