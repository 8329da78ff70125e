"""Fake MongoDB deployments on loopback sockets, for the topology's runtime tests: members answer hello as a
replica set member, mongos or standalone (streaming awaitable hellos when asked). On asyncio they run on the
test's own loop, so a virtual clock (``tests.support.virtual_clock``) sees all their work; entered from trio,
on an asyncio loop in a thread of their own (an :class:`~tests.support.backends.AsyncioServer`). With them: a
pool that records what the topology asks of it, ``make_topology``, and the waits and predicates the tests
share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from mongio.bson import Int64, decode, encode
from mongio.bson.objectid import ObjectId
from mongio.topology.rtt_monitor import MonitorConnectionFactory
from mongio.topology.server_description import Address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import ConnectErrorHook, Topology
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType
from mongio.wire import HEADER_SIZE, OpMsg, encode_op_msg, next_request_id, parse_message
from mongio.wire.op_msg import EXHAUST_ALLOWED, MORE_TO_COME
from tests.support.backends import AsyncioServer, served

# -- a fake deployment ----------------------------------------------------------------------------------------


class FakeMember:
    """One fake server: answers hello as a replica set member, mongos or standalone; streams when asked."""

    def __init__(self, deployment: FakeDeployment, role: str, *, streamable: bool = True) -> None:
        self.deployment = deployment
        self.role = role
        self.streamable = streamable
        self.port = 0
        self.counter = 0
        self.process_id = ObjectId()
        self.hang = False
        self.accepted = 0
        self.hellos = 0
        self.awaited_hellos = 0
        self.writers: set[asyncio.StreamWriter] = set()
        self.hosts_override: list[str] | None = None
        self._changed: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def address(self) -> Address:
        return ("127.0.0.1", self.port)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        return sum(1 for writer in self.writers if not writer.is_closing())

    def bump(self) -> None:
        """A significant change: wake every awaiting stream."""
        self.counter += 1
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    def hello_reply(self, legacy: bool, connection_number: int) -> dict[str, Any]:
        deployment = self.deployment
        key = "ismaster" if legacy else "isWritablePrimary"
        reply: dict[str, Any] = {
            "helloOk": True,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000,
            "minWireVersion": 0,
            "maxWireVersion": 21,
            "connectionId": connection_number,
            "logicalSessionTimeoutMinutes": 30,
        }
        if self.streamable:
            reply["topologyVersion"] = {"processId": self.process_id, "counter": Int64(self.counter)}
        if self.role == "mongos":
            reply.update({key: True, "msg": "isdbgrid"})
        elif self.role == "standalone":
            reply[key] = True
        else:
            hosts = self.hosts_override or [member.host for member in deployment.members]
            reply.update(
                {
                    key: self.role == "primary",
                    "secondary": self.role == "secondary",
                    "setName": deployment.set_name,
                    "setVersion": 1,
                    "hosts": hosts,
                    "me": self.host,
                }
            )
            primary = deployment.primary
            if primary is not None:
                reply["primary"] = primary.host
            if self.role == "primary":
                reply["electionId"] = deployment.election_id
        reply["ok"] = 1
        return reply

    async def start(self) -> None:
        self._changed = asyncio.Event()
        self._never = asyncio.Event()  # a hanging member waits on this forever
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop_connections()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def drop_connections(self) -> None:
        for writer in list(self.writers):
            writer.close()

    def tasks(self) -> set[asyncio.Task[Any]]:
        return set(self._tasks)

    async def _wait_for_change(self, counter: int, max_wait: float) -> None:
        if self.counter != counter:
            return
        assert self._changed is not None
        try:
            async with asyncio.timeout(max_wait):
                await self._changed.wait()
        except TimeoutError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        number = self.accepted
        self.writers.add(writer)
        try:
            while True:
                header = await reader.readexactly(HEADER_SIZE)
                length = int.from_bytes(header[:4], "little")
                parsed = parse_message(header + await reader.readexactly(length - HEADER_SIZE))
                content = parsed.content
                assert isinstance(content, OpMsg)
                request = decode(content.body)
                name = next(iter(request))
                if name.lower() not in ("hello", "ismaster"):
                    writer.write(
                        encode_op_msg(next_request_id(), encode({"ok": 1}), response_to=parsed.request_id)
                    )
                    await writer.drain()
                    continue
                self.hellos += 1
                legacy = name.lower() == "ismaster"
                if self.hang:
                    await self._never.wait()
                if "topologyVersion" not in request:
                    reply = encode(self.hello_reply(legacy, number))
                    writer.write(encode_op_msg(next_request_id(), reply, response_to=parsed.request_id))
                    await writer.drain()
                    continue
                self.awaited_hellos += 1
                exhaust = bool(content.flags & EXHAUST_ALLOWED)
                counter = int(request["topologyVersion"]["counter"])
                max_wait = int(request["maxAwaitTimeMS"]) / 1000
                response_to = parsed.request_id
                while True:
                    await self._wait_for_change(counter, max_wait)
                    if self.hang:
                        await self._never.wait()
                    request_id = next_request_id()
                    body = encode(self.hello_reply(legacy, number))
                    flags = MORE_TO_COME if exhaust else 0
                    writer.write(encode_op_msg(request_id, body, flags=flags, response_to=response_to))
                    await writer.drain()
                    if not exhaust:
                        break
                    response_to, counter = request_id, self.counter
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self.writers.discard(writer)
            self._tasks.discard(task)


class FakeDeployment(AsyncioServer):
    """Fake members, served on the test's loop (asyncio) or on a loop in a thread of their own (trio). From a
    test on trio, change the members' state through :meth:`change` and :meth:`elect`, which run there."""

    def __init__(self, roles: Sequence[str], *, set_name: str = "rs", streamable: bool = True) -> None:
        self.set_name = set_name
        self.members = [FakeMember(self, role, streamable=streamable) for role in roles]
        self.election_id = ObjectId()

    @property
    def primary(self) -> FakeMember | None:
        return next((member for member in self.members if member.role == "primary"), None)

    def __getitem__(self, index: int) -> FakeMember:
        return self.members[index]

    def tasks(self) -> set[asyncio.Task[Any]]:
        """The tasks serving the members' connections (not the driver's)."""
        return {task for member in self.members for task in member.tasks()}

    @served
    async def change(self, action: Callable[[], None]) -> None:
        """Apply a state change, then let the loop run what it wakes."""
        action()
        await asyncio.sleep(0)

    @served
    async def elect(self, index: int) -> None:
        """Make member ``index`` the primary and every other data-bearing member a secondary."""

        def election() -> None:
            self.election_id = ObjectId()
            for position, member in enumerate(self.members):
                role = "primary" if position == index else "secondary"
                if member.role != role:
                    member.role = role
                member.bump()

        await self.change(election)

    async def start(self) -> FakeDeployment:
        for member in self.members:
            await member.start()
        return self

    async def stop(self) -> None:
        for member in self.members:
            await member.stop()


