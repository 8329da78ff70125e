"""The awaitable a connection's task waits on for its next reply.

asyncio's ``Task`` accepts any object that speaks the ``Future`` protocol (``_asyncio_future_blocking``,
``get_loop``, ``add_done_callback``, ``result``, ``cancel``). An ``asyncio.Future`` wakes its task through
``call_soon``, so a task awaiting a reply resumes only on the loop's next turn: on asyncio's own loop that is
one more ``select()`` system call and one more pass of the loop's Python code for every round trip, a large
part of what a single operation costs the client.

A ``ReplyWaiter`` differs in one place only. When the protocol hands it a parsed reply from the transport's
read callback, which the loop runs outside any task, the waiting task resumes at once, in that callback, on
the same turn (``deliver``). Everything else behaves as a ``Future`` does: ``set_result`` and
``set_exception`` from other places (a time-out, a lost connection) and ``cancel`` wake the task through
``call_soon``, and a reply delivered while some task is running (a test feeding the protocol, or a message
taken from the buffer by ``wait_message`` itself) is scheduled too, since a task cannot step inside another.

The protocol calls ``deliver`` as the last thing it does for a message, so whatever the resumed task does on
the connection (send the next command, wait for the next reply, close it) finds the protocol consistent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from mongio.errors import InvalidOperation

__all__ = ["ReplyWaiter"]

T = TypeVar("T")

_current_task = asyncio.current_task

_PENDING = 0
_FINISHED = 1
_CANCELLED = 2


class ReplyWaiter(Generic[T]):
    """A one-shot future for one reply; one task awaits it (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_asyncio_future_blocking",
        "_callback",
        "_cancel_message",
        "_context",
        "_exception",
        "_loop",
        "_result",
        "_state",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._state = _PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._callback: Callable[[Any], object] | None = None
        self._context: contextvars.Context | None = None
        self._cancel_message: Any = None
        # Read and written by asyncio's Task: True while a task is suspended on this object.
        self._asyncio_future_blocking = False

    # -- the Future protocol that asyncio's Task and helpers use ------------------------------------------

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> T:
        if self._state == _FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result  # type: ignore[no-any-return]
        if self._state == _CANCELLED:
            raise asyncio.CancelledError(self._cancel_message)
        raise asyncio.InvalidStateError("the reply has not arrived yet")

    def exception(self) -> BaseException | None:
        if self._state == _CANCELLED:
            raise asyncio.CancelledError(self._cancel_message)
        if self._state == _PENDING:
            raise asyncio.InvalidStateError("the reply has not arrived yet")
        return self._exception

    def add_done_callback(
        self, callback: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        if self._state != _PENDING:
            self._loop.call_soon(callback, self, context=context)
            return
        if self._callback is not None:
            # Only the one task that awaits it registers here; a second party would need a real Future.
            raise InvalidOperation("a reply waiter has one task waiting on it; wrap it to await it twice")
        self._callback = callback
        self._context = context

    def remove_done_callback(self, callback: Callable[[Any], object]) -> int:
        if self._callback is not None and self._callback == callback:
            self._callback = self._context = None
            return 1
        return 0

    def cancel(self, msg: Any | None = None) -> bool:
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        self._schedule_callback()
        return True

    def set_result(self, result: T) -> None:
        """Finish with ``result``; the waiting task resumes on the loop's next turn, as with a Future."""
        self._finish(result, None)
        self._schedule_callback()

    def set_exception(self, exception: BaseException) -> None:
        """Fail with ``exception``; the waiting task resumes on the loop's next turn, as with a Future."""
        self._finish(None, exception)
        self._schedule_callback()

    def __await__(self) -> Generator[ReplyWaiter[T], None, T]:
        if self._state == _PENDING:
            self._asyncio_future_blocking = True
            yield self  # the task registers its wake-up with add_done_callback
            # The task resumes here only when result() succeeded (an error or a cancellation is thrown in at
            # the yield instead); anything else driving the await this far gets what result() says.
            if self._state == _FINISHED and self._exception is None:
                return self._result  # type: ignore[no-any-return]
        return self.result()

    __iter__ = __await__

    # -- used by the protocol ---------------------------------------------------------------------------------

    def deliver(self, result: T | None, exception: BaseException | None = None) -> None:
        """Finish with the parsed reply (or the parser's error) and resume the waiting task now if no task is
        running (the transport's read callback), else on the loop's next turn."""
        self._finish(result, exception)
        callback = self._callback
        if callback is None:
            return
        if _current_task(self._loop) is not None:
            self._schedule_callback()
            return
        context = self._context
        self._callback = self._context = None
        if context is None:
            callback(self)
        else:
            context.run(callback, self)

    # -- internals --------------------------------------------------------------------------------------------

    def _finish(self, result: T | None, exception: BaseException | None) -> None:
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("the reply waiter is already done")
        self._result = result
        self._exception = exception
        self._state = _FINISHED

    def _schedule_callback(self) -> None:
        callback = self._callback
        if callback is not None:
            context = self._context
            self._callback = self._context = None
            self._loop.call_soon(callback, self, context=context)
