"""OpenTelemetry tracing against the test server: the OpenTelemetry prose tests (environment variables),
sensitive commands, a bulk write as one operation, cursors, and the application's span as the parent."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.events.command import CommandListener, CommandStartedEvent
from mongio.operations import DeleteOne, InsertOne
from mongio.tracing import ENABLED_VARIABLE, QUERY_TEXT_MAX_LENGTH_VARIABLE


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        span for span in spans if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


def named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [span for span in spans if span.name == name]
    return span


async def test_prose_1_enabled_through_the_environment(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prose test 1: with the variable false no span is made; with it true, spans are made. The client only
    names its tracer provider, so the variable alone decides."""
    monkeypatch.setenv(ENABLED_VARIABLE, "false")
    async with MongoClient(server_uri, tracing={"tracer_provider": provider}) as client:
        await client.tracing_prose.c.find({}).to_list()
    assert exporter.get_finished_spans() == ()
    monkeypatch.setenv(ENABLED_VARIABLE, "true")
    async with MongoClient(server_uri, tracing={"tracer_provider": provider}) as client:
        await client.tracing_prose.c.find({}).to_list()
    spans = list(exporter.get_finished_spans())
    operation = named(spans, "find tracing_prose.c")
    assert [span.name for span in children(spans, operation)] == ["find"]