# -- a topology on it ---------------------------------------------------------------------------------------------------


class FakePool:
    """Records what the topology asks of a pool; ``on_connect_error`` is the topology's hook for the errors
    of connections being established."""

    def __init__(self, address: Address, on_connect_error: ConnectErrorHook) -> None:
        self.address = address
        self.on_connect_error = on_connect_error
        self.generation = 0
        self.ready_calls = 0
        self.clears: list[tuple[bool, Any]] = []
        self.closed = False
        self.interrupted_on_close = False

    def generation_for(self, service_id: Any = None) -> int:
        return self.generation

    def ready(self) -> None:
        self.ready_calls += 1

    def clear(
        self,
        interrupt_in_use_connections: bool = False,
        service_id: Any = None,
        *,
        error: BaseException | None = None,
    ) -> None:
        self.generation += 1
        self.clears.append((interrupt_in_use_connections, service_id))

    async def close(self, interrupt_in_use_connections: bool = False) -> None:
        self.closed = True
        self.interrupted_on_close = interrupt_in_use_connections

    def let_go(self) -> None:
        self.closed = True

    async def check_out(self, max_wait: float | None = None) -> Any:
        raise AssertionError("the topology never checks a connection out of a pool")

    def check_in(self, conn: Any) -> None:
        raise AssertionError("the topology never checks a connection in")

    def pin(self, conn: Any, purpose: str) -> None:
        raise AssertionError("the topology never pins a connection")


class Pools:
    def __init__(self) -> None:
        self.by_address: dict[Address, FakePool] = {}

    def __call__(self, address: Address, on_connect_error: ConnectErrorHook) -> FakePool:
        pool = self.by_address[address] = FakePool(address, on_connect_error)
        return pool


def make_topology(
    seeds: Sequence[Address],
    factory: MonitorConnectionFactory,
    *,
    heartbeat: float = 10.0,
    mode: str = "stream",
    connect_timeout: float = 5.0,
    **kwargs: Any,
) -> Topology:
    settings_fields = {
        key: kwargs.pop(key)
        for key in (
            "replica_set_name",
            "direct_connection",
            "load_balanced",
            "server_selection_timeout",
            "srv_max_hosts",
        )
        if key in kwargs
    }
    settings = TopologySettings(seeds=tuple(seeds), heartbeat_frequency=heartbeat, **settings_fields)
    return Topology(
        settings,
        monitor_connection_factory=factory,
        server_monitoring_mode=mode,
        connect_timeout=connect_timeout,
        **kwargs,
    )


async def wait_for(
    topology: Topology, predicate: Callable[[TopologyDescription], bool], within: float = 5.0
) -> float:
    """Wait (without requesting checks) until the description satisfies ``predicate``; returns the time taken."""
    started = time.monotonic()
    with anyio.fail_after(within):
        await topology.wait_for_description(predicate)
    return time.monotonic() - started


def types_of(description: TopologyDescription) -> dict[Address, ServerType]:
    return {address: sd.server_type for address, sd in description.server_descriptions().items()}


def has_primary(address: Address) -> Callable[[TopologyDescription], bool]:
    def predicate(description: TopologyDescription) -> bool:
        sd = description.get(address)
        return (
            description.topology_type == TopologyType.ReplicaSetWithPrimary
            and sd is not None
            and sd.server_type == ServerType.RSPrimary
        )

    return predicate


def fully_discovered(deployment: FakeDeployment) -> Callable[[TopologyDescription], bool]:
    def predicate(description: TopologyDescription) -> bool:
        expected = {
            member.address: ServerType.RSPrimary if member.role == "primary" else ServerType.RSSecondary
            for member in deployment.members
        }
        return types_of(description) == expected

    return predicate
