"""An Executor over fakes, for tests without a server: a connection that answers scripted replies (a reply
document, an exception to raise, or "block" to never answer), and the pool, server, topology and client
around it. make_executor(replies) builds them all."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from mongio.errors import (
    ClientClosedError,
)
from mongio.events.command import (
    CommandPublisher,
)
from mongio.execution.executor import Executor
from mongio.execution.retry_policy import RetryOptions
from mongio.operations.base import Command, ConnectionContext, Operation, Retryability
from mongio.topology.server_description import ServerDescription
from mongio.topology.topology_type import TopologyType

ADDRESS = ("db.example", 27017)


PRIMARY_HELLO = {
    "ok": 1,
    "isWritablePrimary": True,
    "setName": "rs",
    "hosts": ["db.example:27017"],
    "maxWireVersion": 21,
    "logicalSessionTimeoutMinutes": 30,
}


class FakeConnection:
    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.sent: list[dict[str, Any]] = []
        self.generation = 0
        self.max_wire_version = 21
        self.max_bson_size = 16 * 1024 * 1024
        self.max_message_size = 48_000_000
        self.max_write_batch_size = 100_000
        self.id = 1
        self.server_connection_id = 9
        self.service_id = None
        self.address = ADDRESS

    async def send(self, db: str, body: dict[str, Any], **kwargs: Any) -> int:
        return self.send_nowait(db, body, **kwargs)

    def send_nowait(self, db: str, body: dict[str, Any], **kwargs: Any) -> int:
        self.sent.append(dict(body))
        return len(self.sent)

    async def receive(self, **kwargs: Any) -> dict[str, Any]:
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if reply == "block":
            await asyncio.Event().wait()
        assert isinstance(reply, dict)
        return reply


class FakePool:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn
        self.checked_out = 0
        self.checked_in = 0

    async def check_out(self, max_wait: float | None = None) -> FakeConnection:
        self.checked_out += 1
        return self.conn

    def pin(self, conn: FakeConnection, purpose: str) -> None:
        pass

    def check_in(self, conn: FakeConnection) -> None:
        self.checked_in += 1


class FakeServer:
    def __init__(self, pool: FakePool, description: ServerDescription) -> None:
        self.address = ADDRESS
        self.pool = pool
        self.description = description
        self.operation_count = 0

    def operation_finished(self) -> None:
        self.operation_count -= 1


class FakeTopology:
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.closed = False
        self.errors: list[BaseException] = []
        self.description = SimpleNamespace(
            logical_session_timeout_minutes=30,
            knows_a_data_bearing_server=True,
            topology_type=TopologyType.ReplicaSetWithPrimary,
            common_wire_version=21,
            get=lambda address: server.description if address == server.address else None,
        )
        self.settings = SimpleNamespace(load_balanced=False)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """A fake topology belongs to whichever loop runs the test."""
        return asyncio.get_running_loop()

    def select_server_nowait(self, *args: Any, **kwargs: Any) -> FakeServer:
        self.server.operation_count += 1
        return self.server

    async def handle_application_error(
        self, address: Any, error: BaseException, generation: int, **kw: Any
    ) -> None:
        self.errors.append(error)


class FakeClient:
    def __init__(self, topology: FakeTopology) -> None:
        self.topology = topology
        self.executor: Any = None  # the executor sessions made for this client reach (when a test sets one)

    async def open_topology(self) -> Any:
        if self.topology.closed:
            raise ClientClosedError("closed")
        return self.topology

    def closed_error(self) -> ClientClosedError:
        return ClientClosedError("closed")


class InsertOne(Operation[int]):
    command_name = "insert"
    retryability = Retryability.WRITE
    takes_write_concern = True

    def build(self, context: ConnectionContext) -> Command:
        return Command({"insert": "c", "documents": [{"_id": 1}]})

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> int:
        return int(reply["n"])


def make_executor(
    replies: list[Any],
    *,
    publisher: CommandPublisher | None = None,
    retry_options: RetryOptions | None = None,
) -> tuple[Executor, FakeTopology, FakePool, FakeConnection]:
    conn = FakeConnection(replies)
    pool = FakePool(conn)
    topology = FakeTopology(FakeServer(pool, ServerDescription(ADDRESS, PRIMARY_HELLO)))
    executor = Executor(
        FakeClient(topology),
        retry_options=RetryOptions() if retry_options is None else retry_options,
        publisher=CommandPublisher() if publisher is None else publisher,
    )
    executor.attach(topology)  # type: ignore[arg-type]
    return executor, topology, pool, conn
