"""The monitor of one server: an ``asyncio.Task`` checking it with ``hello`` on a dedicated connection.

It follows the Server Monitoring specification. Against a server that reports a ``topologyVersion`` (4.4+)
it streams: one awaitable ``hello`` with ``topologyVersion``, ``maxAwaitTimeMS`` and the ``exhaustAllowed``
flag, after which the server pushes a reply whenever its state changes, or every ``heartbeatFrequencyMS``
otherwise; a second task (:class:`~mongio.topology.rtt_monitor.RttMonitor`) measures round trip times.
Otherwise (older servers, ``serverMonitoringMode=poll``, or ``auto`` on a FaaS platform) it polls: a plain
``hello`` then a sleep of ``heartbeatFrequencyMS``.

Between checks the task waits on an ``asyncio.Event`` with the heartbeat as its timeout: ``request_check()``
sets the event and the task checks at once (but never sooner than 0.5 s after the previous check ended).
Nothing polls. Each outcome goes to the topology through the ``on_check`` callback, which applies it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mongio.backend import gather, new_event, running_loop, sleep, timeout
from mongio.bson.int64 import Int64
from mongio.connection.connection import connect
from mongio.connection.establish import ConnectionSettings, handshake
from mongio.connection.handshake import detect_environment
from mongio.error_classification import is_network_error
from mongio.errors import AutoReconnect, ConfigurationError, OperationFailure
from mongio.topology.heartbeat_events import SdamPublisher
from mongio.topology.rtt_monitor import (
    MonitorConnection,
    MonitorConnectionFactory,
    OpenedCallback,
    RttMonitor,
    open_timed,
    wait_sockets_closed,
)
from mongio.topology.selection import RoundTripTimeTracker
from mongio.topology.server_description import Address, ServerDescription, format_address
from mongio.topology.settings import MIN_HEARTBEAT_FREQUENCY

__all__ = [
    "SERVER_MONITORING_MODES",
    "Monitor",
    "is_faas",
    "monitor_connection_factory",
    "streaming_enabled",
]

_log = logging.getLogger("mongio.topology")

SERVER_MONITORING_MODES = ("auto", "stream", "poll")


def is_faas(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the process runs on a Function-as-a-Service platform, by the handshake's ``client.env`` rules
    (``AWS_EXECUTION_ENV``/``AWS_LAMBDA_RUNTIME_API``, ``FUNCTIONS_WORKER_RUNTIME``, ``K_SERVICE``/
    ``FUNCTION_NAME``, ``VERCEL``; several at once, Vercel on Lambda aside, count as none)."""
    env = detect_environment(os.environ if environ is None else environ, dockerenv="")
    return "name" in env


