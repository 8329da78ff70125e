"""The running topology against fake deployments on loopback sockets: discovery, streaming and polling
monitors, elections, server selection, error handling, SRV polling, events, and clean shutdown.

Every test runs on a virtual clock (``tests.support.virtual_clock``): heartbeats, maxAwaitTimeMS, timeouts and
the tests' own sleeps cost no real time, and durations measured here are virtual seconds, exact and repeatable.
The fake members share the test's loop (the clock may only move when they have nothing left to do either);
their tasks and timers are told apart from the driver's where a test counts them. Monitoring connections are
the driver's real ones (TCP, handshake, exhaust replies), made by ``monitor_connection_factory``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from mongio.errors import (
    AutoReconnect,
    ClientClosedError,
    NetworkTimeout,
    NotPrimaryError,
    ServerSelectionTimeoutError,
)
from mongio.options.read_preference import Secondary
from mongio.options.srv import SrvRecord
from mongio.topology.heartbeat_events import (
    ServerHeartbeatFailedEvent,
    ServerHeartbeatListener,
    ServerHeartbeatStartedEvent,
    ServerHeartbeatSucceededEvent,
    ServerListener,
    TopologyListener,
)
from mongio.topology.monitor import is_faas, streaming_enabled
from mongio.topology.sdam_events import (
    ServerClosedEvent,
    ServerDescriptionChangedEvent,
    ServerOpeningEvent,
    TopologyClosedEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpeningEvent,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import Topology
from mongio.topology.topology_type import TopologyType
from tests.support.fake_deployment import (
    FakeDeployment,
    Pools,
    fully_discovered,
    has_primary,
    make_topology,
    types_of,
    wait_for,
)
from tests.support.monitor_connections import CountingFactory
from tests.support.virtual_clock import on_virtual_clock

# -- helpers ---------------------------------------------------------------------------------------------------


class Recorder(ServerListener, TopologyListener, ServerHeartbeatListener):
    """Every SDAM and heartbeat event, in order, with the time it arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[float, object]] = []
        self.failure = asyncio.Event()

    def _add(self, event: object) -> None:
        self.events.append((time.monotonic(), event))

    def opened(self, event: Any) -> None:
        self._add(event)

    def description_changed(self, event: Any) -> None:
        self._add(event)

    def closed(self, event: Any) -> None:
        self._add(event)

    def started(self, event: ServerHeartbeatStartedEvent) -> None:
        self._add(event)

    def succeeded(self, event: ServerHeartbeatSucceededEvent) -> None:
        self._add(event)

    def failed(self, event: ServerHeartbeatFailedEvent) -> None:
        self._add(event)
        self.failure.set()

    def of(self, kind: type[Any]) -> list[Any]:
        return [event for _, event in self.events if isinstance(event, kind)]


def not_primary(code: int = 10107) -> NotPrimaryError:
    reply = {"ok": 0, "code": code, "errmsg": "not primary"}
    return NotPrimaryError("not primary", reply)


# -- discovery and elections -----------------------------------------------------------------------------------


@on_virtual_clock
async def test_discovers_every_member_from_one_seed() -> None:
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        factory = CountingFactory()
        topology = make_topology([rs[1].address], factory)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            description = topology.description
            assert description.topology_type == TopologyType.ReplicaSetWithPrimary
            assert description.replica_set_name == "rs"
            assert set(topology.servers) == {member.address for member in rs.members}
            for server in topology.servers.values():
                assert server.monitor is not None and server.monitor.running


@on_virtual_clock
async def test_election_is_noticed_through_the_streamed_reply() -> None:
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            # Wait until every monitor has its awaitable hello outstanding.
            await asyncio.sleep(0.2)
            assert all(member.awaited_hellos >= 1 for member in rs.members)
            await rs.elect(2)
            took = await wait_for(topology, has_primary(rs[2].address), within=5.0)
            assert topology.description.get(rs[0].address).server_type == ServerType.RSSecondary  # type: ignore[union-attr]
            # The servers pushed their new state: at once, not at the next 10 s heartbeat.
            assert took == 0, f"the election took {took:.3f} s to notice"


