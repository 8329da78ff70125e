"""Which sockets mongio opened on each event loop, so that none stays open when a loop is closed without
shutting down.

The loop runtime lets go of a loop (closed without shutting down, or the parent's after a fork) by first
letting go of every connection recorded here for that loop, and only then of its topology: the pools and
monitors then find their connections already ended, and nothing of them touches the loop. A connection
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
import gc
import socket
import threading
import weakref
from typing import Any, Protocol

from mongio.loop_runtime.bound import LoopBound

__all__ = [
    "LoopConnection",
    "close_transport_socket",
    "forget_connection",
    "forget_socket",
    "let_go_after_fork",
    "let_go_of_loop",
    "record_connection",
    "record_socket",
]


class LoopConnection(LoopBound, Protocol):
    """A connection's protocol: the loop it belongs to, and :meth:`let_go` to end it without that loop."""

    loop: asyncio.AbstractEventLoop


# Another thread may let go of a closed loop while loops on other threads open connections.
_lock = threading.Lock()


_sockets: weakref.WeakKeyDictionary[socket.socket, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()
_connections: weakref.WeakSet[LoopConnection] = weakref.WeakSet()
# The loops something was recorded on, checked before each garbage collection (see _before_collection).
_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def let_go_after_fork() -> None:
    """In the child of a fork (the runtime's fork hook calls it, with no other thread running): every
    connection and socket recorded is the parent's, on a loop of the parent, so each is let go of at once
    (the child's copy of its socket closed, its transport never touched: the epoll set under the parent's
    loop is shared with the child). The lock is renewed: another thread of the parent may have held it."""
    global _lock
    _lock = threading.Lock()
    connections, sockets = list(_connections), list(_sockets)
    _connections.clear()
    _sockets.clear()
    _loops.clear()
    for protocol in connections:
        protocol.let_go()
    for sock in sockets:
        sock.close()


def record_socket(sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
    """Record a socket just made on ``loop``, before it connects."""
    with _lock:
        _sockets[sock] = loop
        _loops.add(loop)


def forget_socket(sock: socket.socket) -> None:
    """The socket belongs to a transport whose protocol is recorded, or it was closed."""
    with _lock:
        _sockets.pop(sock, None)


def record_connection(protocol: LoopConnection) -> None:
    """Record a protocol whose transport is made."""
    with _lock:
        _connections.add(protocol)
        _loops.add(protocol.loop)


def forget_connection(protocol: LoopConnection) -> None:
    """The protocol's connection ended."""
    with _lock:
        _connections.discard(protocol)


def let_go_of_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Let go of every connection and close every socket mongio opened on ``loop``, which will never run
    again here; nothing is scheduled on it."""
    with _lock:
        connections = [protocol for protocol in _connections if protocol.loop is loop]
        sockets = [sock for sock, owner in _sockets.items() if owner is loop]
    for protocol in connections:
        protocol.let_go()
    for sock in sockets:
        sock.close()


def _before_collection(phase: str, info: dict[str, int]) -> None:
    """Before each garbage collection (a ``gc.callbacks`` hook): the connections of every loop closed since the
    last one are let go of, their sockets closed. A client dropped without ``close()`` after its loop was
    closed (Motor's test harness closes the loop of each test) would otherwise be collected with its
    transports' sockets open, each one a ResourceWarning. Checked: one ``is_closed()`` per loop mongio used.
    Skipped when the registry's lock is held (the collection may start inside this module): the next one
    does it."""
    if phase != "start" or not _loops or not _lock.acquire(blocking=False):
        return
    try:
        gone = [loop for loop in _loops if loop.is_closed()]
        for loop in gone:
            _loops.discard(loop)
    finally:
        _lock.release()
    for loop in gone:
        let_go_of_loop(loop)


gc.callbacks.append(_before_collection)


def close_transport_socket(transport: asyncio.BaseTransport) -> None:
    """Close the socket under ``transport``, whose event loop will never run again here.

    asyncio closes a transport's socket only from a callback of its loop, which that loop never runs: the
    socket would stay open until the transport's finalizer closes it with a ``ResourceWarning`` (and in a
    forked child, closing the transport the usual way would take the socket out of the epoll set the child
    shares with its parent). Here the socket is closed at once and the transport left without one, so
    nothing touches the loop. The attributes are asyncio's own (a selector transport's ``_sock``, under the
    TLS layer's ``_ssl_protocol._transport``); a transport without them (another loop implementation) is
    left to its finalizer.
    """
    inner: Any = transport
    ssl_protocol = getattr(inner, "_ssl_protocol", None)
    if ssl_protocol is not None:
        inner = getattr(ssl_protocol, "_transport", None)
    sock = getattr(inner, "_sock", None)
    if isinstance(sock, socket.socket):
        sock.close()
        # asyncio offers no public way to detach a transport's socket without its loop: its own attribute is
        # cleared, so the transport's finalizer finds no socket to close (or warn about) again.
        inner._sock = None
