"""The values connection pool events carry that the pool itself needs: the server address type and the
reasons a connection closes or a check-out fails (the specification's strings).

They live apart from the event classes (:mod:`mongio.events.cmap`, which re-exports them) so that a pool
whose client has no pool listeners never imports those classes.
"""

from __future__ import annotations

__all__ = ["Address", "ConnectionCheckOutFailedReason", "ConnectionClosedReason"]

Address = tuple[str, int | None]
"""``(host, port)``; ``(path, None)`` for a Unix domain socket."""


class ConnectionClosedReason:
    """Why a pooled connection was closed (the values are the specification's strings)."""

    STALE = "stale"
    """The pool was cleared after the connection was made."""

    IDLE = "idle"
    """The connection sat unused in the pool for longer than ``maxIdleTimeMS``."""

    ERROR = "error"
    """The connection failed while being established or used."""

    POOL_CLOSED = "poolClosed"
    """The pool was closed."""


class ConnectionCheckOutFailedReason:
    """Why a check-out failed (the values are the specification's strings)."""

    TIMEOUT = "timeout"
    """No connection became available within the wait queue timeout."""

    POOL_CLOSED = "poolClosed"
    """The pool is closed."""

    CONN_ERROR = "connectionError"
    """A new connection could not be established, or the pool is paused after a clear."""
