"""The connection a load-balanced cursor keeps between its commands.

Behind a load balancer, a pooled connection may lead to any of the services behind it, and a cursor lives on
the one service that opened it: its ``getMore`` and ``killCursors`` must go over the connection its first
command used (the load balancer specification, "Behaviour With Cursors"). A :class:`ConnectionPin` is that
connection's holder: the cursor owns one and passes it to the executor with each command; the executor
fills it when a cursor-opening command leaves the server cursor open, sends later commands over the
connection it holds, and never checks that connection in itself. The cursor gives the connection back
(:meth:`ConnectionPin.release`) once the server cursor is exhausted or killed, or when the cursor is closed
after the connection broke.

A pin also holds the connection of an exhaust stream (``CursorType.EXHAUST``, in any topology): after a
``getMore`` sent with ``exhaustAllowed`` is answered with ``moreToCome``, the server goes on sending the next
batches unasked, so the connection stays with the cursor, which reads them one by one
(:meth:`Executor.receive_streamed <mongio.execution.executor.Executor.receive_streamed>`), until a reply
without ``moreToCome`` ends the stream. A connection held for the stream alone then goes back to its pool
(:meth:`ConnectionPin.stream_ended`); one held for a load balancer stays. A connection with replies still on
their way is never checked in for reuse: the pool closes it (it is still ``in_exchange``).

The pool counts a held connection as "in use by cursors" (for its wait queue timeout message).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mongio.backend import running_loop

__all__ = ["ConnectionPin"]


class ConnectionPin:
    """Holds at most one checked-out connection of one pool for a cursor (load-balanced mode, or while an
    exhaust stream lasts)."""

    __slots__ = ("_conn", "_for_stream_only", "_loop", "_pool", "_stream_command")

    def __init__(self) -> None:
        self._pool: Any = None
        self._conn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The getMore whose exhaust stream the held connection carries (what each streamed batch's command
        # events show), and whether the connection is held for that stream alone.
        self._stream_command: dict[str, Any] | None = None
        self._for_stream_only = False

    def __repr__(self) -> str:
        conn = self._conn
        return "<ConnectionPin empty>" if conn is None else f"<ConnectionPin connection {conn.id}>"

    @property
    def held(self) -> bool:
        """Whether a connection is held."""
        return self._conn is not None

    @property
    def broken(self) -> bool:
        """Whether the held connection can no longer carry a command (a network error or an interrupted
        exchange closed it): closing the cursor then sends no ``killCursors``."""
        conn = self._conn
        return conn is not None and (conn.closed or conn.in_exchange)

    @property
    def streaming(self) -> bool:
        """Whether the held connection carries an exhaust stream with replies still to read."""
        conn = self._conn
        return conn is not None and self._stream_command is not None and conn.more_to_come

    @property
    def held_for_stream_only(self) -> bool:
        """Whether the connection is held for its exhaust stream alone (not for a load balancer): the server
        cursor can then be killed over another connection to the same server."""
        return self._for_stream_only

    def stream(self) -> tuple[Any, dict[str, Any]]:
        """The held connection and the ``getMore`` command its exhaust stream answers."""
        conn, command = self._conn, self._stream_command
        if conn is None or command is None:
            raise RuntimeError("this cursor holds no exhaust stream")
        return conn, command

    def connection_from(self, pool: object) -> Any:
        """The held connection when it belongs to ``pool``, else ``None``."""
        return self._conn if self._pool is pool and pool is not None else None

    def holds(self, conn: object) -> bool:
        """Whether ``conn`` is the held connection (the executor must not check it in)."""
        return self._conn is not None and self._conn is conn

    def hold(self, pool: Any, conn: Any) -> None:
        """Keep ``conn``, checked out of ``pool``, for the cursor's later commands."""
        if self._conn is not None:
            raise RuntimeError("this cursor already holds a connection")
        self._pool = pool
        self._conn = conn
        self._loop = running_loop()
        pool.pin(conn, "cursor")

    def hold_stream(self, pool: Any, conn: Any, command: dict[str, Any]) -> None:
        """Keep ``conn``, whose reply to ``command`` (a ``getMore`` with ``exhaustAllowed``) said more replies
        follow, until the stream ends; a connection already held (load balanced) stays held beyond it."""
        if self._conn is None:
            self.hold(pool, conn)
            self._for_stream_only = True
        elif self._conn is not conn:
            raise RuntimeError("this cursor already holds another connection")
        self._stream_command = command

    def stream_ended(self) -> None:
        """The stream's last reply was read (or the stream broke): a connection held for it alone goes back to
        its pool (closed there if broken); a load balancer's stays with the cursor."""
        self._stream_command = None
        if self._for_stream_only:
            self.release()

    def release(self) -> None:
        """Check the held connection back in (a broken one, or one with unread replies, is closed by the
        pool). Never suspends."""
        pool, conn = self._pool, self._conn
        self._pool = self._conn = self._loop = None
        self._stream_command = None
        self._for_stream_only = False
        if conn is not None:
            pool.check_in(conn)

    def discard(self, reason: str) -> None:
        """Close the held connection (its server cursor may still be open on it) and check it in."""
        conn = self._conn
        if conn is not None:
            conn.close(reason)
        self.release()

    def release_soon(self) -> None:
        """:meth:`release` from a finalizer, which may run in the middle of the pool's own bookkeeping or in
        another thread: the connection, whose server cursor may still be open, is closed, then checked in on
        its event loop's next turn. Nothing is awaited."""
        pool, conn, loop = self._pool, self._conn, self._loop
        self._pool = self._conn = self._loop = None
        self._stream_command = None
        self._for_stream_only = False
        if conn is None or loop is None:
            return
        conn.close("its cursor was dropped while still open")
        try:
            loop.call_soon_threadsafe(pool.check_in, conn)
        except RuntimeError:  # the loop is closed: so is the pool
            pass
