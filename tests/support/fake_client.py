"""A stand-in client for the API layer's unit tests: an executor that builds each operation, shows the command
to a responder (a function, or :class:`CursorServer` which keeps cursors), and hands the reply back to the
operation, as the real executor does, without a network or a topology."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import DEFAULT_CODEC_OPTIONS
from mongio.collection import Collection
from mongio.database import Database
from mongio.errors import (
    CursorNotFound,
    OperationFailure,
)
from mongio.execution.deadline import timeout_in_force
from mongio.execution.executor import Answered
from mongio.operations.base import Operation
from mongio.options.client_options import ClientOptions
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import Primary
from mongio.options.write_concern import WriteConcern
from mongio.sessions.client_session import ClientSession

ADDRESS = ("fake.example", 27017)


@dataclass
class FakeContext:
    address: tuple[str, int] = ADDRESS
    max_wire_version: int = 21
    max_bson_size: int = 16 * 1024 * 1024
    max_message_size: int = 48_000_000
    max_write_batch_size: int = 100_000


@dataclass
class Call:
    operation: Operation[Any]
    body: dict[str, Any]
    session: Any
    address: Any

    @property
    def name(self) -> str:
        return next(iter(self.body))


class FakeSession(ClientSession):
    """A session the API takes for one (a ClientSession) that only records being ended; nothing else of
    ClientSession's is set up, since the fake executor never runs it."""

    def __init__(self, implicit: bool) -> None:
        self._implicit = implicit
        self._ended = False

    async def end_session(self) -> None:
        assert not self._ended, "a session was ended twice"
        self._ended = True


Responder = Callable[[dict[str, Any]], dict[str, Any]]


class FakeExecutor:
    tracing = None  # the client does not trace

    def __init__(self, respond: Responder, context: FakeContext) -> None:
        self.respond = respond
        self.context = context
        self.calls: list[Call] = []

    async def execute(
        self,
        operation: Operation[Any],
        session: Any = None,
        *,
        address: Any = None,
        level_timeout: Any = None,
        pin: Any = None,
    ) -> Any:
        answered = await self.execute_answered(operation, session, address=address, level_timeout=level_timeout)
        return answered.result

    async def execute_answered(
        self,
        operation: Operation[Any],
        session: Any = None,
        *,
        address: Any = None,
        level_timeout: Any = None,
        pin: Any = None,  # not load balanced: nothing is pinned
    ) -> Answered[Any]:
        command = operation.build(self.context)
        body = command.body
        for identifier, sequence in (command.sequences or {}).items():
            body[identifier] = list(sequence.documents)
        self.calls.append(Call(operation, body, session, address))
        answered_by = self.context.address if address is None else address
        if not operation.acknowledged:
            return Answered(operation.handle_response({}, self.context), answered_by)
        reply = self.respond(body)
        if not reply.get("ok", 1):
            code = reply.get("code")
            if code == 26 and operation.ignores_namespace_not_found:
                return Answered(operation.empty_result(), answered_by)
            error = CursorNotFound if code == 43 else OperationFailure
            raise error(str(reply.get("errmsg", "failed")), code, reply)
        return Answered(operation.handle_response(dict(reply, ok=1), self.context), answered_by)

    def operation_timeout(self, timeout: float | None, session: Any, *, deadline: float | None = None) -> float | None:
        return timeout_in_force(timeout, None, None, deadline=deadline)  # no client-level timeoutMS here

    def timeout_scope(
        self, timeout: float | None, session: Any, operation_name: str | None = None
    ) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def names(self) -> list[str]:
        return [call.name for call in self.calls]


