"""Opening streams on trio: TLS with the host name checked (to the test server started with TLS), a Unix
socket, the SOCKS5 proxy, and hosts found through SRV (the initial lookup and polling), plus a cancelled
command closing its connection.

The tests' own servers (the loopback peer, the SOCKS5 proxy) are asyncio programs: they run on an asyncio
loop in a thread of their own while the test's trio run drives the client.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trio
import trio.lowlevel
import trustme
from spec_runner.raw_wire import command_once
from spec_runner.server import external_uri

from mongio import MongoClient
from mongio.backend.trio_stream import StreamProtocol
from mongio.connection import TLSOptions, connect, create_ssl_context
from mongio.connection.socks import SocksProxy
from mongio.errors import AutoReconnect, OperationFailure, ServerSelectionTimeoutError
from mongio.options.proxy_options import ProxyOptions
from mongio.options.srv import SrvRecord, resolve_seedlist
from mongio.topology.srv_polling import SrvPoller
from tests.conftest import first_host
from tests.support.asyncio_thread import on_asyncio_thread
from tests.support.direct_connections import admin_command
from tests.support.loopback_peer import LoopbackPeer
from tests.support.ocsp_pki import Answer, Authority, Responder, write_server_files
from tests.support.persistent_server import PersistentServer
from tests.support.socks5_proxy import Socks5Proxy
from tests.support.tls_server import tls_test_server

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ca = trustme.CA()
    directory = tmp_path_factory.mktemp("trio_pki")
    server = ca.issue_cert("localhost")
    paths = {"ca": directory / "ca.pem", "cert": directory / "server.crt", "key": directory / "server.key"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    server.private_key_pem.write_to_path(str(paths["key"]))
    return {name: str(path) for name, path in paths.items()}


@pytest.fixture(scope="module")
def tls_port(pki: dict[str, str]) -> Iterator[int]:
    if external_uri() is not None:
        pytest.skip("MONGODB_URI names an external deployment; its TLS setup is not ours to know")
    with tls_test_server(pki["cert"], pki["key"], pki["ca"]) as port:
        yield port


def test_tls_with_the_host_name_checked_on_trio(tls_port: int, pki: dict[str, str]) -> None:
    async def body() -> list[Any]:
        seen: list[Any] = []
        strict = create_ssl_context(TLSOptions(ca_file=pki["ca"]))
        conn = await connect(("localhost", tls_port), connect_timeout=10, ssl_context=strict)
        try:
            seen.append((await conn.command("admin", {"ping": 1}))["ok"])
        finally:
            conn.close()
        try:
            await connect(("127.0.0.1", tls_port), connect_timeout=10, ssl_context=strict)
        except AutoReconnect as exc:
            seen.append(str(exc))
        uri = f"mongodb://localhost:{tls_port}/?tls=true&directConnection=true&tlsCAFile={pki['ca']}"
        async with MongoClient(uri) as client:
            seen.append((await client.admin.command("ping"))["ok"])
        return seen

    ping, mismatch, client_ping = trio.run(body)
    assert ping == 1 and client_ping == 1
    assert f"127.0.0.1:{tls_port}" in mismatch
    assert "IP address mismatch" in mismatch or "doesn't match" in mismatch


def test_unix_socket_on_trio(tmp_path: Path) -> None:
    path = str(tmp_path / "mongodb-trio.sock")
    with on_asyncio_thread(LoopbackPeer(unix_socket=path)) as peer:

        async def body() -> tuple[Any, Any]:
            conn = await connect((path, None), connect_timeout=5)
            try:
                return type(conn._protocol), (await conn.command("admin", {"ping": 1}))["ok"]
            finally:
                conn.close()

        protocol, ok = trio.run(body)
    assert protocol is StreamProtocol
    assert ok == 1
    assert peer.commands("ping")


def test_socks5_proxy_on_trio(server_uri: str) -> None:
    server = first_host(server_uri)
    name = ("db.trio-socks.invalid", 27017)  # only the proxy's mapping resolves it
    with on_asyncio_thread(Socks5Proxy(mapping={name: server})) as proxy:

        async def body() -> Any:
            conn = await connect(
                name, connect_timeout=5, proxy=SocksProxy(ProxyOptions("127.0.0.1", proxy.port))
            )
            try:
                return (await conn.command("admin", {"ping": 1}))["ok"]
            finally:
                conn.close()

        assert trio.run(body) == 1
        requests = list(proxy.requests)
    assert [(request.host, request.port) for request in requests] == [name]


class _Resolver:
    """DNS of the test's own (no query leaves the machine)."""

    def __init__(self, host: str, port: int) -> None:
        self.record = SrvRecord(host, port, ttl=0)
        self.srv_lookups = 0

    async def resolve_srv(self, name: str, lifetime: float) -> list[SrvRecord]:
        self.srv_lookups += 1
        await trio.lowlevel.checkpoint()
        return [self.record]

    async def resolve_txt(self, name: str, lifetime: float) -> list[list[bytes]]:
        await trio.lowlevel.checkpoint()
        return [[b"replicaSet=rs0"]]


