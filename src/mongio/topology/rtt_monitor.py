"""The round trip time task of a streamed server: a plain ``hello`` on its own connection every heartbeat.

While a monitor streams, its ``hello`` replies are held back by the server and say nothing about latency, so
the Server Monitoring specification measures round trip times on a second connection. This task feeds the
server's :class:`~mongio.topology.selection.RoundTripTimeTracker`; it never touches the topology and
publishes no events, and a failed ping only drops its connection (the monitor decides about the server).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mongio.backend import gather, running_loop, sleep, timeout
from mongio.topology.selection import RoundTripTimeTracker
from mongio.topology.server_description import Address, format_address

__all__ = [
    "MonitorConnection",
    "MonitorConnectionFactory",
    "RttMonitor",
    "open_timed",
    "wait_sockets_closed",
]

_log = logging.getLogger("mongio.topology")


class MonitorConnection(Protocol):
    """What monitoring needs of a connection (``mongio.connection.Connection`` qualifies).

    The factory returns it handshaked (``hello`` holds the handshake reply) and not authenticated.
    """

    id: int
    server_connection_id: int | None
    hello: Mapping[str, Any] | None
    # How long the handshake's hello took (seconds), when the connection measured it.
    hello_round_trip: float | None

    @property
    def closed(self) -> bool: ...

    @property
    def more_to_come(self) -> bool: ...

    async def command(
        self,
        db: str,
        command: Mapping[str, Any],
        *,
        exhaust_allowed: bool = False,
        check: bool = True,
        deadline: float | None = None,
    ) -> dict[str, Any]: ...

    async def receive(self, *, check: bool = True, deadline: float | None = None) -> dict[str, Any]: ...

    def close(self, reason: str = ...) -> None: ...


OpenedCallback = Callable[[MonitorConnection], None]


class MonitorConnectionFactory(Protocol):
    """Opens a monitoring connection to an address: connected, handshaked with ``hello`` (client metadata, no
    authentication, no ``saslSupportedMechs``), and outside any pool. ``opened``, when given, is told of the
    connection as soon as it is connected, before its handshake: a heartbeat whose handshake fails names the
    connection it failed on."""

    def __call__(self, address: Address, opened: OpenedCallback | None = None, /) -> Awaitable[MonitorConnection]: ...


async def open_timed(
    factory: MonitorConnectionFactory,
    address: Address,
    connect_timeout: float | None,
    opened: OpenedCallback | None = None,
) -> tuple[MonitorConnection, float]:
    """Open a connection through ``factory`` within ``connect_timeout`` and return it with the handshake's
    round trip time; ``opened`` is passed on to the factory.

    The time is the handshake ``hello`` alone when the connection measured it (``hello_round_trip``), else
    the whole opening, which overstates it by the TCP (and TLS) set-up.
    """
    loop = running_loop()
    start = loop.time()
    if connect_timeout:
        async with timeout(connect_timeout):
            connection = await factory(address, opened)
    else:
        connection = await factory(address, opened)
    elapsed = loop.time() - start
    hello_round_trip = connection.hello_round_trip
    if hello_round_trip is not None and hello_round_trip >= 0:
        elapsed = hello_round_trip
    return connection, elapsed


async def wait_sockets_closed(connections: list[MonitorConnection], limit: float = 1.0) -> None:
    """Wait (at most ``limit`` seconds) until the sockets of closed connections are really closed, for
    connections that can tell (``wait_closed()``); empties the list."""
    waits = []
    for connection in connections:
        wait_closed = getattr(connection, "wait_closed", None)
        if wait_closed is not None:
            waits.append(wait_closed())
    connections.clear()
    if waits:
        try:
            async with timeout(limit):
                await gather(*waits)
        except TimeoutError:
            pass


class RttMonitor:
    """Measures one server's round trip time every ``heartbeat_frequency`` seconds on a dedicated connection.

    ``start()`` launches the task; ``close()`` stops it and closes its connection. Between pings the task
    sleeps on one timer; nothing else wakes it.
    """

    def __init__(
        self,
        address: Address,
        factory: MonitorConnectionFactory,
        tracker: RoundTripTimeTracker,
        *,
        heartbeat_frequency: float,
        connect_timeout: float | None,
        hello_ok: bool = False,
        command_fields: Mapping[str, Any] | None = None,
    ) -> None:
        self._address = address
        self._factory = factory
        self._tracker = tracker
        self._heartbeat = heartbeat_frequency
        self._connect_timeout = connect_timeout
        self._use_hello = hello_ok
        self._always_hello = bool(command_fields and "apiVersion" in command_fields)
        self._command_fields = dict(command_fields or {})
        self._connection: MonitorConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._dropped: list[MonitorConnection] = []
        self.pings = 0
        """How many pings were attempted (for diagnostics and tests)."""

    @property
    def started(self) -> bool:
        return self._task is not None

    def unfinished_tasks(self) -> list[asyncio.Task[None]]:
        """The round trip time task, while it has not finished."""
        task = self._task
        return [task] if task is not None and not task.done() else []

    @property
    def connection(self) -> MonitorConnection | None:
        """The connection the pings use, while one is open."""
        return self._connection

    def start(self) -> None:
        """Start measuring (once)."""
        if self._task is None:
            self._task = running_loop().create_task(
                self._run(), name=f"mongio rtt {format_address(self._address)}"
            )

    def stop(self) -> asyncio.Task[None] | None:
        """Cancel the task without waiting; returns it so the caller can await its end."""
        self._stopped = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        return task

    async def close(self) -> None:
        """Stop the task, wait for it to end, and close the connection (waiting until its socket is closed)."""
        task = self.stop()
        if task is not None:
            await gather(task)
        self._drop_connection("the client is closing")
        await wait_sockets_closed(self._dropped)

    def let_go(self) -> None:
        """:meth:`close` once the event loop will never run again (see
        :class:`~mongio.loop_runtime.bound.LoopBound`): the task is forgotten, the connection (which the
        runtime let go of first) dropped."""
        self._stopped = True
        self._task = None
        self._drop_connection("the event loop closed")
        self._dropped.clear()

    def _drop_connection(self, reason: str) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close(reason)
            if self._stopped:
                self._dropped.append(connection)

    async def _run(self) -> None:
        try:
            while True:
                self.pings += 1
                try:
                    sample = await self._ping()
                except Exception as exc:
                    # The monitor owns the server's state and resets the average; only the connection goes.
                    _log.debug("round trip time check of %s failed: %r", format_address(self._address), exc)
                    self._drop_connection(f"round trip time check failed: {exc}")
                    self._use_hello = self._always_hello
                else:
                    self._tracker.add_sample(sample)
                await sleep(self._heartbeat)
        finally:
            self._drop_connection("round trip time monitoring stopped")

    async def _ping(self) -> float:
        connection = self._connection
        if connection is None or connection.closed:
            connection, elapsed = await open_timed(self._factory, self._address, self._connect_timeout)
            self._connection = connection
            self._use_hello = self._always_hello or bool((connection.hello or {}).get("helloOk"))
            return elapsed
        loop = running_loop()
        command: dict[str, Any] = {"hello" if self._use_hello else "isMaster": 1, "helloOk": True}
        command.update(self._command_fields)
        deadline = loop.time() + self._connect_timeout if self._connect_timeout else None
        start = loop.time()
        reply = await connection.command("admin", command, check=False, deadline=deadline)
        elapsed = loop.time() - start
        self._use_hello = self._always_hello or bool(reply.get("helloOk"))
        return elapsed