@on_virtual_clock
async def test_polling_monitors_notice_an_election_after_an_application_error() -> None:
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        pools = Pools()
        topology = make_topology(
            [rs[0].address], CountingFactory(), mode="poll", heartbeat=10.0, pool_factory=pools
        )
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            await rs.elect(1)
            await asyncio.sleep(0.3)
            # Polling: nobody pushes, so the old view stands until something asks for a check.
            assert has_primary(rs[0].address)(topology.description)
            started = time.monotonic()
            decision = await topology.handle_application_error(rs[0].address, not_primary(), 0)
            assert decision.request_check and decision.mark_unknown is not None and not decision.clear_pool
            assert topology.description.get(rs[0].address).server_type == ServerType.Unknown  # type: ignore[union-attr]
            server = await topology.select_server(is_write=True, timeout=5.0)
            took = time.monotonic() - started
            assert server.address == rs[1].address
            server.operation_finished()
            # Not a heartbeat later: the requested check waits only for minHeartbeatFrequencyMS (0.5 s) since the
            # last check, made 0.3 s ago at discovery.
            assert took == pytest.approx(0.2), f"selection after the error took {took:.3f} s"
            assert pools.by_address[rs[0].address].clears == []
            assert all(member.awaited_hellos == 0 for member in rs.members)
            assert all(
                s.monitor is not None and s.monitor.rtt_monitor is None for s in topology.servers.values()
            )


@on_virtual_clock
async def test_a_server_without_topology_version_is_polled_even_in_stream_mode() -> None:
    async with FakeDeployment(["standalone"], streamable=False) as fake:
        factory = CountingFactory()
        topology = make_topology([fake[0].address], factory, heartbeat=0.3, mode="stream")
        async with topology:
            await wait_for(topology, lambda d: d.topology_type == TopologyType.Single)
            discovered = fake[0].hellos
            await asyncio.sleep(0.29)
            assert fake[0].hellos == discovered  # no check before heartbeatFrequencyMS
            await asyncio.sleep(0.02)
            assert fake[0].hellos == discovered + 1
            await asyncio.sleep(0.6)
            assert fake[0].hellos == discovered + 3  # one poll every 0.3 s
            monitor = topology.servers[fake[0].address].monitor
            assert monitor is not None and monitor.rtt_monitor is None
            assert fake[0].awaited_hellos == 0
            assert factory.open_to(fake[0].address) == 1


@on_virtual_clock
async def test_removed_member_has_its_monitor_stopped() -> None:
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        recorder = Recorder()
        pools = Pools()
        topology = make_topology([rs[0].address], CountingFactory(), listeners=[recorder], pool_factory=pools)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            leaving = topology.servers[rs[2].address]

            def reconfigure() -> None:
                rs[0].hosts_override = [rs[0].host, rs[1].host]
                rs[0].bump()

            await rs.change(reconfigure)
            await wait_for(topology, lambda d: not d.has_server(rs[2].address))
            assert leaving.monitor is not None and leaving.monitor._task is not None
            done, _ = await asyncio.wait([leaving.monitor._task], timeout=2)
            assert done, "the removed server's monitor is still running"
            assert [e.server_address for e in recorder.of(ServerClosedEvent)] == [rs[2].address]
            assert rs[2].address not in topology.servers
            await asyncio.sleep(0.05)
            assert pools.by_address[rs[2].address].closed
            # A server leaving the topology lets the operations running on it finish.
            assert not pools.by_address[rs[2].address].interrupted_on_close


# -- server selection ------------------------------------------------------------------------------------------


@on_virtual_clock
async def test_selection_times_out_with_an_error_that_explains_why() -> None:
    async with FakeDeployment(["secondary", "secondary", "secondary"]) as rs:
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0)
        async with topology:
            await wait_for(
                topology, lambda d: len(d.server_descriptions()) == 3 and len(d.known_servers) == 3
            )
            started = time.monotonic()
            with pytest.raises(ServerSelectionTimeoutError) as caught:
                await topology.select_server(is_write=True, timeout=0.4)
            assert time.monotonic() - started == pytest.approx(0.4)  # serverSelectionTimeoutMS, to the tick
            message = str(caught.value)
            assert "writable server" in message
            assert "ReplicaSetNoPrimary" in message
            for member in rs.members:
                assert f"{member.host} (RSSecondary, a write needs the primary)" in message

            with pytest.raises(ServerSelectionTimeoutError) as caught:
                await topology.select_server(Secondary(tag_sets=[{"dc": "mars"}]), timeout=0.2)
            message = str(caught.value)
            assert "read preference secondary" in message and "'dc': 'mars'" in message

            server = await topology.select_server(Secondary(), timeout=0.2)
            assert server.description.server_type == ServerType.RSSecondary
            server.operation_finished()


@on_virtual_clock
async def test_selection_error_names_the_unreachable_server_and_its_error() -> None:
    # A port nothing listens on: take one, then let it go.
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    topology = make_topology([("127.0.0.1", port)], CountingFactory(connect_timeout=1.0), heartbeat=10.0)
    async with topology:
        with pytest.raises(ServerSelectionTimeoutError) as caught:
            await topology.select_server(timeout=0.8)
    message = str(caught.value)
    assert "read preference primary" in message
    assert f"127.0.0.1:{port} (Unknown, error: " in message
    assert "topology type Unknown" in message


