"""The trio side of the backend seam: :class:`TrioLoop`, the event loop façade of one trio run.

Imported only from inside a trio run (trio is imported then already). One ``TrioLoop`` is made per run, the
first time mongio is used in it, and kept in a ``RunVar``; the per-loop runtime keys the run by it, as it keys
an asyncio loop (it carries the run's ``TrioToken``).

What it provides, in trio's terms:

- ``create_future()``: a :class:`TrioFuture`, an ``asyncio.Future`` that a trio task can await (it parks the
  task with ``wait_task_rescheduled``; a trio cancellation cancels the future, unless it was resolved
  already, in which case the task resumes with the result and the cancellation waits for its next
  checkpoint, so a lock or a connection handed over is never lost).
- ``call_soon``/``call_at``/``call_later``: callbacks and timers, run by one system task of the run (the
  *callback runner*), which parks on trio's scheduler with the earliest timer as its deadline.
- ``create_task()``: a :class:`TrioTask`, a system task of the run (``trio.lowlevel.spawn_system_task``)
  wrapped in a cancel scope, with the ``asyncio.Task`` methods mongio uses (``cancel``, ``done``, awaiting
  it). This is the documented system-level home of mongio's background tasks on trio (monitors, round trip
  time tasks, SRV polling, pool upkeep, the cursor reaper): they belong to the run, not to one task, and
  ``await client.close()`` (or leaving ``async with client:``) stops them. An error in one is kept in its
  task, never raised into the run.
- When the run ends (trio cancels its system tasks once the main task returned), the runtimes still open on
  it close, shielded and time-limited, while the callback runner still serves them.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from mongio.backend import (
    ByteReader,
    ByteWriter,
    CancelScopeLike,
    ChildProcess,
    EventLike,
    ForeignLoop,
    LockLike,
    register_cancellation,
)

if TYPE_CHECKING:
    import socket
    import ssl

    from mongio.connection.protocol import MessageProtocol

__all__ = ["TrioFuture", "TrioLoop", "TrioTask", "current_trio_loop", "trio_deadline"]

T = TypeVar("T")

_log = logging.getLogger("mongio.backend")

register_cancellation(trio.Cancelled)

_LOOP: trio.lowlevel.RunVar[TrioLoop] = trio.lowlevel.RunVar("mongio_loop")

# How long the runtimes still open when a trio run ends may take to close (cursor kills, endSessions).
_SHUTDOWN_LIMIT = 5.0


def trio_deadline(deadline: float | None) -> float:
    """A deadline of mongio's clock (``time.monotonic()``, :meth:`TrioLoop.time`) on trio's clock, for a
    cancel scope; None: none (infinity)."""
    if deadline is None or math.isinf(deadline):
        return math.inf
    return trio.current_time() + (deadline - time.monotonic())


def current_trio_loop() -> TrioLoop | None:
    """The run's ``TrioLoop`` (made on first use), or None outside a trio run (a worker thread included)."""
    try:
        token = trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None
    try:
        return _LOOP.get()
    except LookupError:
        loop = TrioLoop(token)  # type: ignore[abstract]  # the loop methods mongio calls are all there
        _LOOP.set(loop)
        return loop


class _Wake:
    """The done callback of a future a trio task awaits: reschedules that task (at once, see
    :meth:`TrioLoop.call_soon`: rescheduling only marks the task runnable)."""

    __slots__ = ("task",)

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task

    def __call__(self, _future: object) -> None:
        trio.lowlevel.reschedule(self.task)


async def _park(future: asyncio.Future[Any]) -> None:
    """Suspend the calling trio task until ``future`` is done, or cancel the future if the task is
    cancelled first (see the module docstring)."""
    wake = _Wake(trio.lowlevel.current_task())
    future.add_done_callback(wake)

    def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
        if future.done():
            return trio.lowlevel.Abort.FAILED  # resolved: the wake-up is on its way, with the result
        future.remove_done_callback(wake)
        future.cancel()
        return trio.lowlevel.Abort.SUCCEEDED

    await trio.lowlevel.wait_task_rescheduled(abort)


class TrioFuture(asyncio.Future[T]):
    """An ``asyncio.Future`` of a :class:`TrioLoop` that trio tasks await."""

    def __await__(self) -> Generator[Any, None, T]:
        if not self.done():
            yield from _park(self).__await__()
        return self.result()

    __iter__ = __await__