def test_srv_lookup_and_polling_on_trio() -> None:
    resolver = _Resolver("a.cluster.example.com", 27017)

    async def body() -> tuple[Any, int, bool]:
        found = await resolve_seedlist("cluster.example.com", resolver=resolver)
        applied: list[Any] = []
        three = trio.Event()

        async def apply(hosts: Any) -> None:
            applied.append(list(hosts))
            if len(applied) == 3:
                three.set()

        poller = SrvPoller(
            "cluster.example.com",
            apply,
            lambda: True,
            heartbeat_frequency=0.01,
            resolver=resolver,
            initial_interval=0.01,
            min_interval=0.01,
        )
        poller.start()
        with trio.fail_after(10):
            await three.wait()
        await poller.close()
        return found, len(applied), poller.running

    found, applied, running = trio.run(body)
    assert found.seeds == (("a.cluster.example.com", 27017),)
    assert found.txt_options == {"replicaSet": "rs0"}
    assert applied >= 3
    assert not running


def test_a_command_cut_by_move_on_after_closes_its_connection(server_uri: str) -> None:
    address = first_host(server_uri)

    async def body() -> tuple[bool, bool, Any]:
        held_back = {"failCommands": ["count"], "blockConnection": True, "blockTimeMS": 1500}
        await admin_command(
            address, {"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": held_back}
        )
        try:
            conn = await connect(address, connect_timeout=5)
            with trio.move_on_after(0.2) as scope:
                await conn.command("trio_cut", {"count": "items"})
        finally:
            await admin_command(address, {"configureFailPoint": "failCommand", "mode": "off"})
        closed, reason = conn.closed, conn.close_reason
        conn.close()
        return scope.cancelled_caught, closed, reason

    cancelled, closed, reason = trio.run(body)
    assert cancelled
    assert closed
    assert "cancelled" in str(reason)


def test_ocsp_check_on_trio(tmp_path: Path) -> None:
    """The revocation check asks the responder over the HTTP client on trio: a revoked certificate fails the
    connection, naming it; a good one passes."""
    authority = Authority("ecdsa")
    outcomes: list[Any] = []
    for answer in (Answer.REVOKED, Answer.GOOD):
        with on_asyncio_thread(Responder(authority, answer=answer)) as responder:
            directory = tmp_path / answer.name
            directory.mkdir()
            files = write_server_files(directory, authority.issue_server([responder.url]), authority)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(files.cert_chain), str(files.key))
            with on_asyncio_thread(LoopbackPeer(ssl=context)) as peer:
                uri = f"{peer.uri}?tls=true&tlsCAFile={quote(str(files.ca))}&serverSelectionTimeoutMS=2000"

                async def ping(uri: str = uri) -> Any:
                    async with MongoClient(uri) as client:
                        try:
                            return (await client.admin.command("ping"))["ok"]
                        except ServerSelectionTimeoutError as exc:
                            return str(exc)

                outcomes.append(trio.run(ping))
    revoked, good = outcomes
    assert "is revoked" in revoked and "keyCompromise" in revoked
    assert good == 1


