"""OpenTelemetry tracing without a server: settings from the option and the environment, span attributes,
query text, sensitive commands, and that a client does not trace (nor import OpenTelemetry) unless asked."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mongio.bson import Binary
from mongio.bson.int64 import Int64
from mongio.client import MongoClient
from mongio.errors import AutoReconnect, ConfigurationError, OperationFailure
from mongio.operations.collections import Create, Drop
from mongio.operations.crud import Find
from mongio.operations.run_command import RunCommand
from mongio.tracing import ENABLED_VARIABLE, QUERY_TEXT_MAX_LENGTH_VARIABLE, client_tracing, tracing_settings
from mongio.tracing.attributes import (
    collection_of,
    command_attributes,
    cursor_id_of_reply,
    lsid_text,
    operation_attributes,
    query_text,
    span_summary,
    status_code,
    transport_of,
)
from mongio.tracing.spans import Tracing

# -- settings --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", " Yes "])
def test_environment_turns_tracing_on(value: str) -> None:
    assert tracing_settings(None, {ENABLED_VARIABLE: value}).enabled


@pytest.mark.parametrize("value", ["", "0", "false", "no", "on", "enabled"])
def test_other_environment_values_leave_tracing_off(value: str) -> None:
    assert not tracing_settings(None, {ENABLED_VARIABLE: value}).enabled


def test_tracing_is_off_by_default() -> None:
    settings = tracing_settings(None, {})
    assert not settings.enabled
    assert settings.query_text_max_length == 0
    assert client_tracing(None, {}) is None
    assert client_tracing({}, {}) is None


def test_client_option_overrides_the_environment() -> None:
    assert not tracing_settings({"enabled": False}, {ENABLED_VARIABLE: "true"}).enabled
    assert tracing_settings({"enabled": True}, {ENABLED_VARIABLE: "false"}).enabled
    # Not said by the client: the environment decides.
    assert tracing_settings({"enabled": None}, {ENABLED_VARIABLE: "yes"}).enabled


def test_query_text_length_from_option_then_environment() -> None:
    assert tracing_settings(None, {QUERY_TEXT_MAX_LENGTH_VARIABLE: "1024"}).query_text_max_length == 1024
    assert tracing_settings(None, {QUERY_TEXT_MAX_LENGTH_VARIABLE: " "}).query_text_max_length == 0
    option = {"query_text_max_length": 10}
    assert tracing_settings(option, {QUERY_TEXT_MAX_LENGTH_VARIABLE: "1024"}).query_text_max_length == 10


@pytest.mark.parametrize("value", ["ten", "-1", "1.5"])
def test_unusable_query_text_length_variable_is_named(value: str) -> None:
    with pytest.raises(ConfigurationError, match=QUERY_TEXT_MAX_LENGTH_VARIABLE):
        tracing_settings(None, {QUERY_TEXT_MAX_LENGTH_VARIABLE: value})


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"enabled": "yes"}, "enabled"),
        ({"query_text_max_length": -1}, "query_text_max_length"),
        ({"query_text_max_length": True}, "query_text_max_length"),
        ({"enable": True}, "enable"),
        ("on", "dict"),
    ],
)
def test_unusable_option_is_named(option: Any, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        tracing_settings(option, {})


def test_client_without_tracing_holds_no_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENABLED_VARIABLE, raising=False)
    assert MongoClient("mongodb://127.0.0.1:1")._executor.tracing is None
    monkeypatch.setenv(ENABLED_VARIABLE, "true")
    assert isinstance(MongoClient("mongodb://127.0.0.1:1")._executor.tracing, Tracing)
    assert MongoClient("mongodb://127.0.0.1:1", tracing={"enabled": False})._executor.tracing is None


def test_tracing_is_not_a_uri_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENABLED_VARIABLE, raising=False)
    with pytest.warns(UserWarning, match="tracing"):
        client = MongoClient("mongodb://127.0.0.1:1/?tracing=true")
    assert client._executor.tracing is None


_WITHOUT_OPENTELEMETRY = textwrap.dedent(
    """
    import logging, sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ModuleNotFoundError(name)
            return None

    sys.meta_path.insert(0, Refuse())
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
    import os
    from mongio.client import MongoClient
    from mongio.errors import ConfigurationError

    client = MongoClient("mongodb://127.0.0.1:1")
    print("default", client._executor.tracing)
    try:
        MongoClient("mongodb://127.0.0.1:1", tracing={"enabled": True})
    except ConfigurationError as exc:
        print("option", exc)
    os.environ["OTEL_PYTHON_INSTRUMENTATION_MONGODB_ENABLED"] = "1"
    print("environment", MongoClient("mongodb://127.0.0.1:1")._executor.tracing)
    print("loaded", any(name.split(".")[0] == "opentelemetry" for name in sys.modules))
    """
)


def test_mongio_works_without_opentelemetry() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPENTELEMETRY], capture_output=True, text=True, timeout=60, check=True
    )
    lines = completed.stdout.splitlines()
    assert "default None" in lines
    assert any(line.startswith("option ") and "mongio[opentelemetry]" in line for line in lines)
    assert any(line.startswith("mongio.tracing ") and ENABLED_VARIABLE in line for line in lines)
    assert "environment None" in lines
    assert "loaded False" in lines


# -- attributes ------------------------------------------------------------------------------------------


def test_collection_of_commands() -> None:
    assert collection_of("find", {"find": "users", "filter": {}}, "test") == "users"
    assert collection_of("getMore", {"getMore": Int64(5), "collection": "users"}, "test") == "users"
    assert collection_of("listCollections", {"listCollections": 1}, "test") is None
    assert collection_of("aggregate", {"aggregate": 1, "pipeline": []}, "test") is None
    # Commands on admin never name a collection (transactions, the client bulkWrite).
    assert collection_of("commitTransaction", {"commitTransaction": 1}, "admin") is None
    assert collection_of("find", {"find": "system.users"}, "admin") is None


def test_summaries() -> None:
    assert (
        span_summary("findAndModify", "warehouse_db", "users_coll") == "findAndModify warehouse_db.users_coll"
    )
    assert span_summary("runCommand", "warehouse", None) == "runCommand warehouse"
    attributes = operation_attributes("find", "test", "users")
    assert attributes == {
        "db.system.name": "mongodb",
        "db.namespace": "test",
        "db.collection.name": "users",
        "db.operation.name": "find",
        "db.operation.summary": "find test.users",
    }
    assert "db.collection.name" not in operation_attributes("listDatabases", "admin", None)


def test_command_attributes() -> None:
    session_uuid = uuid.uuid4()
    body = {
        "insert": "users",
        "lsid": {"id": Binary(session_uuid.bytes, 4)},
        "txnNumber": Int64(3),
        "$db": "test",
    }
    attributes = command_attributes("insert", "test", body, ("db.example.com", 27018), 7, 42)
    assert attributes == {
        "db.system.name": "mongodb",
        "db.namespace": "test",
        "db.collection.name": "users",
        "db.command.name": "insert",
        "db.query.summary": "insert test.users",
        "server.address": "db.example.com",
        "server.port": 27018,
        "network.transport": "tcp",
        "db.mongodb.server_connection_id": 42,
        "db.mongodb.driver_connection_id": 7,
        "db.mongodb.lsid": str(session_uuid),
        "db.mongodb.txn_number": 3,
    }
    unix = command_attributes("ping", "admin", {"ping": 1}, ("/tmp/mongodb-27017.sock", None), 1, None)
    assert unix["network.transport"] == "unix"
    assert "server.port" not in unix
    assert "db.mongodb.server_connection_id" not in unix
    assert unix["db.query.summary"] == "ping admin"


def test_cursor_ids() -> None:
    get_more = command_attributes(
        "getMore", "test", {"getMore": Int64(99), "collection": "c"}, ("h", 1), 1, 1
    )
    assert get_more["db.mongodb.cursor_id"] == 99
    kill = command_attributes(
        "killCursors", "test", {"killCursors": "c", "cursors": [Int64(7)]}, ("h", 1), 1, 1
    )
    assert kill["db.mongodb.cursor_id"] == 7
    assert "db.mongodb.cursor_id" not in command_attributes("find", "test", {"find": "c"}, ("h", 1), 1, 1)
    assert cursor_id_of_reply({"cursor": {"id": Int64(12), "firstBatch": []}, "ok": 1}) == 12
    assert cursor_id_of_reply({"cursor": {"id": Int64(0), "firstBatch": []}, "ok": 1}) is None
    assert cursor_id_of_reply({"n": 1, "ok": 1}) is None


def test_transport() -> None:
    assert transport_of("/var/run/mongodb-27017.sock") == "unix"
    assert transport_of("db.example.com") == "tcp"


def test_lsid_text() -> None:
    identifier = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert lsid_text({"id": Binary(identifier.bytes, 4)}) == "12345678-1234-5678-1234-567812345678"
    assert lsid_text(None) is None


def test_query_text_leaves_out_session_plumbing_and_is_cut() -> None:
    command = {
        "find": "users",
        "filter": {"age": {"$gt": 30}},
        "lsid": {"id": Binary(uuid.uuid4().bytes, 4)},
        "$db": "test",
        "$clusterTime": {"clusterTime": 1},
        "signature": {"hash": b"x"},
    }
    assert query_text(command, 1000) == '{"find": "users", "filter": {"age": {"$gt": 30}}}'
    assert query_text(command, 10) == '{"find": "...'


def test_status_code() -> None:
    assert status_code(OperationFailure("failed", 89, {"ok": 0, "code": 89})) == "89"
    assert status_code(OperationFailure("no code")) is None
    assert status_code(AutoReconnect("connection closed")) is None


# -- spans (the SDK's in-memory exporter, a stand-in connection) -------------------------------------------


class _Connection:
    address = ("127.0.0.1", 27017)
    id = 3
    server_connection_id = 11


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


def _tracing(exporter: InMemorySpanExporter, **option: Any) -> Tracing:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = client_tracing({"enabled": True, "tracer_provider": provider, **option}, {})
    assert isinstance(tracing, Tracing)
    return tracing


def _by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


def test_operation_span_parents_its_command_spans(exporter: InMemorySpanExporter) -> None:
    tracing = _tracing(exporter)
    operation = tracing.start_operation(Find("test", "users", {"x": 1}), None)
    body: dict[str, Any] = {"find": "users", "filter": {"x": 1}, "$db": "test"}
    for _ in range(2):  # a retry: one command span per attempt
        command = operation.command("find", "test", body, None, _Connection())  # type: ignore[arg-type]
        assert command is not None
        command.succeeded({"cursor": {"id": Int64(0), "firstBatch": []}, "ok": 1})
    operation.end()
    spans = exporter.get_finished_spans()
    parent = next(span for span in spans if span.name == "find test.users")
    children = [
        span for span in spans if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]
    assert [span.name for span in children] == ["find", "find"]
    assert parent.attributes is not None and parent.attributes["db.collection.name"] == "users"
    assert parent.attributes["db.operation.summary"] == "find test.users"
    assert children[0].attributes is not None
    assert "db.query.text" not in children[0].attributes  # off unless a length is set
    assert children[0].attributes["db.mongodb.driver_connection_id"] == 3


def test_operation_names_of_collection_helpers_and_run_command(exporter: InMemorySpanExporter) -> None:
    tracing = _tracing(exporter)
    conn: Any = _Connection()
    for op, body in (
        (Create("db", "fresh"), {"create": "fresh"}),
        (Drop("db", "old"), {"drop": "old"}),
        (RunCommand("db", {"find": "users"}), {"find": "users"}),
    ):
        operation = tracing.start_operation(op, None)
        command = operation.command(op.command_name, "db", body, None, conn)
        assert command is not None
        command.succeeded({"ok": 1})
        operation.end()
    names = set(_by_name(exporter))
    # runCommand is not an operation on a collection, whatever the command names.
    assert names == {
        "createCollection db.fresh",
        "create",
        "dropCollection db.old",
        "drop",
        "runCommand db",
        "find",
    }


def test_query_text_is_cut_at_the_configured_length(exporter: InMemorySpanExporter) -> None:
    tracing = _tracing(exporter, query_text_max_length=20)
    operation = tracing.start_operation(Find("test", "users", {"name": "x" * 100}), None)
    body = {"find": "users", "filter": {"name": "x" * 100}, "$db": "test"}
    command = operation.command("find", "test", body, None, _Connection())  # type: ignore[arg-type]
    assert command is not None
    command.succeeded({"ok": 1})
    operation.end()
    attributes = _by_name(exporter)["find"].attributes
    assert attributes is not None
    assert attributes["db.query.text"] == '{"find": "users", "f...'


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("saslStart", {"saslStart": 1, "payload": b"secret"}),
        ("createUser", {"createUser": "u", "pwd": "p"}),
        ("hello", {"hello": 1, "speculativeAuthenticate": {"saslStart": 1}}),
    ],
)
def test_sensitive_commands_get_no_span(
    exporter: InMemorySpanExporter, name: str, body: dict[str, Any]
) -> None:
    tracing = _tracing(exporter, query_text_max_length=1000)
    operation = tracing.start_operation(RunCommand("admin", body), None)
    assert operation.command(name, "admin", body, None, _Connection()) is None  # type: ignore[arg-type]
    operation.end()
    assert [span.name for span in exporter.get_finished_spans()] == ["runCommand admin"]


def test_failures_are_recorded(exporter: InMemorySpanExporter) -> None:
    tracing = _tracing(exporter)
    operation = tracing.start_operation(Find("test", "users", {}), None)
    conn: Any = _Connection()
    command = operation.command("find", "test", {"find": "users"}, None, conn)
    assert command is not None
    error = OperationFailure("Unauthorized", 13, {"ok": 0, "code": 13})
    command.failed(error)
    operation.failed(error)
    operation.failed(error)  # reported twice (a scope and its run): recorded once
    operation.end()
    spans = _by_name(exporter)
    for span in spans.values():
        assert span.status.status_code is StatusCode.ERROR
    assert spans["find"].attributes is not None
    assert spans["find"].attributes["db.response.status_code"] == "13"
    events = spans["find test.users"].events
    assert [event.name for event in events] == ["exception"]
    assert events[0].attributes is not None
    assert str(events[0].attributes["exception.type"]).endswith("OperationFailure")
    assert "Unauthorized" in str(events[0].attributes["exception.message"])
    assert "exception.stacktrace" in events[0].attributes


async def test_operation_scope_is_one_span(exporter: InMemorySpanExporter) -> None:
    tracing = _tracing(exporter)
    conn: Any = _Connection()
    with tracing.operation_scope("bulkWrite"):
        for name in ("insert", "delete"):
            operation = tracing.start_operation(Find("test", "c", {}), None)
            command = operation.command(name, "test", {name: "c"}, None, conn)
            assert command is not None
            command.succeeded({"ok": 1})
            operation.end()
        assert all(span.name in ("insert", "delete") for span in exporter.get_finished_spans())
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == ["insert", "delete", "bulkWrite test.c"]


def test_env_warning_without_api_is_logged_by_name(caplog: pytest.LogCaptureFixture) -> None:
    # With the API installed the environment variable gives a tracing client and logs nothing.
    with caplog.at_level(logging.WARNING, logger="mongio.tracing"):
        assert isinstance(client_tracing(None, {ENABLED_VARIABLE: "true"}), Tracing)
    assert not caplog.records