async def test_prose_2_query_text_through_the_environment(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prose test 2: with a query text length in the environment, command spans carry db.query.text; without
    it they do not."""
    monkeypatch.setenv(ENABLED_VARIABLE, "true")
    monkeypatch.setenv(QUERY_TEXT_MAX_LENGTH_VARIABLE, "1024")
    async with MongoClient(server_uri, tracing={"tracer_provider": provider}) as client:
        await client.tracing_prose.c.find({"x": 1}).to_list()
    (command,) = [span for span in exporter.get_finished_spans() if span.name == "find"]
    assert command.attributes is not None
    assert command.attributes["db.query.text"] == '{"find": "c", "filter": {"x": 1}}'
    exporter.clear()
    monkeypatch.delenv(QUERY_TEXT_MAX_LENGTH_VARIABLE)
    async with MongoClient(server_uri, tracing={"tracer_provider": provider}) as client:
        await client.tracing_prose.c.find({"x": 1}).to_list()
    (command,) = [span for span in exporter.get_finished_spans() if span.name == "find"]
    assert command.attributes is not None and "db.query.text" not in command.attributes


def _client(server_uri: str, provider: TracerProvider, **tracing: Any) -> MongoClient:
    return MongoClient(server_uri, tracing={"enabled": True, "tracer_provider": provider, **tracing})


async def test_sensitive_command_has_no_command_span(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with _client(server_uri, provider, query_text_max_length=1000) as client:
        with pytest.raises(OperationFailure):
            await client.admin.command({"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": b"secret"})
        await client.admin.command({"ping": 1})
    spans = list(exporter.get_finished_spans())
    assert "saslStart" not in [span.name for span in spans]
    assert all("secret" not in str(span.attributes) for span in spans)
    sasl_operation, ping_operation = [span for span in spans if span.name == "runCommand admin"]
    assert children(spans, sasl_operation) == []
    assert sasl_operation.status.status_code is StatusCode.ERROR
    assert [span.name for span in children(spans, ping_operation)] == ["ping"]


async def test_bulk_write_is_one_operation(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    name = f"tracing_{uuid.uuid4().hex[:8]}"
    async with _client(server_uri, provider) as client:
        await client[name].c.bulk_write([InsertOne({"_id": 1}), InsertOne({"_id": 2}), DeleteOne({"_id": 1})])
        exporter.clear()
        await client[name].c.bulk_write([InsertOne({"_id": 3}), DeleteOne({"_id": 2})])
        spans = list(exporter.get_finished_spans())
        await client.drop_database(name)
    operation = named(spans, f"bulkWrite {name}.c")
    assert operation.attributes is not None and operation.attributes["db.operation.name"] == "bulkWrite"
    assert [span.name for span in children(spans, operation)] == ["insert", "delete"]
    assert len(spans) == 3


async def test_cursor_ids_and_get_more(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    name = f"tracing_{uuid.uuid4().hex[:8]}"
    async with _client(server_uri, provider) as client:
        coll = client[name].c
        await coll.insert_many([{"_id": index} for index in range(5)])
        exporter.clear()
        documents = await coll.find({}, batch_size=2).to_list()
        spans = list(exporter.get_finished_spans())
        await client.drop_database(name)
    assert len(documents) == 5
    find_command = named(spans, "find")
    assert find_command.attributes is not None
    cursor_id = find_command.attributes["db.mongodb.cursor_id"]
    assert isinstance(cursor_id, int) and cursor_id != 0
    get_mores = [span for span in spans if span.name == "getMore"]
    assert get_mores and all(
        span.attributes is not None and span.attributes["db.mongodb.cursor_id"] == cursor_id
        for span in get_mores
    )
    # Each getMore is an operation of its own, on the cursor's collection.
    assert len([span for span in spans if span.name == f"getMore {name}.c"]) == len(get_mores)


async def test_application_span_is_the_parent(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("application")
    async with _client(server_uri, provider) as client:
        with tracer.start_as_current_span("handle request") as request:
            await client.tracing_prose.c.count_documents({})
    spans = list(exporter.get_finished_spans())
    operation = named(spans, "aggregate tracing_prose.c")
    assert operation.parent is not None
    assert operation.parent.span_id == request.get_span_context().span_id
    assert operation.context.trace_id == request.get_span_context().trace_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # the driver leaves the context as it found it


class FindSent(CommandListener):
    """Sets ``sent`` once a ``find`` command is on the wire."""

    def __init__(self) -> None:
        self.sent = anyio.Event()

    def started(self, event: CommandStartedEvent) -> None:
        if event.command_name == "find":
            self.sent.set()

    def succeeded(self, event: Any) -> None:
        pass

    def failed(self, event: Any) -> None:
        pass


async def hold_the_next_find(client: MongoClient) -> None:
    """The server holds the next ``find`` for two seconds before answering, long enough to cut it."""
    await client.admin.command(
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {"failCommands": ["find"], "blockConnection": True, "blockTimeMS": 2000},
        }
    )


def assert_ended_by(spans: list[ReadableSpan], operation_name: str, cancellation: str) -> None:
    """The operation's span and its command's span end in error, with the exception ``cancellation`` (a
    class name) recorded."""
    operation = named(spans, operation_name)
    (command,) = children(spans, operation)
    for span in (operation, command):
        assert span.status.status_code is StatusCode.ERROR
        assert [event.name for event in span.events] == ["exception"]
        assert span.events[0].attributes is not None
        assert str(span.events[0].attributes["exception.type"]).rpartition(".")[2] == cancellation


async def test_cancelled_operation_ends_its_spans_with_the_cancellation(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    name = f"tracing_{uuid.uuid4().hex[:8]}"
    find = FindSent()
    tracing = {"enabled": True, "tracer_provider": provider}
    async with MongoClient(server_uri, tracing=tracing, event_listeners=[find]) as client:
        await hold_the_next_find(client)
        exporter.clear()
        task = asyncio.create_task(client[name].c.find_one({}))
        await find.sent.wait()  # the find is on the wire, held by the server
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        spans = list(exporter.get_finished_spans())
    assert_ended_by(spans, f"find {name}.c", "CancelledError")


async def test_an_operation_cut_by_a_cancel_scope_ends_its_spans_with_the_cancellation(
    server_uri: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """As ``test_cancelled_operation_ends_its_spans_with_the_cancellation``, cut by a cancel scope (anyio's
    here, trio's alike): the spans record the backend's own cancellation (trio's ``Cancelled``)."""
    name = f"tracing_{uuid.uuid4().hex[:8]}"
    find = FindSent()
    tracing = {"enabled": True, "tracer_provider": provider}
    async with MongoClient(server_uri, tracing=tracing, event_listeners=[find]) as client:
        await hold_the_next_find(client)
        exporter.clear()
        async with anyio.create_task_group() as finding:
            finding.start_soon(client[name].c.find_one, {})
            await find.sent.wait()  # the find is on the wire, held by the server
            finding.cancel_scope.cancel()
        assert finding.cancel_scope.cancelled_caught
        spans = list(exporter.get_finished_spans())
    assert_ended_by(spans, f"find {name}.c", anyio.get_cancelled_exc_class().__name__)
