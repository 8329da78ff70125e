"""A server monitor against the test server: the polling cadence, immediate checks on request, round trip
times, and the number of connections monitoring costs the server (counted by the server itself)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import anyio
import pytest

from mongio.connection.establish import ConnectionSettings
from mongio.topology.monitor import Monitor, monitor_connection_factory
from mongio.topology.rtt_monitor import MonitorConnection
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import Topology

pytestmark = pytest.mark.server

FACTORY = monitor_connection_factory(ConnectionSettings(connect_timeout=5.0))


class Outcomes:
    """Collects a monitor's check outcomes with their arrival times."""

    def __init__(self) -> None:
        self.items: list[tuple[float, ServerDescription]] = []
        self._arrived: anyio.Event | None = None

    async def __call__(self, description: ServerDescription) -> None:
        self.items.append((time.monotonic(), description))
        if self._arrived is not None:
            self._arrived.set()

    async def next(self, within: float) -> tuple[float, ServerDescription]:
        """The next outcome to arrive from now on, within ``within`` seconds."""
        self._arrived = arrived = anyio.Event()
        with anyio.fail_after(within):
            await arrived.wait()
        return self.items[-1]


async def current_connections(admin: MonitorConnection) -> int:
    reply = await admin.command("admin", {"serverStatus": 1})
    return int(reply["connections"]["current"])


async def settled_connections(admin: MonitorConnection, expected: int, within: float = 3.0) -> int:
    """The server's connection count once it equals ``expected`` (or whatever it is after ``within``)."""
    count = await current_connections(admin)
    for _ in range(int(within / 0.05)):
        if count == expected:
            break
        await anyio.sleep(0.05)
        count = await current_connections(admin)
    return count


async def test_polling_monitor_checks_every_heartbeat(server_address: tuple[str, int]) -> None:
    address: Address = server_address
    outcomes = Outcomes()
    heartbeat = 0.3
    monitor = Monitor(
        address,
        FACTORY,
        outcomes,
        heartbeat_frequency=heartbeat,
        connect_timeout=5.0,
        streaming=False,
        min_heartbeat_frequency=0.1,
    )
    monitor.start()
    try:
        await outcomes.next(within=5)
        started = time.monotonic()
        await anyio.sleep(4 * heartbeat + 0.1)
        recent = [d for t, d in outcomes.items if t >= started]
    finally:
        await monitor.close()
    assert 3 <= len(recent) <= 5, len(recent)
    assert all(d.server_type == ServerType.RSPrimary for d in recent)
    times = [t for t, _ in outcomes.items]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= heartbeat * 0.9  # never sooner than the heartbeat
    assert monitor.rtt_monitor is None  # polling never opens a round trip time connection
    assert recent[-1].round_trip_time is not None and recent[-1].round_trip_time > 0
    assert monitor.rtt.min > 0  # several samples: the minimum is reported
    assert not monitor.running


async def test_request_check_wakes_the_monitor_at_once_but_not_too_soon(
    server_address: tuple[str, int],
) -> None:
    address: Address = server_address
    outcomes = Outcomes()
    monitor = Monitor(
        address, FACTORY, outcomes, heartbeat_frequency=30.0, connect_timeout=5.0, streaming=False
    )
    monitor.start()
    try:
        first_time, _ = await outcomes.next(within=5)
        # Within 0.5 s of the last check: the request waits for the minimum heartbeat.
        monitor.request_check()
        second_time, _ = await outcomes.next(within=2)
        assert 0.45 <= second_time - first_time < 1.0
        await anyio.sleep(0.7)
        requested = time.monotonic()
        monitor.request_check()
        third_time, description = await outcomes.next(within=2)
        assert third_time - requested < 0.3
        assert description.server_type == ServerType.RSPrimary
    finally:
        await monitor.close()
    assert len(outcomes.items) == 3


@pytest.mark.parametrize(("mode", "expected"), [("stream", 2), ("poll", 1)])
async def test_monitoring_costs_the_server_two_connections_streaming_one_polling(
    server_address: tuple[str, int], mode: str, expected: int, record_property: Any
) -> None:
    address: Address = server_address
    admin = await FACTORY(address)
    try:
        await anyio.sleep(0.2)  # connections of earlier tests finish closing
        baseline = await current_connections(admin)
        topology = Topology(
            TopologySettings(seeds=(address,), heartbeat_frequency=10.0),
            monitor_connection_factory=FACTORY,
            server_monitoring_mode=mode,
        )
        async with topology:
            await topology.select_server(is_write=True, timeout=10)
            during = await settled_connections(admin, baseline + expected)
            await anyio.sleep(0.5)
            later = await current_connections(admin)
        after = await settled_connections(admin, baseline)
    finally:
        admin.close()
    record_property("monitoring_connections", during - baseline)
    assert during - baseline == expected
    assert later == during  # steady: no reconnecting
    assert after == baseline
