"""The record of sockets per event loop: letting go of a closed loop closes its sockets and connections, and
only its own."""

from __future__ import annotations

import asyncio
import gc
import socket

from mongio.connection import loop_sockets


class _FakeProtocol:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.aborted = 0

    def abort(self) -> None:
        self.aborted += 1


def test_a_closed_loop_s_sockets_and_connections_are_closed_and_no_other_loop_s() -> None:
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

        loop_sockets.close_sockets_of_closed_loop(closed)

        assert closed_sock.fileno() == -1
        assert kept_sock.fileno() != -1 and forgotten_sock.fileno() != -1
        assert (closed_conn.aborted, kept_conn.aborted, forgotten_conn.aborted) == (1, 0, 0)
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
