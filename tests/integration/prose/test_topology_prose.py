"""The SDAM specification's prose tests for monitoring (server-discovery-and-monitoring/tests/README.md):
the streaming cadence, round trip times kept current by the RTT task, and the heartbeat-started event coming
before the monitoring socket is opened."""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.abc
import pytest

from mongio.connection.establish import ConnectionSettings
from mongio.connection.handshake import ClientMetadata
from mongio.errors import ServerSelectionTimeoutError
from mongio.topology.heartbeat_events import (
    ServerHeartbeatFailedEvent,
    ServerHeartbeatListener,
    ServerHeartbeatStartedEvent,
    ServerHeartbeatSucceededEvent,
    ServerListener,
)
from mongio.topology.monitor import monitor_connection_factory
from mongio.topology.sdam_events import ServerDescriptionChangedEvent
from mongio.topology.server_description import Address
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import Topology
from tests.support.monitor_connections import CountingFactory

pytestmark = pytest.mark.server


class Events(ServerHeartbeatListener, ServerListener):
    def __init__(self, shared: list[Any] | None = None) -> None:
        self.items: list[Any] = shared if shared is not None else []

    def started(self, event: ServerHeartbeatStartedEvent) -> None:
        self.items.append(event)

    def succeeded(self, event: ServerHeartbeatSucceededEvent) -> None:
        self.items.append(event)

    def failed(self, event: ServerHeartbeatFailedEvent) -> None:
        self.items.append(event)

    def description_changed(self, event: ServerDescriptionChangedEvent) -> None:
        self.items.append(event)


async def test_streaming_processes_replies_every_heartbeat(server_address: tuple[str, int]) -> None:
    """Streaming protocol test 1: heartbeatFrequencyMS=500 gives a reply about every 500 ms."""
    address: Address = server_address
    events = Events()
    topology = Topology(
        TopologySettings(seeds=(address,), heartbeat_frequency=0.5),
        monitor_connection_factory=CountingFactory(),
        server_monitoring_mode="stream",
        listeners=[events],
    )
    async with topology:
        await topology.select_server(is_write=True, timeout=10)
        started = time.monotonic()
        await anyio.sleep(2.6)
        window = time.monotonic() - started
    replies = [e for e in events.items if isinstance(e, ServerHeartbeatSucceededEvent) and e.awaited]
    assert window / 0.5 - 2 <= len(replies) <= window / 0.5 + 2, len(replies)


async def test_rtt_is_continuously_updated(server_address: tuple[str, int]) -> None:
    """RTT test 1: every description carries a non-zero RTT, and a slowed hello raises it past 250 ms."""
    address: Address = server_address
    events = Events()
    factory = CountingFactory(
        settings=ConnectionSettings(connect_timeout=5.0, metadata=ClientMetadata("streamingRttTest")),
    )
    topology = Topology(
        TopologySettings(seeds=(address,), heartbeat_frequency=0.5),
        monitor_connection_factory=factory,
        server_monitoring_mode="stream",
        listeners=[events],
    )
    admin = await monitor_connection_factory(ConnectionSettings(connect_timeout=5.0))(address)
    try:
        async with topology:
            await topology.select_server(is_write=True, timeout=10)
            await anyio.sleep(2)
            changed = [e for e in events.items if isinstance(e, ServerDescriptionChangedEvent)]
            assert changed
            for event in changed:
                if event.new_description.is_server_type_known:
                    round_trip_time = event.new_description.round_trip_time
                    assert round_trip_time is not None and round_trip_time > 0
            await admin.command(
                "admin",
                {
                    "configureFailPoint": "failCommand",
                    "mode": {"times": 1000},
                    "data": {
                        "failCommands": ["hello", "isMaster"],
                        "blockConnection": True,
                        "blockTimeMS": 500,
                        "appName": "streamingRttTest",
                    },
                },
            )
            try:
                with anyio.fail_after(10):
                    await topology.wait_for_description(
                        lambda d: (d.get(address).round_trip_time or 0) > 0.25  # type: ignore[union-attr]
                    )
            finally:
                await admin.command("admin", {"configureFailPoint": "failCommand", "mode": "off"})
    finally:
        admin.close()


async def test_heartbeat_started_comes_before_the_socket_is_opened() -> None:
    """Heartbeat test 1: started, client connected, hello received, failed, in that order."""
    shared: list[Any] = []

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:  # closed once the first byte of the hello arrived
            shared.append("client connected")
            try:
                await client.receive(1)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return  # no hello: the order asserted below is then wrong
            shared.append("client hello received")

    async with (
        await anyio.create_tcp_listener(local_host="127.0.0.1") as listener,
        anyio.create_task_group() as server,
    ):
        server.start_soon(listener.serve, serve)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        topology = Topology(
            TopologySettings(seeds=(("127.0.0.1", port),), server_selection_timeout=0.5),
            monitor_connection_factory=monitor_connection_factory(ConnectionSettings(connect_timeout=5.0)),
            listeners=[Events(shared)],
        )
        try:
            async with topology:
                with pytest.raises(ServerSelectionTimeoutError):
                    await topology.select_server()
        finally:
            server.cancel_scope.cancel()
    names = [item if isinstance(item, str) else type(item).__name__ for item in shared]
    assert names[:4] == [
        "ServerHeartbeatStartedEvent",
        "client connected",
        "client hello received",
        "ServerHeartbeatFailedEvent",
    ]