class TrioTask(TrioFuture[T]):
    """A coroutine running as a system task of the trio run, in its own cancel scope; a future of its
    outcome with the ``asyncio.Task`` methods mongio uses. ``cancel()`` cancels the scope: the coroutine
    gets trio's ``Cancelled`` at its next checkpoint and the task ends cancelled."""

    def __init__(
        self,
        coroutine: Coroutine[Any, Any, T],
        loop: TrioLoop,
        name: str | None,
        context: Any | None,
    ) -> None:
        super().__init__(loop=loop)
        self._coroutine = coroutine
        self._name = name or f"mongio task {id(self):#x}"
        self._scope = trio.CancelScope()
        self._cancel_requests = 0
        trio.lowlevel.spawn_system_task(self._step, name=self._name, context=context)

    def get_name(self) -> str:
        return self._name

    def get_coro(self) -> Coroutine[Any, Any, T]:
        return self._coroutine

    def cancel(self, msg: Any | None = None) -> bool:
        if self.done():
            return False
        self._cancel_requests += 1
        self._scope.cancel()
        return True

    def cancelling(self) -> int:
        return self._cancel_requests

    def uncancel(self) -> int:
        if self._cancel_requests > 0:
            self._cancel_requests -= 1
        return self._cancel_requests

    async def _step(self) -> None:
        try:
            with self._scope:
                result = await self._coroutine
        except (KeyboardInterrupt, SystemExit):
            raise
        except trio.Cancelled:
            # The run is ending (its system tasks are cancelled): the task ends cancelled, and so does this.
            if not self.done():
                super().cancel()
            raise
        except BaseException as exc:
            if not self.done():
                if isinstance(exc, asyncio.CancelledError):
                    super().cancel()
                else:
                    self.set_exception(exc)
            return
        if self._scope.cancelled_caught:
            super().cancel()
        elif not self.done():
            self.set_result(result)


class _Timeout:
    """``asyncio.timeout_at`` on trio: a cancel scope with the deadline; its expiry raises TimeoutError."""

    __slots__ = ("_scope",)

    def __init__(self, deadline: float | None) -> None:
        self._scope = trio.CancelScope(deadline=trio_deadline(deadline))

    async def __aenter__(self) -> _Timeout:
        self._scope.__enter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        suppressed = self._scope.__exit__(exc_type, exc, traceback)
        if self._scope.cancelled_caught:
            raise TimeoutError()
        return bool(suppressed)


class _Event:
    """``asyncio.Event`` over :class:`TrioFuture` s (trio's own event cannot be cleared)."""

    __slots__ = ("_loop", "_set", "_waiters")

    def __init__(self, loop: TrioLoop) -> None:
        self._loop = loop
        self._set = False
        self._waiters: set[asyncio.Future[bool]] = set()

    def set(self) -> None:
        if not self._set:
            self._set = True
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(True)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> bool:
        if self._set:
            return True
        waiter: asyncio.Future[bool] = self._loop.create_future()
        self._waiters.add(waiter)
        try:
            return await waiter
        finally:
            self._waiters.discard(waiter)


class _Lock:
    """A fair lock over :class:`TrioFuture` s, handed from holder to waiter: a waiter cancelled once the
    lock was handed to it still takes it (see :func:`_park`), so the lock is never lost."""

    __slots__ = ("_locked", "_loop", "_waiters")

    def __init__(self, loop: TrioLoop) -> None:
        self._loop = loop
        self._locked = False
        self._waiters: deque[asyncio.Future[bool]] = deque()

    def locked(self) -> bool:
        return self._locked

    async def acquire(self) -> bool:
        if not self._locked:
            self._locked = True
            return True
        waiter: asyncio.Future[bool] = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if not waiter.cancelled():
                raise
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass
            raise
        return True

    def release(self) -> None:
        if not self._locked:
            raise RuntimeError("Lock is not acquired.")
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(True)  # handed over: the lock stays taken
                return
        self._locked = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        self.release()