@on_virtual_clock
async def test_fast_path_selects_without_awaiting() -> None:
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        topology = make_topology([rs[0].address], CountingFactory())
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            coroutine = topology.select_server(is_write=True)
            with pytest.raises(StopIteration) as finished:
                coroutine.send(None)  # completes on its first step: it never suspended
            server = finished.value.value
            assert server.address == rs[0].address
            assert server.operation_count == 1
            with server:
                pass
            assert server.operation_count == 0


@on_virtual_clock
async def test_waiting_selection_succeeds_as_soon_as_a_primary_appears() -> None:
    async with FakeDeployment(["secondary", "secondary", "secondary"]) as rs:
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0)
        async with topology:
            await wait_for(topology, lambda d: len(d.known_servers) == 3)
            waiting = asyncio.ensure_future(topology.select_server(is_write=True, timeout=5.0))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await rs.elect(1)
            started = time.monotonic()
            server = await waiting
            assert server.address == rs[1].address
            assert time.monotonic() - started == 0  # woken by the new description, not a later check
            server.operation_finished()


@on_virtual_clock
async def test_selection_logs_follow_the_specification(caplog: pytest.LogCaptureFixture) -> None:
    async with FakeDeployment(["secondary"]) as rs:
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0)
        async with topology:
            await wait_for(topology, lambda d: len(d.known_servers) == 1)
            with (
                caplog.at_level(logging.DEBUG, logger="mongio.serverSelection"),
                pytest.raises(ServerSelectionTimeoutError),
            ):
                await topology.select_server(is_write=True, timeout=1.2, operation="insert")
            messages = [
                record.msg.fields["message"]  # type: ignore[union-attr]
                for record in caplog.records
                if record.name == "mongio.serverSelection"
            ]
            assert messages == [
                "Server selection started",
                "Waiting for suitable server to become available",
                "Server selection failed",
            ]
            waiting = [record for record in caplog.records if "Waiting" in record.getMessage()]
            assert waiting[0].levelno == logging.INFO
            assert waiting[0].msg.fields["operation"] == "insert"  # type: ignore[union-attr]


# -- monitor error handling --------------------------------------------------------------------------------------


@on_virtual_clock
async def test_known_server_is_checked_again_at_once_after_a_network_error() -> None:
    async with FakeDeployment(["primary"]) as rs:
        recorder = Recorder()
        pools = Pools()
        topology = make_topology(
            [rs[0].address], CountingFactory(), heartbeat=10.0, listeners=[recorder], pool_factory=pools
        )
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            await asyncio.sleep(0.2)
            assert recorder.of(ServerHeartbeatFailedEvent) == []
            await rs.change(rs[0].drop_connections)
            async with asyncio.timeout(3):
                await recorder.failure.wait()
            await wait_for(topology, fully_discovered(rs), within=3)
            failure = next(i for i, (_, e) in enumerate(recorder.events) if isinstance(e, ServerHeartbeatFailedEvent))
            failure_time = recorder.events[failure][0]
            success_time = next(
                t for t, e in recorder.events[failure:] if isinstance(e, ServerHeartbeatSucceededEvent)
            )
            # No sleep between the failure and the retry: not even the 0.5 s minimum heartbeat.
            assert success_time == failure_time
            # The failed check cleared the pool, without interrupting connections in use (not a timeout).
            assert pools.by_address[rs[0].address].clears == [(False, None)]


@on_virtual_clock
async def test_a_check_timeout_clears_the_pool_interrupting_connections_in_use() -> None:
    async with FakeDeployment(["primary"]) as rs:
        pools = Pools()
        topology = make_topology(
            [rs[0].address],
            CountingFactory(),
            mode="poll",
            heartbeat=10.0,
            connect_timeout=0.3,
            pool_factory=pools,
        )
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            pool = pools.by_address[rs[0].address]
            assert pool.ready_calls >= 1

            def hang() -> None:
                rs[0].hang = True

            await rs.change(hang)
            topology.servers[rs[0].address].monitor.request_check()  # type: ignore[union-attr]
            await wait_for(
                topology,
                lambda d: d.get(rs[0].address).server_type == ServerType.Unknown,  # type: ignore[union-attr]
                within=3,
            )
            error = topology.description.get(rs[0].address).error  # type: ignore[union-attr]
            assert isinstance(error, NetworkTimeout | TimeoutError)
            assert pool.clears and pool.clears[0] == (True, None)


