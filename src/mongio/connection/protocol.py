"""The asyncio protocol under each connection: it frames messages in its own buffer and hands each complete
message to the one task waiting for it.

The transport reads straight into the protocol's buffer (``get_buffer``/``buffer_updated``); when a message is
complete its parser runs right there, on a view of that buffer, and the waiting task gets the parsed result
through a ``ReplyWaiter``, which resumes it within the same read callback. So a reply costs no task, no
intermediate ``bytes``, no copy beyond what decoding makes and no extra turn of the event loop.

A message that arrives while nobody waits (the next reply of an exhaust stream, which the server sends without
being asked) stays where it is in the buffer, and reading pauses (``transport.pause_reading()``) until a task
takes it: a server streaming ahead of its consumer fills the socket's buffers and then waits, instead of
filling the client's memory. Reading resumes once the held message is taken.

Memory follows the bytes that arrived, never what a header claims: a length outside ``HEADER_SIZE`` to
``max_message_size`` aborts the connection with ``ProtocolError`` as soon as the header is in, and the buffer
grows for a longer message only as its bytes fill it (doubling, up to the message's length).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from mongio.bson._compiled import load_speedups
from mongio.connection.reply_waiter import ReplyWaiter
from mongio.errors import AutoReconnect, ConnectionFailure, InvalidOperation, NetworkTimeout, ProtocolError
from mongio.loop_runtime.bound import loop_gone
from mongio.loop_runtime.sockets import close_transport_socket, forget_connection, record_connection
from mongio.wire.header import DEFAULT_MAX_MESSAGE_SIZE, HEADER_SIZE

__all__ = ["MessageProtocol"]

T = TypeVar("T")

_INT32 = struct.Struct("<i")
# Big enough for the usual small reply (a hello, a write's acknowledgement) in one read; a larger message
# doubles it each time what arrived of it fills it, up to the message's length. Small, since every connection
# has one: a client holds at least three (its monitor's, its RTT task's, one pooled).
_INITIAL_BUFFER_SIZE = 4 * 1024
# A buffer grown for a large reply is given back once it is empty again, so idle pooled connections stay small.
_KEEP_BUFFER_UP_TO = 1024 * 1024
# What a growing buffer is extended with, a step at a time (see MessageProtocol._grow_buffer).
_ZEROS = memoryview(bytes(1024 * 1024))

# The compiled framing and ReplyWaiter (_speedups.c), or None: then _FramingInPython does the same work.
_compiled = load_speedups("mongio.connection._speedups")
if _compiled is not None:
    _compiled.configure(
        asyncio.current_task,
        asyncio.InvalidStateError,
        asyncio.CancelledError,
        InvalidOperation,
        _INITIAL_BUFFER_SIZE,
        _KEEP_BUFFER_UP_TO,
    )


class _FramingInPython:
    """The framing steps run once per reply, in Python: the reference for the compiled ``Framing`` of
    ``_speedups.c``, which ``MessageProtocol`` builds on when the extension is there. Both keep their state in
    the same attributes and leave every rare step to ``MessageProtocol``'s methods (``_replace_buffer``,
    ``_hold``, ``_bad_length``, ``_already_waiting``, ``_take_held``, ``lost_exception``, ``_time_out``)."""

    loop: asyncio.AbstractEventLoop
    max_message_size: int
    _buffer: bytearray
    _view: memoryview
    _capacity: int
    _start: int
    _end: int
    _needed: int
    _held: int
    _waiter: ReplyWaiter[Any] | None
    _parser: Callable[[memoryview], Any] | None
    _timer: asyncio.TimerHandle | None
    _lost_reason: str | None

    if TYPE_CHECKING:  # MessageProtocol's, declared here for the methods below

        def _replace_buffer(self, new: bytearray, start: int, end: int) -> None: ...
        def _grow_buffer(self, size: int) -> None: ...
        def _hold(self, length: int) -> None: ...
        def _bad_length(self, length: int) -> None: ...
        def _already_waiting(self) -> InvalidOperation: ...
        def _take_held(self, future: ReplyWaiter[T], parser: Callable[[memoryview], T]) -> None: ...
        def lost_exception(self) -> ConnectionFailure: ...
        def _time_out(self, future: ReplyWaiter[Any], timeout: float) -> None: ...

    def get_buffer(self, sizehint: int) -> memoryview:
        start, end = self._start, self._end
        if start == end:
            self._start = self._end = 0
            if self._capacity > _KEEP_BUFFER_UP_TO:
                self._replace_buffer(bytearray(_INITIAL_BUFFER_SIZE), 0, 0)
            return self._view
        capacity = self._capacity
        if start + self._needed > capacity:
            # The message being received does not fit where it starts, and it must end up in one piece to be
            # parsed in place: move what arrived of it to the front; once that fills the buffer, double the
            # buffer, up to the message's length. The buffer so grows with the bytes that arrived, never
            # ahead of them to what the header claims: whatever length a header forges, the buffer is at most
            # twice the bytes sent, and a real message's bytes are copied about once on average.
            if start:
                self._buffer[0 : end - start] = self._buffer[start:end]  # same-size: allowed while exported
                self._start, self._end = 0, end - start
            elif end == capacity:
                self._grow_buffer(min(self._needed, 2 * capacity))
        elif end == capacity:
            # Only with a held message: a TLS layer may still hand over what it had decrypted before reading
            # paused, and the buffer must have room for it.
            self._replace_buffer(bytearray(2 * capacity), start, end)
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        # While a message is held (a TLS layer may still hand over data), the loop finds it again at the
        # buffer's start, still without a waiter, and holds it anew.
        while self._lost_reason is None:
            start = self._start
            available = self._end - start
            if available < HEADER_SIZE:
                self._needed = HEADER_SIZE
                return
            length = _INT32.unpack_from(self._buffer, start)[0]
            if length < HEADER_SIZE or length > self.max_message_size:
                self._bad_length(length)
                return
            if available < length:
                self._needed = length
                return
            waiter = self._waiter
            if waiter is None or waiter.done():
                self._hold(length)
                return
            self._start = start + length
            if self._start == self._end:
                self._start = self._end = 0  # the bytes stay valid until the next get_buffer
            # The waiter gets the message parsed in place (here rather than in a method of its own: this runs
            # once per reply). Delivering is the last step: the waiting task may resume inside deliver() and
            # use this protocol again (send, wait for the next message, abort), so the state is settled first
            # and the loop reads it afresh.
            parser = self._parser
            self._waiter = self._parser = None
            timer = self._timer
            if timer is not None:
                timer.cancel()
                self._timer = None
            try:
                result = parser(self._view[start : start + length])  # type: ignore[misc]
            except Exception as exc:
                waiter.deliver(None, exc)
            else:
                waiter.deliver(result)

    def wait_message(
        self, parser: Callable[[memoryview], T], deadline: float | None = None
    ) -> ReplyWaiter[T]:
        """An awaitable for the next complete message, parsed by ``parser`` while the bytes are still in the buffer.

        ``deadline`` (in ``loop.time()`` terms) fails the future with ``NetworkTimeout`` when it passes; the
        caller then has to abort the connection. An error raised by ``parser`` becomes the future's exception.
        """
        if self._waiter is not None and not self._waiter.done():
            raise self._already_waiting()
        future: ReplyWaiter[T] = ReplyWaiter(self.loop)
        if self._held:
            self._take_held(future, parser)
            return future
        if self._lost_reason is not None:
            future.set_exception(self.lost_exception())
            return future
        self._waiter = future
        self._parser = parser
        if deadline is not None:
            self._timer = self.loop.call_at(deadline, self._time_out, future, deadline - self.loop.time())
        return future


# A block, not a conditional expression: type checkers take the first branch as the class's base.
if TYPE_CHECKING or _compiled is None:  # noqa: SIM108
    _Framing = _FramingInPython
else:
    _Framing = _compiled.Framing


class MessageProtocol(_Framing, asyncio.BufferedProtocol):
    """Frames MongoDB wire messages for one connection and delivers them to a single waiter.

    ``address`` only names the peer in error messages. ``max_message_size`` bounds what the peer may send;
    set it from the handshake's ``maxMessageSizeBytes``. It bounds an OP_COMPRESSED message as it is on the
    wire, with no allowance: a server never sends one longer than its limit (it sends the message
    uncompressed instead when compressing it would not fit).
    """

    def __init__(
        self,
        address: str,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.address = address
        self.max_message_size = max_message_size
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop() if loop is None else loop
        self._buffer = bytearray(_INITIAL_BUFFER_SIZE)
        self._view = memoryview(self._buffer)
        self._capacity = _INITIAL_BUFFER_SIZE  # len(self._buffer), kept: get_buffer runs once per read
        self._start = 0  # first unconsumed byte
        self._end = 0  # end of received data
        self._needed = HEADER_SIZE  # total length of the message being received, once its header is in
        self._waiter: ReplyWaiter[Any] | None = None
        self._parser: Callable[[memoryview], Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        # The length of a complete message kept at the buffer's start because nobody waited for it; reading is
        # paused while one is held.
        self._held = 0
        self._reading_paused = False
        self._lost_reason: str | None = None
        self.lost = False
        """True once the connection ended (peer closed it, a network error, a protocol error, or ``abort``).
        Set by the protocol alone; a plain attribute, since every exchange reads it."""
        self._lost_error: BaseException | None = None
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._connection_lost = False
        self._closed_waiter: asyncio.Future[None] | None = None

    # -- state --------------------------------------------------------------------------------------------

    @property
    def lost_reason(self) -> str | None:
        return self._lost_reason

    def hung_up_while_idle(self, idle_since: float) -> bool:
        """Whether the server is found to have ended the connection while it sat idle since ``idle_since``
        (``time.monotonic()``), asked before the connection is used again. On asyncio the transport reports
        a hang-up the moment it arrives (``connection_lost``), so ``lost`` already knows; a pull-based
        protocol, which reads nothing while idle, looks at its socket instead."""
        return self.lost

    @property
    def writing_paused(self) -> bool:
        """True while the transport holds more unsent data than its high-water mark (``drain()`` waits)."""
        return self._write_paused

    def lost_exception(self) -> ConnectionFailure:
        """A fresh error describing why the connection ended, for a caller that tries to use it."""
        error = self._lost_error
        if isinstance(error, ConnectionFailure):
            return type(error)(str(error))
        # "host:port: " first, as PyMongo's network errors start, so that code matching it still matches.
        lost = AutoReconnect(f"{self.address}: connection closed: {self._lost_reason}")
        lost.__cause__ = error  # e.g. the TLS alert that ended it, which decides the error's labels
        return lost

    # -- asyncio.BufferedProtocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Duck-typed: uvloop's transports have the asyncio.Transport methods without deriving from it.
        self.transport = cast(asyncio.Transport, transport)
        record_connection(self)

    def _replace_buffer(self, new: bytearray, start: int, end: int) -> None:
        new[0 : end - start] = self._view[start:end]
        self._buffer = new
        self._view = memoryview(new)
        self._capacity = len(new)
        self._start, self._end = 0, end - start

    def _grow_buffer(self, size: int) -> None:
        """Make the buffer, whose bytes up to ``_end`` are one message's start, ``size`` bytes long. In place
        when nothing but the protocol's own view holds the buffer (the usual case): the bytearray is extended
        by at most a mebibyte at a time, and for a large buffer the allocator moves its pages instead of
        copying them, so the peak is the new size rather than the old and the new together. Otherwise (a
        parsed message still holds a view of it), a new buffer with those bytes copied in."""
        buffer = self._buffer
        try:
            self._view.release()
        except BufferError:  # a slice of the view is still held
            self._replace_buffer(bytearray(size), self._start, self._end)
            return
        try:
            while len(buffer) < size:
                buffer += _ZEROS[: size - len(buffer)]
        except BufferError:  # another view of the buffer is still held
            self._view = memoryview(buffer)
            self._replace_buffer(bytearray(size), self._start, self._end)
            return
        self._view = memoryview(buffer)
        self._capacity = size

    def _bad_length(self, length: int) -> None:
        self.abort(
            ProtocolError(
                f"{self.address} sent a message of length {length}; the limits are {HEADER_SIZE} to "
                f"{self.max_message_size} bytes"
            )
        )

    def _already_waiting(self) -> InvalidOperation:
        return InvalidOperation(f"a task is already waiting for a message from {self.address}")

    def _hold(self, length: int) -> None:
        """Keep the complete message at the buffer's start for the next ``wait_message`` and stop reading."""
        self._held = self._needed = length
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._mark_lost("the server closed the connection", None)
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        reason = (
            f"{type(exc).__name__}: {exc}" if exc is not None else "the server closed the connection"
        )
        self._mark_lost(reason, exc)
        self._connection_lost = True
        forget_connection(self)
        if self._closed_waiter is not None and not self._closed_waiter.done():
            self._closed_waiter.set_result(None)
        drain = self._drain_waiter
        if drain is not None and not drain.done():
            drain.set_exception(self.lost_exception())
        self._drain_waiter = None

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        drain = self._drain_waiter
        if drain is not None and not drain.done():
            drain.set_result(None)
        self._drain_waiter = None

    # -- used by Connection -----------------------------------------------------------------------------

    def _take_held(self, future: ReplyWaiter[T], parser: Callable[[memoryview], T]) -> None:
        """Parse the held message into ``future``, then frame what follows it: a further complete message is
        held in turn; otherwise reading resumes."""
        start, length = self._start, self._held
        self._held = 0
        self._start = start + length
        try:
            future.set_result(parser(self._view[start : start + length]))
        except Exception as exc:
            future.set_exception(exc)
        if self._start == self._end:
            self._start = self._end = 0
        self.buffer_updated(0)
        if not self._held and self._reading_paused:
            self._reading_paused = False
            if self.transport is not None and self._lost_reason is None:
                self.transport.resume_reading()

    def _time_out(self, future: ReplyWaiter[Any], timeout: float) -> None:
        self._timer = None
        if future is self._waiter:
            self._waiter = self._parser = None
        if not future.done():
            future.set_exception(
                NetworkTimeout(
                    f"{self.address}: timed out after {max(timeout, 0.0):.3f}s waiting for a reply"
                )
            )

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark (rarely: only after large
        or many unacknowledged writes). Cancellation or a timeout here leaves the caller to abort."""
        if not self._write_paused:
            return
        if self._lost_reason is not None:
            raise self.lost_exception()
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = self.loop.create_future()
        await self._drain_waiter

    async def wait_closed(self) -> None:
        """Wait until the transport has really closed (``connection_lost`` ran)."""
        if self._connection_lost:
            return
        if self._closed_waiter is None:
            self._closed_waiter = self.loop.create_future()
        await asyncio.shield(self._closed_waiter)

    def abort(self, error: BaseException | None = None) -> None:
        """End the connection now, dropping unsent data; a waiting task gets ``error`` (or ``AutoReconnect``)."""
        self._end_connection(error, flush=False)

    def close(self) -> None:
        """End the connection after unsent data is flushed; only for a connection with nothing in flight."""
        self._end_connection(None, flush=True)

    def _end_connection(self, error: BaseException | None, *, flush: bool) -> None:
        if loop_gone(self.loop):
            # Closed without anyone letting go of it yet (see loop_gone's module): nothing may be scheduled
            # on the loop, a waiter's future included.
            self.let_go()
            return
        self._mark_lost(str(error) if error is not None else "closed by the driver", error)
        transport = self.transport
        if transport is None:
            return
        if flush:
            transport.close()
        else:
            transport.abort()

    def let_go(self) -> None:
        """End the connection without its event loop, which will never run again here (the loop runtime
        calls it; see :class:`~mongio.loop_runtime.bound.LoopBound`): a waiter of that loop is dropped rather
        than failed, the socket is closed directly, and the transport is let go of, so a later ``close`` or
        ``abort`` (a pool letting go, a coroutine of the loop finalized) touches nothing of the loop."""
        self._lost_reason = self._lost_reason or "the event loop of the connection will never run again"
        self.lost = True
        self._waiter = self._parser = self._timer = self._drain_waiter = self._closed_waiter = None
        self._connection_lost = True
        transport, self.transport = self.transport, None
        if transport is not None:
            close_transport_socket(transport)

    def _mark_lost(self, reason: str, error: BaseException | None) -> None:
        if self._lost_reason is not None:
            return
        self._lost_reason = reason
        self.lost = True
        self._lost_error = error
        self._cancel_timer()
        waiter = self._waiter
        self._waiter = self._parser = None
        if waiter is not None and not waiter.done():
            if isinstance(error, ProtocolError):
                waiter.set_exception(error)
            else:
                waiter.set_exception(self.lost_exception())
