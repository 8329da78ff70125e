"""The ``testRunner`` operations that need no client API: ``wait``, ``runOnThread``, ``waitForThread``,
``waitForEvent``, ``assertEventCount`` and ``assertTopologyType``.

The ones that do (``failPoint``, ``targetedFailPoint``, the session and collection assertions,
``createEntities``, ``assertNumberConnectionsCheckedOut``, ``recordTopologyDescription``,
``waitForPrimaryChange``) are registered beside the driver-facing operations.
"""

from __future__ import annotations

from typing import Any

import anyio

from spec_runner.unified.entities import EntityKind, EntityMap
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.events import acting_client
from spec_runner.unified.loader import Operation
from spec_runner.unified.operations import TEST_RUNNER, OperationCall, OperationContext, execute, operation
from spec_runner.unified.schema import OPERATION
from spec_runner.unified.threads import ThreadEntity

WAIT_LIMIT_SECONDS = 10.0


@operation("wait", object=TEST_RUNNER, required=("ms",))
async def wait(call: OperationCall) -> None:
    await anyio.sleep(call.arguments["ms"] / 1000)


@operation("runOnThread", object=TEST_RUNNER, required=("thread", "operation"))
async def run_on_thread(call: OperationCall) -> None:
    thread = call.entities.thread(call.arguments["thread"])
    raw = call.arguments["operation"]
    problems: list[str] = []
    OPERATION.check(raw, "operation", problems)
    if problems:
        raise UnifiedTestError(f"runOnThread: {'; '.join(problems)}")
    if not isinstance(thread, ThreadEntity):
        raise UnifiedTestError(f"entity {call.arguments['thread']!r} is not a thread")
    thread.schedule(Operation.parse(raw))


@operation("waitForThread", object=TEST_RUNNER, required=("thread",))
async def wait_for_thread(call: OperationCall) -> None:
    thread = call.entities.thread(call.arguments["thread"])
    await thread.join(WAIT_LIMIT_SECONDS)


@operation("waitForEvent", object=TEST_RUNNER, required=("client", "event", "count"))
async def wait_for_event(call: OperationCall) -> None:
    store = call.entities.client_events(call.arguments["client"])
    await store.wait_for(call.arguments["event"], call.arguments["count"], WAIT_LIMIT_SECONDS)


@operation("assertEventCount", object=TEST_RUNNER, required=("client", "event", "count"))
async def assert_event_count(call: OperationCall) -> None:
    store = call.entities.client_events(call.arguments["client"])
    expected, count = call.arguments["event"], call.arguments["count"]
    seen = store.count(expected)
    if seen != count:
        raise MatchError("assertEventCount", f"expected {count} x {dict(expected)}, observed {seen}")


@operation("assertTopologyType", object=TEST_RUNNER, required=("topologyDescription", "topologyType"))
async def assert_topology_type(call: OperationCall) -> None:
    description = call.entities.get(call.arguments["topologyDescription"], EntityKind.TOPOLOGY_DESCRIPTION)
    actual = topology_type_name(description)
    if actual != call.arguments["topologyType"]:
        raise MatchError("assertTopologyType", f"expected {call.arguments['topologyType']}, got {actual}")


def topology_type_name(description: Any) -> str:
    """The SDAM name of a recorded topology description's type (``ReplicaSetWithPrimary``)."""
    name = getattr(description, "topology_type_name", None)
    if isinstance(name, str):
        return name
    kind = getattr(description, "topology_type", None)
    return str(getattr(kind, "name", kind))


def acting_client_of(entities: EntityMap, op: Operation) -> str | None:
    """The client entity ``op`` acts for: its object's client (a database, collection, session or bucket
    remembers the client it came from), or a ``testRunner`` operation's ``client`` / ``session`` argument's."""
    runner_op = op.object == TEST_RUNNER
    name = op.arguments.get("client", op.arguments.get("session")) if runner_op else op.object
    if not isinstance(name, str) or name not in entities:
        return None
    entity = entities.entity(name)
    if entity.kind is EntityKind.CLIENT:
        return name
    owner = entity.extras.get("client")
    return owner if isinstance(owner, str) else None


async def execute_as_client(context: OperationContext, op: Operation) -> Any:
    """``execute`` with what is logged meanwhile attributed to the client ``op`` acts for."""
    with acting_client(acting_client_of(context.entities, op)):
        return await execute(context, op)


def add_thread(context: OperationContext, name: str) -> ThreadEntity:
    """Create thread entity ``name``; its operations go through the same ``execute`` path as the test's."""
    if context.thread_tasks is None:
        raise UnifiedTestError(f"thread {name!r}: threads run only within a test (no task group to run in)")
    thread = ThreadEntity(name, lambda op: execute_as_client(context, op), context.thread_tasks)
    context.entities.add(name, EntityKind.THREAD, thread)
    return thread