@on_virtual_clock
async def test_application_network_error_cancels_the_check_and_clears_the_pool() -> None:
    async with FakeDeployment(["primary", "secondary"]) as rs:
        pools = Pools()
        factory = CountingFactory()
        topology = make_topology([rs[0].address], factory, heartbeat=10.0, pool_factory=pools)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            await asyncio.sleep(0.2)
            monitor = topology.servers[rs[0].address].monitor
            assert monitor is not None
            streaming_connection = monitor.connection
            # The awaitable hello is outstanding on it.
            assert streaming_connection is not None and streaming_connection.in_exchange  # type: ignore[attr-defined]
            pool = pools.by_address[rs[0].address]
            decision = await topology.handle_application_error(
                rs[0].address, AutoReconnect("connection reset by peer"), pool.generation
            )
            assert decision.mark_unknown is not None and decision.clear_pool and decision.cancel_check
            assert streaming_connection.closed
            assert topology.description.topology_type == TopologyType.ReplicaSetNoPrimary
            assert pool.clears == [(False, None)]
            # A stale error (an older connection generation) changes nothing.
            stale = await topology.handle_application_error(rs[1].address, AutoReconnect("old"), -1)
            assert stale.stale
            # Selection asks for an immediate check and finds the primary again.
            server = await topology.select_server(is_write=True, timeout=3.0)
            assert server.address == rs[0].address
            server.operation_finished()


@on_virtual_clock
async def test_closing_interrupts_the_pools_and_ignores_the_errors_it_causes() -> None:
    async with FakeDeployment(["primary", "secondary"]) as rs:
        pools = Pools()
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=10.0, pool_factory=pools)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
        assert {address: pool.interrupted_on_close for address, pool in pools.by_address.items()} == {
            rs[0].address: True,
            rs[1].address: True,
        }
        # The network error of an operation whose connection the closing closed: nothing to learn from it.
        pool = pools.by_address[rs[0].address]
        decision = await topology.handle_application_error(
            rs[0].address, AutoReconnect("connection 1 closed: the pool was closed"), pool.generation
        )
        assert not decision.acts and decision.reason == "the topology is closed"
        assert pool.clears == []


# -- idle cost -------------------------------------------------------------------------------------------------


def scheduled_by_the_driver(frame: FrameType | None) -> bool:
    """Whether the first caller outside asyncio (the frame that asked for a timer) is mongio code."""
    while frame is not None and frame.f_globals.get("__name__", "").startswith("asyncio"):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__", "").startswith("mongio")


