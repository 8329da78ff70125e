"""Server sessions and the client's pool of them.

A server session is an ``lsid`` the driver makes up (a random UUID as BSON binary subtype 4) plus what the
driver must remember about it: when it was last sent (the server forgets a session after
``logicalSessionTimeoutMinutes`` of disuse), its last transaction number (which must keep growing while the
id is reused), and whether a network error left it in an unknown state ("dirty").

The pool is LIFO so that the most recently used, least likely to expire, sessions are reused first. It is
pure: time comes from a clock the client injects (``time.monotonic`` by default), and ending the pooled
sessions on close is returned as ``endSessions`` commands for the caller to send.

A forked child process must not reuse the ids its parent goes on using: every pool is emptied in the child
right after ``os.fork()`` by the loop runtime's fork hook (without ``endSessions``, which would end the parent's sessions too), and sessions
the parent had checked out are not taken back by the child's pool (driver sessions specification).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from mongio.bson.binary import Binary
from mongio.bson.int64 import Int64
from mongio.loop_runtime.fork import renew_in_forked_children

__all__ = ["END_SESSIONS_BATCH_SIZE", "ServerSession", "ServerSessionPool"]

END_SESSIONS_BATCH_SIZE = 10_000
_UUID_SUBTYPE = 4
# A pooled session must have at least this long left before the server would forget it.
_EXPIRY_MARGIN = 60.0


class ServerSession:
    """One server session: its ``lsid`` document, last use, transaction number and dirty flag."""

    __slots__ = ("dirty", "generation", "last_use", "session_id", "txn_number")

    def __init__(self, now: float, *, generation: int = 0, session_uuid: uuid.UUID | None = None) -> None:
        identifier = session_uuid if session_uuid is not None else uuid.uuid4()
        self.session_id: dict[str, Any] = {"id": Binary(identifier.bytes, _UUID_SUBTYPE)}
        self.last_use = now
        self.txn_number = 0
        self.dirty = False
        self.generation = generation

    def mark_used(self, now: float) -> None:
        """Record that the id was just sent to a server."""
        self.last_use = now

    def mark_dirty(self) -> None:
        """A network error happened while the session was in use: never pool it again."""
        self.dirty = True

    def next_txn_number(self) -> Int64:
        """Increment and return the transaction number (for a retryable write or a new transaction)."""
        self.txn_number += 1
        return Int64(self.txn_number)

    def about_to_expire(self, now: float, timeout_minutes: float | None) -> bool:
        """Whether less than a minute is left before the server would consider the session stale."""
        fresh_since = _fresh_since(now, timeout_minutes)
        return fresh_since is not None and self.last_use < fresh_since

    def __repr__(self) -> str:
        return (
            f"ServerSession({self.session_id['id'].hex()}, txn_number={self.txn_number}, dirty={self.dirty})"
        )


class ServerSessionPool:
    """The client's server sessions not in use, most recently returned first.

    ``timeout_minutes`` arguments are the topology's ``logicalSessionTimeoutMinutes`` (``None`` when unknown:
    nothing is then judged to expire). In load-balanced mode a pooled session is always reused on checkout.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sessions: deque[ServerSession] = deque()
        self._generation = 0
        # Server sessions are plain data, shared by the client's event loops, which may run in threads.
        self._lock = threading.Lock()
        renew_in_forked_children(self)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[ServerSession]:
        return iter(self._sessions)

    def acquire(
        self, timeout_minutes: float | None, *, load_balanced: bool = False, now: float | None = None
    ) -> ServerSession:
        """Take the most recently returned session that still has a minute to live, else a new one. ``now`` is
        the pool's clock read by a caller that just did (the pool reads it otherwise)."""
        if now is None:
            now = self._clock()
        fresh_since = None if load_balanced else _fresh_since(now, timeout_minutes)
        with self._lock:
            while self._sessions:
                session = self._sessions.popleft()
                if fresh_since is None or session.last_use >= fresh_since:
                    return session
        return ServerSession(now, generation=self._generation)

    def release(self, session: ServerSession, timeout_minutes: float | None) -> None:
        """Return a session; it is dropped when dirty, about to expire, or from before :meth:`reset`."""
        fresh_since = _fresh_since(self._clock(), timeout_minutes)
        with self._lock:
            if fresh_since is not None:
                # The oldest sessions are at the right end: drop those that are about to expire.
                while self._sessions and self._sessions[-1].last_use < fresh_since:
                    self._sessions.pop()
                if session.last_use < fresh_since:
                    return
            if session.generation != self._generation or session.dirty:
                return
            self._sessions.appendleft(session)

    def renew_after_fork(self) -> None:
        """Forget every pooled session without ending it (in a forked child, which the loop runtime's fork
        hook calls it in); sessions checked out now are not taken back."""
        self._lock = threading.Lock()  # a lock held in the parent at the fork stays held in the child
        self._generation += 1
        self._sessions.clear()

    def end_sessions_commands(self, batch_size: int = END_SESSIONS_BATCH_SIZE) -> list[dict[str, Any]]:
        """Empty the pool and return the ``endSessions`` commands (for ``admin``) that end its sessions,
        at most ``batch_size`` ids each. Errors from those commands are to be ignored."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        with self._lock:
            ids = [session.session_id for session in self._sessions]
            self._sessions.clear()
        return [{"endSessions": ids[start : start + batch_size]} for start in range(0, len(ids), batch_size)]


def _fresh_since(now: float, timeout_minutes: float | None) -> float | None:
    """The last use before which a session is about to expire, ``None`` when nothing expires: the one expiry
    rule, which the pool computes once per call rather than once per session."""
    if timeout_minutes is None:
        return None
    return now - (timeout_minutes * 60.0 - _EXPIRY_MARGIN)