async def _serve_dns(sock: Any, answered: list[str]) -> None:
    """A DNS server on a loopback UDP socket answering SRV and TXT queries for ``cluster0.example.test``."""
    import dns.message
    import dns.rdatatype
    import dns.rrset

    while True:
        data, peer = await sock.recvfrom(4096)
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        if question.rdtype == dns.rdatatype.SRV:
            response.answer.append(
                dns.rrset.from_text(question.name, 60, "IN", "SRV", "0 0 27017 a.cluster0.example.test.")
            )
        elif question.rdtype == dns.rdatatype.TXT:
            response.answer.append(dns.rrset.from_text(question.name, 60, "IN", "TXT", '"replicaSet=rs0"'))
        answered.append(dns.rdatatype.to_text(question.rdtype))
        await sock.sendto(response.to_wire(), peer)


def test_dnspython_resolver_on_trio() -> None:
    """The default resolver (dnspython's async resolver, which picks trio itself) against a loopback DNS
    server: no query leaves the machine."""
    import dns.asyncresolver

    async def body() -> tuple[Any, list[str]]:
        answered: list[str] = []
        sock = trio.socket.socket(type=trio.socket.SOCK_DGRAM)
        await sock.bind(("127.0.0.1", 0))
        resolver = dns.asyncresolver.get_default_resolver()
        saved = resolver.nameservers, resolver.port
        resolver.nameservers = ["127.0.0.1"]
        resolver.port = sock.getsockname()[1]
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_serve_dns, sock, answered)
                found = await resolve_seedlist("cluster0.example.test", lifetime=5)
                nursery.cancel_scope.cancel()
        finally:
            resolver.nameservers, resolver.port = saved
            sock.close()
        return found, sorted(answered)

    found, answered = trio.run(body)
    assert found.seeds == (("a.cluster0.example.test", 27017),)
    assert found.txt_options == {"replicaSet": "rs0"}
    assert answered == ["SRV", "TXT"]


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """SecantusDB with ``--auth`` and a user ``trio`` (provisioned without it first, on the same storage)."""
    if external_uri() is not None:
        pytest.skip("MONGODB_URI names an external deployment; its users are not ours to make")
    storage = tmp_path_factory.mktemp("secantus-trio-auth")
    setup = PersistentServer(storage)
    with setup:
        command = {"createUser": "trio", "pwd": "s3cret", "roles": [{"role": "root", "db": "admin"}], "$db": "admin"}
        assert command_once(setup.host, setup.port, command, timeout=10.0).get("ok") == 1
    with PersistentServer(storage, "--auth", port=setup.port) as server:
        yield server.host, server.port


def test_scram_authentication_on_trio(auth_server: tuple[str, int]) -> None:
    """SCRAM-SHA-256 on trio: the key derivation runs in a worker thread, shared by the connections that
    authenticate at once; a wrong password is refused."""
    host, port = auth_server

    async def body() -> tuple[Any, str]:
        uri = f"mongodb://trio:s3cret@{host}:{port}/?authSource=admin&maxPoolSize=3"
        async with MongoClient(uri) as client:
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(client.admin.command, "ping")
            ok = (await client.admin.command("ping"))["ok"]
        wrong = f"mongodb://trio:wrong@{host}:{port}/?authSource=admin&serverSelectionTimeoutMS=2000"
        async with MongoClient(wrong) as client:
            try:
                await client.admin.command("ping")
            except OperationFailure as exc:
                return ok, type(exc).__name__
        return ok, "no error"

    ok, refused = trio.run(body)
    assert ok == 1
    assert refused == "AuthenticationFailed"
