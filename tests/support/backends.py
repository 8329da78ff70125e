"""Running tests on more than one backend: which tests run only on asyncio, and why (under ``pytest --backend
trio`` they are skipped with the reason), and the tasks a run holds apart from any client's.

A test is listed in ``ASYNCIO_ONLY`` when what it checks is asyncio's own machinery (the loop's call_later, a Task's cancel(),
the loop's exception handler, closing or replacing an event loop, uvloop), so it has no trio counterpart as
written; the behaviour itself is covered on trio by the tests written for both backends. Entries are node id
prefixes (a module, or one test of it).
"""

from __future__ import annotations

import anyio

from mongio.client import MongoClient

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


async def tasks_of_the_run(uri: str) -> set[int]:
    """The tasks running now, once mongio has been used on this run: what mongio starts at its first use in a
    run and keeps until the run ends, as an event loop is kept (on trio, the task serving the run's callbacks
    and timers), is among them; a client's own tasks are not, since the client used for this is closed."""
    async with MongoClient(uri) as client:
        await client.admin.command("ping")
    return {task.id for task in anyio.get_running_tasks()}
