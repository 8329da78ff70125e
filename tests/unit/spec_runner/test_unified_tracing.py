"""The unified runner's ``observeTracingMessages`` / ``expectTracingMessages``: spans read back as trees
and matched against a test's expectations."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from spec_runner.unified.entities import EntityKind, EntityMap
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.runner import _client_spans
from spec_runner.unified.tracing import SpanStore, check_tracing_messages

from mongio.bson import Binary


def _store_with_operation(*, failed: bool = False, lsid: uuid.UUID | None = None) -> SpanStore:
    """A store holding ``find db.c`` with one ``find`` command span under it (and a sibling ``ping``)."""
    store = SpanStore({"enableCommandPayload": True})
    provider = store.client_option()["tracer_provider"]
    tracer = provider.get_tracer("test")
    from opentelemetry import trace

    operation = tracer.start_span("find db.c", attributes={"db.operation.name": "find"})
    attributes: dict[str, Any] = {"db.command.name": "find", "server.port": 27017}
    if lsid is not None:
        attributes["db.mongodb.lsid"] = str(lsid)
    command = tracer.start_span("find", context=trace.set_span_in_context(operation), attributes=attributes)
    if failed:
        command.record_exception(RuntimeError("boom"))
    command.end()
    operation.end()
    tracer.start_span("ping admin").end()
    return store


def _expected(spans: list[dict[str, Any]], ignore_extra: bool = False) -> dict[str, Any]:
    return {"client": "client0", "ignoreExtraSpans": ignore_extra, "spans": spans}


_FIND = {
    "name": "find db.c",
    "attributes": {"db.operation.name": "find"},
    "nested": [
        {"name": "find", "attributes": {"db.command.name": "find", "server.port": {"$$type": "long"}}}
    ],
}


def test_spans_match_as_trees() -> None:
    store = _store_with_operation()
    check_tracing_messages(_expected([_FIND, {"name": "ping admin", "attributes": {}}]), store)


def test_extra_spans_fail_unless_ignored() -> None:
    store = _store_with_operation()
    with pytest.raises(MatchError, match="expected 1 span"):
        check_tracing_messages(_expected([_FIND]), store)
    check_tracing_messages(_expected([_FIND], ignore_extra=True), store)


def test_missing_nested_span_fails() -> None:
    store = _store_with_operation()
    nested_twice = dict(_FIND, nested=[*_FIND["nested"], {"name": "getMore", "attributes": {}}])
    with pytest.raises(MatchError):
        check_tracing_messages(_expected([nested_twice], ignore_extra=True), store)


def test_wrong_attribute_fails() -> None:
    store = _store_with_operation()
    wrong = dict(_FIND, attributes={"db.operation.name": "aggregate"})
    with pytest.raises(MatchError, match="aggregate"):
        check_tracing_messages(_expected([wrong], ignore_extra=True), store)


def test_exception_event_counts_as_span_attributes() -> None:
    store = _store_with_operation(failed=True)
    failed = dict(
        _FIND,
        nested=[
            {
                "name": "find",
                "attributes": {"exception.message": "boom", "exception.type": {"$$type": "string"}},
            }
        ],
    )
    check_tracing_messages(_expected([failed], ignore_extra=True), store)
    with pytest.raises(MatchError):
        check_tracing_messages(
            _expected(
                [
                    _FIND
                    | {"nested": [{"name": "find", "attributes": {"exception.message": {"$$exists": False}}}]}
                ],
                ignore_extra=True,
            ),
            _store_with_operation(failed=True),
        )


def test_lsid_reads_back_as_the_session_document() -> None:
    identifier = uuid.uuid4()
    store = _store_with_operation(lsid=identifier)
    entities = EntityMap()
    entities.add("session0", EntityKind.SESSION, object(), lsid={"id": Binary(identifier.bytes, 4)})
    with_lsid = dict(
        _FIND, nested=[{"name": "find", "attributes": {"db.mongodb.lsid": {"$$sessionLsid": "session0"}}}]
    )
    check_tracing_messages(_expected([with_lsid], ignore_extra=True), store, entities=entities)


def test_spans_are_frozen_when_recording_stops() -> None:
    store = _store_with_operation()
    store.enabled = False
    tracer = store.client_option()["tracer_provider"].get_tracer("test")
    tracer.start_span("after the test").end()
    assert [node.name for node in store.roots()] == ["find db.c", "ping admin"]


def test_client_that_does_not_observe_tracing_is_refused() -> None:
    entities = EntityMap()
    entities.add("client0", EntityKind.CLIENT, object())
    with pytest.raises(UnifiedTestError, match="does not observe tracing"):
        _client_spans(entities, {"client": "client0"})
