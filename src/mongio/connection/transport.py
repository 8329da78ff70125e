"""Opening the byte stream under a connection: TCP (IPv4 or IPv6), TLS over TCP, or a Unix domain socket."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from mongio.backend import ForeignLoop, running_loop, timeout_at
from mongio.connection.protocol import MessageProtocol
from mongio.error_classification import OVERLOAD_LABELS, may_be_overload
from mongio.errors import AutoReconnect, NetworkTimeout
from mongio.loop_runtime.sockets import forget_socket, record_socket

if TYPE_CHECKING:
    from mongio.connection.socks import SocksProxy

__all__ = [
    "Address",
    "connect_first_address",
    "format_address",
    "is_unix_socket",
    "open_transport",
    "resolve_stream_addresses",
    "tune_socket",
]

Address = tuple[str, int | None]
"""``(host, port)``; a Unix domain socket is ``(path, None)`` with a path ending in ``.sock``."""

DEFAULT_PORT = 27017

AddressInfo = tuple[Any, Any, int, str, Any]
"""One entry of ``getaddrinfo``'s answer: family, socket kind, protocol, canonical name, socket address."""

T = TypeVar("T")


def is_unix_socket(address: Address) -> bool:
    return address[0].endswith(".sock")


def format_address(address: Address) -> str:
    """``host:port`` as written in a URI, with brackets around an IPv6 literal; a socket path as it is."""
    host, port = address
    if is_unix_socket(address):
        return host
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port if port is not None else DEFAULT_PORT}"


class ResolutionError(OSError):
    """A host name that does not resolve: never a sign of an overloaded server."""


async def open_transport(
    address: Address,
    *,
    connect_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    protocol_factory: Callable[[], MessageProtocol] | None = None,
    proxy: SocksProxy | None = None,
) -> tuple[asyncio.Transport, MessageProtocol]:
    """Connect to ``address`` and return the transport and its protocol, TLS handshake done when
    ``ssl_context`` is given.

    A host name is resolved with ``loop.getaddrinfo`` and every address it resolves to is tried in turn (IPv4
    and IPv6 alike) until one connects; with a ``proxy``, the proxy is asked for the host name instead (see
    :mod:`mongio.connection.socks`) and TLS runs inside its tunnel. The whole attempt, resolution, proxy and TLS
    handshake included, is bounded by ``connect_timeout`` seconds (None or 0: no bound, as
    ``connectTimeoutMS=0`` means). Failures raise ``AutoReconnect`` (``NetworkTimeout`` for the time limit)
    naming the address and the cause.
    """
    name = format_address(address)
    loop = running_loop()
    factory = protocol_factory or (lambda: MessageProtocol(name))
    deadline = loop.time() + connect_timeout if connect_timeout else None
    transport: asyncio.BaseTransport
    # Reaching the proxy and its handshake raise errors of their own, naming the proxy; what follows (TLS
    # inside the tunnel) is the server's, as on a direct connection.
    proxied: Any = await proxy.open_socket(address, connect_timeout or None) if proxy is not None else None
    try:
        async with timeout_at(deadline):
            if isinstance(loop, ForeignLoop):
                protocol = await loop.open_message_stream(
                    address, name, is_unix_socket(address), ssl_context, proxied
                )
                transport = protocol.transport  # type: ignore[assignment]
            elif proxied is not None:
                _adopt_socket(proxied, loop)
                transport, protocol = await _wrap_socket(loop, proxied, address[0], factory, ssl_context)
            elif is_unix_socket(address):
                transport, protocol = await loop.create_unix_connection(
                    factory, address[0], ssl=ssl_context, server_hostname="localhost" if ssl_context else None
                )
            else:
                transport, protocol = await _open_tcp(loop, address, factory, ssl_context)
    # Per CMAP's backpressure rule, failures that an overloaded server can cause (timeouts, refused or reset
    # connections, I/O errors in the TLS handshake) carry the overload labels; ones it cannot (DNS, a
    # certificate or host name rejected, TLS misconfiguration) do not.
    except TimeoutError as exc:
        raise NetworkTimeout(
            f"connecting to {name} timed out after {connect_timeout}s", error_labels=OVERLOAD_LABELS
        ) from exc
    except ResolutionError as exc:
        raise AutoReconnect(f"cannot connect to {name}: {exc}") from exc
    except ssl.SSLCertVerificationError as exc:
        raise AutoReconnect(f"TLS certificate of {name} rejected: {exc.verify_message or exc}") from exc
    except ssl.SSLError as exc:
        raise AutoReconnect(
            f"TLS handshake with {name} failed: {exc}",
            error_labels=OVERLOAD_LABELS if may_be_overload(exc) else None,
        ) from exc
    except (OSError, EOFError) as exc:
        raise AutoReconnect(f"cannot connect to {name}: {exc}", error_labels=OVERLOAD_LABELS) from exc
    assert isinstance(protocol, MessageProtocol)
    # Duck-typed: uvloop's transports have the asyncio.Transport methods without deriving from it.
    return cast(asyncio.Transport, transport), protocol


