"""OpenTelemetry spans for one client: an operation span per driver operation, a command span per command
sent (one per attempt, children of their operation's span), a ``transaction`` span per transaction.

This module imports ``opentelemetry`` (the API only) and is imported only when a client traces, so a
client without tracing never loads it. Sensitive commands (the command monitoring specification's list) get
no span at all. An operation made of several commands (the batches of a bulk write) is one span: see
:meth:`Tracing.operation_scope`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from mongio.backend import current_task
from mongio.context_vars import reset
from mongio.events.command import is_sensitive
from mongio.tracing.attributes import (
    collection_of,
    command_attributes,
    cursor_id_of_reply,
    operation_attributes,
    query_text,
    span_summary,
    status_code,
)
from mongio.tracing.settings import TracingSettings
from mongio.version import __version__

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.operations.base import DocumentSequence, Operation
    from mongio.sessions.operation_session import OperationSession

__all__ = ["TRACER_NAME", "CommandSpan", "OperationSpan", "Tracing"]

TRACER_NAME = "mongio"
_CLIENT = SpanKind.CLIENT
_RUN_COMMAND = "runCommand"


class _Scope:
    """An operation made of several commands, open in one task: its span is made by its first command."""

    __slots__ = ("operation_name", "span", "task", "tracing")

    def __init__(self, tracing: Tracing, operation_name: str | None) -> None:
        self.tracing = tracing
        self.operation_name = operation_name
        self.task = current_task()
        self.span: OperationSpan | None = None


_OPEN_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "mongio_tracing_scope", default=None
)


class Tracing:
    """The tracer of one client and what its spans show (made only when the client traces)."""

    __slots__ = ("_query_text_max_length", "_tracer")

    def __init__(self, settings: TracingSettings) -> None:
        self._tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider=settings.tracer_provider)
        self._query_text_max_length = settings.query_text_max_length

    def start_operation(self, op: Operation[Any], session: OperationSession | None) -> OperationSpan:
        """The span of the driver operation ``op`` is part of: a new one (child of the session's transaction
        span, else of the current span), or the open :meth:`operation_scope`'s."""
        scope = _OPEN_SCOPE.get()
        if scope is not None and scope.tracing is self and scope.task is current_task():
            if scope.span is None:
                scope.span = self._new_operation(op, session, scope.operation_name, held=True)
            return scope.span
        return self._new_operation(op, session, None, held=False)

    def _new_operation(
        self, op: Operation[Any], session: OperationSession | None, name: str | None, *, held: bool
    ) -> OperationSpan:
        if name is None:
            name = _RUN_COMMAND if op.is_user_command else (op.operation_name or op.command_name)
        parent = None if session is None else session.transaction_trace()
        context = None if parent is None else trace.set_span_in_context(parent)
        database = op.database
        span = self._tracer.start_span(
            span_summary(name, database, None),
            context=context,
            kind=_CLIENT,
            attributes=operation_attributes(name, database, None),
        )
        return OperationSpan(self, span, name, database, named=op.is_user_command, held=held)

    @contextlib.contextmanager
    def operation_scope(self, operation_name: str | None = None) -> Iterator[None]:
        """``with tracing.operation_scope():`` every operation the block runs in this task is one driver
        operation, one span (named ``operation_name``, else after its first command)."""
        scope = _Scope(self, operation_name)
        token = _OPEN_SCOPE.set(scope)
        try:
            yield
        except BaseException as exc:
            if scope.span is not None:
                scope.span.failed(exc)
            raise
        finally:
            reset(_OPEN_SCOPE, token)
            if scope.span is not None:
                scope.span.finish()

    def start_transaction(self) -> Span:
        """The ``transaction`` span, child of the current span; the session ends it at commit or abort."""
        return self._tracer.start_span("transaction", kind=_CLIENT, attributes={"db.system.name": "mongodb"})

    def start_command(
        self,
        parent: Span,
        command_name: str,
        database: str,
        body: dict[str, Any],
        sequences: Mapping[str, DocumentSequence] | None,
        conn: Connection,
    ) -> CommandSpan | None:
        """The span of one command sent on ``conn``; ``None`` for a sensitive command (never traced)."""
        if is_sensitive(command_name, body):
            return None
        attributes = command_attributes(
            command_name, database, body, conn.address, conn.id, conn.server_connection_id
        )
        if self._query_text_max_length > 0:
            shown = body
            if sequences:
                # As the started event shows them: the document sequences as the command's arrays.
                shown = dict(body)
                for identifier, sequence in sequences.items():
                    shown[identifier] = sequence.documents
            attributes["db.query.text"] = query_text(shown, self._query_text_max_length)
        span = self._tracer.start_span(
            command_name, context=trace.set_span_in_context(parent), kind=_CLIENT, attributes=attributes
        )
        return CommandSpan(span)


def _record_failure(span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class OperationSpan:
    """One driver operation's span; the executor makes a command span under it for each command sent."""

    __slots__ = ("_database", "_held", "_name", "_named", "_recorded", "_span", "_tracing")

    def __init__(
        self, tracing: Tracing, span: Span, name: str, database: str, *, named: bool, held: bool
    ) -> None:
        self._tracing = tracing
        self._span = span
        self._name = name
        self._database = database
        # Whether the collection part of the name is settled (the first command tells it).
        self._named = named
        self._held = held  # ended by its scope, not by each command's run
        self._recorded: BaseException | None = None

    @property
    def span(self) -> Span:
        return self._span

    def command(
        self,
        command_name: str,
        database: str,
        body: dict[str, Any],
        sequences: Mapping[str, DocumentSequence] | None,
        conn: Connection,
    ) -> CommandSpan | None:
        """Start the span of a command of this operation (``None``: a sensitive command, not traced)."""
        if not self._named:
            self._named = True
            collection = collection_of(command_name, body, database)
            if collection is not None:
                # The operation works on a collection: its name and summary say which.
                summary = span_summary(self._name, self._database, collection)
                self._span.update_name(summary)
                self._span.set_attributes({"db.operation.summary": summary, "db.collection.name": collection})
        return self._tracing.start_command(self._span, command_name, database, body, sequences, conn)

    def failed(self, error: BaseException) -> None:
        """The operation ends with ``error`` (recorded once, however many layers report it)."""
        if self._recorded is error:
            return
        self._recorded = error
        _record_failure(self._span, error)

    def end(self) -> None:
        """The operation's run is over: end the span unless a scope holds it for more commands."""
        if not self._held:
            self._span.end()

    def finish(self) -> None:
        """End the span of a scope's operation."""
        self._span.end()


class CommandSpan:
    """One command's span: end it once with :meth:`succeeded` or :meth:`failed`."""

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def succeeded(self, reply: Mapping[str, Any]) -> None:
        cursor_id = cursor_id_of_reply(reply)
        if cursor_id is not None:
            self._span.set_attribute("db.mongodb.cursor_id", cursor_id)
        self._span.end()

    def failed(self, error: BaseException) -> None:
        code = status_code(error)
        if code is not None:
            self._span.set_attribute("db.response.status_code", code)
        _record_failure(self._span, error)
        self._span.end()
