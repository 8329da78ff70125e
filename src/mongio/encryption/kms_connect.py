"""KMS connections opened by the user's ``kms_connect_callback`` (the client-side encryption specification's
``kmsConnectCallback``), for a KMS reached through an HTTP ``CONNECT`` proxy, say.

The callback opens the TCP connection and returns it as a plain socket; mongio then does the KMS's TLS
handshake over it, with the provider's TLS options, SNI and certificate checks naming the KMS host (never the
address the socket is connected to), through the backend seam (:func:`mongio.backend.wrap_byte_stream`), so
the same code runs on asyncio and on trio.

A coroutine function is awaited on the event loop. A plain function runs in a worker thread
(:func:`mongio.backend.to_thread_abandoning`): at the attempt's deadline it is given up on, and a socket it
returns afterwards is closed. An ``OSError`` from the callback is a network failure (a ``ConnectionError``
naming the callback, which the KMS retry rules retry, calling the callback again); any other exception fails
the operation with an :class:`~mongio.errors.EncryptionError` naming the callback.
"""

from __future__ import annotations

import functools
import inspect
import socket
import ssl

from mongio import backend
from mongio.encryption_options import KMSConnectCallback, KMSConnectContext
from mongio.errors import EncryptionError

__all__ = ["KmsConnector"]

_OPTION = "kms_connect_callback"


def _close_late(returned: object) -> None:
    """What a worker-thread callback returned after the attempt gave up on it: a socket is closed."""
    if isinstance(returned, socket.socket):
        returned.close()


def _failed(host: str, port: int, problem: str) -> EncryptionError:
    return EncryptionError(RuntimeError(f"{_OPTION} for KMS {host}:{port}: {problem}"))


def _checked_socket(returned: object, host: str, port: int) -> socket.socket:
    """``returned`` when it is a plain, connected TCP socket; else it is closed and the operation fails."""
    if isinstance(returned, ssl.SSLSocket):
        returned.close()
        raise _failed(
            host,
            port,
            "returned an ssl.SSLSocket; return the plain socket: mongio does the KMS's TLS handshake over it "
            "(a proxy reached over TLS needs a plain socket bridged to that TLS connection)",
        )
    if inspect.iscoroutine(returned):
        returned.close()
        raise _failed(host, port, "a plain function returned a coroutine; define the callback with async def")
    if not isinstance(returned, socket.socket):
        raise _failed(host, port, f"returned {type(returned).__name__}, not a connected socket.socket")
    if returned.type != socket.SOCK_STREAM:
        returned.close()
        raise _failed(host, port, f"returned a socket of type {returned.type!r}, not a TCP (SOCK_STREAM) socket")
    return returned


class KmsConnector:
    """Opens KMS byte streams through ``callback`` (see the module docstring)."""

    __slots__ = ("__callback", "__is_async")

    def __init__(self, callback: KMSConnectCallback) -> None:
        self.__callback = callback
        self.__is_async = backend.is_async_callable(callback)

    def __repr__(self) -> str:
        return f"KmsConnector({self.__callback!r})"

    async def open(
        self, host: str, port: int, ssl_context: ssl.SSLContext, time_allowed: float
    ) -> tuple[backend.ByteReader, backend.ByteWriter]:
        """A TLS stream to the KMS ``host:port`` over the socket the callback connected, the handshake checked
        against ``host``; ``time_allowed`` (seconds) is what the callback is told it has (the caller's
        deadline bounds the whole)."""
        sock = await self.__connected_socket(KMSConnectContext(host, port, time_allowed))
        return await backend.wrap_byte_stream(sock, ssl_context, host)

    async def __connected_socket(self, context: KMSConnectContext) -> socket.socket:
        try:
            returned = await self.__call(context)
        except OSError as exc:
            raise ConnectionError(f"{_OPTION} raised {type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            raise _failed(context.host, context.port, f"raised {type(exc).__name__}: {exc}") from exc
        return _checked_socket(returned, context.host, context.port)

    async def __call(self, context: KMSConnectContext) -> object:
        if self.__is_async:
            return await self.__callback(context)  # type: ignore[misc]
        return await backend.to_thread_abandoning(functools.partial(self.__callback, context), _close_late)
