"""The SRV polling specification's prose tests (polling-srv-records-for-mongos-discovery/tests/README.md), with
DNS replaced by a resolver of the test's own and the four mongoses played by fake members on loopback ports.

Port ``27017 + i`` of the README is fake mongos ``i``; every record names ``localhost.test.build.10gen.cc``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from mongio.options.srv import SrvRecord
from mongio.topology.server_description import Address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import Topology
from mongio.topology.topology_type import TopologyType
from tests.support.fake_deployment import FakeDeployment, wait_for
from tests.support.monitor_connections import CountingFactory
from tests.support.virtual_clock import on_virtual_clock

HOST = "localhost.test.build.10gen.cc"
RESCAN = 0.05


class Resolver:
    """Serves the current records; can time out, fail, or answer nothing; counts lookups."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = list(ports)
        self.error: BaseException | None = None
        self.names: list[str] = []
        self._looked_up = asyncio.Event()

    async def resolve_srv(self, name: str, lifetime: float) -> list[SrvRecord]:
        self.names.append(name)
        self._looked_up.set()
        if self.error is not None:
            raise self.error
        return [SrvRecord(HOST, port, ttl=0) for port in self.ports]

    async def resolve_txt(self, name: str, lifetime: float) -> list[list[bytes]]:
        return []

    async def lookups(self, count: int) -> None:
        """Wait for ``count`` more lookups (the README's "wait until 2*rescanSRVIntervalMS")."""
        for _ in range(count):
            self._looked_up.clear()
            async with asyncio.timeout(5):
                await self._looked_up.wait()


def hosts(description: Any) -> set[Address]:
    return set(description.server_descriptions())


CASES = [
    # name, initial records, new records (None: an error instead), srvMaxHosts, service name, expected
    ("1 addition of a new record", [0, 1], [0, 1, 2], 0, "mongodb", {0, 1, 2}),
    ("2 removal of an existing record", [0, 1], [0], 0, "mongodb", {0}),
    ("3 replacement of a record", [0, 1], [0, 2], 0, "mongodb", {0, 2}),
    ("4 both replaced by one", [0, 1], [2], 0, "mongodb", {2}),
    ("5 both replaced by two", [0, 1], [2, 3], 0, "mongodb", {2, 3}),
    ("6 lookup timeout", [0, 1], TimeoutError("DNS timed out"), 0, "mongodb", {0, 1}),
    ("7 lookup failure", [0, 1], OSError("NXDOMAIN"), 0, "mongodb", {0, 1}),
    ("8 all records removed", [0, 1], [], 0, "mongodb", {0, 1}),
    ("10 srvMaxHosts=0 takes all", [0, 1], [0, 2, 3], 0, "mongodb", {0, 2, 3}),
    ("11 srvMaxHosts equal to the records", [0, 1], [2, 3], 2, "mongodb", {2, 3}),
    ("13 custom service name", [0], [2, 3], 0, "customname", {2, 3}),
]


@pytest.mark.parametrize(
    ("initial", "new", "max_hosts", "service", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
@on_virtual_clock
async def test_srv_polling_prose(
    initial: list[int], new: list[int] | BaseException, max_hosts: int, service: str, expected: set[int]
) -> None:
    async with FakeDeployment(["mongos"] * 4) as mongoses:
        ports = [member.port for member in mongoses.members]
        address = {i: (HOST, port) for i, port in enumerate(ports)}
        resolver = Resolver([ports[i] for i in initial])
        failing = isinstance(new, BaseException) or new == []
        # After a failed rescan the next comes after heartbeatFrequencyMS: keep it short for those cases.
        heartbeat = 0.1 if failing else 10.0
        topology = Topology(
            TopologySettings(
                seeds=tuple(address[i] for i in initial),
                srv_max_hosts=max_hosts,
                heartbeat_frequency=heartbeat,
            ),
            monitor_connection_factory=CountingFactory(loopback=True),
            srv_host="test1.test.build.10gen.cc",
            srv_service_name=service,
            srv_resolver=resolver,
            srv_rescan_interval=RESCAN,
            srv_min_rescan_interval=RESCAN,
        )
        async with topology:
            await wait_for(topology, lambda d: d.topology_type == TopologyType.Sharded)
            if isinstance(new, BaseException):
                resolver.error = new
            else:
                resolver.ports = [ports[i] for i in new]
            await resolver.lookups(2)
            assert hosts(topology.description) == {address[i] for i in expected}
            # Every server the topology keeps is monitored, and the new ones are discovered as mongoses.
            assert set(topology.servers) == {address[i] for i in expected}
            await wait_for(
                topology,
                lambda d: all(sd.server_type == ServerType.Mongos for sd in d.server_descriptions().values()),
            )
            if failing:
                assert topology.srv_poller is not None
                assert topology.srv_poller.interval == heartbeat
        assert set(resolver.names) == {f"_{service}._tcp.test1.test.build.10gen.cc"}


@on_virtual_clock
async def test_srv_polling_prose_12_new_records_are_chosen_at_random() -> None:
    async with FakeDeployment(["mongos"] * 4) as mongoses:
        ports = [member.port for member in mongoses.members]
        resolver = Resolver(ports[:2])
        topology = Topology(
            TopologySettings(seeds=((HOST, ports[0]), (HOST, ports[1])), srv_max_hosts=2),
            monitor_connection_factory=CountingFactory(loopback=True),
            srv_host="test1.test.build.10gen.cc",
            srv_resolver=resolver,
            srv_rescan_interval=RESCAN,
            srv_min_rescan_interval=RESCAN,
        )
        async with topology:
            resolver.ports = [ports[0], ports[2], ports[3]]
            await resolver.lookups(2)
            found = hosts(topology.description)
            assert len(found) == 2 and (HOST, ports[0]) in found
            assert found <= {(HOST, ports[0]), (HOST, ports[2]), (HOST, ports[3])}


@on_virtual_clock
async def test_srv_polling_prose_9_no_polling_when_load_balanced() -> None:
    resolver = Resolver([27017])
    topology = Topology(
        TopologySettings(seeds=((HOST, 27017),), load_balanced=True),
        srv_host="test3.test.build.10gen.cc",
        srv_resolver=resolver,
        srv_rescan_interval=RESCAN,
        srv_min_rescan_interval=RESCAN,
    )
    async with topology:
        resolver.ports = [27017, 27018]
        await asyncio.sleep(2 * RESCAN + 0.05)
        assert hosts(topology.description) == {(HOST, 27017)}
        assert topology.srv_poller is None and topology.tasks() == []
    assert resolver.names == []
