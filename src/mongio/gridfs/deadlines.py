"""The client-side operation timeout of GridFS: one deadline for a whole bucket operation, and for the
whole life of a stream, as the CSOT specification asks of GridFS.

A deadline already in force (an enclosing ``mongio.timeout()`` block) is kept; otherwise the database's
``timeoutMS``, an explicit session's default or the client's gives one, taken when the operation or the
stream starts. Reading from or writing to the application's own streams counts against it too.
"""

from __future__ import annotations

import math
import time
from typing import Any

from mongio.execution import deadline

__all__ = ["operation_deadline", "within"]


def _timeout_seconds(database: Any, session: Any) -> float | None:
    level = getattr(database, "_timeout", None)  # the database's own timeoutMS, in seconds, when it has one
    client_ms = database.client.options.timeout_ms
    session_ms = None if session is None else session.options.default_timeout_ms
    return deadline.timeout_in_force(
        None if level is None else float(level), session_ms, deadline.timeout_seconds(client_ms)
    )


def operation_deadline(database: Any, session: Any = None) -> float | None:
    """The absolute ``time.monotonic()`` deadline of an operation starting now (``math.inf``: CSOT on without
    a bound; ``None``: CSOT off)."""
    current = deadline.current_deadline()
    if current is not None:
        return current
    seconds = _timeout_seconds(database, session)
    if seconds is None or math.isinf(seconds):
        return seconds
    return time.monotonic() + seconds


def within(absolute: float | None) -> deadline.timeout:
    """A ``timeout`` block ending at ``absolute`` (as :func:`operation_deadline` gives it)."""
    if absolute is None or math.isinf(absolute):
        return deadline.timeout(absolute)
    return deadline.timeout(max(0.0, absolute - time.monotonic()))
