"""An HTTP ``CONNECT`` proxy of the tests' own (the part of the client-side encryption prose's
``kms_http_proxy.py`` the tests use), listening on 127.0.0.1, plain or over TLS, and connecting only to loopback
addresses; and the ``kms_connect_callback`` functions that reach a KMS through it.

``connect_count`` counts the TCP connections it accepted since it started or since :meth:`reset` (the prose's
``GET /metrics``), ``targets`` the ``host:port`` each ``CONNECT`` asked for. ``mapping`` sends a requested host
name to a loopback address (a KMS host name that resolves nowhere reaches the fake KMS), so a test shows the
driver's TLS named the KMS host while the socket went to the proxy.

    async with HttpConnectProxy(mapping={"kms.example.test": ("127.0.0.1", kms_port)}) as proxy:
        callback = proxy.connect_callback()   # a plain function, blocking: mongio runs it in a worker thread
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

import trustme

from mongio.encryption_options import KMSConnectContext
from tests.support.backends import AsyncioServer, served_sync
from tests.support.stream_relay import relay

__all__ = ["HttpConnectProxy", "ProxyCertificates", "TlsBridges"]

_MAX_HEAD = 8192
_CHUNK = 65536


@dataclass(frozen=True)
class ProxyCertificates:
    """The HTTPS proxy's own certificate authority (``ca_file``, which only its callback trusts) and its server
    context (a certificate for 127.0.0.1)."""

    ca_file: str
    server_context: ssl.SSLContext

    @classmethod
    def make(cls, directory: str) -> ProxyCertificates:
        authority = trustme.CA()
        ca_file = f"{directory}/proxy-ca.pem"
        authority.cert_pem.write_to_path(ca_file)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert("127.0.0.1").configure_cert(context)
        return cls(ca_file, context)


class _Refused(Exception):
    """The CONNECT is answered with an error status and the connection closed."""


@dataclass
class HttpConnectProxy(AsyncioServer):
    """The proxy; ``async with`` serves it on a free port of 127.0.0.1 (over TLS when ``certificates``)."""

    mapping: dict[str, tuple[str, int]] = field(default_factory=dict)
    certificates: ProxyCertificates | None = None
    connect_count: int = 0
    targets: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = field(default=None, repr=False)
    _port: int | None = field(default=None, repr=False)
    _connections: set[asyncio.Task[None]] = field(default_factory=set, repr=False)
    _streams: set[asyncio.StreamWriter] = field(default_factory=set, repr=False)

    @property
    def port(self) -> int:
        assert self._port is not None, "the proxy was never started"
        return self._port

    @served_sync
    def reset(self) -> None:
        """Zero the counters (the prose's ``POST /reset``)."""
        self.connect_count = 0
        self.targets.clear()

    async def start(self) -> HttpConnectProxy:
        tls = None if self.certificates is None else self.certificates.server_context
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        """Stop listening and end every tunnel (closing its streams ends the tasks relaying it)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for stream in list(self._streams):
            stream.close()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connect_count += 1
        self._connections.add(task)
        self._streams.add(writer)
        try:
            upstream = await self._tunnel(reader, writer)
            self._streams.add(upstream[1])
            try:
                await relay(reader, writer, *upstream)
            finally:
                self._streams.discard(upstream[1])
        except (_Refused, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            self._connections.discard(task)
            self._streams.discard(writer)
            writer.close()

    async def _tunnel(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _MAX_HEAD:
            await _answer(writer, "431 Request Header Fields Too Large")
        method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if method != "CONNECT":
            await _answer(writer, "405 Method Not Allowed")
        self.targets.append(target)
        host, _, port_text = target.rpartition(":")
        try:
            destination = self._destination(host.strip("[]"), int(port_text))
            upstream = await asyncio.open_connection(*destination)
        except (ValueError, OSError):
            await _answer(writer, "502 Bad Gateway")
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        return upstream

    def _destination(self, host: str, port: int) -> tuple[str, int]:
        """Where to connect for ``host:port``: its mapping, else itself; only ever a loopback address."""
        address, port = self.mapping.get(host, (host, port))
        if not ipaddress.ip_address(address).is_loopback:
            raise ValueError(f"{address} is not a loopback address")  # the tests send traffic to loopback only
        return address, port

    def connect_callback(self, bridges: TlsBridges | None = None) -> Callable[[KMSConnectContext], socket.socket]:
        """The prose's ``kmsConnectCallback`` for this proxy, a plain (blocking) function: connect to the proxy
        (over TLS, verified against the proxy's own certificate authority, when it serves TLS), send
        ``CONNECT host:port``, check for ``HTTP/1.1 200`` and return a plain socket carrying the tunnel. Over
        TLS that socket is one end of a pair that ``bridges`` relays to the TLS connection."""
        port, certificates = self.port, self.certificates

        def connect(context: KMSConnectContext) -> socket.socket:
            sock = socket.create_connection(("127.0.0.1", port), timeout=context.timeout)
            if certificates is None:
                try:
                    open_tunnel(sock, context.host, context.port)
                except BaseException:
                    sock.close()
                    raise
                return sock
            assert bridges is not None, "a proxy over TLS needs TlsBridges to hand a plain socket back"
            trust = ssl.create_default_context(cafile=certificates.ca_file)
            try:
                tls = trust.wrap_socket(sock, server_hostname="127.0.0.1")
            except BaseException:
                sock.close()
                raise
            try:
                open_tunnel(tls, context.host, context.port)
            except BaseException:
                tls.close()
                raise
            return bridges.bridge(tls)

        return connect


def open_tunnel(sock: socket.socket, host: str, port: int) -> None:
    """Ask the proxy on ``sock`` for a tunnel to ``host:port``; ``ConnectionError`` unless it answers 200."""
    sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)  # byte by byte: nothing past the answer's head may be read here
        if not chunk or len(head) > _MAX_HEAD:
            raise ConnectionError(f"the proxy ended its answer early: {head!r}")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        status = head.split(b"\r\n", 1)[0]
        raise ConnectionError(f"the proxy refused the tunnel: {status!r}")


async def _answer(writer: asyncio.StreamWriter, status: str) -> NoReturn:
    writer.write(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n".encode())
    await writer.drain()
    raise _Refused


class TlsBridges:
    """Hands a plain socket back for a TLS connection to the proxy (mongio does the KMS's TLS over a plain
    socket): one end of a socket pair, the other end shuttled to and from the TLS socket by a thread of the
    bridge's own (one thread, so the TLS connection is never read and written at once), each owned here and
    joined by :meth:`close`."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._ends: list[socket.socket] = []
        self._lock = threading.Lock()

    def bridge(self, tls: ssl.SSLSocket) -> socket.socket:
        mine, theirs = socket.socketpair()
        thread = threading.Thread(target=_shuttle, args=(tls, mine), daemon=True, name="tls bridge")
        with self._lock:
            self._ends.append(mine)
            self._threads.append(thread)
        thread.start()
        return theirs

    def close(self) -> None:
        """End every bridge: shutting its end of the pair down wakes its thread, which is then joined."""
        with self._lock:
            ends, threads = self._ends[:], self._threads[:]
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=10)


def _shuttle(tls: ssl.SSLSocket, mine: socket.socket) -> None:
    """Copy between ``tls`` (non-blocking) and ``mine`` until either ends, then close both."""
    tls.setblocking(False)
    try:
        while True:
            readable = [tls] if tls.pending() else select.select([tls, mine], [], [])[0]
            if tls in readable:
                try:
                    chunk = tls.recv(_CHUNK)
                except ssl.SSLWantReadError:
                    chunk = None  # a TLS record not complete yet, or one without data (a session ticket)
                if chunk == b"":
                    return
                if chunk:
                    mine.sendall(chunk)
            if mine in readable:
                chunk = mine.recv(_CHUNK)
                if not chunk:
                    return
                _send_tls(tls, chunk)
    except OSError:
        return
    finally:
        mine.close()
        tls.close()


def _send_tls(tls: ssl.SSLSocket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[tls.send(view) :]
        except ssl.SSLWantWriteError:
            select.select([], [tls], [], 10)
        except ssl.SSLWantReadError:
            select.select([tls], [], [], 10)
