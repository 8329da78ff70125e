"""A SOCKS5 proxy of the tests' own (RFC 1928, CONNECT only; RFC 1929 username and password when asked),
listening on 127.0.0.1 and connecting only to loopback addresses.

It records what each client asked for (``greetings``: the authentication methods each offered; ``requests``:
the destination as sent, a host name or an address), so a test can show the host name arrived unresolved. ``mapping`` plays
the part of the specification's ``socks5srv.py --map``: a requested ``host:port`` is connected to another
address instead (``localhost:12345`` to a member of the replica set). ``behaviour`` makes it misbehave:

- ``"serve"``: relay the connection (the default);
- ``"refuse"``: answer the CONNECT request with reply code 2, "connection not allowed by ruleset";
- ``"drop"``: close the connection as soon as the client's greeting arrives;
- ``"stall"``: read the greeting and answer nothing.

    async with Socks5Proxy(credentials=("username", "p4ssw0rd"), mapping={("localhost", 12345): member}) as proxy:
        client = MongoClient(f"mongodb://localhost:12345/?proxyHost=127.0.0.1&proxyPort={proxy.port}...")
        ...
        assert proxy.requests[0].host == "localhost"
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
from dataclasses import dataclass
from typing import Literal

from tests.support.backends import AsyncioServer, served
from tests.support.stream_relay import relay

__all__ = ["Behaviour", "Socks5Proxy", "SocksRequest"]

Behaviour = Literal["serve", "refuse", "drop", "stall"]
AddressKind = Literal["domain", "ipv4", "ipv6"]

_VERSION = 5
_NO_AUTHENTICATION = 0
_USERNAME_PASSWORD = 2
_NO_ACCEPTABLE_METHOD = 0xFF
_CONNECT = 1
_IPV4, _DOMAIN, _IPV6 = 1, 3, 4
_SUCCEEDED, _GENERAL_FAILURE, _NOT_ALLOWED, _HOST_UNREACHABLE, _COMMAND_NOT_SUPPORTED = 0, 1, 2, 4, 7


@dataclass(frozen=True)
class SocksRequest:
    """One CONNECT request: the destination as the client wrote it, and how it wrote it."""

    host: str
    port: int
    kind: AddressKind


class _Refused(Exception):
    """The client is answered with a failure and the connection closed."""


class Socks5Proxy(AsyncioServer):
    """A SOCKS5 proxy on 127.0.0.1 (a free port); use it as an async context manager."""

    def __init__(
        self,
        *,
        credentials: tuple[str, str] | None = None,
        mapping: dict[tuple[str, int], tuple[str, int]] | None = None,
        behaviour: Behaviour = "serve",
    ) -> None:
        self.credentials = credentials
        """The only username and password accepted; ``None``: no authentication (and no other method)."""
        self.mapping = dict(mapping or {})
        self.behaviour: Behaviour = behaviour
        self.greetings: list[tuple[int, ...]] = []
        """The authentication methods each client's greeting offered (0: none, 2: username and password)."""
        self.requests: list[SocksRequest] = []
        self.authentications: list[tuple[str, str]] = []
        """Every username and password a client sent (accepted or not)."""
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._streams: set[asyncio.StreamWriter] = set()  # both ends of every connection, closed by stop()
        self._stopping = asyncio.Event()
        self._request_arrived = asyncio.Event()

    @property
    def port(self) -> int:
        """The port it listens (or listened) on."""
        assert self._port is not None, "the proxy was never started"
        return self._port

    @served
    async def wait_for_requests(self, count: int, within: float = 10.0) -> None:
        """Wait until ``count`` CONNECT requests have arrived in all."""
        async with asyncio.timeout(within):
            while len(self.requests) < count:
                self._request_arrived.clear()
                await self._request_arrived.wait()

    async def start(self) -> Socks5Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        """Stop listening and end every connection: closing their streams ends the tasks serving them (the
        server's own tasks are not cancelled, which asyncio's stream server would log as an error)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self._stopping.set()
        for stream in self._streams:
            stream.close()
        await asyncio.gather(*self._connections, return_exceptions=True)

    # -- one client ---------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._streams.add(writer)
        try:
            upstream = await self._handshake(reader, writer)
            if upstream is not None:
                self._streams.add(upstream[1])
                try:
                    await relay(reader, writer, *upstream)
                finally:
                    self._streams.discard(upstream[1])
        except (_Refused, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._connections.discard(task)
            self._streams.discard(writer)
            writer.close()

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        version, count = await reader.readexactly(2)
        if version != _VERSION:
            raise _Refused
        methods = tuple(await reader.readexactly(count))
        self.greetings.append(methods)
        if self.behaviour == "drop":
            return None
        if self.behaviour == "stall":
            await self._stopping.wait()
            return None
        await self._authenticate(reader, writer, methods)
        request = await self._read_request(reader, writer)
        if self.behaviour == "refuse":
            await self._reply(writer, _NOT_ALLOWED)
            raise _Refused
        try:
            upstream = await asyncio.open_connection(*self._destination(request))
        except (OSError, _Refused):
            await self._reply(writer, _HOST_UNREACHABLE)
            raise _Refused from None
        await self._reply(writer, _SUCCEEDED)
        return upstream

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, methods: tuple[int, ...]
    ) -> None:
        wanted = _NO_AUTHENTICATION if self.credentials is None else _USERNAME_PASSWORD
        if wanted not in methods:
            writer.write(bytes((_VERSION, _NO_ACCEPTABLE_METHOD)))
            await writer.drain()
            raise _Refused
        writer.write(bytes((_VERSION, wanted)))
        if self.credentials is None:
            return
        _subversion, length = await reader.readexactly(2)
        username = (await reader.readexactly(length)).decode("ascii", "replace")
        (length,) = await reader.readexactly(1)
        password = (await reader.readexactly(length)).decode("ascii", "replace")
        self.authentications.append((username, password))
        accepted = (username, password) == self.credentials
        writer.write(bytes((1, 0 if accepted else 1)))
        await writer.drain()
        if not accepted:
            raise _Refused

    async def _read_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> SocksRequest:
        version, command, _reserved, kind = await reader.readexactly(4)
        written: AddressKind
        if version != _VERSION or command != _CONNECT:
            await self._reply(writer, _COMMAND_NOT_SUPPORTED)
            raise _Refused
        if kind == _IPV4:
            host, written = socket.inet_ntop(socket.AF_INET, await reader.readexactly(4)), "ipv4"
        elif kind == _IPV6:
            host, written = socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16)), "ipv6"
        elif kind == _DOMAIN:
            (length,) = await reader.readexactly(1)
            host, written = (await reader.readexactly(length)).decode("ascii"), "domain"
        else:
            await self._reply(writer, _GENERAL_FAILURE)
            raise _Refused
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        request = SocksRequest(host, port, written)
        self.requests.append(request)
        self._request_arrived.set()
        return request

    def _destination(self, request: SocksRequest) -> tuple[str, int]:
        """Where to connect for ``request``: its mapping, else itself; only ever a loopback address."""
        host, port = self.mapping.get((request.host, request.port), (request.host, request.port))
        address = "127.0.0.1" if host == "localhost" else host
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(address).is_loopback:
                return address, port
        raise _Refused  # the tests send traffic to loopback only

    async def _reply(self, writer: asyncio.StreamWriter, code: int) -> None:
        # The bound address is not used by clients: 0.0.0.0:0.
        writer.write(bytes((_VERSION, code, 0, _IPV4, 0, 0, 0, 0, 0, 0)))
        await writer.drain()

