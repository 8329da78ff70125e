"""``observeTracingMessages`` and ``expectTracingMessages``: the spans a client made, against what a test
expects.

A client entity that observes tracing gets its own OpenTelemetry ``TracerProvider`` (the SDK's, with an
in-memory exporter), given to the client through its ``tracing`` option, so its spans are its own. Spans are
read back as trees (a span's children are the spans whose parent it is), siblings in the order they started.

How a span is compared: its name, then its attributes as a root document (more attributes than expected are
allowed), where the attributes of the span's ``exception`` event (``exception.message``, ``exception.type``,
``exception.stacktrace``, which OpenTelemetry records as an event) count as the span's own, and
``db.mongodb.lsid`` (the session id's UUID text) is read back as the lsid document ``$$sessionLsid`` compares.
Integer attributes are 64-bit, as OpenTelemetry's are. With ``ignoreExtraSpans`` the expected spans must
appear in order among the observed ones, at every level; without it, the observed spans at every level are
exactly the expected ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from mongio.bson.binary import Binary
from mongio.bson.int64 import Int64
from spec_runner.unified.errors import MatchError
from spec_runner.unified.matcher import EntityLookup, Matcher

__all__ = ["SpanStore", "check_tracing_messages"]

# Enough for any command of the test files: db.query.text must parse as a whole document.
_QUERY_TEXT_LENGTH = 1_000_000
_EXCEPTION_EVENT = "exception"
_LSID = "db.mongodb.lsid"


class SpanNode:
    """One finished span, its attributes as the tests see them, and its children."""

    __slots__ = ("attributes", "children", "name")

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        self.name = name
        self.attributes = attributes
        self.children: list[SpanNode] = []

    def describe(self, depth: int = 0) -> str:
        lines = ["  " * depth + self.name]
        lines.extend(child.describe(depth + 1) for child in self.children)
        return "\n".join(lines)


class SpanStore:
    """The spans of one client entity: its tracer provider and what the provider's exporter received."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self._exporter = InMemorySpanExporter()
        self._provider = TracerProvider()
        self._provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        self._payload = bool(options.get("enableCommandPayload", False))
        self._frozen: list[SpanNode] | None = None

    def client_option(self) -> dict[str, Any]:
        """The ``tracing`` option of the client entity."""
        return {
            "enabled": True,
            "query_text_max_length": _QUERY_TEXT_LENGTH if self._payload else 0,
            "tracer_provider": self._provider,
        }

    def clear(self) -> None:
        """Forget the spans made so far (the runner's own setup of the client)."""
        self._exporter.clear()

    @property
    def enabled(self) -> bool:
        return self._frozen is None

    @enabled.setter
    def enabled(self, value: bool) -> None:
        # The runner stops recording once the test's operations ran: the spans then are the test's.
        if not value and self._frozen is None:
            self._frozen = self._trees()
        elif value:
            self._frozen = None

    def roots(self) -> list[SpanNode]:
        """The client's spans as trees, roots first by start time."""
        return self._frozen if self._frozen is not None else self._trees()

    def _trees(self) -> list[SpanNode]:
        spans = sorted(self._exporter.get_finished_spans(), key=lambda span: span.start_time or 0)
        nodes: dict[int, SpanNode] = {}
        for span in spans:
            nodes[span.context.span_id] = SpanNode(span.name, _attributes(span))
        roots: list[SpanNode] = []
        for span in spans:
            node = nodes[span.context.span_id]
            parent = None if span.parent is None else nodes.get(span.parent.span_id)
            (roots if parent is None else parent.children).append(node)
        return roots

    def shutdown(self) -> None:
        self._provider.shutdown()


def _attributes(span: Any) -> dict[str, Any]:
    attributes = dict(span.attributes or {})
    for event in span.events:
        if event.name == _EXCEPTION_EVENT:
            attributes.update(event.attributes or {})
    for key, value in attributes.items():
        if isinstance(value, int) and not isinstance(value, bool):
            # An OpenTelemetry integer attribute is 64-bit (the specification's int64 attributes).
            attributes[key] = Int64(value)
    lsid = attributes.get(_LSID)
    if isinstance(lsid, str):
        try:
            attributes[_LSID] = {"id": Binary(uuid.UUID(lsid).bytes, 4)}
        except ValueError:
            pass  # not a UUID: compared as the text it is
    return attributes


def check_tracing_messages(
    expected_for_client: Mapping[str, Any], store: SpanStore, *, entities: EntityLookup | None = None
) -> None:
    """Check one ``expectTracingMessages`` object against the client's spans."""
    client = expected_for_client.get("client", "?")
    ignore_extra = bool(expected_for_client.get("ignoreExtraSpans", False))
    _check_level(
        list(expected_for_client["spans"]),
        store.roots(),
        ignore_extra,
        f"expectTracingMessages[{client}]",
        Matcher(entities),
    )


def _check_level(
    expected: Sequence[Mapping[str, Any]],
    observed: list[SpanNode],
    ignore_extra: bool,
    path: str,
    matcher: Matcher,
) -> None:
    shown = [node.describe() for node in observed]
    if not ignore_extra and len(observed) != len(expected):
        raise MatchError(
            path, f"expected {len(expected)} span(s), observed {len(observed)}:\n" + "\n".join(shown)
        )
    start = 0
    for index, want in enumerate(expected):
        where = f"{path}.spans[{index}]"
        # The most telling failure is the first of a span with the expected name.
        named_failure: str | None = None
        last_failure: str | None = None
        for position in range(start, len(observed)):
            try:
                _check_span(want, observed[position], ignore_extra, where, matcher)
            except MatchError as exc:
                if not ignore_extra:
                    raise
                last_failure = str(exc)
                if named_failure is None and observed[position].name == want["name"]:
                    named_failure = last_failure
                continue
            start = position + 1
            break
        else:
            detail = named_failure or last_failure or "no span left to match"
            raise MatchError(
                where,
                f"no observed span matches {want.get('name')!r} ({detail}); observed:\n" + "\n".join(shown),
            )


def _check_span(
    want: Mapping[str, Any], node: SpanNode, ignore_extra: bool, path: str, matcher: Matcher
) -> None:
    if node.name != want["name"]:
        raise MatchError(f"{path}.name", f"expected span {want['name']!r}, observed {node.name!r}")
    matcher.match(want["attributes"], node.attributes, root=True, path=f"{path}.attributes")
    _check_level(list(want.get("nested", ())), node.children, ignore_extra, f"{path}.nested", matcher)
