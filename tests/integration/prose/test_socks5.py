"""Connecting through a SOCKS5 proxy: the prose tests of the SOCKS5 Support specification's test README.

Each connection string of the README's table runs with TLS and without, with the proxy options in the URI
and as keyword options, on the single topology (one SecantusDB) and on the cluster harness's replica set. As
in the README, two proxies run: one requiring username ``username`` and password ``p4ssw0rd`` (the README's
port 1080), one requiring no authentication (1081); both map ``localhost:12345`` (the README's
``<mappedhost>``, where nothing listens) to a member of the deployment.

The harness's members go by the host name ``members.invalid`` (RFC 6761: it never resolves), which only the
proxies map to them: every connection to them, monitors', round-trip-time and pools' alike, can only have
gone through a proxy, asking it for that name.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trustme
from spec_runner.cluster import Deployment, replica_set
from spec_runner.server import external_uri

from mongio import MongoClient
from mongio.errors import ServerSelectionTimeoutError
from tests.conftest import first_host
from tests.support.recorders import CommandRecorder
from tests.support.socks5_proxy import Socks5Proxy
from tests.support.tls_server import tls_test_server

pytestmark = pytest.mark.server

MAPPED = ("localhost", 12345)
MEMBERS_HOST = "members.invalid"
USERNAME, PASSWORD = "username", "p4ssw0rd"
SELECTION_MS = 1500  # a failing row gives up after this


@dataclass(frozen=True)
class Target:
    """A deployment the rows run against: its seed list, the member ``localhost:12345`` maps to, the TLS
    options the URIs need, and where the proxies must send each name they are asked for."""

    seeds: tuple[str, ...]
    mapped_member: tuple[str, int]
    tls_query: str
    mapping: dict[tuple[str, int], tuple[str, int]]


@dataclass(frozen=True)
class Row:
    """One line of the README's table."""

    number: int
    hosts: str  # "mapped" (<mappedhost>, directConnection=true) or "set" (<replicaset>)
    authenticating_proxy: bool  # port 1080 in the README, else 1081
    credentials: tuple[str, str] | None
    succeeds: bool


BAD = ("nonexistentuser", "badauth")
ROWS = [
    Row(1, "mapped", True, None, False),
    Row(2, "mapped", False, None, True),
    Row(3, "set", True, None, False),
    Row(4, "set", False, None, True),
    Row(5, "mapped", True, BAD, False),
    Row(6, "mapped", False, BAD, True),
    Row(7, "set", False, BAD, True),
    Row(8, "mapped", True, (USERNAME, PASSWORD), True),
    Row(9, "mapped", False, None, True),
    Row(10, "set", True, (USERNAME, PASSWORD), True),
    Row(11, "set", False, None, True),
]


