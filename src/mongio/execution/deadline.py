"""The client-side operation timeout (CSOT): one deadline per operation, carried in a context variable.

``timeoutMS`` (from the client, database, collection, session or a ``timeout()`` block) becomes an absolute
deadline on the :func:`time.monotonic` clock, which is also the clock of asyncio's default event loop, so the
executor can hand it straight to :func:`asyncio.timeout_at`. Because the deadline lives in a
:class:`contextvars.ContextVar`, it follows the caller into every task started inside the block and never
leaks out of it.

Three states are told apart: no deadline (CSOT is off: the legacy timeouts apply and a retryable operation is
retried once), an infinite deadline (``timeoutMS=0``: CSOT is on, so retries are bounded only by errors), and
a finite one.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Literal

from mongio.context_vars import reset
from mongio.errors import OperationTimeoutError, operation_timeout_error

__all__ = [
    "MaxTimePolicy",
    "OperationTimeoutError",
    "TimeoutMode",
    "checkout_timeout",
    "connect_timeout",
    "current_deadline",
    "deadline_from_timeout_ms",
    "establishing_until",
    "establishment_deadline",
    "is_enabled",
    "level_timeout",
    "max_time_ms_for",
    "max_time_policy",
    "raise_if_expired",
    "remaining",
    "selection_deadline",
    "sending_max_time",
    "timeout",
    "timeout_error",
    "timeout_in_force",
    "timeout_seconds",
    "within",
]

Clock = Callable[[], float]

# None: CSOT is off. math.inf: on, without a bound. Otherwise a time.monotonic() deadline.
_DEADLINE: ContextVar[float | None] = ContextVar("mongio_deadline", default=None)

# Under CSOT, the end of the operation's computedServerSelectionTimeout while it checks a connection out.
_ESTABLISH_END: ContextVar[float | None] = ContextVar("mongio_establish_end", default=None)

MaxTimePolicy = Literal["send", "omit", "cap"]
"""How the executor puts ``maxTimeMS`` on a command under CSOT: ``"send"`` the time left minus the RTT
(replacing a deprecated ``maxTimeMS`` option), ``"omit"`` none (``getMore``, tailable cursors, a cursor's first
command in ``ITERATION`` mode), ``"cap"`` only lowers the ``maxTimeMS`` the command carries (an awaitData
``getMore``'s ``maxAwaitTimeMS``) to the time left minus the RTT."""

_MAX_TIME: ContextVar[MaxTimePolicy] = ContextVar("mongio_max_time_policy", default="send")


class TimeoutMode(enum.StrEnum):
    """How ``timeoutMS`` applies to a cursor (the ``timeout_mode`` argument of ``find``, ``aggregate``...).

    ``CURSOR_LIFETIME`` (the default of non-tailable cursors): the first command and every ``getMore`` share
    one deadline, counted from the first command. ``ITERATION`` (the only mode of tailable cursors): the
    first command and then each ``next()``/``try_next()`` call get the whole timeout afresh.
    """

    CURSOR_LIFETIME = "cursorLifetime"
    ITERATION = "iteration"


def timeout_in_force(
    level: float | None,
    session_timeout_ms: float | None,
    client_timeout: float | None,
    *,
    deadline: float | None = None,
    now: float | None = None,
) -> float | None:
    """The one rule for the timeout an operation gets, in seconds (``math.inf``: CSOT on without a bound;
    ``None``: CSOT off): what is left until ``deadline`` (an enclosing ``timeout()`` block's, when the caller
    passes it), else the database's or collection's ``timeoutMS`` (``level``, in seconds), else the session's
    ``default_timeout_ms``, else the client's ``timeoutMS`` (``client_timeout``, in seconds)."""
    if deadline is not None:
        if math.isinf(deadline):
            return math.inf
        return max(deadline - (time.monotonic() if now is None else now), 0.0)
    if level is not None:
        return level
    if session_timeout_ms is not None:
        return timeout_seconds(session_timeout_ms)
    return client_timeout


def timeout_seconds(timeout_ms: int | float | None) -> float | None:
    """``timeoutMS`` as the seconds :class:`timeout` takes: ``None`` unset, ``math.inf`` for 0 (no bound)."""
    if timeout_ms is None:
        return None
    if timeout_ms < 0:
        raise ValueError(f"timeoutMS must be non-negative, not {timeout_ms}")
    return math.inf if timeout_ms == 0 else timeout_ms / 1000.0


def timeout_error(cause: BaseException | None = None, *, detail: str = "") -> OperationTimeoutError:
    """The timeout error to raise, wrapping ``cause`` (whose text it includes) when there is one."""
    if cause is not None:
        message = f"operation timed out: {cause}"
    else:
        message = f"operation timed out{': ' + detail if detail else ''}"
    error = operation_timeout_error(message, cause)
    if cause is not None:
        error.__cause__ = cause
    return error


def deadline_from_timeout_ms(timeout_ms: int | float | None, *, now: float | None = None) -> float | None:
    """The deadline a ``timeoutMS`` value gives: ``None`` when unset, infinite for 0."""
    if timeout_ms is None:
        return None
    if timeout_ms < 0:
        raise ValueError(f"timeoutMS must be non-negative, not {timeout_ms}")
    if timeout_ms == 0:
        return math.inf
    return (time.monotonic() if now is None else now) + timeout_ms / 1000.0


class timeout:
    """Bound everything inside the block by ``seconds``: ``with timeout(2.5):`` or ``async with timeout(2.5):``.

    Blocks nest: an inner block can shorten the time left but never extend it, so a library function that
    asks for 10 seconds inside a caller's 1-second block still ends within the caller's second. ``None``
    adds no bound (the enclosing one, if any, still applies); ``math.inf`` turns CSOT on without a bound
    (the spec's ``timeoutMS=0``). The clock is read on entering the block, so the object can be made ahead
    of time and entered more than once.
    """

    __slots__ = ("_clock", "_seconds", "_tokens")

    def __init__(self, seconds: float | None, *, clock: Clock = time.monotonic) -> None:
        if seconds is not None and (math.isnan(seconds) or seconds < 0):
            raise ValueError(f"timeout must be a non-negative number of seconds or None, not {seconds}")
        self._seconds = seconds
        self._clock = clock
        self._tokens: list[Token[float | None]] = []

    def _enter(self) -> None:
        outer = _DEADLINE.get()
        if self._seconds is None:
            deadline = outer
        elif math.isinf(self._seconds):
            deadline = math.inf if outer is None else outer
        else:
            own = self._clock() + self._seconds
            deadline = own if outer is None else min(outer, own)
        self._tokens.append(_DEADLINE.set(deadline))

    def _exit(self) -> None:
        reset(_DEADLINE, self._tokens.pop())

    def __enter__(self) -> timeout:
        self._enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit()

    async def __aenter__(self) -> timeout:
        self._enter()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit()


def level_timeout(seconds: float | None) -> float | None:
    """A database's or collection's ``timeout`` argument (seconds; 0 for no limit) as the executor takes it:
    ``None`` when not given, ``math.inf`` for 0."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, not {seconds!r}")
    return math.inf if seconds == 0 else float(seconds)


@contextmanager
def within(deadline: float | None) -> Iterator[None]:
    """Run the block under the absolute ``deadline`` (a cursor's lifetime), or the enclosing one if sooner;
    ``None`` leaves the deadline as it is."""
    if deadline is None:
        yield
        return
    outer = _DEADLINE.get()
    token = _DEADLINE.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        reset(_DEADLINE, token)


@contextmanager
def sending_max_time(policy: MaxTimePolicy) -> Iterator[None]:
    """Run the block with ``policy`` for the ``maxTimeMS`` of its commands (see :data:`MaxTimePolicy`)."""
    token = _MAX_TIME.set(policy)
    try:
        yield
    finally:
        reset(_MAX_TIME, token)


@contextmanager
def establishing_until(selection_end: float) -> Iterator[None]:
    """Around a connection checkout under CSOT: a connection opened for it must be established by
    ``selection_end`` (see :func:`establishment_deadline`). Does nothing without CSOT."""
    if _DEADLINE.get() is None:
        yield
        return
    token = _ESTABLISH_END.set(selection_end)
    try:
        yield
    finally:
        reset(_ESTABLISH_END, token)


def establishment_deadline() -> float | None:
    """The deadline for opening a connection for the operation in progress: under CSOT the end of its
    computedServerSelectionTimeout (during checkout) or its own deadline; ``None`` without CSOT or a bound."""
    end = _ESTABLISH_END.get()
    if end is None:
        end = _DEADLINE.get()
    return None if end is None or math.isinf(end) else end


def max_time_policy() -> MaxTimePolicy:
    """The :data:`MaxTimePolicy` in force (``"send"`` unless a cursor said otherwise)."""
    return _MAX_TIME.get()


current_deadline: Callable[[], float | None] = _DEADLINE.get
"""``current_deadline()``: the deadline in force (a ``time.monotonic()`` value, ``math.inf``), or ``None`` when
CSOT is off. The context variable's own ``get``, so every operation asks it without a Python call."""


def is_enabled() -> bool:
    """Whether a CSOT deadline (possibly infinite) applies to the current operation."""
    return _DEADLINE.get() is not None


def remaining(*, now: float | None = None) -> float | None:
    """Seconds left before the deadline (negative once it has passed), ``math.inf`` without bound, or ``None``."""
    deadline = _DEADLINE.get()
    if deadline is None or math.isinf(deadline):
        return deadline
    return deadline - (time.monotonic() if now is None else now)


def raise_if_expired(*, now: float | None = None, cause: BaseException | None = None) -> None:
    """Raise :class:`OperationTimeoutError` when the deadline has passed."""
    left = remaining(now=now)
    if left is not None and left <= 0:
        raise timeout_error(cause, detail=f"the deadline passed {-left * 1000:.0f} ms ago")


def max_time_ms_for(min_rtt: float, *, now: float | None = None) -> int | None:
    """The ``maxTimeMS`` to put on a command for a server whose minimum round-trip time is ``min_rtt`` seconds.

    ``None`` when no finite deadline applies (send no ``maxTimeMS``). Raises :class:`OperationTimeoutError`
    without anything being sent when the time left is not more than the RTT, or would round to zero
    milliseconds (``maxTimeMS: 0`` would mean "no limit" to the server).
    """
    left = remaining(now=now)
    if left is None or math.isinf(left):
        return None
    budget = left - min_rtt
    if budget <= 0:
        raise timeout_error(
            detail=f"{max(left, 0.0) * 1000:.0f} ms left is not more than the server's minimum round-trip time "
            f"of {min_rtt * 1000:.0f} ms"
        )
    milliseconds = math.floor(budget * 1000)
    if milliseconds < 1:
        raise timeout_error(
            detail=f"less than 1 ms left after the server's round-trip time of {min_rtt * 1000:.0f} ms"
        )
    return milliseconds


def selection_deadline(server_selection_timeout: float, *, now: float | None = None) -> float:
    """The deadline for server selection: ``serverSelectionTimeoutMS`` from now, or the operation's deadline
    when that comes first. Under CSOT the same deadline then bounds the connection checkout."""
    start = time.monotonic() if now is None else now
    own = start + server_selection_timeout
    deadline = _DEADLINE.get()
    return own if deadline is None else min(own, deadline)


def checkout_timeout(
    selection_end: float, wait_queue_timeout: float | None, *, now: float | None = None
) -> float | None:
    """Seconds a connection checkout may wait: what is left of ``selection_end`` under CSOT (which
    ignores ``waitQueueTimeoutMS``), else ``wait_queue_timeout`` (``None``: no bound)."""
    if _DEADLINE.get() is None:
        return wait_queue_timeout
    return max(0.0, selection_end - (time.monotonic() if now is None else now))


def connect_timeout(
    selection_end: float, configured: float | None, *, now: float | None = None
) -> float | None:
    """Seconds to establish a new connection for an operation: ``configured`` (``connectTimeoutMS``;
    ``None``: no bound), cut to what is left of ``selection_end`` under CSOT."""
    if _DEADLINE.get() is None:
        return configured
    left = max(0.0, selection_end - (time.monotonic() if now is None else now))
    return left if configured is None else min(configured, left)