def streaming_enabled(mode: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``serverMonitoringMode`` allows the streaming protocol here."""
    if mode == "stream":
        return True
    if mode == "poll":
        return False
    if mode == "auto":
        return not is_faas(environ)
    raise ConfigurationError(
        f"serverMonitoringMode must be one of {', '.join(SERVER_MONITORING_MODES)}, not {mode!r}"
    )


def monitor_connection_factory(settings: ConnectionSettings) -> MonitorConnectionFactory:
    """The factory of real monitoring connections: TCP (or TLS, or a Unix socket) and the handshake ``hello``
    with the client metadata, compression negotiation and stable API fields of ``settings``, but never
    authentication. The connections have no socket timeout of their own: monitors give each wait a
    deadline (``connectTimeoutMS``, plus ``heartbeatFrequencyMS`` for awaitable replies).
    """
    ids = itertools.count(1)

    async def open_monitor_connection(address: Address, opened: OpenedCallback | None = None) -> MonitorConnection:
        connection = await connect(
            address,
            id=next(ids),
            connect_timeout=settings.connect_timeout,
            socket_timeout=None,
            ssl_context=settings.ssl_context,
            proxy=settings.proxy,
            revocation=settings.revocation,
        )
        if opened is not None:
            opened(connection)
        try:
            await handshake(connection, settings, authenticate=False)
        except BaseException as exc:
            connection.close(f"the monitoring handshake failed: {type(exc).__name__}")
            raise
        return connection

    return open_monitor_connection



class _Heartbeat:
    """When a heartbeat's hello started (the connection's opening excluded) and whether it was awaited."""

    __slots__ = ("awaited", "start")

    def __init__(self, start: float) -> None:
        self.start = start
        self.awaited = False

class _CheckCancelled(Exception):
    """The topology cancelled the check in progress (an application saw a network error)."""


CheckCallback = Callable[[ServerDescription], Awaitable[None]]


class Monitor:
    """Checks one server until stopped and reports every outcome through ``on_check``.

    ``streaming`` says whether the streaming protocol may be used (see :func:`streaming_enabled`); it is
    used only once the server shows it supports it. ``command_fields`` are added to every monitoring
    ``hello`` (the stable API fields; declaring an API version implies ``hello`` over the legacy name).
    """

    def __init__(
        self,
        address: Address,
        factory: MonitorConnectionFactory,
        on_check: CheckCallback,
        *,
        heartbeat_frequency: float,
        connect_timeout: float | None,
        streaming: bool,
        rtt: RoundTripTimeTracker | None = None,
        publisher: SdamPublisher | None = None,
        command_fields: Mapping[str, Any] | None = None,
        min_heartbeat_frequency: float = MIN_HEARTBEAT_FREQUENCY,
    ) -> None:
        self._address = address
        self._factory = factory
        self._on_check = on_check
        self._heartbeat = heartbeat_frequency
        # Tests may run monitors faster than the user-facing minimum; the minimum never exceeds the heartbeat.
        self._min_heartbeat = min(min_heartbeat_frequency, heartbeat_frequency)
        self._connect_timeout = connect_timeout or None
        self._streaming = streaming
        self.rtt = rtt if rtt is not None else RoundTripTimeTracker()
        self._publisher = publisher if publisher is not None else SdamPublisher(None)
        self._command_fields = dict(command_fields or {})
        self._api_declared = "apiVersion" in self._command_fields
        self._use_hello = self._api_declared
        self._description = ServerDescription(address)
        self._connection: MonitorConnection | None = None
        # The connection being opened (connected, its handshake not yet answered): a heartbeat failing there
        # names it.
        self._opening: MonitorConnection | None = None
        self._event = new_event()
        self._task: asyncio.Task[None] | None = None
        self._rtt_monitor: RttMonitor | None = None
        self._checking = False
        self._check_cancelled = False
        self._stopped = False
        self._dropped: list[MonitorConnection] = []
        self.checks = 0
        """How many checks were started (for diagnostics and tests)."""

    def __repr__(self) -> str:
        return f"<Monitor {format_address(self._address)} streaming={self._streaming}>"

    @property
    def address(self) -> Address:
        return self._address

    @property
    def description(self) -> ServerDescription:
        """The outcome of the last check (Unknown before the first)."""
        return self._description

    @property
    def connection(self) -> MonitorConnection | None:
        """The monitoring connection, while one is open."""
        return self._connection

    @property
    def rtt_monitor(self) -> RttMonitor | None:
        """The round trip time task, once streaming started it."""
        return self._rtt_monitor

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def unfinished_tasks(self) -> list[asyncio.Task[None]]:
        """The monitor's task and its round trip time task, those that have not finished."""
        found = [self._task] if self._task is not None and not self._task.done() else []
        if self._rtt_monitor is not None:
            found.extend(self._rtt_monitor.unfinished_tasks())
        return found

    def start(self) -> None:
        """Start the monitor task (once); needs a running event loop."""
        if self._task is None and not self._stopped:
            self._task = running_loop().create_task(
                self._run(), name=f"mongio monitor {format_address(self._address)}"
            )

    def request_check(self) -> None:
        """Check as soon as allowed. Ignored while a check is in progress (its outcome answers the request)."""
        self._event.set()

    def cancel_check(self) -> None:
        """Interrupt the check in progress and close the monitoring connection; the next check reconnects.

        Used when an application operation saw a network error and the topology already marked the server
        Unknown: the cancelled check reports nothing, and the monitor waits before checking again.
        """
        if self._checking:
            self._check_cancelled = True
        self._drop_connection("the server was marked Unknown after a network error")

    def stop(self) -> list[asyncio.Task[None]]:
        """Cancel the monitor and its round trip time task without waiting; returns the tasks to await."""
        self._stopped = True
        tasks = []
        for task in (self._task, self._rtt_monitor.stop() if self._rtt_monitor is not None else None):
            if task is not None:
                if not task.done():
                    task.cancel()
                tasks.append(task)
        return tasks

    async def close(self) -> None:
        """Stop checking, wait for the tasks to end, and close the connections (until their sockets are)."""
        tasks = self.stop()
        if tasks:
            await gather(*tasks)
        self._drop_connection("the client is closing")
        if self._rtt_monitor is not None:
            await self._rtt_monitor.close()
        await wait_sockets_closed(self._dropped)

    def let_go(self) -> None:
        """:meth:`close` once the monitor's event loop will never run again (see
        :class:`~mongio.loop_runtime.bound.LoopBound`): its tasks are only forgotten, and its connections,
        which the runtime let go of first, are dropped."""
        self._stopped = True
        self._task = None
        self._drop_connection("the event loop closed")
        self._dropped.clear()
        if self._rtt_monitor is not None:
            self._rtt_monitor.let_go()

    # -- the loop ------------------------------------------------------------------------------------------

    def _drop_connection(self, reason: str) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close(reason)
            if self._stopped:
                self._dropped.append(connection)

    async def _run(self) -> None:
        try:
            while not self._stopped:
                previous = self._description
                try:
                    description = await self._check(previous)
                except _CheckCancelled:
                    await self._wait()
                    continue
                self._description = description
                try:
                    await self._on_check(description)
                except Exception:
                    _log.exception("applying the check of %s failed", format_address(self._address))
                supports_streaming = (
                    description.is_server_type_known and description.topology_version is not None
                )
                connection = self._connection
                streaming_now = connection is not None and not connection.closed and connection.more_to_come
                if self._streaming and supports_streaming and self._rtt_monitor is None and not self._stopped:
                    self._rtt_monitor = RttMonitor(
                        self._address,
                        self._factory,
                        self.rtt,
                        heartbeat_frequency=self._heartbeat,
                        connect_timeout=self._connect_timeout,
                        hello_ok=self._use_hello,
                        command_fields=self._command_fields,
                    )
                    self._rtt_monitor.start()
                # A server known until a network error is checked again at once: the error may have been a
                # blip or a restart, and marking it Unknown for a whole heartbeat would be too harsh.
                retry = is_network_error(description.error) and previous.is_server_type_known
                if (self._streaming and (supports_streaming or streaming_now)) or retry:
                    continue
                await self._wait()
        finally:
            self._drop_connection("monitoring stopped")

    async def _wait(self) -> None:
        loop = running_loop()
        start = loop.time()
        if not self._event.is_set():
            try:
                async with timeout(self._heartbeat):
                    await self._event.wait()
            except TimeoutError:
                pass
        self._event.clear()
        waited = loop.time() - start
        if waited < self._min_heartbeat:
            await sleep(self._min_heartbeat - waited)

    def _hello_command(self, topology_version: Mapping[str, Any] | None) -> dict[str, Any]:
        command: dict[str, Any] = {"hello" if self._use_hello else "isMaster": 1, "helloOk": True}
        if topology_version is not None:
            command["topologyVersion"] = topology_version
            command["maxAwaitTimeMS"] = Int64(round(self._heartbeat * 1000))
        command.update(self._command_fields)
        return command

    def _deadline(self, awaited: bool) -> float | None:
        if self._connect_timeout is None:
            return None  # connectTimeoutMS=0: no limit, for the awaitable hello too
        extra = self._heartbeat if awaited else 0.0
        return running_loop().time() + self._connect_timeout + extra

    async def _check(self, previous: ServerDescription) -> ServerDescription:
        loop = running_loop()
        self.checks += 1
        # A request that arrives while this check runs is answered by it.
        self._event.clear()
        self._checking = True
        self._check_cancelled = False
        publisher = self._publisher if self._publisher.heartbeat_enabled else None
        attempt = _Heartbeat(loop.time())
        try:
            reply = await self._hello(previous, publisher, attempt)
            duration = loop.time() - attempt.start
            if reply.get("ok") != 1:
                code = reply.get("code")
                raise OperationFailure(
                    str(reply.get("errmsg", "hello failed")), int(code) if code is not None else None, reply
                )
            self._use_hello = self._api_declared or bool(reply.get("helloOk"))
            if publisher is not None:
                connection = self._connection
                server_id = connection.server_connection_id if connection is not None else None
                connection_id = connection.id if connection is not None else None
                publisher.heartbeat_succeeded(
                    self._address, duration, reply, attempt.awaited, connection_id, server_id
                )
            return ServerDescription(self._address, reply, self.rtt.average, min_round_trip_time=self.rtt.min)
        except Exception as exc:
            return self._check_failed(exc, loop.time() - attempt.start, attempt.awaited, publisher)
        finally:
            self._checking = False

    async def _hello(
        self, previous: ServerDescription, publisher: SdamPublisher | None, attempt: _Heartbeat
    ) -> Mapping[str, Any]:
        """One heartbeat's hello: the handshake of a new connection, the next reply of a stream, a streaming
        (awaited) hello, or a polling one; ``attempt`` gets when it started and whether it was awaited."""
        loop = running_loop()
        connection = self._connection
        if connection is None or connection.closed:
            self._connection = None
            if publisher is not None:
                publisher.heartbeat_started(self._address, False, log=False)
            attempt.start = loop.time()
            self._opening = None
            connection, handshake_time = await open_timed(
                self._factory, self._address, self._connect_timeout, self._connection_opening
            )
            self._opening = None
            if self._check_cancelled or self._stopped:
                connection.close("the check was cancelled")
                raise AutoReconnect("the check was cancelled while connecting")
            self._connection = connection
            if publisher is not None:
                publisher.heartbeat_started(
                    self._address, False, connection.id, connection.server_connection_id, event=False
                )
            reply: Mapping[str, Any] = connection.hello or {}
            if reply.get("ok") == 1:
                self.rtt.add_sample(handshake_time)
            return reply
        streaming = connection.more_to_come or (self._streaming and previous.topology_version is not None)
        attempt.awaited = streaming
        if publisher is not None:
            publisher.heartbeat_started(self._address, streaming, connection.id, connection.server_connection_id)
        attempt.start = loop.time()
        if connection.more_to_come:
            return await connection.receive(check=False, deadline=self._deadline(True))
        if streaming:
            return await connection.command(
                "admin",
                self._hello_command(previous.topology_version),
                exhaust_allowed=True,
                check=False,
                deadline=self._deadline(True),
            )
        reply = await connection.command(
            "admin", self._hello_command(None), check=False, deadline=self._deadline(False)
        )
        if reply.get("ok") == 1:
            self.rtt.add_sample(loop.time() - attempt.start)
        return reply

    def _connection_opening(self, connection: MonitorConnection) -> None:
        self._opening = connection

    def _check_failed(
        self, exc: Exception, duration: float, awaited: bool, publisher: SdamPublisher | None
    ) -> ServerDescription:
        """A failed check: the heartbeat failed event, the connection dropped, the RTT samples forgotten."""
        if publisher is not None:
            connection = self._connection
            ids: tuple[int | None, int | None]
            if connection is not None:
                ids = (connection.id, connection.server_connection_id)
            else:
                ids = (None if self._opening is None else self._opening.id, None)
            publisher.heartbeat_failed(self._address, duration, exc, awaited, *ids)
        self._drop_connection(f"the check failed: {exc}")
        self.rtt.reset()
        if self._check_cancelled:
            raise _CheckCancelled() from exc
        return ServerDescription(self._address, error=exc)