# -- the deployments ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ca = trustme.CA()
    directory = tmp_path_factory.mktemp("socks5-pki")
    server = ca.issue_cert("localhost", "127.0.0.1", MEMBERS_HOST)
    paths = {name: directory / f"{name}.pem" for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    server.private_key_pem.write_to_path(str(paths["key"]))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.configure_cert(context)
    return {**{name: str(path) for name, path in paths.items()}, "context": context}


def _single(host: str, port: int, tls_query: str) -> Target:
    return Target((f"{host}:{port}",), (host, port), tls_query, {MAPPED: (host, port)})


def _set(deployment: Deployment, tls_query: str) -> Target:
    ports = [member.port for member in deployment.members]
    mapping = {(MEMBERS_HOST, port): ("127.0.0.1", port) for port in ports}
    mapping[MAPPED] = ("127.0.0.1", ports[0])
    return Target(tuple(deployment.hosts), ("127.0.0.1", ports[0]), tls_query, mapping)


@pytest.fixture(scope="module")
def plain_set() -> Iterator[Deployment]:
    with replica_set(3, member_host=MEMBERS_HOST) as deployment:
        yield deployment


@pytest.fixture(scope="module")
def tls_set(pki: dict[str, Any]) -> Iterator[Deployment]:
    with replica_set(3, member_host=MEMBERS_HOST, ssl_context=pki["context"]) as deployment:
        yield deployment


@pytest.fixture(scope="module")
def tls_single_port(pki: dict[str, Any]) -> Iterator[int]:
    if external_uri() is not None:
        pytest.skip("MONGODB_URI names an external deployment; its TLS setup is not ours to know")
    with tls_test_server(pki["cert"], pki["key"], pki["ca"]) as port:
        yield port


@pytest.fixture(params=["single", "replicaset"])
def topology(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[False, True], ids=["plain", "tls"])
def target(request: pytest.FixtureRequest, topology: str, pki: dict[str, Any]) -> Target:
    tls = bool(request.param)
    tls_query = f"&tls=true&tlsCAFile={pki['ca']}" if tls else ""
    if topology == "single":
        if tls:
            return _single("127.0.0.1", request.getfixturevalue("tls_single_port"), tls_query)
        return _single(*first_host(request.getfixturevalue("server_uri")), tls_query)
    return _set(request.getfixturevalue("tls_set" if tls else "plain_set"), tls_query)


@pytest.fixture
async def proxies(target: Target) -> AsyncIterator[dict[bool, Socks5Proxy]]:
    """The README's two proxies, by whether they require authentication."""
    async with (
        Socks5Proxy(credentials=(USERNAME, PASSWORD), mapping=target.mapping) as authenticating,
        Socks5Proxy(mapping=target.mapping) as open_proxy,
    ):
        yield {True: authenticating, False: open_proxy}


# -- the rows -----------------------------------------------------------------------------------------------


def _hosts(row: Row, target: Target) -> tuple[str, str]:
    if row.hosts == "mapped":
        return f"{MAPPED[0]}:{MAPPED[1]}", "&directConnection=true"
    return ",".join(target.seeds), ""


def _proxy_options(row: Row, proxy: Socks5Proxy) -> dict[str, Any]:
    options: dict[str, Any] = {"proxyHost": "localhost", "proxyPort": proxy.port}
    if row.credentials is not None:
        options["proxyUsername"], options["proxyPassword"] = row.credentials
    return options


def _client(row: Row, target: Target, proxy: Socks5Proxy, given_as: str, **kwargs: Any) -> MongoClient:
    hosts, direct = _hosts(row, target)
    query = f"serverSelectionTimeoutMS={SELECTION_MS}{direct}{target.tls_query}"
    options = _proxy_options(row, proxy)
    if given_as == "uri":
        query += "".join(f"&{name}={value}" for name, value in options.items())
        return MongoClient(f"mongodb://{hosts}/?{query}", **kwargs)
    return MongoClient(f"mongodb://{hosts}/?{query}", **options, **kwargs)


@pytest.mark.parametrize("given_as", ["uri", "keyword"])
@pytest.mark.parametrize("row", ROWS, ids=[f"row{row.number}" for row in ROWS])
async def test_readme_rows(
    row: Row, given_as: str, target: Target, proxies: dict[bool, Socks5Proxy], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = proxies[row.authenticating_proxy]
    recorder = CommandRecorder()
    client = _client(row, target, proxy, given_as, event_listeners=[recorder])
    try:
        if row.succeeds:
            assert (await client.admin.command("hello"))["ok"] == 1
        else:
            with pytest.raises(ServerSelectionTimeoutError) as caught:
                await client.admin.command("hello")
    finally:
        await client.close()
    assert proxy.greetings, "no connection went through the proxy"
    # Both methods are offered exactly when a username and password are given (the specification's step 2).
    assert set(proxy.greetings) == ({(0, 2)} if row.credentials is not None else {(0,)})
    if row.hosts == "mapped":
        # The name as written, never resolved: nothing listens on localhost:12345 but through the proxy.
        assert {(r.host, r.port, r.kind) for r in proxy.requests} <= {(*MAPPED, "domain")}
    elif target.seeds[0].startswith(MEMBERS_HOST):
        assert {(r.host, r.kind) for r in proxy.requests} <= {(MEMBERS_HOST, "domain")}
    assert bool(proxy.requests) == row.succeeds  # a refused handshake never gets to the CONNECT request
    if not row.succeeds:
        message = str(caught.value)
        assert f"SOCKS5 proxy localhost:{proxy.port}" in message
        assert ("check proxyUsername and proxyPassword" if row.credentials else "needs proxyUsername") in message
        assert row.credentials is None or row.credentials[1] not in message
        return
    # The proxy never shows in the command events: they name the server as the client knows it.
    addresses = {event.connection_id for event in recorder.started_events}
    expected = {MAPPED} if row.hosts == "mapped" else {_address(seed) for seed in target.seeds}
    assert addresses and addresses <= expected
    assert all(event.connection_id[1] != proxy.port for event in recorder.events)
    if row.credentials is not None:
        logged = "\n".join(record.getMessage() for record in caplog.records)
        assert row.credentials[1] not in logged


def _address(seed: str) -> tuple[str, int]:
    host, _, port = seed.rpartition(":")
    return host, int(port)
