"""The ``testRunner`` operations that need the driver or the server: fail points, the session, collection
and index assertions, ``createEntities``, ``assertNumberConnectionsCheckedOut``, ``recordTopologyDescription``,
``waitForPrimaryChange`` and ``loop``.

(``wait``, ``runOnThread``, ``waitForThread``, ``waitForEvent``, ``assertEventCount`` and
``assertTopologyType`` are in ``special``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel

from spec_runner.unified.backend import MongioBackend
from spec_runner.unified.entities import EntityKind
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.events import CommandStartedEvent
from spec_runner.unified.loader import EntityDescription, Operation
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import (
    TEST_RUNNER,
    OperationCall,
    OperationContext,
    execute,
    operation,
)
from spec_runner.unified.runner import create_entities

WAIT_LIMIT_SECONDS = 10.0


def _backend(call: OperationCall) -> MongioBackend:
    backend = call.context.runner
    if not isinstance(backend, MongioBackend):
        raise UnifiedTestError(f"{call.operation.name} needs the mongio backend")
    return backend


# --- fail points ------------------------------------------------------------------------------------------


@operation("failPoint", object=TEST_RUNNER, required=("client", "failPoint"))
async def fail_point(call: OperationCall) -> Any:
    # Through the client entity, as the format requires (its check-out and connection show in the test's CMAP
    # events); the runner's own connection turns it off on the same server at the end of the test.
    client = call.entities.client(call.arguments["client"])
    await _backend(call).set_fail_point(call.arguments["failPoint"], client)
    return MISSING


@operation("targetedFailPoint", object=TEST_RUNNER, required=("session", "failPoint"))
async def targeted_fail_point(call: OperationCall) -> Any:
    session = call.arguments["session"]
    pinned = getattr(session, "_pinned_address", None)
    if pinned is None and _backend(call).facts.topology == "sharded":
        raise MatchError("targetedFailPoint", "the session is not pinned to a mongos")
    address = None
    if pinned is not None and _backend(call).deployment is not None:
        host, port = pinned
        address = f"{host}:{port}"
    await _backend(call).set_fail_point(call.arguments["failPoint"], address=address)
    return MISSING


# --- sessions ---------------------------------------------------------------------------------------------

_TRANSACTION_STATES = {
    "NO_TXN": "none",
    "STARTING": "starting",
    "IN_PROGRESS": "in_progress",
    "COMMITTED": "committed",
    "COMMITTED_EMPTY": "committed",
    "ABORTED": "aborted",
}


def transaction_state(session: Any) -> str:
    """The format's name (``none``, ``starting``, ``in_progress``, ``committed``, ``aborted``) of a session's
    transaction state."""
    transaction = getattr(session, "_transaction", None)
    state = getattr(transaction, "state", None)
    if state is None:
        if not hasattr(session, "in_transaction"):
            raise NotImplementedError("the session exposes no transaction state")
        return "in_progress" if session.in_transaction else "none"
    name = getattr(state, "name", str(state))
    return _TRANSACTION_STATES.get(name, str(name).lower())


@operation("assertSessionTransactionState", object=TEST_RUNNER, required=("session", "state"))
async def assert_session_transaction_state(call: OperationCall) -> Any:
    session = call.arguments["session"]
    actual = transaction_state(session)
    if actual != call.arguments["state"]:
        raise MatchError("assertSessionTransactionState", f"expected {call.arguments['state']}, got {actual}")
    return MISSING


def _pinned(session: Any) -> bool:
    for attribute in ("_pinned_address", "_pinned_connection"):
        if getattr(session, attribute, None) is not None:
            return True
    transaction = getattr(session, "_transaction", None)
    return getattr(transaction, "pinned_address", None) is not None


@operation("assertSessionPinned", object=TEST_RUNNER, required=("session",))
async def assert_session_pinned(call: OperationCall) -> Any:
    if not _pinned(call.arguments["session"]):
        raise MatchError("assertSessionPinned", "the session is not pinned")
    return MISSING


@operation("assertSessionUnpinned", object=TEST_RUNNER, required=("session",))
async def assert_session_unpinned(call: OperationCall) -> Any:
    if _pinned(call.arguments["session"]):
        raise MatchError("assertSessionUnpinned", "the session is pinned")
    return MISSING


def _dirty(session: Any) -> bool:
    server_session = getattr(session, "_server_session", None)
    if server_session is None:
        return False
    return bool(server_session.dirty)


@operation("assertSessionDirty", object=TEST_RUNNER, required=("session",))
async def assert_session_dirty(call: OperationCall) -> Any:
    if not _dirty(call.arguments["session"]):
        raise MatchError("assertSessionDirty", "the session's server session is not marked dirty")
    return MISSING


@operation("assertSessionNotDirty", object=TEST_RUNNER, required=("session",))
async def assert_session_not_dirty(call: OperationCall) -> Any:
    if _dirty(call.arguments["session"]):
        raise MatchError("assertSessionNotDirty", "the session's server session is marked dirty")
    return MISSING


def _last_two_lsids(call: OperationCall) -> tuple[Any, Any]:
    store = call.entities.client_events(call.arguments["client"])
    started = [e for e in store.events if isinstance(e, CommandStartedEvent)]
    if len(started) < 2:
        raise MatchError(call.operation.name, f"needs two command started events, observed {len(started)}")
    first, second = (event.command.get("lsid", MISSING) for event in started[-2:])
    if first is MISSING or second is MISSING:
        raise MatchError(call.operation.name, "one of the last two commands has no lsid")
    return first, second


@operation("assertSameLsidOnLastTwoCommands", object=TEST_RUNNER, required=("client",))
async def assert_same_lsid(call: OperationCall) -> Any:
    first, second = _last_two_lsids(call)
    if first != second:
        raise MatchError("assertSameLsidOnLastTwoCommands", f"{first!r} != {second!r}")
    return MISSING


@operation("assertDifferentLsidOnLastTwoCommands", object=TEST_RUNNER, required=("client",))
async def assert_different_lsid(call: OperationCall) -> Any:
    first, second = _last_two_lsids(call)
    if first == second:
        raise MatchError("assertDifferentLsidOnLastTwoCommands", f"both commands used {first!r}")
    return MISSING


# --- collections and indexes ------------------------------------------------------------------------------


async def _collection_names(call: OperationCall) -> list[str]:
    reply = await _backend(call).internal.command(
        call.arguments["databaseName"], {"listCollections": 1, "nameOnly": True}
    )
    return [str(item["name"]) for item in reply["cursor"]["firstBatch"]]


@operation("assertCollectionExists", object=TEST_RUNNER, required=("databaseName", "collectionName"))
async def assert_collection_exists(call: OperationCall) -> Any:
    names = await _collection_names(call)
    if call.arguments["collectionName"] not in names:
        raise MatchError(
            "assertCollectionExists",
            f"{call.arguments['databaseName']}.{call.arguments['collectionName']} not in {names}",
        )
    return MISSING


@operation("assertCollectionNotExists", object=TEST_RUNNER, required=("databaseName", "collectionName"))
async def assert_collection_not_exists(call: OperationCall) -> Any:
    if call.arguments["collectionName"] in await _collection_names(call):
        raise MatchError(
            "assertCollectionNotExists",
            f"{call.arguments['databaseName']}.{call.arguments['collectionName']} exists",
        )
    return MISSING


async def _index_names(call: OperationCall) -> list[str]:
    reply = await _backend(call).internal.command(
        call.arguments["databaseName"], {"listIndexes": call.arguments["collectionName"]}, check=False
    )
    if reply.get("ok") != 1:
        return []
    return [str(item["name"]) for item in reply["cursor"]["firstBatch"]]


@operation(
    "assertIndexExists", object=TEST_RUNNER, required=("databaseName", "collectionName", "indexName")
)
async def assert_index_exists(call: OperationCall) -> Any:
    names = await _index_names(call)
    if call.arguments["indexName"] not in names:
        raise MatchError("assertIndexExists", f"index {call.arguments['indexName']} not in {names}")
    return MISSING


@operation(
    "assertIndexNotExists", object=TEST_RUNNER, required=("databaseName", "collectionName", "indexName")
)
async def assert_index_not_exists(call: OperationCall) -> Any:
    if call.arguments["indexName"] in await _index_names(call):
        raise MatchError("assertIndexNotExists", f"index {call.arguments['indexName']} exists")
    return MISSING


# --- entities, connections and topology ---------------------------------------------------------------------


@operation("createEntities", object=TEST_RUNNER, required=("entities",))
async def create_entities_operation(call: OperationCall) -> Any:
    descriptions = [EntityDescription.parse(raw) for raw in call.arguments["entities"]]
    await create_entities(descriptions, call.context, _backend(call))
    return MISSING


def _pools(client: Any) -> list[Any]:
    topology = getattr(client, "_topology", None)
    if topology is None:
        return []
    servers = getattr(topology, "servers", None) or getattr(topology, "_servers", None) or {}
    values = servers.values() if isinstance(servers, Mapping) else servers
    return [server.pool for server in values if getattr(server, "pool", None) is not None]


@operation("assertNumberConnectionsCheckedOut", object=TEST_RUNNER, required=("client", "connections"))
async def assert_number_connections_checked_out(call: OperationCall) -> Any:
    client = call.entities.client(call.arguments["client"])
    pools = _pools(client)
    if getattr(client, "_topology", None) is not None and not pools:
        raise NotImplementedError("the client's topology exposes no servers with pools")
    checked_out = sum(int(pool.in_use_connection_count) for pool in pools)
    if checked_out != call.arguments["connections"]:
        raise MatchError(
            "assertNumberConnectionsCheckedOut",
            f"expected {call.arguments['connections']} connections checked out, found {checked_out}",
        )
    return MISSING


@operation("recordTopologyDescription", object=TEST_RUNNER, required=("client", "id"))
async def record_topology_description(call: OperationCall) -> Any:
    client = call.entities.client(call.arguments["client"])
    call.entities.add(call.arguments["id"], EntityKind.TOPOLOGY_DESCRIPTION, client.topology_description)
    return MISSING


def _primary(description: Any) -> Any:
    for server in description.server_descriptions().values():
        if getattr(server, "server_type_name", None) == "RSPrimary":
            return server.address
    return None


@operation(
    "waitForPrimaryChange",
    object=TEST_RUNNER,
    required=("client", "priorTopologyDescription"),
    optional=("timeoutMS",),
)
async def wait_for_primary_change(call: OperationCall) -> Any:
    client = call.entities.client(call.arguments["client"])
    prior = call.entities.topology_description(call.arguments["priorTopologyDescription"])
    before = _primary(prior)
    within = call.arguments.get("timeoutMS", 10_000) / 1000
    topology = getattr(client, "_topology", None)
    if topology is None:
        raise NotImplementedError("the client exposes no topology to wait on")

    def changed(description: Any) -> bool:
        now = _primary(description)
        return now is not None and now != before

    try:
        with anyio.fail_after(within):
            await topology.wait_for_description(changed)
    except TimeoutError:
        raise MatchError("waitForPrimaryChange", f"the primary is still {before} after {within}s") from None
    return MISSING


# --- loop ---------------------------------------------------------------------------------------------------


@operation(
    "loop",
    object=TEST_RUNNER,
    required=("operations",),
    optional=("storeErrorsAsEntity", "storeFailuresAsEntity", "storeSuccessesAsEntity", "storeIterationsAsEntity"),
)
async def loop_operation(call: OperationCall) -> Any:
    arguments = call.arguments
    operations = [Operation.parse(raw) for raw in arguments["operations"]]
    errors = _store_list(call.context, arguments.get("storeErrorsAsEntity"))
    failures = _store_list(call.context, arguments.get("storeFailuresAsEntity"))
    successes_name = arguments.get("storeSuccessesAsEntity")
    iterations_name = arguments.get("storeIterationsAsEntity")
    successes = iterations = 0
    stop = call.context.state.setdefault("loop_stop", anyio.Event())
    # Runs until the runner sets the ``loop_stop`` event (the workload executor's stop signal).
    while not stop.is_set():
        for op in operations:
            try:
                await execute(call.context, op)
                successes += 1
            except UnifiedTestError:
                raise
            except Exception as exc:
                failed = isinstance(exc, AssertionError)
                target = failures if failed and failures is not None else errors
                if target is None:
                    raise
                target.append({"error": str(exc), "time": anyio.current_time()})
                break
        iterations += 1
        await anyio.lowlevel.checkpoint()
    for name, value in ((successes_name, successes), (iterations_name, iterations)):
        if name is not None:
            call.entities.add_bson(name, value)
    return MISSING


def _store_list(context: OperationContext, name: str | None) -> list[Any] | None:
    return None if name is None else context.entities.new_list(name)