class TimerCounter:
    """Counts the timers the driver schedules on a loop (``call_later`` and ``asyncio.timeout`` go through
    ``call_at``); the fake members' timers, on the same loop, are left out."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.count = 0
        self._original = loop.call_at

    def __enter__(self) -> TimerCounter:
        original = self._original

        def call_at(
            when: float, callback: Callable[..., object], *args: Any, **kwargs: Any
        ) -> asyncio.TimerHandle:
            if scheduled_by_the_driver(sys._getframe(1)):
                self.count += 1
            return original(when, callback, *args, **kwargs)

        self.loop.call_at = call_at  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.loop.call_at


@pytest.mark.parametrize("mode", ["stream", "poll"])
@on_virtual_clock
async def test_idle_topology_wakes_no_more_often_than_the_heartbeat(mode: str) -> None:
    heartbeat = 0.5
    window = 3.0
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        topology = make_topology([rs[0].address], CountingFactory(), heartbeat=heartbeat, mode=mode)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            await asyncio.sleep(heartbeat)  # let the RTT tasks start
            monitors = [server.monitor for server in topology.servers.values() if server.monitor is not None]
            checks_before = [monitor.checks for monitor in monitors]
            pings_before = [monitor.rtt_monitor.pings if monitor.rtt_monitor else 0 for monitor in monitors]
            hellos_before = sum(member.hellos for member in rs.members)
            with TimerCounter(asyncio.get_running_loop()) as timers:
                await asyncio.sleep(window)
            periods = window / heartbeat
            checks = [monitor.checks - before for monitor, before in zip(monitors, checks_before)]
            pings = [
                (monitor.rtt_monitor.pings if monitor.rtt_monitor else 0) - before
                for monitor, before in zip(monitors, pings_before)
            ]
            hellos = sum(member.hellos for member in rs.members) - hellos_before
    # Each monitor checks (or reads a streamed reply) once per heartbeat, each RTT task pings once per heartbeat
    # (on the virtual clock the counts are exact but for a check due at the very end of the window).
    assert all(periods - 1 <= n <= periods for n in checks), checks
    if mode == "stream":
        assert all(periods - 1 <= n <= periods for n in pings), pings
        # Streaming sends no new hello per reply: only the RTT pings reach the servers.
        assert hellos <= 3 * (periods + 2)
    else:
        assert pings == [0, 0, 0]
        assert hellos <= 3 * (periods + 2)
    # Per server and heartbeat, streaming: the streamed reply's deadline, the RTT sleep and the RTT reply's
    # deadline; polling: the wait between checks and the reply's deadline. A loop polling every 50 ms would
    # need hundreds.
    per_server_and_heartbeat = 3 if mode == "stream" else 2
    assert timers.count <= 3 * per_server_and_heartbeat * (periods + 2), timers.count


# -- events ----------------------------------------------------------------------------------------------------


@on_virtual_clock
async def test_events_are_published_in_order_and_cost_nothing_without_listeners() -> None:
    async with FakeDeployment(["primary", "secondary"]) as rs:
        recorder = Recorder()
        topology = make_topology([rs[0].address], CountingFactory(), listeners=[recorder])
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            await asyncio.sleep(0.2)
        events = [event for _, event in recorder.events]
        sdam = [
            e
            for e in events
            if not isinstance(
                e, ServerHeartbeatStartedEvent | ServerHeartbeatSucceededEvent | ServerHeartbeatFailedEvent
            )
        ]
        assert isinstance(sdam[0], TopologyOpeningEvent)
        assert isinstance(sdam[1], TopologyDescriptionChangedEvent)
        assert sdam[1].previous_description.topology_type == TopologyType.Unknown
        assert isinstance(sdam[2], ServerOpeningEvent) and sdam[2].server_address == rs[0].address
        assert isinstance(sdam[-1], TopologyClosedEvent)
        assert isinstance(sdam[-2], TopologyDescriptionChangedEvent)
        assert sdam[-2].new_description.server_descriptions() == {}
        opened = [e.server_address for e in sdam if isinstance(e, ServerOpeningEvent)]
        assert opened == [rs[0].address, rs[1].address]
        changed = [e for e in sdam if isinstance(e, ServerDescriptionChangedEvent)]
        assert {e.new_description.server_type for e in changed} == {
            ServerType.RSPrimary,
            ServerType.RSSecondary,
        }
        # Heartbeats: every started event is answered; awaited ones appear once streaming began.
        started = [e for e in events if isinstance(e, ServerHeartbeatStartedEvent)]
        answered = [
            e for e in events if isinstance(e, ServerHeartbeatSucceededEvent | ServerHeartbeatFailedEvent)
        ]
        assert len(started) - len(answered) in (0, 1, 2)  # at most one in flight per server at close
        assert any(e.awaited for e in started) and any(not e.awaited for e in started)
        first = next(e for e in events if isinstance(e, ServerHeartbeatSucceededEvent))
        assert first.awaited is False and first.reply["ok"] == 1

        quiet = make_topology([rs[0].address], CountingFactory())
        assert not quiet._publisher.sdam_enabled and not quiet._publisher.heartbeat_enabled


# -- closing ---------------------------------------------------------------------------------------------------


@on_virtual_clock
async def test_close_stops_every_task_and_connection() -> None:
    async with FakeDeployment(["primary", "secondary", "secondary"]) as rs:
        before = asyncio.all_tasks()
        factory = CountingFactory()
        topology = make_topology([rs[0].address], factory, heartbeat=10.0)
        await topology.open()
        await wait_for(topology, fully_discovered(rs))
        await asyncio.sleep(0.2)
        # Streaming: a monitor and an RTT task per server.
        assert len(topology.tasks()) == 6
        waiting = asyncio.ensure_future(topology.select_server(Secondary(tag_sets=[{"x": "y"}]), timeout=30))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await topology.close()
        assert time.monotonic() - started == 0  # no waiting out maxAwaitTimeMS
        assert topology.tasks() == []
        with pytest.raises(ClientClosedError):
            await waiting
        assert asyncio.all_tasks() - before - rs.tasks() == {asyncio.current_task()} - before
        assert all(conn.closed for _, conn in factory.opened)
        # Not just closing: the sockets are gone (connection_lost ran) by the time close() returned.
        assert all(conn._protocol._connection_lost for _, conn in factory.opened)  # type: ignore[attr-defined]
        assert topology.description.server_descriptions() == {}
        with pytest.raises(ClientClosedError):
            await topology.select_server()


# -- load balancing and SRV polling ------------------------------------------------------------------------------


@on_virtual_clock
async def test_load_balanced_topology_has_no_monitors() -> None:
    pools = Pools()
    settings = TopologySettings(seeds=(("lb.example.com", 27017),), load_balanced=True)
    recorder = Recorder()
    topology = Topology(settings, pool_factory=pools, listeners=[recorder])
    async with topology:
        assert topology.tasks() == []
        description = topology.description
        assert description.topology_type == TopologyType.LoadBalanced
        assert types_of(description) == {("lb.example.com", 27017): ServerType.LoadBalancer}
        assert pools.by_address[("lb.example.com", 27017)].ready_calls == 1
        coroutine = topology.select_server(is_write=True)
        with pytest.raises(StopIteration):
            coroutine.send(None)
    changed = recorder.of(ServerDescriptionChangedEvent)
    assert changed[0].new_description.server_type == ServerType.LoadBalancer


class FakeResolver:
    def __init__(self, records: list[SrvRecord]) -> None:
        self.records = records
        self.fail = False
        self.failed = asyncio.Event()
        self.lookups = 0
        self.names: list[str] = []

    async def resolve_srv(self, name: str, lifetime: float) -> list[SrvRecord]:
        self.names.append(name)
        self.lookups += 1
        if self.fail:
            self.failed.set()
            raise OSError("DNS is down")
        return list(self.records)

    async def resolve_txt(self, name: str, lifetime: float) -> list[list[bytes]]:
        return []


@on_virtual_clock
async def test_srv_polling_adds_and_removes_mongoses() -> None:
    async with FakeDeployment(["mongos", "mongos", "mongos"]) as mongoses:
        ports = [member.port for member in mongoses.members]
        hosts = [(f"{name}.test.example.com", port) for name, port in zip("abc", ports)]
        resolver = FakeResolver([SrvRecord(host, port, ttl=0) for host, port in hosts[:2]])
        recorder = Recorder()
        topology = make_topology(
            hosts[:2],
            CountingFactory(loopback=True),
            listeners=[recorder],
            srv_host="test.example.com",
            srv_resolver=resolver,
            srv_rescan_interval=0.1,
            srv_min_rescan_interval=0.1,
        )
        async with topology:
            await wait_for(
                topology, lambda d: d.topology_type == TopologyType.Sharded and len(d.known_servers) == 2
            )
            resolver.records = [SrvRecord(host, port, ttl=0) for host, port in hosts[1:]]
            await wait_for(topology, lambda d: set(d.server_descriptions()) == set(hosts[1:]))
            await wait_for(topology, lambda d: len(d.known_servers) == 2)
            assert set(topology.servers) == set(hosts[1:])
            assert [e.server_address for e in recorder.of(ServerClosedEvent)] == [hosts[0]]
            poller = topology.srv_poller
            assert poller is not None and poller.running
            # A failing lookup keeps the topology and retries at the heartbeat.
            resolver.fail = True
            resolver.failed.clear()
            async with asyncio.timeout(2):
                await resolver.failed.wait()
            await asyncio.sleep(0.01)
            assert poller.interval == topology.settings.heartbeat_frequency
            assert set(topology.description.server_descriptions()) == set(hosts[1:])
        assert not poller.running


@on_virtual_clock
async def test_srv_polling_stops_for_a_replica_set() -> None:
    async with FakeDeployment(["primary"]) as rs:
        resolver = FakeResolver([SrvRecord("a.test.example.com", rs[0].port)])
        topology = make_topology(
            [rs[0].address],
            CountingFactory(),
            srv_host="test.example.com",
            srv_resolver=resolver,
            srv_rescan_interval=0.05,
            srv_min_rescan_interval=0.05,
        )
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            poller = topology.srv_poller
            assert poller is not None and poller._task is not None
            done, _ = await asyncio.wait([poller._task], timeout=2)
            assert done, "SRV polling goes on for a replica set"
            assert resolver.lookups <= 1


# -- monitoring modes ------------------------------------------------------------------------------------------


def test_server_monitoring_mode_and_faas_detection() -> None:
    assert streaming_enabled("stream", {"AWS_EXECUTION_ENV": "AWS_Lambda_python3.12"})
    assert not streaming_enabled("poll", {})
    assert streaming_enabled("auto", {})
    for environ in (
        {"AWS_EXECUTION_ENV": "AWS_Lambda_python3.12"},
        {"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"},
        {"FUNCTIONS_WORKER_RUNTIME": "python"},
        {"K_SERVICE": "svc"},
        {"FUNCTION_NAME": "fn"},
        {"VERCEL": "1"},
    ):
        assert is_faas(environ), environ
        assert not streaming_enabled("auto", environ), environ
    # Two providers at once are no provider at all.
    assert not is_faas({"FUNCTIONS_WORKER_RUNTIME": "python", "K_SERVICE": "svc"})
    assert not is_faas({"AWS_EXECUTION_ENV": "EC2"})
    with pytest.raises(Exception, match="serverMonitoringMode"):
        streaming_enabled("sometimes", {})


@on_virtual_clock
async def test_auto_mode_on_faas_polls() -> None:
    async with FakeDeployment(["primary"]) as rs:
        topology = make_topology(
            [rs[0].address], CountingFactory(), heartbeat=0.3, mode="auto", environ={"VERCEL": "1"}
        )
        assert not topology.streaming
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            discovered = rs[0].hellos
            await asyncio.sleep(0.7)
            assert rs[0].awaited_hellos == 0
            assert rs[0].hellos == discovered + 2  # polled at 0.3 s and 0.6 s
            assert topology.servers[rs[0].address].monitor.rtt_monitor is None  # type: ignore[union-attr]


@on_virtual_clock
async def test_on_server_description_applies_the_update_rules() -> None:
    topology = make_topology([("a", 1)], CountingFactory())
    # Not opened: no monitor starts, but the description still follows the rules.
    await topology.on_server_description(
        ServerDescription(
            ("a", 1), {"ok": 1, "isWritablePrimary": True, "msg": "isdbgrid", "maxWireVersion": 21}
        )
    )
    assert topology.description.topology_type == TopologyType.Sharded
    await topology.close()


@on_virtual_clock
async def test_two_random_choices_steer_away_from_a_busy_server() -> None:
    async with FakeDeployment(["mongos", "mongos"]) as mongoses:
        topology = make_topology([m.address for m in mongoses.members], CountingFactory())
        async with topology:
            await wait_for(topology, lambda d: len(d.known_servers) == 2)
            busy = topology.servers[mongoses[0].address]
            busy.operation_count = 50
            chosen = [topology.select_server_nowait() for _ in range(20)]
            assert {server.address for server in chosen if server is not None} == {mongoses[1].address}
            idle = topology.servers[mongoses[1].address]
            assert idle.operation_count == 20
            # Deprioritized servers are used only when nothing else is suitable.
            for server in chosen:
                assert server is not None
                server.operation_finished()
            busy.operation_count = 0
            picks = {
                topology.select_server_nowait(deprioritized=[mongoses[1].address]).address  # type: ignore[union-attr]
                for _ in range(10)
            }
            assert picks == {mongoses[0].address}


@on_virtual_clock
async def test_topology_log_messages(caplog: pytest.LogCaptureFixture) -> None:
    async with FakeDeployment(["primary"]) as rs:
        with caplog.at_level(logging.DEBUG, logger="mongio.topology"):
            topology = make_topology([rs[0].address], CountingFactory())
            assert topology._publisher.sdam_enabled
            async with topology:
                await wait_for(topology, fully_discovered(rs))
                await asyncio.sleep(0.1)
        records = [r for r in caplog.records if r.name == "mongio.topology"]
        messages = [r.msg.fields["message"] for r in records]  # type: ignore[union-attr]
        assert messages[0] == "Starting topology monitoring"
        assert messages[1] == "Topology description changed"
        assert messages[2] == "Starting server monitoring"
        assert messages[-1] == "Stopped topology monitoring"
        assert "Stopped server monitoring" in messages
        assert "Server heartbeat started" in messages and "Server heartbeat succeeded" in messages
        succeeded = next(r for r in records if r.msg.fields["message"] == "Server heartbeat succeeded")  # type: ignore[union-attr]
        fields = succeeded.msg.fields  # type: ignore[union-attr]
        assert fields["serverHost"] == "127.0.0.1" and fields["serverPort"] == rs[0].port
        assert fields["topologyId"] == topology.topology_id
        assert fields["awaited"] is False and fields["durationMS"] >= 0
        assert "Heartbeat succeeded in" in succeeded.getMessage()
        assert all(r.levelno == logging.DEBUG for r in records)


@on_virtual_clock
async def test_a_pool_connect_error_marks_the_server_unknown() -> None:
    async with FakeDeployment(["primary", "secondary"]) as rs:
        pools = Pools()
        topology = make_topology([rs[0].address], CountingFactory(), pool_factory=pools)
        async with topology:
            await wait_for(topology, fully_discovered(rs))
            pool = pools.by_address[rs[1].address]
            topology.report_connect_error(rs[1].address, AutoReconnect("connection refused"), pool.generation)
            await wait_for(topology, lambda d: d.get(rs[1].address).server_type == ServerType.Unknown)  # type: ignore[union-attr]
            assert pool.clears == [(False, None)]
            # An error from before the clear is stale now.
            topology.report_connect_error(rs[1].address, AutoReconnect("old"), pool.generation - 1)
            await asyncio.sleep(0.05)
            assert pool.clears == [(False, None)]


@on_virtual_clock
async def test_srv_polling_honours_srv_max_hosts_and_the_service_name() -> None:
    async with FakeDeployment(["mongos"] * 4) as mongoses:
        hosts = [(f"{name}.test.example.com", member.port) for name, member in zip("abcd", mongoses.members)]
        resolver = FakeResolver([SrvRecord(host, port, ttl=0) for host, port in hosts[:2]])
        topology = make_topology(
            hosts[:2],
            CountingFactory(loopback=True),
            srv_max_hosts=2,
            srv_host="test.example.com",
            srv_service_name="customname",
            srv_resolver=resolver,
            srv_rescan_interval=0.05,
            srv_min_rescan_interval=0.05,
        )
        async with topology:
            await wait_for(topology, lambda d: len(d.known_servers) == 2)
            # a leaves, c and d arrive: b stays and one newcomer fills the second place.
            resolver.records = [SrvRecord(host, port, ttl=0) for host, port in hosts[1:]]
            await wait_for(topology, lambda d: hosts[0] not in d.server_descriptions())
            servers = set(topology.description.server_descriptions())
            assert len(servers) == 2 and hosts[1] in servers and servers <= set(hosts[1:])
            await asyncio.sleep(0.2)
            assert set(topology.description.server_descriptions()) == servers  # no churn on later rescans
        assert resolver.names and set(resolver.names) == {"_customname._tcp.test.example.com"}


def test_heartbeat_log_truncates_the_reply(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mongio.topology.heartbeat_events import SdamPublisher

    publisher = SdamPublisher("tid")
    reply = {"ok": 1, "hosts": [f"host{i}.example.com:27017" for i in range(100)]}
    with caplog.at_level(logging.DEBUG, logger="mongio.topology"):
        publisher.heartbeat_succeeded(("h", 1), 0.002, reply, False, 7, 8)
        monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "20")
        publisher.heartbeat_succeeded(("h", 1), 0.002, reply, False, 7, 8)
        monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "lots")
        publisher.heartbeat_succeeded(("h", 1), 0.002, reply, False, 7, 8)
    shown = [record.msg.fields["reply"] for record in caplog.records]  # type: ignore[union-attr]
    assert len(shown[0]) == 1003 and shown[0].endswith("...")
    assert len(shown[1]) == 23 and shown[1].endswith("...")
    assert shown[2] == shown[0]  # an invalid setting means the default
    fields = caplog.records[0].msg.fields  # type: ignore[union-attr]
    assert fields["driverConnectionId"] == 7 and fields["serverConnectionId"] == 8
    assert fields["durationMS"] == pytest.approx(2.0)


def test_heartbeat_failure_log_cuts_the_server_reply(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logging, Representing Errors in Log Messages: a server reply in a heartbeat's error is cut to the
    maximum document length in the "server heartbeat failed" message, as documents are."""
    from mongio.errors import OperationFailure
    from mongio.topology.heartbeat_events import SdamPublisher

    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "10")
    reply = {"ok": 0, "errmsg": "node is recovering " * 200, "code": 91}
    publisher = SdamPublisher("tid")
    with caplog.at_level(logging.DEBUG, logger="mongio.topology"):
        publisher.heartbeat_failed(("h", 1), 0.002, OperationFailure(str(reply["errmsg"]), 91, reply), False, 7)
    (record,) = [record for record in caplog.records if record.name == "mongio.topology"]
    assert record.msg.fields["failure"] == 'OperationFailure: {"ok": 0, ...'  # type: ignore[union-attr]


