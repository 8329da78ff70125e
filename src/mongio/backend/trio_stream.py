"""Connections on trio: a stream opened with trio's sockets (TCP, TLS with host name verification, a Unix
socket, a socket connected through the SOCKS5 proxy) under a :class:`StreamProtocol`, the
:class:`~mongio.connection.protocol.MessageProtocol` whose framing (compiled or Python: the same buffer, the
same limits, the same parse in place) is fed by a pull-based reader instead of a transport's callbacks.

Nothing reads unless a task waits for a message: ``wait_message`` sends what the connection wrote since (a
request is written synchronously by :class:`~mongio.connection.connection.Connection` and goes out with the
wait for its reply), then receives straight into the framing's buffer (``recv_into`` on a plain socket; a
TLS stream's decrypted bytes are copied in) until the framing delivers the message. Memory follows the bytes
that arrived exactly as on asyncio. A wait cut short (trio's cancellation, a ``move_on_after``, the deadline)
leaves the framing mid-message; :class:`~mongio.connection.connection.Connection` then closes the connection,
as on asyncio, so no half-read connection is ever used again.

The streams are trio's own rather than anyio's: closing one must be synchronous (a pool discards connections
without awaiting, an interrupted exchange aborts on the spot), which trio's sockets offer and anyio's streams
do not.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from mongio.backend.trio_loop import trio_deadline
from mongio.connection.protocol import MessageProtocol
from mongio.connection.transport import (
    DEFAULT_PORT,
    connect_first_address,
    resolve_stream_addresses,
    tune_socket,
)
from mongio.errors import NetworkTimeout
from mongio.loop_runtime.sockets import forget_connection, forget_socket, record_connection, record_socket
from mongio.wire.header import DEFAULT_MAX_MESSAGE_SIZE

if TYPE_CHECKING:
    from mongio.backend.trio_loop import TrioLoop

__all__ = [
    "ByteStreamReader",
    "ByteStreamWriter",
    "StreamProtocol",
    "connect_stream",
    "open_byte_stream",
    "wrap_byte_stream",
]

T = TypeVar("T")


_STREAM_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)

IDLE_PROBE_AFTER = 0.01
"""How long (seconds) a connection sits idle before :meth:`StreamProtocol.hung_up_while_idle` looks at its
socket: one reused sooner (a busy pool's) costs no system call at check-out, and one idle longer is looked at
for a system call that its idle time dwarfs."""

_HAS_POLL = hasattr(select, "poll")


def _readable_now(sock: socket.socket) -> bool:
    """Whether ``sock`` has something to read (or is hung up, or failed) right now, without waiting: poll()
    where there is one, as select() refuses descriptors past FD_SETSIZE; select() on Windows, which has no
    poll() and no such limit."""
    if _HAS_POLL:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class _PulledReply:
    """What the framing delivers a message to while the reading task pulls it: the outcome, kept."""

    __slots__ = ("_done", "_exception", "_result")

    def __init__(self) -> None:
        self._done = False
        self._result: Any = None
        self._exception: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def deliver(self, result: Any, exception: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            self._result = result
            self._exception = exception

    def set_result(self, result: Any) -> None:
        self.deliver(result)

    def set_exception(self, exception: BaseException) -> None:
        self.deliver(None, exception)

    def outcome(self) -> Any:
        if self._exception is not None:
            raise self._exception
        return self._result


class _StreamTransport:
    """The transport face of a :class:`StreamProtocol`: what ``Connection`` and the protocol call on it."""

    __slots__ = ("_protocol",)

    def __init__(self, protocol: StreamProtocol) -> None:
        self._protocol = protocol

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._protocol.queue(data)

    def close(self) -> None:
        self._protocol.close_socket()

    def abort(self) -> None:
        self._protocol.close_socket()

    def pause_reading(self) -> None:
        pass  # pull-based: nothing is read unless a task waits for a message

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self._protocol.socket_closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._protocol.extra_info(name, default)


class StreamProtocol(MessageProtocol):
    """:class:`MessageProtocol` on a trio stream, read by the waiting task (see the module docstring).

    ``sock`` is the stdlib socket under the stream: closing it ends the stream synchronously, from the run or,
    once the run is over, from anywhere.
    """

    def __init__(
        self,
        address: str,
        loop: TrioLoop,
        stream: trio.abc.Stream,
        sock: socket.socket,
        trio_socket: trio.socket.SocketType,
        *,
        plain: bool,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        super().__init__(address, max_message_size, loop=loop)
        self._stream = stream
        self._sock = sock
        self._trio_socket = trio_socket
        # A plain socket is written and read directly (see _send_plain and _receive_plain); a TLS stream
        # hands decrypted bytes.
        self._plain = plain
        self._unsent: list[bytes | bytearray | memoryview] = []
        self.socket_closed = False
        self.transport = _StreamTransport(self)  # type: ignore[assignment]
        record_connection(self)

    def extra_info(self, name: str, default: Any = None) -> Any:
        """What asyncio's ``transport.get_extra_info`` gives for ``name``: ``"ssl_object"`` is the TLS stream,
        which answers ``getpeercert``, ``version``, ``cipher``, ``get_channel_binding`` as ``SSLObject`` does;
        ``"socket"`` and ``"peername"`` come from the socket."""
        if name == "ssl_object":
            return self._stream if isinstance(self._stream, trio.SSLStream) else default
        if name == "socket":
            return self._sock
        if name == "peername":
            return self._sock.getpeername()
        return default

    def hung_up_while_idle(self, idle_since: float) -> bool:
        """Whether the server ended the connection while it sat idle: nothing reads an idle trio stream, so a
        hang-up waits unread in the socket, which is looked at without blocking (once the connection was idle
        ``IDLE_PROBE_AFTER``). An idle socket with anything to read is done with: the server hung up (end of
        file, a reset, TLS's close_notify) or sent bytes that no request asked for. The connection is then
        closed, with the reason."""
        if self.lost:
            return True
        if time.monotonic() - idle_since < IDLE_PROBE_AFTER:
            return False
        try:
            readable = _readable_now(self._sock)
        except (OSError, ValueError) as exc:  # ValueError: the socket has no descriptor any more
            self._mark_lost(f"{type(exc).__name__}: {exc}", exc)
            self.close_socket()
            return True
        if not readable:
            return False
        self._mark_lost(self._idle_read_reason(), None)
        self.close_socket()
        return True

    def _idle_read_reason(self) -> str:
        """Why an idle socket had something to read (it is peeked at, not consumed)."""
        try:
            peeked = self._sock.recv(1, socket.MSG_PEEK)
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        if not peeked:
            return "the server closed the connection while it was idle"
        if self._plain:
            return "the server sent data while no request was waiting for a reply"
        return "the server sent TLS data while no request was waiting for a reply (its close_notify, or data)"

    def queue(self, data: bytes | bytearray | memoryview) -> None:
        """Keep ``data`` to send with the next wait for a message (or the next drain)."""
        self._unsent.append(data)

    async def wait_message(  # type: ignore[override]
        self, parser: Callable[[memoryview], T], deadline: float | None = None
    ) -> T:
        """The next complete message, parsed by ``parser`` in the buffer; what was written goes out first.
        ``deadline`` (``loop.time()`` terms) raises ``NetworkTimeout`` when it passes first."""
        if self._waiter is not None and not self._waiter.done():
            raise self._already_waiting()
        reply: Any = _PulledReply()
        if self._held:
            self._take_held(reply, parser)
            return reply.outcome()  # type: ignore[no-any-return]
        if self._lost_reason is not None:
            raise self.lost_exception()
        self._waiter = reply
        self._parser = parser
        try:
            if deadline is None:
                # Most exchanges: no deadline, so no cancel scope of their own.
                await (self._pull_plain(reply) if self._plain else self._pull(reply))
            else:
                await self._pull_until(reply, deadline)
        finally:
            if self._waiter is reply:
                self._waiter = self._parser = None
        return reply.outcome()  # type: ignore[no-any-return]

    async def _pull(self, reply: _PulledReply) -> None:
        """Send what was written, then receive until the framing delivered a message into ``reply``."""
        await self._send_unsent()
        while not reply.done():
            await self._receive()

    async def _pull_plain(self, reply: _PulledReply) -> None:
        """:meth:`_pull` on a plain socket written out in one piece, in one coroutine (it runs once per round
        trip: the request sent with one ``send``, the reply read after one wait)."""
        if self._unsent and self._lost_reason is None:
            unsent = self._unsent
            data = unsent[0] if len(unsent) == 1 else b"".join(unsent)
            unsent.clear()
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self._stream_failed(exc)
                raise self.lost_exception() from exc
            if sent < len(data):
                self._unsent.append(memoryview(data)[sent:])
        await self._pull(reply)

    async def _pull_until(self, reply: _PulledReply, deadline: float) -> None:
        """:meth:`_pull` within ``deadline`` (``loop.time()`` terms); ``NetworkTimeout`` once it passed."""
        limit = deadline - self.loop.time()
        with trio.CancelScope(deadline=trio_deadline(deadline)) as scope:
            await self._pull(reply)
        if scope.cancelled_caught and not reply.done():
            raise NetworkTimeout(
                f"{self.address}: timed out after {max(limit, 0.0):.3f}s waiting for a reply"
            )

    async def drain(self) -> None:
        """Send what was written (an unacknowledged request, which no wait for a reply follows)."""
        await self._send_unsent()

    async def wait_closed(self) -> None:
        """The socket closes synchronously: nothing to wait for."""

    async def _send_unsent(self) -> None:
        unsent = self._unsent
        if not unsent:
            return
        data = unsent[0] if len(unsent) == 1 else b"".join(unsent)
        unsent.clear()
        if self._lost_reason is not None:
            raise self.lost_exception()
        try:
            if self._plain:
                await self._send_plain(data)
            else:
                await self._stream.send_all(data)
        except _STREAM_ERRORS as exc:
            self._stream_failed(exc)
            raise self.lost_exception() from exc

    async def _send_plain(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` to the socket, waiting for room only when the kernel's buffer is full: a request
        usually goes out in one ``send`` with no turn of trio's scheduler (the wait for its reply is the
        checkpoint)."""
        sock = self._sock
        view = memoryview(data)
        while view:
            try:
                sent = sock.send(view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            view = view[sent:]

    async def _receive(self) -> None:
        buffer = self.get_buffer(-1)
        try:
            if self._plain:
                received = await self._receive_plain(buffer)
            else:
                data = await self._stream.receive_some(len(buffer))
                received = len(data)
                buffer[:received] = data
        except _STREAM_ERRORS as exc:
            self._stream_failed(exc)
            return
        del buffer  # the framing may grow its buffer only once no view of it is held
        if not received:
            self._mark_lost("the server closed the connection", None)
            self.close_socket()
            return
        self.buffer_updated(received)

    async def _receive_plain(self, buffer: memoryview) -> int:
        """Read what the socket holds into ``buffer``: first a wait for it to be readable when nothing of the
        message arrived yet (the reply to a request just sent is not there yet, and trying first would cost a
        failed system call), else a read straight away (the rest of a long message usually is there)."""
        sock = self._sock
        if self._start == self._end:
            await trio.lowlevel.wait_readable(sock)
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                return sock.recv_into(buffer)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)

    def _stream_failed(self, exc: BaseException) -> None:
        if isinstance(exc, trio.ClosedResourceError) and self._lost_reason is not None:
            return  # closed by the driver while the task read: the reason is already given
        cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
        self._mark_lost(f"{type(cause).__name__}: {cause}", cause)
        self.close_socket()

    def close_socket(self) -> None:
        """Close the socket now (a task reading or sending on it gets ``ClosedResourceError`` at once)."""
        if self.socket_closed:
            return
        self.socket_closed = True
        self._unsent.clear()
        if self.loop.is_closed():
            self._sock.close()
        else:
            self._trio_socket.close()
        self._connection_lost = True
        forget_connection(self)

    def let_go(self) -> None:
        """The run is over: the stdlib socket is closed directly (see ``MessageProtocol.let_go``)."""
        self.socket_closed = True
        self._sock.close()
        super().let_go()


async def connect_stream(
    loop: TrioLoop,
    address: tuple[str, int | None],
    name: str,
    unix: bool,
    ssl_context: ssl.SSLContext | None,
    proxied: trio.socket.SocketType | None,
) -> StreamProtocol:
    """Open a stream to ``address`` (``proxied``: a socket already connected through the proxy) and return
    its protocol, the TLS handshake done; the caller bounds the time and converts the errors."""
    if proxied is not None:
        sock = socket.socket(fileno=proxied.detach())
        trio_socket = trio.socket.from_stdlib_socket(sock)
        record_socket(sock, loop)
        tune_socket(sock)
    elif unix:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        record_socket(sock, loop)
        trio_socket = trio.socket.from_stdlib_socket(sock)
        try:
            await trio_socket.connect(address[0])
        except BaseException:
            trio_socket.close()
            forget_socket(sock)
            raise
    else:
        sock, trio_socket = await _connect_tcp(loop, address)
    try:
        stream: trio.abc.Stream = trio.SocketStream(trio_socket)
        if ssl_context is not None:
            host = "localhost" if unix else address[0]
            tls = trio.SSLStream(stream, ssl_context, server_hostname=host, https_compatible=True)
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError as exc:
                # The TLS error itself (a certificate or host name rejected, an alert) decides the error.
                if isinstance(exc.__cause__, OSError):
                    raise exc.__cause__ from None
                raise
            stream = tls
        protocol = StreamProtocol(name, loop, stream, sock, trio_socket, plain=ssl_context is None)
    except BaseException:
        trio_socket.close()
        raise
    finally:
        forget_socket(sock)
    return protocol


async def _connect_tcp(
    loop: TrioLoop, address: tuple[str, int | None]
) -> tuple[socket.socket, trio.socket.SocketType]:
    host, port = address[0], address[1] if address[1] is not None else DEFAULT_PORT
    infos = await resolve_stream_addresses(host, port, loop.getaddrinfo)
    return await connect_first_address(infos, loop, _connect_socket)


async def _connect_socket(sock: socket.socket, sockaddr: Any) -> tuple[socket.socket, trio.socket.SocketType]:
    trio_socket = trio.socket.from_stdlib_socket(sock)
    try:
        tune_socket(sock)
        await trio_socket.connect(sockaddr)
    except BaseException:
        trio_socket.close()
        raise
    return sock, trio_socket


class ByteStreamReader:
    """``asyncio.StreamReader``'s reading methods over a trio stream, for the HTTP client: what arrived is
    buffered, and ``readuntil`` gives up with ``LimitOverrunError`` once ``limit`` bytes hold no separator."""

    def __init__(self, stream: trio.abc.Stream, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._buffer = bytearray()
        self._eof = False

    async def _fill(self) -> None:
        try:
            data = await self._stream.receive_some(65536)
        except trio.BrokenResourceError as exc:
            raise (exc.__cause__ if isinstance(exc.__cause__, OSError) else OSError(str(exc))) from None
        if data:
            self._buffer += data
        else:
            self._eof = True

    def _take(self, size: int) -> bytes:
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def readuntil(self, separator: bytes = b"\n") -> bytes:
        while True:
            found = self._buffer.find(separator)
            if found >= 0:
                if found > self._limit:
                    raise asyncio.LimitOverrunError("the separator was found past the limit", found)
                return self._take(found + len(separator))
            if len(self._buffer) > self._limit:
                raise asyncio.LimitOverrunError("no separator within the limit", len(self._buffer))
            if self._eof:
                raise asyncio.IncompleteReadError(self._take(len(self._buffer)), None)
            await self._fill()

    async def readexactly(self, n: int) -> bytes:
        while len(self._buffer) < n and not self._eof:
            await self._fill()
        if len(self._buffer) < n:
            raise asyncio.IncompleteReadError(self._take(len(self._buffer)), n)
        return self._take(n)

    async def read(self, n: int = -1) -> bytes:
        if not self._buffer and not self._eof:
            await self._fill()
        return self._take(len(self._buffer) if n < 0 else n)


class ByteStreamWriter:
    """``asyncio.StreamWriter``'s writing methods over a trio stream, for the HTTP client."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._unsent = bytearray()
        self._closing = False

    def write(self, data: bytes) -> None:
        self._unsent += data

    async def drain(self) -> None:
        data, self._unsent = bytes(self._unsent), bytearray()
        try:
            await self._stream.send_all(data)
        except trio.BrokenResourceError as exc:
            raise (exc.__cause__ if isinstance(exc.__cause__, OSError) else OSError(str(exc))) from None

    def close(self) -> None:
        self._closing = True

    async def wait_closed(self) -> None:
        await trio.aclose_forcefully(self._stream)


async def open_byte_stream(
    host: str, port: int, ssl_context: ssl.SSLContext | None, server_hostname: str | None, limit: int
) -> tuple[ByteStreamReader, ByteStreamWriter]:
    """A TCP stream to ``host:port`` (TLS checked against ``server_hostname`` when ``ssl_context`` is given,
    its handshake done) as a reader and a writer."""
    try:
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        raise _connect_failure(exc) from None
    if ssl_context is not None:
        stream = await _tls_over(stream, ssl_context, server_hostname)
    return ByteStreamReader(stream, limit), ByteStreamWriter(stream)


async def wrap_byte_stream(
    sock: socket.socket, ssl_context: ssl.SSLContext, server_hostname: str, limit: int
) -> tuple[ByteStreamReader, ByteStreamWriter]:
    """:func:`open_byte_stream` over ``sock``, connected already: TLS checked against ``server_hostname``
    whatever ``sock`` is connected to. The stream owns ``sock``; a failed handshake closes it."""
    try:
        stream: trio.abc.Stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    except BaseException:
        sock.close()
        raise
    tls = await _tls_over(stream, ssl_context, server_hostname)
    return ByteStreamReader(tls, limit), ByteStreamWriter(tls)


async def _tls_over(
    stream: trio.abc.Stream, ssl_context: ssl.SSLContext, server_hostname: str | None
) -> trio.SSLStream[trio.abc.Stream]:
    """``stream`` with the TLS handshake done over it (closed when the handshake fails)."""
    tls = trio.SSLStream(stream, ssl_context, server_hostname=server_hostname, https_compatible=True)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(stream)
        if isinstance(exc.__cause__, OSError):
            raise exc.__cause__ from None
        raise OSError(str(exc)) from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return tls


def _connect_failure(exc: OSError) -> OSError:
    """The error of a failed ``trio.open_tcp_stream`` as asyncio's ``open_connection`` raises it: when the
    host had one address, that attempt's own error (``ConnectionRefusedError``, ...) rather than trio's
    summary of all attempts, so a failure reads the same on both runtimes."""
    attempts = exc.__cause__
    if isinstance(attempts, ExceptionGroup) and len(attempts.exceptions) == 1:
        (only,) = attempts.exceptions
        if isinstance(only, OSError):
            return only
    return exc
