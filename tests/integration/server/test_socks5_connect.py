"""Opening connections through a SOCKS5 proxy, below the client: what each failure of the proxy raises (naming
the proxy and what went wrong, within connectTimeoutMS, without the overload labels), TLS inside the tunnel
checked against the server's name, and hosts discovered through SRV reached through the proxy too.

The proxy is the tests' own (``tests.support.socks5_proxy``); the servers are loopback peers.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trustme
from spec_runner.server import free_port

from mongio.connection import connect
from mongio.connection.establish import ConnectionSettings
from mongio.connection.socks import SocksProxy
from mongio.connection.tls import TLSOptions, create_ssl_context
from mongio.error_classification import OVERLOAD_LABELS
from mongio.errors import AutoReconnect, NetworkTimeout
from mongio.options.proxy_options import ProxyOptions
from mongio.options.srv import SrvRecord
from mongio.topology.monitor import monitor_connection_factory
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import Topology
from mongio.topology.topology_type import TopologyType
from tests.support.fake_deployment import FakeDeployment, wait_for
from tests.support.loopback_peer import LoopbackPeer
from tests.support.socks5_proxy import Behaviour, Socks5Proxy

SERVER = ("db.socks.invalid", 27017)  # a name only the proxy's mapping resolves
PASSWORD = "pr0xy-s3cret"


@pytest.fixture
async def peer() -> AsyncIterator[LoopbackPeer]:
    async with LoopbackPeer() as started:
        yield started


def mapping_to(peer: LoopbackPeer) -> dict[tuple[str, int], tuple[str, int]]:
    host, port = peer.address
    assert port is not None
    return {SERVER: (host, port)}


def through(proxy: Socks5Proxy, username: str | None = None, password: str | None = None) -> SocksProxy:
    return SocksProxy(ProxyOptions("127.0.0.1", proxy.port, username, password))


def no_overload_labels(error: AutoReconnect) -> bool:
    return not any(error.has_error_label(label) for label in OVERLOAD_LABELS)


async def test_a_connection_through_the_proxy_asks_for_the_name_and_talks_to_the_server(
    peer: LoopbackPeer,
) -> None:
    async with Socks5Proxy(mapping=mapping_to(peer)) as proxy:
        conn = await connect(SERVER, connect_timeout=5, proxy=through(proxy))
        try:
            assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
            assert conn.address == SERVER
        finally:
            conn.close()
    assert [(r.host, r.port, r.kind) for r in proxy.requests] == [(*SERVER, "domain")]
    assert proxy.greetings == [(0,)]
    assert peer.commands("ping")


async def test_credentials_are_offered_and_sent_as_rfc_1929_asks(peer: LoopbackPeer) -> None:
    async with Socks5Proxy(credentials=("alice", PASSWORD), mapping=mapping_to(peer)) as proxy:
        conn = await connect(SERVER, connect_timeout=5, proxy=through(proxy, "alice", PASSWORD))
        conn.close()
    assert proxy.greetings == [(0, 2)]
    assert proxy.authentications == [("alice", PASSWORD)]


@pytest.mark.parametrize(
    ("behaviour", "credentials", "given", "fragment"),
    [
        ("refuse", None, None, "could not connect to db.socks.invalid:27017: Connection not allowed by ruleset"),
        ("serve", ("alice", PASSWORD), None, "did not complete the handshake for db.socks.invalid:27017"),
        ("serve", ("alice", PASSWORD), ("alice", "wrong"), "check proxyUsername and proxyPassword"),
        ("drop", None, None, "did not complete the handshake for db.socks.invalid:27017"),
    ],
    ids=["refuses", "demands-authentication", "wrong-password", "drops"],
)
async def test_a_proxy_that_refuses_fails_the_connection_naming_the_proxy_and_why(
    peer: LoopbackPeer,
    behaviour: Behaviour,
    credentials: tuple[str, str] | None,
    given: tuple[str, str] | None,
    fragment: str,
) -> None:
    async with Socks5Proxy(credentials=credentials, mapping=mapping_to(peer), behaviour=behaviour) as proxy:
        socks = through(proxy, *(given or (None, None)))
        with pytest.raises(AutoReconnect) as caught:
            await connect(SERVER, connect_timeout=5, proxy=socks)
    message = str(caught.value)
    assert f"SOCKS5 proxy 127.0.0.1:{proxy.port}" in message
    assert fragment in message
    assert "wrong" not in message and PASSWORD not in message
    # Not the server's overload: the proxy failed (the specification's backpressure rule).
    assert no_overload_labels(caught.value)
    assert not peer.connections


async def test_a_proxy_that_demands_authentication_is_told_the_options_to_give(peer: LoopbackPeer) -> None:
    async with Socks5Proxy(credentials=("alice", PASSWORD), mapping=mapping_to(peer)) as proxy:
        with pytest.raises(AutoReconnect, match="needs proxyUsername and proxyPassword"):
            await connect(SERVER, connect_timeout=5, proxy=through(proxy))
    assert proxy.greetings == [(0,)] and not proxy.authentications


async def test_an_unreachable_proxy_fails_the_connection_naming_it() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(AutoReconnect) as caught:
        await connect(SERVER, connect_timeout=5, proxy=SocksProxy(ProxyOptions("127.0.0.1", port)))
    assert f"cannot reach the SOCKS5 proxy 127.0.0.1:{port} (to connect to db.socks.invalid:27017)" in str(
        caught.value
    )
    assert "refused" in str(caught.value).lower()
    assert no_overload_labels(caught.value)


async def test_a_proxy_name_that_does_not_resolve_fails_the_connection_naming_it() -> None:
    with pytest.raises(AutoReconnect) as caught:
        await connect(SERVER, connect_timeout=5, proxy=SocksProxy(ProxyOptions("proxy.socks.invalid")))
    assert str(caught.value).startswith(
        "cannot reach the SOCKS5 proxy proxy.socks.invalid:1080 (to connect to db.socks.invalid:27017): "
        "cannot resolve 'proxy.socks.invalid': "
    )


async def test_a_server_the_proxy_cannot_reach_fails_naming_both() -> None:
    async with Socks5Proxy() as proxy:  # maps nothing: the name is not loopback, so it refuses to connect
        with pytest.raises(AutoReconnect, match=rf"proxy 127\.0\.0\.1:{proxy.port} could not connect to "):
            await connect(SERVER, connect_timeout=5, proxy=through(proxy))


async def test_a_host_name_no_socks5_request_can_carry_fails_naming_it() -> None:
    long_name = ("a" * 60 + ".") * 5 + "invalid"  # over the 255 bytes of a SOCKS5 domain name
    async with Socks5Proxy() as proxy:
        with pytest.raises(AutoReconnect, match=rf"proxy 127\.0\.0\.1:{proxy.port} cannot be asked for {long_name}:1"):
            await connect((long_name, 1), connect_timeout=5, proxy=through(proxy))
    assert proxy.greetings and not proxy.requests


async def test_a_stalled_proxy_is_given_up_on_after_connect_timeout(peer: LoopbackPeer) -> None:
    async with Socks5Proxy(mapping=mapping_to(peer), behaviour="stall") as proxy:
        with pytest.raises(NetworkTimeout) as caught:
            await connect(SERVER, connect_timeout=0.3, proxy=through(proxy))
    assert str(caught.value) == (
        f"connecting to db.socks.invalid:27017 through the SOCKS5 proxy 127.0.0.1:{proxy.port} timed out after 0.3s"
    )
    assert no_overload_labels(caught.value)


# -- TLS inside the tunnel --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_peer(ca: trustme.CA) -> AsyncIterator[LoopbackPeer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(SERVER[0]).configure_cert(context)
    async with LoopbackPeer(ssl=context) as started:
        yield started


def client_context(ca: trustme.CA, tmp_path: Any, **options: Any) -> ssl.SSLContext:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return create_ssl_context(TLSOptions(ca_file=str(ca_file), **options))


async def test_tls_inside_the_tunnel_checks_the_servers_name(
    tls_peer: LoopbackPeer, ca: trustme.CA, tmp_path: Any
) -> None:
    context = client_context(ca, tmp_path)
    other = ("other.socks.invalid", 27017)  # the same server under a name its certificate does not carry
    mapping = {SERVER: mapping_to(tls_peer)[SERVER], other: mapping_to(tls_peer)[SERVER]}
    async with Socks5Proxy(mapping=mapping) as proxy:
        conn = await connect(SERVER, connect_timeout=5, ssl_context=context, proxy=through(proxy))
        try:
            assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
            ssl_object = conn._transport.get_extra_info("ssl_object")
            assert ssl_object is not None and ssl_object.server_hostname == SERVER[0]
        finally:
            conn.close()
        with pytest.raises(AutoReconnect, match=r"TLS certificate of other\.socks\.invalid:27017 rejected"):
            await connect(other, connect_timeout=5, ssl_context=context, proxy=through(proxy))
        relaxed = client_context(ca, tmp_path, allow_invalid_hostnames=True)
        conn = await connect(other, connect_timeout=5, ssl_context=relaxed, proxy=through(proxy))
        conn.close()


# -- monitoring and hosts discovered through SRV --------------------------------------------------------------


async def test_the_monitor_and_its_round_trip_time_task_connect_through_the_proxy() -> None:
    async with FakeDeployment(["mongos"]) as mongoses:  # streaming hellos: a round-trip-time task starts
        name = ("mongos.socks.invalid", mongoses.members[0].port)
        async with Socks5Proxy(mapping={name: ("127.0.0.1", name[1])}) as proxy:
            settings = ConnectionSettings(connect_timeout=5, proxy=through(proxy))
            topology = Topology(
                TopologySettings(seeds=(name,), heartbeat_frequency=0.5),
                monitor_connection_factory=monitor_connection_factory(settings),
                server_monitoring_mode="stream",
            )
            async with topology:
                await proxy.wait_for_requests(2)  # the monitor's connection, then the round-trip-time task's
                monitor = topology.servers[name].monitor
                assert monitor is not None and monitor.rtt_monitor is not None
    assert {(r.host, r.port, r.kind) for r in proxy.requests} == {(*name, "domain")}


# -- hosts discovered through SRV -------------------------------------------------------------------------


class Resolver:
    """DNS of the test's own: the SRV records name mongoses ``a``, ``b``... of ``socks.invalid``."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    async def resolve_srv(self, name: str, lifetime: float) -> list[SrvRecord]:
        return [SrvRecord(f"{chr(ord('a') + i)}.socks.invalid", port, ttl=0) for i, port in enumerate(self.ports)]

    async def resolve_txt(self, name: str, lifetime: float) -> list[list[bytes]]:
        return []


async def test_hosts_found_by_srv_polling_are_monitored_through_the_proxy() -> None:
    async with FakeDeployment(["mongos"] * 2) as mongoses:
        ports = [member.port for member in mongoses.members]
        names = [(f"{chr(ord('a') + i)}.socks.invalid", port) for i, port in enumerate(ports)]
        resolver = Resolver(ports[:1])
        async with Socks5Proxy(mapping={name: ("127.0.0.1", name[1]) for name in names}) as proxy:
            settings = ConnectionSettings(connect_timeout=5, proxy=through(proxy))
            topology = Topology(
                TopologySettings(seeds=(names[0],), heartbeat_frequency=10.0),
                monitor_connection_factory=monitor_connection_factory(settings),
                srv_host="cluster.socks.invalid",
                srv_resolver=resolver,
                srv_rescan_interval=0.05,
                srv_min_rescan_interval=0.05,
            )
            async with topology:
                await wait_for(topology, lambda d: d.topology_type == TopologyType.Sharded)
                resolver.ports = ports  # the second mongos appears in DNS
                await wait_for(topology, lambda d: len(d.known_servers) == 2)
    requested = {(r.host, r.port, r.kind) for r in proxy.requests}
    assert requested == {(*name, "domain") for name in names}