@on_virtual_clock
async def test_a_server_of_the_wrong_replica_set_never_gets_a_ready_pool() -> None:
    async with FakeDeployment(["primary"]) as rs:
        pools = Pools()
        topology = make_topology(
            [rs[0].address],
            CountingFactory(),
            direct_connection=True,
            replica_set_name="other",
            pool_factory=pools,
        )
        async with topology:
            with pytest.raises(ServerSelectionTimeoutError) as caught:
                await topology.select_server(is_write=True, timeout=0.3)
            assert topology.description.topology_type == TopologyType.Single
            assert pools.by_address[rs[0].address].ready_calls == 0
        assert "replica set 'other'" in str(caught.value)


@on_virtual_clock
async def test_a_monitoring_connection_carries_its_handshake_round_trip() -> None:
    async with FakeDeployment(["primary"]) as rs:
        factory = CountingFactory()
        connection = await factory(rs[0].address)
        try:
            assert connection.hello is not None
            assert connection.hello_round_trip is not None and connection.hello_round_trip >= 0
        finally:
            connection.close()


@on_virtual_clock
async def test_handshake_round_trip_excludes_connecting_when_the_connection_measured_it() -> None:
    from mongio.topology.rtt_monitor import open_timed

    class Opened:
        closed = False

        def __init__(self, hello_round_trip: float | None) -> None:
            self.hello_round_trip = hello_round_trip

    async def slow_factory(address: Address, opened: Any = None) -> Any:
        await asyncio.sleep(0.2)  # connecting (and TLS) take long; the hello itself was quick
        return Opened(0.001 if address[1] == 1 else None)

    _, reported = await open_timed(slow_factory, ("h", 1), 5.0)
    _, measured = await open_timed(slow_factory, ("h", 2), 5.0)
    assert reported == 0.001
    assert measured == pytest.approx(0.2)
    with pytest.raises(TimeoutError):
        await open_timed(slow_factory, ("h", 2), 0.05)
