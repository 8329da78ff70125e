"""Which tasks are running, on either backend: how the soak (``spec_runner.cluster.soak``) and the tests show that
a run left no task behind."""

from __future__ import annotations

import anyio

# The task that plays the event loop's part in a trio run (mongio.backend.trio_loop): it runs the run's
# callbacks and timers, and comes and goes with them, as the loop itself does on asyncio (where it is no task).
LOOP_TASK_NAMES = frozenset({"mongio callback runner"})


def running_tasks() -> dict[int, str | None]:
    """The tasks running now, by id with their names, leaving out the one playing the event loop's part."""
    return {task.id: task.name for task in anyio.get_running_tasks() if task.name not in LOOP_TASK_NAMES}


def tasks_started_since(before: dict[int, str | None]) -> list[str | None]:
    """The names of the tasks running now that were not running at ``before`` (a ``running_tasks()``)."""
    return [name for task_id, name in running_tasks().items() if task_id not in before]