class TrioLoop(ForeignLoop):
    """The event loop façade of one trio run (see the module docstring)."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token
        self._ready: deque[asyncio.Handle] = deque()
        self._timers: list[asyncio.TimerHandle] = []
        # The callback runner: a system task that lives while there is something to run or wait for (a
        # callback, a timer, a runtime to close at the run's end), so a run whose clients are closed has
        # no task of mongio left.
        self._runner: trio.lowlevel.Task | None = None
        self._runner_alive = False
        self._parked = False
        self._closed = False
        self._shutdown_hooks: list[Callable[[], Awaitable[None]]] = []

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"<TrioLoop {state} of trio run {id(self.token):#x}>"

    # -- the loop's state ------------------------------------------------------------------------------------

    def time(self) -> float:
        """``time.monotonic()``, as asyncio's loop gives: the clock of every deadline in mongio (the client-side
        operation timeout's included). trio's own clock differs by an offset; :func:`trio_deadline` converts."""
        return time.monotonic()

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return not self.is_closed()

    def is_closed(self) -> bool:
        """Whether the trio run is over; from any thread (another thread asks the run's token)."""
        if self._closed:
            return True
        if self._in_own_run():
            return False
        try:
            self.token.run_sync_soon(_nothing)
        except trio.RunFinishedError:
            self._closed = True
        return self._closed

    def on_shutdown(self, hook: Callable[[], Awaitable[None]]) -> None:
        self._shutdown_hooks.append(hook)
        self._wake_runner()

    def forget_shutdown(self, hook: Callable[[], Awaitable[None]]) -> None:
        try:
            self._shutdown_hooks.remove(hook)
        except ValueError:
            return
        self._wake_runner()  # it may have nothing left to wait for

    # -- futures, callbacks and timers --------------------------------------------------------------------

    def create_future(self) -> asyncio.Future[Any]:
        return TrioFuture(loop=self)

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any | None = None
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        if type(callback) is _Wake:
            # A task waiting on a future: rescheduling it only marks it runnable, so it is done now rather
            # than through the runner (one task switch less per wake-up).
            callback(*args)
            return handle
        self._ready.append(handle)
        self._wake_runner()
        return handle

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any | None = None
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        if self._in_own_run():
            self._ready.append(handle)
            self._wake_runner()
        else:
            # From another thread, or from another run of this thread: through the token, which raises
            # RunFinishedError (a RuntimeError) once the run is over.
            self.token.run_sync_soon(self._schedule_handle, handle)
        return handle

    def _in_own_run(self) -> bool:
        try:
            return trio.lowlevel.current_trio_token() is self.token
        except RuntimeError:
            return False

    def _schedule_handle(self, handle: asyncio.Handle) -> None:
        self._ready.append(handle)
        self._wake_runner()

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., object], *args: Any, context: Any | None = None
    ) -> asyncio.TimerHandle:
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._timers, timer)
        if self._timers[0] is timer:
            self._wake_runner()  # an earlier deadline for the runner's park
        return timer

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., object], *args: Any, context: Any | None = None
    ) -> asyncio.TimerHandle:
        return self.call_at(self.time() + delay, callback, *args, context=context)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        pass  # left in the heap, dropped when it reaches the front

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        _log.error(
            "%s", context.get("message", "unhandled error in a callback"), exc_info=context.get("exception")
        )

    def create_task(
        self,
        coro: Coroutine[Any, Any, T] | Generator[Any, None, T],
        *,
        name: str | None = None,
        context: Any = None,
    ) -> asyncio.Task[T]:
        return TrioTask(coro, self, name, context)  # type: ignore[arg-type,return-value]

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        if executor is not None:
            raise NotImplementedError("on trio, work runs in trio's worker threads, not in an executor")
        return self.create_task(trio.to_thread.run_sync(func, *args))

    async def getaddrinfo(
        self, host: Any, port: Any, *, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list[Any]:
        return await trio.socket.getaddrinfo(host, port, family, type, proto, flags)

    def _wake_runner(self) -> None:
        if self._parked and self._runner is not None:
            self._parked = False
            trio.lowlevel.reschedule(self._runner)
        elif not self._runner_alive and not self._closed:
            self._runner_alive = True
            trio.lowlevel.spawn_system_task(self._run, name="mongio callback runner")

    async def _run(self) -> None:
        try:
            await self._serve(until_idle=True)
        except trio.Cancelled:
            # The run is ending (its system tasks are cancelled): close what is still open.
            await self._shut_down()
            raise
        finally:
            self._runner_alive = self._parked = False
            self._runner = None

    async def _shut_down(self) -> None:
        """Run the shutdown hooks, shielded and time-limited, while a runner still serves the callbacks."""
        try:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _SHUTDOWN_LIMIT):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._serve, False)
                    hooks, self._shutdown_hooks = self._shutdown_hooks, []
                    for hook in hooks:
                        try:
                            await hook()
                        except Exception:
                            _log.debug("closing mongio at the end of the trio run failed", exc_info=True)
                    nursery.cancel_scope.cancel()
        finally:
            self._closed = True

    async def _serve(self, until_idle: bool) -> None:
        """Run callbacks as they are scheduled and timers as they fall due; ``until_idle``: return once
        there is nothing left to run or wait for."""
        self._runner = trio.lowlevel.current_task()
        ready, timers = self._ready, self._timers
        while True:
            now = time.monotonic()
            while timers and (timers[0]._cancelled or timers[0].when() <= now):
                timer = heapq.heappop(timers)
                if not timer._cancelled:
                    ready.append(timer)
            for _ in range(len(ready)):
                handle = ready.popleft()
                if not handle._cancelled:
                    handle._run()
            if ready:
                await trio.lowlevel.checkpoint()
                continue
            if timers and all(timer._cancelled for timer in timers):
                timers.clear()
            if until_idle and not timers and not self._shutdown_hooks:
                return
            deadline = trio_deadline(timers[0].when()) if timers else math.inf
            with trio.CancelScope(deadline=deadline):
                self._parked = True
                await trio.lowlevel.wait_task_rescheduled(self._unpark)
            self._parked = False

    def _unpark(self, _raise_cancel: Any) -> trio.lowlevel.Abort:
        self._parked = False
        return trio.lowlevel.Abort.SUCCEEDED

    # -- the seam's primitives beyond the loop's methods ----------------------------------------------------

    def timeout_at(self, deadline: float | None) -> AbstractAsyncContextManager[Any]:
        return _Timeout(deadline)

    async def sleep(self, delay: float) -> None:
        await trio.sleep(max(delay, 0.0))

    def new_event(self) -> EventLike:
        return _Event(self)

    def new_lock(self) -> LockLike:
        return _Lock(self)

    def new_cancel_scope(self) -> CancelScopeLike:
        return trio.CancelScope()

    async def shield(self, awaitable: Awaitable[T]) -> T:
        inner: asyncio.Future[T] = (
            awaitable if isinstance(awaitable, asyncio.Future) else self.create_task(awaitable)  # type: ignore[arg-type]
        )
        if inner.done():
            return inner.result()
        outer: asyncio.Future[T] = self.create_future()
        inner.add_done_callback(lambda done: _copy_outcome(done, outer))
        return await outer

    async def gather(self, awaitables: tuple[Awaitable[Any], ...]) -> list[Any]:
        futures = [
            item if isinstance(item, asyncio.Future) else self.create_task(item)  # type: ignore[arg-type]
            for item in awaitables
        ]
        results: list[Any] = []
        for future in futures:
            try:
                results.append(await future)
            except (Exception, asyncio.CancelledError) as exc:
                results.append(exc)
        return results

    def current_task(self) -> object | None:
        return trio.lowlevel.current_task()

    async def to_thread(self, func: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(func)

    async def take_uninterrupted(self, lock: LockLike) -> None:
        with trio.CancelScope(shield=True):
            await lock.acquire()

    async def finish_shielded(self, work: Callable[[], Awaitable[T]], limit: float) -> T:
        with trio.CancelScope(shield=True, deadline=trio.current_time() + limit):
            return await work()
        raise TimeoutError(f"the shielded clean-up did not finish within {limit} s")

    async def open_byte_stream(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
    ) -> tuple[ByteReader, ByteWriter]:
        from mongio.backend.trio_stream import open_byte_stream

        return await open_byte_stream(host, port, ssl_context, server_hostname, limit)

    async def wrap_byte_stream(
        self, sock: socket.socket, ssl_context: ssl.SSLContext, server_hostname: str, limit: int
    ) -> tuple[ByteReader, ByteWriter]:
        from mongio.backend.trio_stream import wrap_byte_stream

        return await wrap_byte_stream(sock, ssl_context, server_hostname, limit)

    async def to_thread_abandonable(self, func: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(func, abandon_on_cancel=True)

    async def open_process(self, args: Sequence[str]) -> ChildProcess:
        from mongio.backend.trio_process import open_process

        return await open_process(args)

    async def getnameinfo(
        self, sockaddr: tuple[str, int] | tuple[str, int, int, int], flags: int = 0
    ) -> tuple[str, str]:
        return await trio.socket.getnameinfo(sockaddr, flags)

    async def open_message_stream(
        self,
        address: tuple[str, int | None],
        name: str,
        unix: bool,
        ssl_context: ssl.SSLContext | None,
        proxied: Any,
    ) -> MessageProtocol:
        from mongio.backend.trio_stream import connect_stream

        return await connect_stream(self, address, name, unix, ssl_context, proxied)


def _nothing() -> None:
    pass


def _copy_outcome(done: asyncio.Future[T], outer: asyncio.Future[T]) -> None:
    if outer.done():
        return
    if done.cancelled():
        outer.cancel()
    elif done.exception() is not None:
        outer.set_exception(done.exception())  # type: ignore[arg-type]
    else:
        outer.set_result(done.result())