@dataclass
class FakeClient:
    respond: Responder = field(default=lambda body: {"ok": 1})
    codec_options: Any = DEFAULT_CODEC_OPTIONS
    read_preference: Any = field(default_factory=Primary)
    write_concern: WriteConcern = field(default_factory=WriteConcern)
    read_concern: ReadConcern = field(default_factory=ReadConcern)
    context: FakeContext = field(default_factory=FakeContext)
    # A client's options (the API reads the automatic encryption settings from them): none set.
    options: ClientOptions = field(default_factory=lambda: ClientOptions.from_uri(f"mongodb://{ADDRESS[0]}"))

    def __post_init__(self) -> None:
        self._executor = FakeExecutor(self.respond, self.context)
        self.sessions: list[FakeSession] = []
        self.abandoned: list[tuple[Any, str, int, Any]] = []

    @property
    def executor(self) -> FakeExecutor:
        return self._executor

    @property
    def calls(self) -> list[Call]:
        return self._executor.calls

    def implicit_session(self) -> FakeSession:
        session = FakeSession(implicit=True)
        self.sessions.append(session)
        return session

    def close_abandoned_cursor(self, address: Any, namespace: str, cursor_id: int, session: Any) -> None:
        self.abandoned.append((address, namespace, cursor_id, session))

    def __getitem__(self, name: str) -> Database[dict[str, Any]]:
        return Database(self, name)  # type: ignore[arg-type]

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return other is self


class CursorServer:
    """Answers ``find``/``aggregate``/``getMore``/``killCursors`` from a list of documents, keeping open cursors
    the way a server does (batch sizes, limits, single batches, the default first batch of 101)."""

    def __init__(self, documents: list[dict[str, Any]], namespace: str = "db.coll") -> None:
        self.documents = documents
        self.namespace = namespace
        self.open: dict[int, tuple[list[dict[str, Any]], int]] = {}  # id -> (remaining, limit left)
        self.killed: list[int] = []
        self.next_id = 1000
        self.other: Responder = lambda body: {"ok": 1}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        name = next(iter(body))
        if name in ("find", "aggregate"):
            if name == "find":
                documents = self.documents[body.get("skip", 0) :]
                batch_size = body.get("batchSize", 101)
            else:
                documents = list(self.documents)
                batch_size = body["cursor"].get("batchSize", 101)
            limit = body.get("limit", 0)
            if limit:
                documents = documents[:limit]
            if body.get("singleBatch"):
                documents = documents[:batch_size]
            return self._batch(documents, batch_size, "firstBatch")
        if name == "getMore":
            cursor_id = int(body["getMore"])
            if cursor_id not in self.open:
                return {"ok": 0, "code": 43, "errmsg": "cursor not found"}
            remaining = self.open.pop(cursor_id)[0]
            return self._batch(remaining, body.get("batchSize", len(remaining)), "nextBatch", cursor_id)
        if name == "killCursors":
            for cursor_id in body["cursors"]:
                self.open.pop(int(cursor_id), None)
                self.killed.append(int(cursor_id))
            return {"ok": 1, "cursorsKilled": list(body["cursors"])}
        return self.other(body)

    def _batch(
        self, documents: list[dict[str, Any]], size: int, field: str, cursor_id: int | None = None
    ) -> dict[str, Any]:
        batch, rest = documents[:size], documents[size:]
        if rest:
            if cursor_id is None:
                cursor_id = self.next_id
                self.next_id += 1
            self.open[cursor_id] = (rest, 0)
        else:
            cursor_id = 0
        return {"cursor": {"id": cursor_id, "ns": self.namespace, field: batch}, "ok": 1}


def documents(n: int) -> list[dict[str, Any]]:
    return [{"_id": i, "x": i % 3} for i in range(n)]


class QueuedReplies:
    """Answers with the replies queued for each command name (``{"ok": 1}`` otherwise)."""

    def __init__(self, **replies: Any) -> None:
        self.replies = replies
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        reply = self.replies.get(next(iter(body)), {"ok": 1})
        if isinstance(reply, list):
            return dict(reply.pop(0))
        return dict(reply)


def make_collection(**replies: Any) -> tuple[FakeClient, QueuedReplies, Collection[dict[str, Any]]]:
    """A collection ``db.coll`` of a fake client answering with ``replies`` (see ``QueuedReplies``)."""
    recorder = QueuedReplies(**replies)
    client = FakeClient(respond=recorder)
    return client, recorder, client["db"]["coll"]