async def _open_tcp(
    loop: asyncio.AbstractEventLoop,
    address: Address,
    factory: Callable[[], MessageProtocol],
    ssl_context: ssl.SSLContext | None,
) -> tuple[asyncio.BaseTransport, MessageProtocol]:
    host, port = address[0], address[1] if address[1] is not None else DEFAULT_PORT
    infos = await resolve_stream_addresses(host, port, loop.getaddrinfo)
    sock = await connect_first_address(
        infos, loop, lambda sock, sockaddr: _connect_socket(loop, sock, sockaddr)
    )
    return await _wrap_socket(loop, sock, host, factory, ssl_context)


async def _connect_socket(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, sockaddr: Any
) -> socket.socket:
    try:
        sock.setblocking(False)
        tune_socket(sock)
        await loop.sock_connect(sock, sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


async def resolve_stream_addresses(
    host: str, port: int, getaddrinfo: Callable[..., Awaitable[Sequence[AddressInfo]]]
) -> Sequence[AddressInfo]:
    """The TCP addresses ``host`` resolves to, by the runtime's ``getaddrinfo``; ``ResolutionError`` when it
    resolves to none."""
    try:
        infos = await getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ResolutionError(f"cannot resolve {host!r}: {exc.strerror or exc}") from exc
    if not infos:
        raise ResolutionError(f"{host!r} resolves to no address")
    return infos


async def connect_first_address(
    infos: Sequence[AddressInfo],
    loop: asyncio.AbstractEventLoop,
    connect: Callable[[socket.socket, Any], Awaitable[T]],
) -> T:
    """Try the resolved addresses in turn (IPv4 and IPv6 alike) and return what ``connect(sock, sockaddr)``
    returns for the first that connects; ``connect`` closes its socket when it fails. The socket is recorded
    with ``loop`` meanwhile (the caller forgets it once its connection is recorded); when none connects, the
    ``OSError`` names each address's failure."""
    errors: list[tuple[str, str]] = []
    for family, kind, proto, _canonical, sockaddr in infos:
        sock = socket.socket(family, kind, proto)
        # Until its protocol is recorded, the socket alone is: a loop closed meanwhile must not leave it open.
        record_socket(sock, loop)
        try:
            return await connect(sock, sockaddr)
        except OSError as exc:
            forget_socket(sock)
            errors.append((str(sockaddr[0]), os.strerror(exc.errno) if exc.errno else str(exc)))
        except BaseException:
            forget_socket(sock)
            raise
    if len(errors) == 1:
        raise OSError(errors[0][1])
    raise OSError("; ".join(f"{ip}: {message}" for ip, message in errors))


async def _wrap_socket(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    host: str,
    factory: Callable[[], MessageProtocol],
    ssl_context: ssl.SSLContext | None,
) -> tuple[asyncio.BaseTransport, MessageProtocol]:
    """A connected socket, recorded and tuned, made into the transport and protocol, TLS handshake done
    (``host`` is the server's name, for SNI and the certificate check)."""
    try:
        # On failure (TLS handshake included) create_connection closes the socket itself.
        return await loop.create_connection(
            factory,
            sock=sock,
            ssl=ssl_context,
            # The name given, not the resolved address: it is what SNI and the certificate check need.
            server_hostname=host if ssl_context is not None else None,
        )
    finally:
        forget_socket(sock)


def _adopt_socket(sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
    """Record and tune a socket connected elsewhere (through a proxy); closed if that fails."""
    record_socket(sock, loop)
    try:
        tune_socket(sock)
    except BaseException:
        sock.close()
        forget_socket(sock)
        raise


def tune_socket(sock: socket.socket) -> None:
    """Keep-alive on (idle pooled connections must notice a vanished peer or a middlebox that dropped them)
    and, on TCP, no Nagle delay."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
