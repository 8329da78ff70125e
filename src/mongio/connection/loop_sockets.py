"""Which sockets mongio opened on each event loop, so that none stays open when a loop is closed without
shutting down.

Pools and monitors close the connections they hold when a client lets go of a closed loop. A connection
still opening (connecting, in its TLS handshake or its MongoDB handshake) is held by no one but a task that
the closed loop will never run again: it would stay open until the garbage collector finalizes that task.
This record reaches it. Each TCP socket is recorded from its creation until its transport is made (a Unix
socket connects at once), and each connection's protocol from then until the connection ends; both are held
weakly, so the record keeps nothing alive. Recording happens once per new connection, never per operation.

A socket still in its TLS handshake is closed here, but its transport (which asyncio made around it and
nothing of mongio holds yet) may still warn when collected. Transports of other loop implementations, whose
sockets mongio cannot reach, are left to their finalizers.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import weakref
from typing import Protocol

__all__ = [
    "close_sockets_of_closed_loop",
    "forget_connection",
    "forget_socket",
    "record_connection",
    "record_socket",
]


class _Abortable(Protocol):
    """A connection's protocol: its loop, and how to end it (on a closed loop, by closing its socket)."""

    loop: asyncio.AbstractEventLoop

    def abort(self) -> None: ...


# Another thread may let go of a closed loop while loops on other threads open connections.
_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    # A child forked while another thread held the lock would wait for it forever.
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_after_fork)

_sockets: weakref.WeakKeyDictionary[socket.socket, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()
_connections: weakref.WeakSet[_Abortable] = weakref.WeakSet()


def record_socket(sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
    """Record a socket just made on ``loop``, before it connects."""
    with _lock:
        _sockets[sock] = loop


def forget_socket(sock: socket.socket) -> None:
    """The socket belongs to a transport whose protocol is recorded, or it was closed."""
    with _lock:
        _sockets.pop(sock, None)


def record_connection(protocol: _Abortable) -> None:
    """Record a protocol whose transport is made."""
    with _lock:
        _connections.add(protocol)


def forget_connection(protocol: _Abortable) -> None:
    """The protocol's connection ended."""
    with _lock:
        _connections.discard(protocol)


def close_sockets_of_closed_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close every socket mongio opened on ``loop``, which is closed; nothing is scheduled on it."""
    with _lock:
        connections = [protocol for protocol in _connections if protocol.loop is loop]
        sockets = [sock for sock, owner in _sockets.items() if owner is loop]
    for protocol in connections:
        protocol.abort()
    for sock in sockets:
        sock.close()
