"""Executing one test of a unified test file, in the order the format prescribes.

What needs the driver (setting up collections, making client/database/collection/session/bucket entities,
reading collections back, the end-of-test cleanup) goes through a ``Backend``; everything else (skips,
requirements, threads, running and checking operations, expectEvents, expectLogMessages, comparing outcome
data) is done here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from spec_runner.model import CaseSkipped
from spec_runner.unified import special
from spec_runner.unified.entities import EntityKind, EntityMap
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.events import check_events, check_log_messages
from spec_runner.unified.loader import CollectionData, EntityDescription, UnifiedTest, UnifiedTestFile
from spec_runner.unified.matcher import documents_equal
from spec_runner.unified.operations import REGISTRY, OperationContext, OperationRegistry
from spec_runner.unified.requirements import ServerFacts, unmet_requirements
from spec_runner.unified.threads import ThreadEntity, thread_tasks
from spec_runner.unified.tracing import SpanStore, check_tracing_messages


class TestSkipped(CaseSkipped):
    """The test is not run here; the message says why (a ``skipReason`` or an unmet requirement)."""

    __test__ = False  # not a pytest test class


class Backend(Protocol):
    """The driver-facing half of the runner."""

    async def prepare_collection(self, data: CollectionData) -> None:
        """``initialData``: drop the collection (and its ``enxcol_`` collections), create it (with
        ``createOptions`` when given) and insert the documents, with the internal client and majority
        write concern."""
        ...

    async def create_entity(self, description: EntityDescription, context: OperationContext) -> None:
        """Make a client, clientEncryption, database, collection, session or bucket entity and add it to
        ``context.entities`` (a client with its ``events``/``logs`` stores as extras, a session with its lsid)."""
        ...

    async def collection_documents(self, data: CollectionData) -> Sequence[Mapping[str, Any]]:
        """``outcome``: the collection's documents sorted by ``_id``, read with the internal client, a primary
        read preference and a local read concern."""
        ...

    async def disable_fail_points(self) -> None:
        """Turn off every fail point the test set, on the server it was set on (done once the operations are
        over, before the events and the outcome are checked, and again by ``end_test``)."""
        ...

    async def end_test(self, context: OperationContext) -> None:
        """Disable the fail points set, end sessions, close cursors, change streams and clients, and end
        open transactions; must not raise for what the test already broke."""
        ...


def skip_reason(test_file: UnifiedTestFile, test: UnifiedTest, facts: ServerFacts) -> str | None:
    """Why ``test`` is not run against a server with ``facts`` (``None``: it is run)."""
    if test.skip_reason is not None:
        return f"skipReason: {test.skip_reason}"
    reason = unmet_requirements(test_file.run_on_requirements, facts)
    if reason is not None:
        return f"file {reason}"
    reason = unmet_requirements(test.run_on_requirements, facts)
    if reason is not None:
        return f"test {reason}"
    return None


async def create_entities(
    descriptions: Sequence[EntityDescription], context: OperationContext, backend: Backend
) -> None:
    """Create entities in the order given; threads are made here, everything else by the backend."""
    for description in descriptions:
        if description.kind == EntityKind.THREAD.value:
            special.add_thread(context, description.id)
        else:
            await backend.create_entity(description, context)
            if description.id not in context.entities:
                raise UnifiedTestError(f"the backend did not store entity {description.id!r}")


def check_outcome(expected: CollectionData, actual: Sequence[Mapping[str, Any]]) -> None:
    """Collection contents must match exactly (key order aside): no operators, no extra fields."""
    where = f"outcome[{expected.namespace}]"
    if len(actual) != len(expected.documents):
        raise MatchError(
            where, f"expected {len(expected.documents)} documents, found {len(actual)}: {list(actual)}"
        )
    for index, (want, got) in enumerate(zip(expected.documents, actual)):
        if not documents_equal(want, got):
            raise MatchError(f"{where}[{index}]", f"expected {want!r}, found {got!r}")


def _tracing_expectations(raw: Any) -> list[Mapping[str, Any]]:
    """``expectTracingMessages``: one object (as the format's text describes it) or an array of them."""
    if raw is None:
        return []
    return [raw] if isinstance(raw, Mapping) else list(raw)


def _client_spans(entities: EntityMap, expected: Mapping[str, Any]) -> SpanStore:
    name = expected["client"]
    store = entities.entity(name, EntityKind.CLIENT).extras.get("spans")
    if not isinstance(store, SpanStore):
        raise UnifiedTestError(f"expectTracingMessages: client {name!r} does not observe tracing messages")
    return store


def _stop_recording(entities: EntityMap) -> None:
    for entity in entities.of_kind(EntityKind.CLIENT):
        for key in ("events", "logs", "spans"):
            store = entity.extras.get(key)
            if store is not None:
                store.enabled = False


async def run_test(
    test_file: UnifiedTestFile,
    test: UnifiedTest,
    *,
    facts: ServerFacts,
    backend: Backend,
    registry: OperationRegistry = REGISTRY,
    inspect_entities: Callable[[EntityMap], None] | None = None,
) -> None:
    """Run one test; raises ``TestSkipped`` when it is not to be run, ``AssertionError`` (``MatchError``)
    when it fails, ``UnifiedTestError`` when the test itself asks for something unsupported.

    ``inspect_entities`` is called with the entity map before it is cleared (the format lets whoever runs the
    tests look at the entities at the end of each test)."""
    reason = skip_reason(test_file, test, facts)
    if reason is not None:
        raise TestSkipped(reason)
    for data in test_file.initial_data or ():
        await backend.prepare_collection(data)
    async with thread_tasks() as threads:
        context = OperationContext(entities=EntityMap(), runner=backend, registry=registry, thread_tasks=threads)
        try:
            await create_entities(test_file.create_entities, context, backend)
            for op in test.operations:
                await special.execute_as_client(context, op)
            _stop_recording(context.entities)
            # A fail point still on could fail the outcome's reads; the format turns them off at this point.
            await backend.disable_fail_points()
            for expected in test.expect_events or ():
                store = context.entities.client_events(expected["client"])
                check_events(expected, store.events, entities=context.entities)
            for expected in test.expect_log_messages or ():
                logs = context.entities.client_logs(expected["client"])
                check_log_messages(expected, logs.messages, entities=context.entities)
            for expected in _tracing_expectations(test.expect_tracing_messages):
                check_tracing_messages(expected, _client_spans(context.entities, expected), entities=context.entities)
            for data in test.outcome or ():
                check_outcome(data, await backend.collection_documents(data))
        finally:
            for entity in context.entities.of_kind(EntityKind.THREAD):
                if isinstance(entity.value, ThreadEntity):
                    await entity.value.close()
            await backend.end_test(context)
            if inspect_entities is not None:
                inspect_entities(context.entities)
            context.entities.clear()
