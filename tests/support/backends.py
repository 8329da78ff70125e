"""Running tests on more than one backend: which tests run only on asyncio, and why (under ``pytest --backend
trio`` they are skipped with the reason), and which tasks run, on either backend.

A test is listed in ``ASYNCIO_ONLY`` when what it checks is asyncio's own machinery (the loop's call_later, a Task's cancel(),
the loop's exception handler, closing or replacing an event loop, uvloop), so it has no trio counterpart as
written; the behaviour itself is covered on trio by the tests written for both backends. Entries are node id
prefixes (a module, or one test of it).
"""

from __future__ import annotations

import anyio

ASYNCIO_ONLY: dict[str, str] = {
    "tests/integration/api/test_event_loops.py": "one client on successive asyncio loops, a loop per thread and "
    "pytest-asyncio's loops (a client on asyncio then trio then asyncio: tests/integration/api/test_client_trio.py)",
    "tests/integration/server/test_connection_stress.py": "tasks cancelled through Task.cancel() and the loop's "
    "call_later (on trio: the cancellation storm, test_pool_cancellation_storm.py)",
    "tests/integration/server/test_pool_cancellation.py": "the pool's waiters cancelled through Task.cancel() and "
    "the loop's call_later (on trio: the cancellation storm, test_pool_cancellation_storm.py)",
}


def asyncio_only_reason(nodeid: str) -> str | None:
    """Why the test ``nodeid`` runs only on asyncio (``None``: it runs on every backend)."""
    for prefix, reason in ASYNCIO_ONLY.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return reason
    return None


# The task that plays the event loop's part in a trio run (mongio.backend.trio_loop): it runs the run's
# callbacks and timers, and comes and goes with them, as the loop itself does on asyncio (where it is no task).
LOOP_TASK_NAMES = frozenset({"mongio callback runner"})


def running_tasks() -> dict[int, str | None]:
    """The tasks running now, by id with their names, leaving out the one playing the event loop's part."""
    return {task.id: task.name for task in anyio.get_running_tasks() if task.name not in LOOP_TASK_NAMES}


def tasks_started_since(before: dict[int, str | None]) -> list[str | None]:
    """The names of the tasks running now that were not running at ``before`` (a ``running_tasks()``)."""
    return [name for task_id, name in running_tasks().items() if task_id not in before]
