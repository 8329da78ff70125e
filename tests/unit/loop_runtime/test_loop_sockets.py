"""The record of sockets per event loop: letting go of a loop lets go of its connections and closes its
sockets, and only its own."""

from __future__ import annotations

import asyncio
import gc
import socket

from mongio.loop_runtime import sockets as loop_sockets


class _FakeProtocol:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.let_go_count = 0

    def let_go(self) -> None:
        self.let_go_count += 1


def test_a_closed_loop_s_sockets_and_connections_are_let_go_of_and_no_other_loop_s() -> None:
    closed, running = asyncio.new_event_loop(), asyncio.new_event_loop()
    closed_sock, kept_sock, forgotten_sock = (socket.socket() for _ in range(3))
    closed_conn, kept_conn, forgotten_conn = _FakeProtocol(closed), _FakeProtocol(running), _FakeProtocol(closed)
    try:
        loop_sockets.record_socket(closed_sock, closed)
        loop_sockets.record_socket(kept_sock, running)
        loop_sockets.record_socket(forgotten_sock, closed)
        loop_sockets.forget_socket(forgotten_sock)
        for conn in (closed_conn, kept_conn, forgotten_conn):
            loop_sockets.record_connection(conn)
        loop_sockets.forget_connection(forgotten_conn)
        closed.close()

        loop_sockets.let_go_of_loop(closed)

        assert closed_sock.fileno() == -1
        assert kept_sock.fileno() != -1 and forgotten_sock.fileno() != -1
        assert (closed_conn.let_go_count, kept_conn.let_go_count, forgotten_conn.let_go_count) == (1, 0, 0)
    finally:
        for sock in (closed_sock, kept_sock, forgotten_sock):
            sock.close()
        running.close()
        closed.close()


def test_the_record_keeps_nothing_alive() -> None:
    loop = asyncio.new_event_loop()
    try:
        conn = _FakeProtocol(loop)
        sock = socket.socket()
        loop_sockets.record_connection(conn)
        loop_sockets.record_socket(sock, loop)
        sock.close()
        del conn, sock
        gc.collect()
        assert not any(owner is loop for owner in loop_sockets._sockets.values())
        assert not any(protocol.loop is loop for protocol in loop_sockets._connections)
    finally:
        loop.close()


async def test_a_protocol_let_go_of_closes_its_socket_and_later_closes_touch_no_loop() -> None:
    """What a pool does after the runtime let go of a connection's protocol (``close``, ``abort``) must not
    reach the transport, whose loop will never run again."""
    from mongio.connection.protocol import MessageProtocol

    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        transport, protocol = await loop.create_connection(
            lambda: MessageProtocol("test"), *listener.getsockname()[:2]
        )
        sock = transport.get_extra_info("socket")
        assert sock.fileno() != -1
        protocol.let_go()
        assert protocol.lost and protocol.transport is None
        assert transport.get_extra_info("socket").fileno() == -1
        protocol.close()
        protocol.abort()
        assert not transport.is_closing()  # neither reached the transport (which would schedule on the loop)
    finally:
        listener.close()


def test_a_connection_closed_after_its_loop_closed_lets_itself_go() -> None:
    """A coroutine of a loop closed without shutting down, finalized by the garbage collector before anyone
    let go of the loop, closes its connection: the protocol closes its socket directly, and neither fails
    the waiter nor schedules anything on the closed loop (which would raise)."""
    from mongio.connection.protocol import MessageProtocol

    loop = asyncio.new_event_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    try:

        async def connect() -> tuple[asyncio.BaseTransport, MessageProtocol]:
            return await loop.create_connection(lambda: MessageProtocol("test"), *listener.getsockname()[:2])

        transport, protocol = loop.run_until_complete(connect())
        sock = transport.get_extra_info("socket")
        loop.close()
        protocol.close()
        assert protocol.lost and protocol.transport is None
        assert sock.fileno() == -1
    finally:
        listener.close()
        loop.close()
