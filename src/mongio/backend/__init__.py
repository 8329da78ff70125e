"""The backend seam: what mongio needs of the async runtime it runs in, so that one client works on asyncio
and on trio (directly, or through anyio's trio backend) with the same API.

Everything mongio keeps per runtime is tied to an *event loop* (see :mod:`mongio.loop_runtime`), and most of
the driver talks to that loop through the methods of ``asyncio.AbstractEventLoop`` it already used:
``time()``, ``create_future()``, ``call_soon()``, ``call_at()``, ``call_later()``, ``create_task()``,
``getaddrinfo()``, ``is_running()``, ``is_closed()``. On asyncio that loop is asyncio's own, untouched: the
BufferedProtocol, the compiled framing and the ``ReplyWaiter`` run exactly as before, and nothing is decided
per call. On trio it is a :class:`ForeignLoop`, one per trio run (keyed by its ``TrioToken``), that gives
those methods trio's meaning (:mod:`mongio.backend.trio_loop`).

What asyncio offers as module functions rather than loop methods is the rest of the seam, here, each
dispatching once on the running loop:

==========================  ==========================================================================
primitive                   here
==========================  ==========================================================================
which runtime am I in       :func:`running_loop` (the loop, asyncio's or a :class:`ForeignLoop`)
open a stream               :meth:`ForeignLoop.open_message_stream` (TCP, TLS with host name checks,
                            Unix socket, a socket connected through the SOCKS5 proxy), time-limited
send, receive into buffer   the stream's protocol (``MessageProtocol`` on asyncio; a pull-based reader
                            feeding the same framing on trio)
fail-after / move-on-after  :func:`timeout`, :func:`timeout_at` (raise ``TimeoutError`` as asyncio's);
                            trio's own ``move_on_after`` cancels mongio like asyncio's cancellation
Event, Lock, Condition      :func:`new_event`, :func:`new_lock` (the topology's
                            :class:`~mongio.topology.change_condition.ChangeCondition` is built on it)
background tasks            ``loop.create_task`` (on trio: a system task of the run)
time, sleep, worker thread  ``loop.time()`` (``time.monotonic()`` on both, the clock of every deadline),
                            :func:`sleep`, :func:`to_thread`
getaddrinfo, SRV/TXT        ``loop.getaddrinfo``; dnspython's async resolver (it picks trio itself)
shielding                   :func:`shield`; :func:`finish_shielded` (clean-up that a cancel scope
                            must not cut, time-limited)
cancellation                :func:`is_cancellation`, :func:`current_task`; :func:`new_cancel_scope`
                            (trio: a scope another task can cancel, as asyncio cancels a task)
waiting for several         :func:`gather`, :func:`as_completed`
HTTP byte streams           :func:`open_byte_stream` (OCSP, AWS, OIDC endpoints, KMS exchanges);
                            :func:`wrap_byte_stream` (the same over a socket connected already: a KMS
                            reached through ``kms_connect_callback``)
abandonable worker thread   :func:`to_thread_abandoning` (a user's blocking callback, given up on at a
                            deadline, its late result discarded)
a user's callback           :func:`is_async_callable`: awaited on the loop, or run in a worker thread
child processes             :func:`open_process` (the embedded test server)
==========================  ==========================================================================

Why not anyio's streams on trio: a connection is closed synchronously where a pool discards it or an
interrupted exchange aborts it, which trio's sockets allow and anyio's ``aclose()`` does not; the trio side
therefore uses trio directly (anyio's trio backend runs on the same trio run, so ``anyio.run(...,
backend="trio")`` is served the same way).

``import mongio`` imports neither trio nor anyio: the trio side is imported only when a call finds itself
inside a trio run (trio is then imported already).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import socket
    import ssl

    from mongio.connection.protocol import MessageProtocol

__all__ = [
    "ByteReader",
    "ByteWriter",
    "CancelScopeLike",
    "ChildProcess",
    "EventLike",
    "ForeignLoop",
    "LockLike",
    "as_completed",
    "current_asyncio_task",
    "current_task",
    "finish_shielded",
    "foreign_loop",
    "gather",
    "is_async_callable",
    "is_cancellation",
    "new_cancel_scope",
    "new_event",
    "new_lock",
    "open_byte_stream",
    "open_process",
    "running_loop",
    "shield",
    "sleep",
    "timeout",
    "timeout_at",
    "to_thread",
    "to_thread_abandoning",
    "wrap_byte_stream",
]

T = TypeVar("T")

_get_asyncio_loop = asyncio._get_running_loop

# The cancellation exception of a foreign runtime (trio.Cancelled), once one was loaded.
_foreign_cancellations: tuple[type[BaseException], ...] = ()


class EventLike(Protocol):
    """What mongio uses of an event (``asyncio.Event``'s interface)."""

    def set(self) -> None: ...
    def clear(self) -> None: ...
    def is_set(self) -> bool: ...
    async def wait(self) -> Any: ...


class LockLike(Protocol):
    """What mongio uses of a lock (``asyncio.Lock``'s interface)."""

    async def acquire(self) -> Any: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    async def __aenter__(self) -> Any: ...
    async def __aexit__(self, exc_type: Any, exc: Any, traceback: Any) -> Any: ...


class CancelScopeLike(Protocol):
    """A scope around a piece of work that another task can cancel (``trio.CancelScope``'s interface):
    leaving it after :meth:`cancel` interrupted the work swallows the cancellation and sets
    ``cancelled_caught``."""

    @property
    def cancelled_caught(self) -> bool: ...
    def cancel(self) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> bool: ...


class ByteReader(Protocol):
    """What mongio's HTTP client reads with (``asyncio.StreamReader``'s interface)."""

    async def readuntil(self, separator: bytes = b"\n") -> bytes: ...
    async def readexactly(self, n: int) -> bytes: ...
    async def read(self, n: int = -1) -> bytes: ...


class ByteWriter(Protocol):
    """What mongio's HTTP client writes with (``asyncio.StreamWriter``'s interface)."""

    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def close(self) -> None: ...
    async def wait_closed(self) -> None: ...


class ChildProcess(Protocol):
    """What mongio uses of a child process with no input, whose output and errors reach it through one pipe."""

    @property
    def returncode(self) -> int | None:
        """The exit status, None while the process runs."""
        ...

    async def read_output(self, max_bytes: int) -> bytes:
        """At most ``max_bytes`` of the output, as soon as some arrived; ``b""`` once the output ended."""
        ...

    async def wait(self) -> int:
        """Wait for the process to exit; its exit status."""
        ...

    def terminate(self) -> None: ...
    def kill(self) -> None: ...

    def close_output(self) -> None:
        """Close this end of the output pipe (once nothing reads it any more)."""
        ...


class ForeignLoop(asyncio.AbstractEventLoop):
    """An event loop façade over another runtime (trio): the loop methods mongio calls, in that runtime's
    terms, plus the primitives asyncio offers as module functions (see the module docstring)."""

    def on_shutdown(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``hook`` when the foreign run ends (shielded, within a few seconds), unless it was forgotten
        with :meth:`forget_shutdown` first: the run cancels none of mongio's tasks that could do it."""
        raise NotImplementedError

    def forget_shutdown(self, hook: Callable[[], Awaitable[None]]) -> None:
        raise NotImplementedError

    def timeout_at(self, deadline: float | None) -> AbstractAsyncContextManager[Any]:
        """A scope that cancels its body at ``deadline`` (``time()`` terms) and then raises TimeoutError."""
        raise NotImplementedError

    async def sleep(self, delay: float) -> None:
        raise NotImplementedError

    def new_event(self) -> EventLike:
        raise NotImplementedError

    def new_lock(self) -> LockLike:
        raise NotImplementedError

    def new_cancel_scope(self) -> CancelScopeLike:
        raise NotImplementedError

    async def shield(self, awaitable: Awaitable[T]) -> T:
        raise NotImplementedError

    async def gather(self, awaitables: tuple[Awaitable[Any], ...]) -> list[Any]:
        raise NotImplementedError

    def current_task(self) -> object | None:
        raise NotImplementedError

    async def to_thread(self, func: Callable[[], T]) -> T:
        raise NotImplementedError

    async def take_uninterrupted(self, lock: LockLike) -> None:
        """Acquire ``lock`` even while the caller is being cancelled (the cancellation stays pending)."""
        raise NotImplementedError

    async def finish_shielded(self, work: Callable[[], Awaitable[T]], limit: float) -> T:
        """:func:`finish_shielded` on this runtime."""
        raise NotImplementedError

    async def open_byte_stream(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
    ) -> tuple[ByteReader, ByteWriter]:
        """``asyncio.open_connection``: a TCP stream (TLS when ``ssl_context`` is given, checked against
        ``server_hostname``) as a reader whose ``readuntil`` raises ``LimitOverrunError`` past ``limit``
        bytes, and a writer; for the HTTP client."""
        raise NotImplementedError

    async def wrap_byte_stream(
        self, sock: socket.socket, ssl_context: ssl.SSLContext, server_hostname: str, limit: int
    ) -> tuple[ByteReader, ByteWriter]:
        """:func:`wrap_byte_stream` on this runtime."""
        raise NotImplementedError

    async def to_thread_abandonable(self, func: Callable[[], T]) -> T:
        """:meth:`to_thread`, except that a cancellation returns at once, leaving the thread to finish alone."""
        raise NotImplementedError

    async def open_process(self, args: Sequence[str]) -> ChildProcess:
        """:func:`open_process` on this runtime."""
        raise NotImplementedError

    async def open_message_stream(
        self,
        address: tuple[str, int | None],
        name: str,
        unix: bool,
        ssl_context: ssl.SSLContext | None,
        proxied: Any,
    ) -> MessageProtocol:
        """A connection's protocol on a new stream to ``address`` (``name`` as errors say it; ``unix``: a
        Unix socket path; ``proxied``: a socket already connected through the SOCKS5 proxy), the TLS
        handshake done with host name verification. The caller bounds the time and converts the errors."""
        raise NotImplementedError


_current_trio_loop: Callable[[], ForeignLoop | None] | None = None


def foreign_loop() -> ForeignLoop | None:
    """The :class:`ForeignLoop` of the foreign run in progress in this thread (a trio run), else None."""
    global _current_trio_loop
    if _current_trio_loop is None:
        if "trio" not in sys.modules:
            return None  # no trio run can be in progress
        from mongio.backend.trio_loop import current_trio_loop

        _current_trio_loop = current_trio_loop
    return _current_trio_loop()


def running_loop() -> asyncio.AbstractEventLoop:
    """The running loop: asyncio's, else the :class:`ForeignLoop` of the trio run in progress. Raises
    ``RuntimeError`` outside both, as ``asyncio.get_running_loop()`` does."""
    loop = _get_asyncio_loop()
    if loop is not None:
        return loop
    foreign = foreign_loop()
    if foreign is None:
        raise RuntimeError(
            "no running event loop: mongio runs inside asyncio, or inside trio (trio.run, or "
            "anyio.run(..., backend='trio'))"
        )
    return foreign


def _foreign() -> ForeignLoop | None:
    if _get_asyncio_loop() is not None:
        return None
    return foreign_loop()


def timeout_at(deadline: float | None) -> AbstractAsyncContextManager[Any]:
    """``asyncio.timeout_at`` on the running runtime: the body is cancelled at ``deadline`` (the loop's
    ``time()`` terms; None: never) and ``TimeoutError`` raised."""
    foreign = _foreign()
    if foreign is None:
        return asyncio.timeout_at(deadline)
    return foreign.timeout_at(deadline)


def timeout(delay: float | None) -> AbstractAsyncContextManager[Any]:
    """``asyncio.timeout`` on the running runtime (None: no limit)."""
    foreign = _foreign()
    if foreign is None:
        return asyncio.timeout(delay)
    return foreign.timeout_at(None if delay is None else foreign.time() + delay)


async def sleep(delay: float) -> None:
    foreign = _foreign()
    if foreign is None:
        await asyncio.sleep(delay)
    else:
        await foreign.sleep(delay)


def new_event() -> EventLike:
    """An event of the running runtime (``asyncio.Event`` when no foreign run is in progress)."""
    foreign = _foreign()
    return asyncio.Event() if foreign is None else foreign.new_event()


def new_lock() -> LockLike:
    """A lock of the running runtime (``asyncio.Lock`` when no foreign run is in progress)."""
    foreign = _foreign()
    return asyncio.Lock() if foreign is None else foreign.new_lock()


def new_cancel_scope() -> CancelScopeLike:
    """A cancel scope of the foreign runtime in progress (trio), so that another task can interrupt the work
    inside it. On asyncio a task is cancelled instead (``asyncio.Task.cancel``): ``RuntimeError`` there."""
    foreign = _foreign()
    if foreign is None:
        raise RuntimeError("on asyncio, interrupt work by cancelling its task")
    return foreign.new_cancel_scope()


async def shield(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` (a task or future of the running loop) so that cancelling the caller does not
    cancel it."""
    foreign = _foreign()
    if foreign is None:
        return await asyncio.shield(awaitable)
    return await foreign.shield(awaitable)


async def gather(*awaitables: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather(*awaitables, return_exceptions=True)`` on the running runtime."""
    foreign = _foreign()
    if foreign is None:
        return await asyncio.gather(*awaitables, return_exceptions=True)
    return await foreign.gather(awaitables)


async def as_completed(futures: Sequence[asyncio.Future[T]]) -> AsyncIterator[asyncio.Future[T]]:
    """The futures (tasks of the running loop) as each finishes, the first finished first."""
    loop = running_loop()
    pending = set(futures)
    while pending:
        woken: asyncio.Future[None] = loop.create_future()

        def wake(_finished: object, woken: asyncio.Future[None] = woken) -> None:
            if not woken.done():
                woken.set_result(None)

        for future in pending:
            future.add_done_callback(wake)
        try:
            await woken
        finally:
            for future in pending:
                future.remove_done_callback(wake)
        finished = [future for future in futures if future in pending and future.done()]
        pending.difference_update(finished)
        for future in finished:
            yield future


def current_task() -> object | None:
    """The running task (an ``asyncio.Task``, or the foreign runtime's task), for identity checks."""
    loop = _get_asyncio_loop()
    if loop is not None:
        return asyncio.current_task(loop)
    foreign = foreign_loop()
    return None if foreign is None else foreign.current_task()


def current_asyncio_task() -> asyncio.Task[Any] | None:
    """The running asyncio task, None on a foreign runtime (whose tasks cannot be cancelled from outside
    their own cancel scopes)."""
    loop = _get_asyncio_loop()
    return None if loop is None else asyncio.current_task(loop)


async def open_byte_stream(
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None,
    limit: int = 2**16,
) -> tuple[ByteReader, ByteWriter]:
    """``asyncio.open_connection`` on the running runtime: a TCP stream to ``host:port`` (TLS when
    ``ssl_context`` is given, its handshake done and checked against ``server_hostname``) as a reader and a
    writer; the reader's ``readuntil`` gives up past ``limit`` bytes."""
    foreign = _foreign()
    if foreign is None:
        return await asyncio.open_connection(
            host, port, ssl=ssl_context, server_hostname=server_hostname, limit=limit
        )
    return await foreign.open_byte_stream(host, port, ssl_context, server_hostname, limit)


async def wrap_byte_stream(
    sock: socket.socket, ssl_context: ssl.SSLContext, server_hostname: str, limit: int = 2**16
) -> tuple[ByteReader, ByteWriter]:
    """:func:`open_byte_stream` over ``sock``, a TCP socket connected already (to the peer, or to a proxy that
    tunnels to it): the TLS handshake is done over it and checked against ``server_hostname`` (SNI and the
    certificate's names), whatever address ``sock`` is connected to. The stream owns ``sock`` from then on,
    and closes it when the handshake fails."""
    foreign = _foreign()
    if foreign is None:
        return await asyncio.open_connection(
            sock=sock, ssl=ssl_context, server_hostname=server_hostname, limit=limit
        )
    return await foreign.wrap_byte_stream(sock, ssl_context, server_hostname, limit)


async def open_process(args: Sequence[str]) -> ChildProcess:
    """Start the program ``args[0]`` with the arguments ``args[1:]`` as a child process on the running
    runtime: no input, its output and errors piped together to the caller."""
    foreign = _foreign()
    if foreign is not None:
        return await foreign.open_process(args)
    process = await asyncio.create_subprocess_exec(
        *args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return _AsyncioChild(process)


class _AsyncioChild:
    """:class:`ChildProcess` over asyncio's."""

    __slots__ = ("_output", "_process")

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None  # piped by open_process
        self._process = process
        self._output = process.stdout

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def read_output(self, max_bytes: int) -> bytes:
        return await self._output.read(max_bytes)

    async def wait(self) -> int:
        return await self._process.wait()

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()

    def close_output(self) -> None:
        # asyncio's pipe transport closes itself once the process exited and the pipe reached its end.
        pass


def is_async_callable(callback: object) -> bool:
    """Whether calling ``callback`` (a user's function: a credential provider, a KMS connect callback, a
    GridFS stream's read or write) gives a coroutine to await: an ``async def`` function or method, or an
    object whose class's ``__call__`` is one. Anything else is a plain function, which the caller runs in a
    worker thread, as it may block."""
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(type(callback).__call__)


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread`` on the running runtime: ``func`` runs in a worker thread with the caller's
    context variables."""
    foreign = _foreign()
    if foreign is None:
        return await asyncio.to_thread(func, *args, **kwargs)
    context = contextvars.copy_context()
    return await foreign.to_thread(functools.partial(context.run, func, *args, **kwargs))


class _Handoff:
    """A worker thread's result, passed to the task that waits for it, or to ``discard`` once that task has
    given up on it: whichever of the two comes second gets it, under a lock, so nothing is lost or kept."""

    __slots__ = ("_abandoned", "_discard", "_func", "_lock", "_result")

    def __init__(self, func: Callable[[], T], discard: Callable[[T], None]) -> None:
        self._func: Callable[[], Any] = func
        self._discard: Callable[[Any], None] = discard
        self._lock = threading.Lock()
        self._abandoned = False
        self._result: list[Any] = []

    def run(self) -> None:
        """In the worker thread."""
        result = self._func()
        with self._lock:
            if not self._abandoned:
                self._result.append(result)
                return
        self._discard(result)

    def take(self) -> Any:
        with self._lock:
            return self._result.pop()

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            late = self._result[:]
            self._result.clear()
        for result in late:
            self._discard(result)


async def to_thread_abandoning(func: Callable[[], T], discard: Callable[[T], None]) -> T:
    """:func:`to_thread` for a blocking function of the user's that may overrun: when the caller is cancelled
    (a deadline), it returns at once and the thread is left to finish; what ``func`` returns then is given to
    ``discard`` (in the worker thread, or in the caller when it came back just too late), never lost."""
    handoff = _Handoff(func, discard)
    context = contextvars.copy_context()
    foreign = _foreign()
    try:
        if foreign is None:
            await asyncio.to_thread(context.run, handoff.run)
        else:
            await foreign.to_thread_abandonable(functools.partial(context.run, handoff.run))
    except BaseException:
        handoff.abandon()
        raise
    return handoff.take()  # type: ignore[no-any-return]


async def take_uninterrupted(lock: LockLike) -> None:
    """Acquire ``lock`` whatever cancellation arrives meanwhile; a cancellation is raised once it is held
    (asyncio), or stays pending for the next checkpoint (trio, whose cancellation lasts)."""
    foreign = _foreign()
    if foreign is not None:
        await foreign.take_uninterrupted(lock)
        return
    interrupted: asyncio.CancelledError | None = None
    while True:
        try:
            await lock.acquire()
        except asyncio.CancelledError as exc:
            interrupted = exc
            continue
        break
    if interrupted is not None:
        raise interrupted


async def finish_shielded(work: Callable[[], Awaitable[T]], limit: float) -> T:
    """Run ``work()`` to its end even while the caller is being cancelled (a cancel scope of anyio or trio
    cancels every await inside it again, not only the one it interrupted), for at most ``limit`` seconds
    (then it is cancelled and ``TimeoutError`` raised). A cancellation of the caller that arrived meanwhile is
    raised once the work is over (asyncio), or stays pending for the next checkpoint (trio). For clean-up
    that must run when an operation is cut, such as deleting an aborted upload's chunks."""
    foreign = _foreign()
    if foreign is not None:
        return await foreign.finish_shielded(work, limit)
    loop = asyncio.get_running_loop()
    task = loop.create_task(_awaited(work))
    deadline = loop.time() + limit
    interrupted: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,), timeout=max(deadline - loop.time(), 0.0))
        except asyncio.CancelledError as exc:
            interrupted = exc
            continue
        if not task.done():
            task.cancel()  # over the limit; the loop waits for it to end
    if interrupted is not None:
        raise interrupted
    if task.cancelled():
        raise TimeoutError(f"the shielded clean-up did not finish within {limit} s")
    return task.result()


async def _awaited(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is a cancellation: asyncio's ``CancelledError`` or trio's ``Cancelled``."""
    return isinstance(exc, (asyncio.CancelledError, _foreign_cancellations))


def register_cancellation(exception_type: type[BaseException]) -> None:
    """Make :func:`is_cancellation` recognise a foreign runtime's cancellation (called once, by the
    foreign loop's module)."""
    global _foreign_cancellations
    if exception_type not in _foreign_cancellations:
        _foreign_cancellations = (*_foreign_cancellations, exception_type)
