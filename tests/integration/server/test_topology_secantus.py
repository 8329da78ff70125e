"""The running topology against the test server: discovery, streaming monitoring, a step-down seen through
the stream, the number of monitoring connections, and a clean close.

SecantusDB's streamed ``hello`` follow-ups carry the opening request's id as ``responseTo`` (the OP_MSG
specification says the previous reply's); ``Connection`` accepts both, so the driver's own factory is used.
The server does not advance ``topologyVersion`` when it becomes primary again after a step-down, so that change
arrives with the next streamed reply (after ``maxAwaitTimeMS`` = ``heartbeatFrequencyMS``), not at once.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio.connection.connection import Connection
from mongio.connection.establish import ConnectionSettings
from mongio.topology.heartbeat_events import (
    ServerHeartbeatFailedEvent,
    ServerHeartbeatListener,
    ServerHeartbeatStartedEvent,
    ServerHeartbeatSucceededEvent,
)
from mongio.topology.server_description import Address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import ConnectErrorHook, Topology
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType
from tests.support.monitor_connections import CountingFactory

pytestmark = pytest.mark.server


class Heartbeats(ServerHeartbeatListener):
    def __init__(self) -> None:
        self.events: list[tuple[float, Any]] = []
        self.awaited_started = anyio.Event()

    def started(self, event: ServerHeartbeatStartedEvent) -> None:
        self.events.append((time.monotonic(), event))
        if event.awaited:
            self.awaited_started.set()

    def succeeded(self, event: ServerHeartbeatSucceededEvent) -> None:
        self.events.append((time.monotonic(), event))

    def failed(self, event: ServerHeartbeatFailedEvent) -> None:
        self.events.append((time.monotonic(), event))

    def of(self, kind: type[Any]) -> list[Any]:
        return [event for _, event in self.events if isinstance(event, kind)]


def server_type_is(address: Address, server_type: ServerType) -> Any:
    def predicate(description: TopologyDescription) -> bool:
        sd = description.get(address)
        return sd is not None and sd.server_type == server_type

    return predicate


async def test_discovers_the_server_and_streams(server_address: tuple[str, int]) -> None:
    address: Address = server_address
    factory = CountingFactory()
    heartbeats = Heartbeats()
    before = running_tasks()
    topology = Topology(
        TopologySettings(seeds=(address,), heartbeat_frequency=10.0),
        monitor_connection_factory=factory,
        server_monitoring_mode="stream",
        listeners=[heartbeats],
    )
    async with topology:
        with anyio.fail_after(10):
            await topology.wait_for_description(server_type_is(address, ServerType.RSPrimary))
        description = topology.description
        assert description.topology_type == TopologyType.ReplicaSetWithPrimary
        assert description.replica_set_name is not None
        server = await topology.select_server(is_write=True)
        assert server.address == address
        server.operation_finished()
        with anyio.fail_after(5):
            await heartbeats.awaited_started.wait()
        monitor = topology.servers[address].monitor
        assert monitor is not None and monitor.rtt_monitor is not None
        await anyio.sleep(0.3)
        # The monitor's streaming connection and the RTT task's connection, no more.
        assert factory.open_to(address) == 2
        assert description.get(address).round_trip_time is not None  # type: ignore[union-attr]
    assert topology.tasks() == []
    assert tasks_started_since(before) == []
    assert all(connection.closed for _, connection in factory.opened)


async def test_streaming_keeps_the_server_fresh(server_address: tuple[str, int]) -> None:
    address: Address = server_address
    factory = CountingFactory()
    heartbeats = Heartbeats()
    heartbeat = 1.0
    topology = Topology(
        TopologySettings(seeds=(address,), heartbeat_frequency=heartbeat),
        monitor_connection_factory=factory,
        server_monitoring_mode="stream",
        listeners=[heartbeats],
    )
    async with topology:
        with anyio.fail_after(10):
            await topology.wait_for_description(server_type_is(address, ServerType.RSPrimary))
        await anyio.sleep(3.5 * heartbeat)
        monitor = topology.servers[address].monitor
        assert monitor is not None and monitor.rtt_monitor is not None
        awaited = [e for e in heartbeats.of(ServerHeartbeatSucceededEvent) if e.awaited]
        assert len(awaited) >= 2, "the server streamed no replies at maxAwaitTimeMS"
        assert heartbeats.of(ServerHeartbeatFailedEvent) == []
        assert monitor.rtt_monitor.pings >= 3
        assert topology.description.get(address).server_type == ServerType.RSPrimary  # type: ignore[union-attr]
        # The streamed replies came on one connection: no reconnecting.
        assert len(factory.opened) == 2
    assert factory.most_open <= 2


async def test_step_down_is_seen_through_the_stream(
    server_address: tuple[str, int], record_property: Any
) -> None:
    address: Address = server_address
    factory = CountingFactory()
    heartbeats = Heartbeats()
    heartbeat = 2.0
    step_down_seconds = 5
    topology = Topology(
        TopologySettings(seeds=(address,), heartbeat_frequency=heartbeat),
        monitor_connection_factory=factory,
        server_monitoring_mode="stream",
        listeners=[heartbeats],
    )
    async with topology:
        with anyio.fail_after(10):
            await topology.wait_for_description(server_type_is(address, ServerType.RSPrimary))
        await anyio.sleep(0.3)  # the awaitable hello is outstanding
        admin = await factory(address)
        try:
            reply = await admin.command(
                "admin", {"replSetStepDown": step_down_seconds, "force": True}, check=False
            )
        finally:
            admin.close()
        assert reply.get("ok") == 1, reply
        stepped_down = time.monotonic()
        with anyio.fail_after(heartbeat + 3):
            await topology.wait_for_description(server_type_is(address, ServerType.RSSecondary))
        secondary_after = time.monotonic() - stepped_down
        with anyio.fail_after(step_down_seconds + heartbeat + 5):
            await topology.wait_for_description(server_type_is(address, ServerType.RSPrimary))
        primary_after = time.monotonic() - stepped_down
        record_property("secondary_noticed_after_s", round(secondary_after, 3))
        record_property("primary_again_noticed_after_s", round(primary_after, 3))
        print(f"step-down noticed after {secondary_after:.3f} s, primary again after {primary_after:.3f} s")

        # The server pushed its new state: far sooner than a heartbeat.
        assert secondary_after < 1.0
        # Back after the step-down period, noticed within one more streamed reply.
        assert step_down_seconds - 0.5 <= primary_after <= step_down_seconds + heartbeat + 1.5
        # Both changes arrived as streamed (awaited) replies, not through new connections or polls.
        replies = [e.reply for e in heartbeats.of(ServerHeartbeatSucceededEvent) if e.awaited]
        assert any(r.get("secondary") for r in replies)
        assert any(r.get("isWritablePrimary") for r in replies)
        assert heartbeats.of(ServerHeartbeatFailedEvent) == []
        assert factory.most_open <= 3  # monitor and RTT connections, plus the one that ran replSetStepDown
        assert sum(1 for where, _ in factory.opened if where == address) == 3


async def test_real_pools_follow_the_topology(server_address: tuple[str, int]) -> None:
    from mongio.connection.establish import establish
    from mongio.connection.pool import Pool, PoolState
    from mongio.errors import AutoReconnect

    address: Address = server_address
    settings = ConnectionSettings(connect_timeout=5.0)
    pools: dict[Address, Pool[Connection]] = {}

    def make_pool(where: Address, on_connect_error: ConnectErrorHook) -> Pool[Connection]:
        async def connect(connection_id: int, generation: int) -> Connection:
            return await establish(where, settings, id=connection_id, generation=generation)

        pool = pools[where] = Pool(where, connect, on_connect_error=on_connect_error)
        return pool

    topology = Topology(
        TopologySettings(seeds=(address,), heartbeat_frequency=10.0),
        monitor_connection_factory=CountingFactory(),
        pool_factory=make_pool,
        server_monitoring_mode="stream",
    )
    async with topology:
        server = await topology.select_server(is_write=True, timeout=10)
        pool = pools[address]
        # The first successful check made the pool ready before selection could see the server.
        assert pool.state == PoolState.READY
        async with pool.checkout() as connection:
            reply = await connection.command("admin", {"ping": 1})
            generation = connection.generation
        assert reply["ok"] == 1
        server.operation_finished()

        # An application's network error marks the server Unknown and clears the pool in one step.
        decision = await topology.handle_application_error(
            address, AutoReconnect("connection reset"), generation
        )
        assert decision.clear_pool and decision.mark_unknown is not None
        assert pool.state == PoolState.PAUSED and pool.generation == generation + 1
        assert topology.description.get(address).server_type == ServerType.Unknown  # type: ignore[union-attr]

        # Selection requests a check; the monitor reconnects, the pool is ready again.
        started = time.monotonic()
        server = await topology.select_server(is_write=True, timeout=10)
        assert time.monotonic() - started < 2.0
        assert pool.state == PoolState.READY
        async with pool.checkout() as connection:
            assert (await connection.command("admin", {"ping": 1}))["ok"] == 1
        server.operation_finished()
    assert pool.state == PoolState.CLOSED
    assert topology.tasks() == []
