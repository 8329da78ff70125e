"""Connection pool test support: a connection factory without I/O and an event recorder."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from mongio import backend
from mongio.connection.pool import Pool
from mongio.connection.pool_options import PoolOptions
from mongio.events import ConnectionPoolListener

ADDRESS = ("db.example.com", 27017)


class FakeConnection:
    """Behaves like ``Connection`` where the pool can tell: an interrupted exchange closes it."""

    def __init__(self, factory: FakeFactory, connection_id: int, generation: int, service_id: Any) -> None:
        self.factory = factory
        self.id = connection_id
        self.generation = generation
        self.service_id = service_id
        self.last_used = time.monotonic()
        self.close_reason: str | None = None
        self.in_exchange = False
        self.more_to_come = False  # an exhaust stream's replies still to read (then in_exchange too)
        self.peer_hung_up = False
        """Set by a test: the peer ended the connection while it sat idle, unseen until somebody looks
        (``hung_up_while_idle``), as on a pull-based stream."""

    @property
    def closed(self) -> bool:
        return self.close_reason is not None

    def hung_up_while_idle(self) -> bool:
        if self.peer_hung_up:
            self.close("the peer hung up")
        return self.closed

    def close(self, reason: str = "closed") -> None:
        if self.close_reason is None:
            self.close_reason = reason
            self.factory.open -= 1

    async def command(self, seconds: float) -> None:
        if self.closed:
            raise ConnectionError(f"connection {self.id} is closed: {self.close_reason}")
        try:
            await asyncio.sleep(seconds)
        except BaseException:
            self.close("interrupted")
            raise
        if self.closed:
            raise ConnectionError(f"connection {self.id} was closed during the command: {self.close_reason}")


class FakeFactory:
    """``connect(connection_id, generation)``: optionally slow, optionally failing; counts open connections."""

    def __init__(
        self,
        delay: float | Callable[[], float] = 0.0,
        error: BaseException | None = None,
        service_id: Callable[[int], Any] | None = None,
    ) -> None:
        self.delay = delay
        self.error = error
        self.service_id = service_id
        self.open = 0
        self.max_open = 0
        self.establishing = 0
        self.max_establishing = 0
        self.made: list[FakeConnection] = []

    async def __call__(self, connection_id: int, generation: int) -> FakeConnection:
        self.establishing += 1
        self.max_establishing = max(self.max_establishing, self.establishing)
        try:
            delay = self.delay() if callable(self.delay) else self.delay
            if delay:
                await backend.sleep(delay)  # asyncio's, or trio's in a trio run
            if self.error is not None:
                raise self.error
        finally:
            self.establishing -= 1
        service = self.service_id(connection_id) if self.service_id is not None else None
        conn = FakeConnection(self, connection_id, generation, service)
        self.made.append(conn)
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        return conn


class Recorder(ConnectionPoolListener):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def _add(self, event: Any) -> None:
        self.events.append(event)

    pool_created = pool_ready = pool_cleared = pool_closed = _add
    connection_created = connection_ready = connection_closed = _add
    connection_check_out_started = connection_check_out_failed = _add
    connection_checked_out = connection_checked_in = _add

    def types(self) -> list[str]:
        return [type(event).__name__ for event in self.events]

    def of(self, name: str) -> list[Any]:
        return [event for event in self.events if type(event).__name__ == name]


def make_pool(
    factory: FakeFactory | None = None,
    *,
    recorder: Recorder | None = None,
    ready: bool = True,
    on_connect_error: Callable[[BaseException, int], None] | None = None,
    background_task: bool = True,
    **options: Any,
) -> Pool[FakeConnection]:
    listeners = [recorder] if recorder is not None else []
    pool: Pool[FakeConnection] = Pool(
        ADDRESS,
        factory if factory is not None else FakeFactory(),
        PoolOptions(event_listeners=listeners, **options),
        on_connect_error=on_connect_error,
        background_task=background_task,
    )
    if ready:
        pool.ready()
    return pool
