"""A pool's report of a connection that failed while being established: acted on before the report returns
(the pool cleared and the server marked Unknown at once), so the pool's own events for the failed check-out
come after its clear."""

from __future__ import annotations

from mongio.errors import AutoReconnect, OperationFailure
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import Topology
from mongio.topology.topology_type import TopologyType
from tests.support.fake_deployment import (
    FakeDeployment,
    Pools,
    fully_discovered,
    make_topology,
    wait_for,
)
from tests.support.monitor_connections import CountingFactory
from tests.support.virtual_clock import on_virtual_clock


@on_virtual_clock
async def test_a_connect_error_clears_the_pool_before_the_report_returns() -> None:
    async with FakeDeployment(["primary", "secondary"]) as rs:
        pools = Pools()
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0, pool_factory=pools)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            pool = pools.by_address[rs[0].address]
            generation = pool.generation
            topology.report_connect_error(rs[0].address, AutoReconnect("reset while connecting"), generation)
            assert pool.clears == [(False, None)]
            assert topology.description.topology_type == TopologyType.ReplicaSetNoPrimary
            # A second report from the same (now older) generation is stale: no second clear.
            topology.report_connect_error(rs[0].address, AutoReconnect("reset again"), generation)
            assert pool.clears == [(False, None)]
            # Selection wakes up and finds the primary again once it is checked.
            server = await topology.select_server(is_write=True, timeout=3.0)
            assert server.address == rs[0].address
            server.operation_finished()


@on_virtual_clock
async def test_load_balanced_connect_errors_clear_only_the_service_the_hello_named() -> None:
    pools = Pools()
    balancer = ("lb.example.com", 27017)
    topology = Topology(TopologySettings(seeds=(balancer,), load_balanced=True), pool_factory=pools)
    async with topology:
        pool = pools.by_address[balancer]
        # Refused by the hello itself (a shutdown error answering it): the connection has no service yet.
        during_hello = OperationFailure("interrupted at shutdown", 11600, {"ok": 0, "code": 11600})
        topology.report_connect_error(balancer, during_hello, 0)
        topology.report_connect_error(balancer, AutoReconnect("reset while connecting"), 0)
        assert pool.clears == []
        # Failed after the hello, during authentication: that service's connections go, nothing else changes.
        during_auth = AutoReconnect("reset during authentication")
        during_auth.attribute_to_service("service-1")
        topology.report_connect_error(balancer, during_auth, 0)
        assert pool.clears == [(False, "service-1")]
        assert topology.description.topology_type == TopologyType.LoadBalanced
        assert topology.description.server_descriptions()[balancer].server_type == ServerType.LoadBalancer


@on_virtual_clock
async def test_the_pool_reports_its_connect_errors_through_the_hook_the_topology_gave_it() -> None:
    async with FakeDeployment(["primary", "secondary"]) as rs:
        pools = Pools()
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0, pool_factory=pools)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            pool = pools.by_address[rs[0].address]
            pool.on_connect_error(AutoReconnect("reset while connecting"), pool.generation)
            assert pool.clears == [(False, None)]
            assert topology.description.server_descriptions()[rs[0].address].server_type is ServerType.Unknown
