"""Opening TCP connections through a SOCKS5 proxy (``proxyHost``), with python-socks (the ``mongio[socks]`` extra).

The proxy is asked for the server's host name exactly as the client knows it (never resolved here, as the
SOCKS5 Support specification asks); it offers "no authentication", plus RFC 1929 username and password when
``proxyUsername`` and ``proxyPassword`` are given. The connected socket then goes through the same
``loop.create_connection`` (TLS, protocol, compiled framing) as a direct connection: see
:func:`mongio.connection.transport.open_transport`.

A failure to reach the proxy or of its handshake is a network error without the overload labels: it says
nothing of the server's load (the specification's backpressure rule).
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
from typing import TYPE_CHECKING, Any

from mongio.backend import ForeignLoop, running_loop, timeout
from mongio.connection.transport import DEFAULT_PORT, Address, format_address
from mongio.errors import AutoReconnect, ConfigurationError, NetworkTimeout

if TYPE_CHECKING:
    from mongio.options.proxy_options import ProxyOptions

__all__ = ["SocksProxy"]

INSTALL_HINT = "install mongio[socks] (python-socks) to connect through a SOCKS5 proxy"


class SocksProxy:
    """The SOCKS5 proxy every connection of a client goes through; made once per client.

    python-socks is imported here, so a client without ``proxyHost`` never loads it; without it installed,
    making one raises ``ConfigurationError`` saying what to install.
    """

    def __init__(self, options: ProxyOptions) -> None:
        try:
            from python_socks import ProxyConnectionError, ProxyError, ProxyType
            from python_socks.async_.asyncio import Proxy
        except ImportError as exc:
            raise ConfigurationError(f"proxyHost={options.host!r} needs python-socks: {INSTALL_HINT}") from exc
        self._options = options
        self._proxy_class = Proxy
        self._socks5 = ProxyType.SOCKS5
        self._unreachable: type[OSError] = ProxyConnectionError
        self._refused: type[ProxyError] = ProxyError
        self.name = format_address((options.host, options.port))
        """``host:port`` of the proxy, as errors name it."""

    def __repr__(self) -> str:
        return f"SocksProxy({self.name}, authenticates={self._options.username is not None})"

    async def open_socket(self, address: Address, connect_timeout: float | None) -> Any:
        """A connected non-blocking TCP socket to ``address`` through the proxy, its SOCKS5 handshake done
        (a ``socket.socket`` on asyncio, a ``trio.socket.SocketType`` on trio).

        ``connect_timeout`` (seconds; None: no bound) bounds reaching the proxy and its handshake. Failures raise
        ``AutoReconnect`` (``NetworkTimeout`` for the time limit) naming the server, the proxy and what went
        wrong.
        """
        host, port = address[0], address[1] if address[1] is not None else DEFAULT_PORT
        target = format_address(address)
        proxy = self._proxy(running_loop())
        try:
            async with timeout(connect_timeout):
                # The deadline is ours (above); python-socks's own would otherwise default to 60 seconds.
                return await proxy.connect(host, port, timeout=math.inf)
        except TimeoutError as exc:
            raise NetworkTimeout(
                f"connecting to {target} through the SOCKS5 proxy {self.name} timed out after {connect_timeout}s"
            ) from exc
        # The library's errors, a socket error it let through, or a host name a SOCKS5 request cannot carry.
        except (self._unreachable, self._refused, OSError, ValueError) as exc:
            raise AutoReconnect(self._failure(target, exc)) from exc

    def _proxy(self, loop: asyncio.AbstractEventLoop) -> Any:
        """python-socks's proxy for one connection, in the flavour of the running runtime (its trio flavour,
        which imports trio, only on trio)."""
        options = self._options
        if isinstance(loop, ForeignLoop):
            from python_socks.async_.trio import Proxy as TrioProxy

            return TrioProxy(
                self._socks5,
                options.host,
                options.port,
                username=options.username,
                password=options.password,
                rdns=True,
            )
        return self._proxy_class(
            self._socks5,
            options.host,
            options.port,
            username=options.username,
            password=options.password,
            rdns=True,  # the host name goes to the proxy unresolved
            loop=loop,
        )

    def _failure(self, target: str, error: Exception) -> str:
        """What went wrong, for the error message: the proxy unreachable, refusing, or failing its handshake."""
        if isinstance(error, self._unreachable):
            # python-socks's own message repeats the proxy's address: the cause says it shorter (a name that
            # does not resolve by its message, a refused connection by its error number).
            cause = error.__cause__
            if isinstance(cause, socket.gaierror):
                reason = f"cannot resolve {self._options.host!r}: {cause.strerror}"
            else:
                reason = os.strerror(error.errno) if error.errno else str(cause or error)
            return f"cannot reach the SOCKS5 proxy {self.name} (to connect to {target}): {reason}"
        if isinstance(error, self._refused):
            if error.error_code is not None:  # the proxy answered the CONNECT request with a failure
                return f"the SOCKS5 proxy {self.name} could not connect to {target}: {error}"
            # The authentication methods or the credentials refused, the connection closed or a reply malformed
            # before the proxy answered the CONNECT request (python-socks's message says which).
            hint = (
                "check proxyUsername and proxyPassword"
                if self._options.username is not None
                else "a proxy that requires authentication needs proxyUsername and proxyPassword"
            )
            return f"the SOCKS5 proxy {self.name} did not complete the handshake for {target}: {error} ({hint})"
        if isinstance(error, OSError):
            reason = os.strerror(error.errno) if error.errno else str(error)
            return f"the connection to the SOCKS5 proxy {self.name} failed during the handshake for {target}: {reason}"
        # The host name cannot be written in a SOCKS5 request (too long for its length byte, or not IDNA).
        return f"the SOCKS5 proxy {self.name} cannot be asked for {target}: {error}"
