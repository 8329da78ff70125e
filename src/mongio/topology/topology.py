"""``Topology``: the client's live view of the deployment, kept current by one monitor task per server.

The topology owns the current :class:`~mongio.topology.topology_description.TopologyDescription` and, per
server, a monitor (plus, while streaming, a round trip time task) and a connection pool. Every new server
description goes through the pure update rules while holding one ``asyncio.Condition``; the description is
replaced, monitors are started or stopped for servers that appeared or left, pools are marked ready or
cleared in the same step, and every waiter on the condition is woken. The condition is a
:class:`~mongio.topology.change_condition.ChangeCondition`, whose waits end in constant time however many
selections wait.

Server selection has a synchronous fast path: when the current description already holds a suitable server,
:meth:`Topology.select_server` returns it without awaiting anything. Otherwise it asks every monitor for an
immediate check and awaits the condition with the time that remains of ``serverSelectionTimeoutMS``; no
loop wakes up to poll.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mongio.backend import gather, running_loop, timeout
from mongio.bson.objectid import ObjectId
from mongio.error_classification import (
    ApplicationError,
    ErrorDecision,
    application_error_decision,
    is_network_timeout,
)
from mongio.errors import ClientClosedError, ConfigurationError, MongioError, ServerSelectionTimeoutError
from mongio.events.logs import LogMessage, format_error
from mongio.loop_runtime.bound import LoopBound
from mongio.topology.change_condition import ChangeCondition
from mongio.topology.heartbeat_events import SERVER_SELECTION_LOGGER, SdamPublisher
from mongio.topology.monitor import Monitor, streaming_enabled
from mongio.topology.rtt_monitor import MonitorConnectionFactory
from mongio.topology.selection import (
    MODE_NAMES,
    ReadPreferenceLike,
    RoundTripTimeTracker,
    ServerSelector,
    choose_server,
    rejection_reasons,
    select_servers,
)
from mongio.topology.server_description import Address, ServerDescription, format_address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import MIN_HEARTBEAT_FREQUENCY, TopologySettings
from mongio.topology.topology_description import (
    TopologyDescription,
    initial_topology_description,
    updated_topology_description,
    updated_topology_description_srv_polling,
)
from mongio.topology.topology_type import SRV_POLLING_TOPOLOGIES, TopologyType

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.options.srv import DnsResolver
    from mongio.topology.srv_polling import SrvPoller

__all__ = ["PoolLike", "Server", "Topology", "describe_topology"]

_log = logging.getLogger("mongio.topology")
_DEBUG = logging.DEBUG
_INFO = logging.INFO

# A successful check of one of these makes its pool ready (so is any known server of a Single topology).
_POOL_READY_TYPES = frozenset(
    {
        ServerType.Mongos,
        ServerType.RSPrimary,
        ServerType.RSSecondary,
        ServerType.Standalone,
        ServerType.LoadBalancer,
    }
)


class PoolLike(LoopBound, Protocol):
    """What the topology needs of a connection pool (``mongio.connection.pool`` provides one), ``let_go``
    included."""

    @property
    def generation(self) -> int: ...

    def generation_for(self, service_id: Any = None) -> int: ...

    def ready(self) -> None: ...

    def clear(
        self,
        interrupt_in_use_connections: bool = False,
        service_id: Any = None,
        *,
        error: BaseException | None = None,
    ) -> Any: ...

    def close(self, interrupt_in_use_connections: bool = False) -> Any:
        """Close the pool; with ``interrupt_in_use_connections`` the connections in use are closed now too
        (their operations fail at once instead of running on)."""
        ...

    async def check_out(self, max_wait: float | None = None) -> Connection:
        """A connection of this pool, ready for a command (waiting at most ``max_wait`` seconds)."""
        ...

    def check_in(self, conn: Connection) -> None:
        """Give back a connection :meth:`check_out` gave."""
        ...

    def pin(self, conn: Connection, purpose: str) -> None:
        """Record that a cursor or a transaction holds ``conn`` across commands (load-balanced mode)."""
        ...


ConnectErrorHook = Callable[[BaseException, int], None]
"""How a pool reports a connection that failed while being established: ``(error, generation)``."""

PoolFactory = Callable[[Address, ConnectErrorHook], PoolLike]
"""Makes the pool of a server: its address, and the hook through which the pool reports a connection that
failed while being established to the topology (:meth:`Topology.report_connect_error`)."""


class Server:
    """One server of the topology at run time: its pool, its monitor, and the operations running on it.

    :meth:`Topology.select_server` counts the selected server's operation as started; call
    :meth:`operation_finished` once the operation is over, however it ended (or use ``with server:``).
    """

    __slots__ = ("_topology", "address", "monitor", "operation_count", "pool")

    def __init__(
        self, topology: Topology, address: Address, pool: PoolLike | None, monitor: Monitor | None
    ) -> None:
        self._topology = topology
        self.address = address
        self.pool = pool
        self.monitor = monitor
        self.operation_count = 0

    def __repr__(self) -> str:
        return f"<Server {format_address(self.address)} operations={self.operation_count}>"

    @property
    def description(self) -> ServerDescription:
        """The server's current description (Unknown once it left the topology)."""
        return self._topology.description.get(self.address) or ServerDescription(self.address)

    def operation_finished(self) -> None:
        """Count one operation on this server as over; never wakes selection."""
        if self.operation_count > 0:
            self.operation_count -= 1

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.operation_finished()


def _operation_label(operation: str, operation_id: int | None) -> str:
    """How selection log messages name the operation: ``insert with ID 7`` when it has an id."""
    return operation if operation_id is None else f"{operation} with ID {operation_id}"


def _describe_read_preference(read_preference: ReadPreferenceLike | None) -> str:
    if read_preference is None:
        return "read preference primary"
    mode = read_preference.mode
    text = f"read preference {MODE_NAMES[mode] if 0 <= mode < len(MODE_NAMES) else mode}"
    tag_sets = [dict(tags) for tags in (read_preference.tag_sets or ())]
    if tag_sets and tag_sets != [{}]:
        text += f", tag sets {tag_sets}"
    staleness = read_preference.max_staleness
    if staleness is not None and staleness != -1:
        text += f", maxStalenessSeconds {staleness:g}"
    return text


def describe_topology(description: TopologyDescription, reasons: Mapping[Address, str] | None = None) -> str:
    """A short text of the topology for error messages: its type, each server's address, type and error (or
    the reason selection rejected it, from ``reasons``), and why recently removed servers left."""
    servers = sorted(description.server_descriptions().values(), key=lambda sd: format_address(sd.address))
    parts = []
    for sd in servers:
        part = f"{format_address(sd.address)} ({sd.server_type.name}"
        reason = None if reasons is None else reasons.get(sd.address)
        if reason is not None:
            part += f", {reason}"
        elif sd.error is not None:
            part += f", error: {format_error(sd.error)}"
        parts.append(part + ")")
    listed = ", ".join(parts) if parts else "none"
    text = f"topology type {description.topology_type.name}, servers: {listed}"
    removed = description.removed_servers
    if removed:
        gone = ", ".join(f"{format_address(address)} ({why})" for address, why in removed.items())
        text += f"; removed from the topology: {gone}"
    if description.compatibility_error is not None:
        text += f"; {description.compatibility_error}"
    return text


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


class Topology:
    """The deployment as the client sees it, kept current in the background.

    ``monitor_connection_factory`` opens handshaked, unauthenticated monitoring connections (required
    unless load balanced); ``pool_factory`` makes the connection pool of each server, given the hook its
    connection errors go to (none when omitted, which suits tests). ``server_monitoring_mode`` is ``"auto"``, ``"stream"`` or ``"poll"``;
    ``connect_timeout`` is ``connectTimeoutMS`` in seconds (0 or None: no limit). ``listeners`` may hold
    :class:`~mongio.topology.heartbeat_events.ServerListener`, ``TopologyListener`` and
    ``ServerHeartbeatListener`` instances. ``srv_host`` (with ``srv_service_name`` and an optional
    ``srv_resolver``) starts SRV polling for a ``mongodb+srv`` URI.

    Make it anywhere; :meth:`open` (or the first :meth:`select_server`) starts the tasks on the running
    loop, and :meth:`close` stops and awaits every one of them.
    """

    def __init__(
        self,
        settings: TopologySettings,
        *,
        monitor_connection_factory: MonitorConnectionFactory | None = None,
        pool_factory: PoolFactory | None = None,
        server_monitoring_mode: str = "auto",
        connect_timeout: float | None = 20.0,
        listeners: Iterable[object] = (),
        monitor_command_fields: Mapping[str, Any] | None = None,
        srv_host: str | None = None,
        srv_service_name: str = "mongodb",
        srv_resolver: DnsResolver | None = None,
        srv_rescan_interval: float | None = None,
        srv_min_rescan_interval: float | None = None,
        environ: Mapping[str, str] | None = None,
        min_heartbeat_frequency: float = MIN_HEARTBEAT_FREQUENCY,
    ) -> None:
        # settings, description, loop and closed are read by every operation: plain attributes, set by the
        # topology alone (no other class writes them).
        self.settings = settings
        """The topology's settings (seeds, replica set name, timeouts, load balancing)."""
        self._factory = monitor_connection_factory
        self._pool_factory = pool_factory
        self._streaming = streaming_enabled(server_monitoring_mode, environ)
        self._connect_timeout = connect_timeout or None
        self._monitor_command_fields = dict(monitor_command_fields or {})
        self._min_heartbeat = min_heartbeat_frequency
        self._topology_id = ObjectId()
        self._publisher = SdamPublisher(self._topology_id, listeners)
        self.description = initial_topology_description(settings)
        """The current description: an immutable snapshot, safe to keep and read."""
        self._servers: dict[Address, Server] = {}
        self._condition = ChangeCondition()
        self._retired: set[asyncio.Future[Any]] = set()
        self._opened = False
        self.closed = False
        """True once :meth:`close` began; a closed topology is never reopened."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the topology was opened on, which its tasks, pools and condition belong to."""
        self._srv_poller: SrvPoller | None = None
        if srv_host is not None and not settings.load_balanced:
            # Imported here: only mongodb+srv clients poll DNS.
            from mongio.options.srv import MIN_RESCAN_INTERVAL
            from mongio.topology.srv_polling import SrvPoller

            self._srv_poller = SrvPoller(
                srv_host,
                self._apply_srv_hosts,
                self._srv_polling_wanted,
                heartbeat_frequency=settings.heartbeat_frequency,
                service_name=srv_service_name,
                resolver=srv_resolver,
                initial_interval=srv_rescan_interval,
                min_interval=MIN_RESCAN_INTERVAL if srv_min_rescan_interval is None else srv_min_rescan_interval,
                lifetime=self._connect_timeout,
            )

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("open" if self._opened else "not opened")
        return f"<Topology {self._topology_id} {state}: {describe_topology(self.description)}>"

    # -- state ----------------------------------------------------------------------------------------------

    @property
    def topology_id(self) -> ObjectId:
        """The id the SDAM events and log messages carry."""
        return self._topology_id

    @property
    def streaming(self) -> bool:
        """Whether monitors may use the streaming protocol (``serverMonitoringMode`` and the platform)."""
        return self._streaming

    @property
    def opened(self) -> bool:
        return self._opened

    @property
    def srv_poller(self) -> SrvPoller | None:
        return self._srv_poller

    def get_server(self, address: Address) -> Server | None:
        """The run-time server at ``address``, if it is part of the topology."""
        return self._servers.get(address)

    @property
    def servers(self) -> dict[Address, Server]:
        """A new dict of the run-time servers by address."""
        return dict(self._servers)

    @property
    def waiting_selections(self) -> int:
        """How many server selections wait for the topology to change now."""
        return self._condition.waiting

    def tasks(self) -> list[asyncio.Future[Any]]:
        """Every task this topology started that has not finished (monitors, round trip times, SRV polling)."""
        found: list[asyncio.Future[Any]] = [task for task in self._retired if not task.done()]
        for server in self._servers.values():
            if server.monitor is not None:
                found.extend(server.monitor.unfinished_tasks())
        if self._srv_poller is not None:
            found.extend(self._srv_poller.unfinished_tasks())
        return found

    async def wait_for_description(
        self, predicate: Callable[[TopologyDescription], bool]
    ) -> TopologyDescription:
        """Wait until the current description satisfies ``predicate`` and return it.

        Requests no check: it only watches what the monitors report. Bound it with ``asyncio.timeout``.
        Raises :class:`~mongio.errors.ClientClosedError` if the topology closes first.
        """
        if not predicate(self.description):
            async with self._condition:
                await self._condition.wait_for(lambda: self.closed or predicate(self.description))
        if self.closed:
            raise ClientClosedError("this topology was closed; make a new client")
        return self.description

    # -- opening and closing ----------------------------------------------------------------------------------

    async def open(self) -> None:
        """Publish the opening events and start monitoring every seed (idempotent)."""
        if self._opened:
            return
        if self.closed:
            raise ClientClosedError("this topology was closed; make a new client")
        if self._factory is None and not self.settings.load_balanced:
            raise ConfigurationError("a Topology needs a monitor connection factory unless load balanced")
        self._opened = True
        self.loop = running_loop()
        if self._publisher.sdam_enabled:
            # The SDAM event module is imported only by a topology whose events someone receives.
            from mongio.topology.sdam_events import opening_events

            self._publisher.publish(opening_events(self._topology_id, self.description))
        self._sync_servers()
        if self.settings.load_balanced:
            # A load balancer is never monitored: it is known as one from the start.
            for address in list(self.description.server_descriptions()):
                await self.on_server_description(ServerDescription.load_balancer(address))
        if self._srv_poller is not None and self._srv_polling_wanted():
            self._srv_poller.start()

    async def close(self) -> None:
        """Stop every task this topology started and wait for them, close the pools, publish the closing events.

        Selections still waiting fail with :class:`~mongio.errors.ClientClosedError`; operations running
        on a connection of a pool have it closed under them (see :meth:`Pool.close
        <mongio.connection.pool.Pool.close>`), and operations waiting for one fail. Errors of the closing
        itself are logged at debug level, never raised: closing the client must not fail on what a server
        sent.
        """
        if self.closed:
            return
        self.closed = True
        tasks: list[asyncio.Future[Any]] = list(self._retired)
        if self._srv_poller is not None:
            task = self._srv_poller.stop()
            if task is not None:
                tasks.append(task)
        for server in self._servers.values():
            if server.monitor is not None:
                tasks.extend(server.monitor.stop())
        if tasks:
            await gather(*tasks)
        for server in self._servers.values():
            await self._close_server(server)
        self._finish_closing()
        async with self._condition:
            self._condition.notify_all()

    async def _close_server(self, server: Server) -> None:
        """Close a server's monitor and pool (its connections in use interrupted), logging what fails."""
        try:
            if server.monitor is not None:
                await server.monitor.close()
        except Exception:
            _log.debug("closing the monitor of %s failed", format_address(server.address), exc_info=True)
        try:
            if server.pool is not None:
                await _maybe_await(server.pool.close(interrupt_in_use_connections=True))
        except Exception:
            _log.debug("closing the pool of %s failed", format_address(server.address), exc_info=True)

    def let_go(self) -> None:
        """:meth:`close` for a topology whose event loop will never run again (see
        :class:`~mongio.loop_runtime.bound.LoopBound`), from anywhere and without awaiting: the tasks are
        forgotten, the SRV poller, monitors and pools let go of, and the closing events are published.
        Nothing is scheduled on the loop."""
        if self.closed:
            return
        self.closed = True
        self._retired.clear()
        if self._srv_poller is not None:
            self._srv_poller.let_go()
        for server in self._servers.values():
            if server.monitor is not None:
                server.monitor.let_go()
            if server.pool is not None:
                server.pool.let_go()
        self._finish_closing()

    def _finish_closing(self) -> None:
        last = self.description
        self._servers.clear()
        self.description = TopologyDescription(TopologyType.Unknown, {}, None, None, None, self.settings)
        if self._opened and self._publisher.sdam_enabled:
            from mongio.topology.sdam_events import closing_events

            self._publisher.publish(closing_events(self._topology_id, last))

    async def __aenter__(self) -> Topology:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- applying descriptions --------------------------------------------------------------------------------

    async def on_server_description(self, server_description: ServerDescription) -> None:
        """Apply one new description of a server (a check's outcome) through the SDAM update rules.

        Monitors start for servers the update added and stop for those it removed; the server's pool is
        marked ready when the server turned out usable; everyone waiting on the topology is woken.
        """
        async with self._condition:
            self._apply(server_description)
            self._condition.notify_all()

    async def _on_check(self, server: Server, server_description: ServerDescription) -> None:
        # A failed check clears the pool in the same step as marking the server Unknown; a timeout also
        # interrupts the connections in use, which are likely stuck on the same dead path.
        async with self._condition:
            if self.closed or self._servers.get(server.address) is not server:
                return  # the server left the topology (and may have come back with a new monitor) meanwhile
            self._apply(server_description)
            error = server_description.error
            if error is not None and server.pool is not None:
                await _maybe_await(
                    server.pool.clear(interrupt_in_use_connections=is_network_timeout(error), error=error)
                )
            self._condition.notify_all()

    def _apply(self, server_description: ServerDescription) -> None:
        previous = self.description
        new = updated_topology_description(previous, server_description)
        if new is previous:
            return
        self.description = new
        server = self._servers.get(server_description.address)
        # Judge by what the topology kept: the rules may have made the server Unknown (a stale primary, a
        # set name mismatch) or removed it.
        kept = new.get(server_description.address)
        if (
            server is not None
            and server.pool is not None
            and kept is not None
            and (
                kept.server_type in _POOL_READY_TYPES
                or (kept.is_server_type_known and new.topology_type == TopologyType.Single)
            )
        ):
            server.pool.ready()
        if self._publisher.sdam_enabled:
            from mongio.topology.sdam_events import update_events

            self._publisher.publish(update_events(self._topology_id, previous, new, server_description))
        self._sync_servers()

    def _sync_servers(self) -> None:
        """Start a server (pool and monitor) for each new address, retire the servers that left."""
        if not self._opened or self.closed:
            return
        wanted = self.description.server_descriptions()
        for address in list(self._servers):
            if address not in wanted:
                self._retire(self._servers.pop(address))
        for address in wanted:
            if address not in self._servers:
                self._servers[address] = self._start_server(address)

    def _start_server(self, address: Address) -> Server:
        pool = None
        if self._pool_factory is not None:
            pool = self._pool_factory(address, functools.partial(self.report_connect_error, address))
        server = Server(self, address, pool, None)
        if not self.settings.load_balanced:
            assert self._factory is not None

            async def on_check(server_description: ServerDescription) -> None:
                await self._on_check(server, server_description)

            server.monitor = monitor = Monitor(
                address,
                self._factory,
                on_check,
                heartbeat_frequency=self.settings.heartbeat_frequency,
                connect_timeout=self._connect_timeout,
                streaming=self._streaming,
                rtt=RoundTripTimeTracker(),
                publisher=self._publisher,
                command_fields=self._monitor_command_fields,
                min_heartbeat_frequency=self._min_heartbeat,
            )
            monitor.start()
        return server

    def _retire(self, server: Server) -> None:
        tasks: list[asyncio.Future[Any]] = []
        if server.monitor is not None:
            tasks.extend(server.monitor.stop())
            connection = server.monitor.connection
            if connection is not None:
                connection.close("the server left the topology")
        if server.pool is not None:
            closing = server.pool.close()
            if inspect.isawaitable(closing):
                tasks.append(asyncio.ensure_future(closing, loop=running_loop()))
        for task in tasks:
            self._track(task)

    # -- SRV polling -------------------------------------------------------------------------------------------

    def _srv_polling_wanted(self) -> bool:
        return not self.closed and self.description.topology_type in SRV_POLLING_TOPOLOGIES

    async def _apply_srv_hosts(self, hosts: Sequence[Address]) -> None:
        async with self._condition:
            previous = self.description
            if self.closed or previous.topology_type not in SRV_POLLING_TOPOLOGIES:
                return
            new = updated_topology_description_srv_polling(previous, hosts)
            if new is previous:
                return
            self.description = new
            if self._publisher.sdam_enabled:
                from mongio.topology.sdam_events import update_events

                self._publisher.publish(update_events(self._topology_id, previous, new))
            self._sync_servers()
            self._condition.notify_all()

    # -- application errors -----------------------------------------------------------------------------------

    async def handle_application_error(
        self,
        address: Address,
        error: BaseException | ApplicationError,
        connection_generation: int,
        *,
        completed_handshake: bool = True,
        service_id: Any = None,
    ) -> ErrorDecision:
        """Update the topology for an operation's error on ``address``, per the SDAM error-handling rules.

        ``connection_generation`` is the pool generation of the connection the error happened on (for an
        error while connecting, the pool's generation when the attempt began). A state-change error marks
        the server Unknown and requests a check (clearing the pool if the server is shutting down); a
        network error, or any error before the handshake completed, marks it Unknown, clears the pool and
        cancels the monitor's check. Stale errors change nothing. Returns what was decided.
        """
        if self.closed:
            # The error is the closing's own doing (a connection closed under its operation): nothing to learn.
            return ErrorDecision(reason="the topology is closed")
        if isinstance(error, ApplicationError):
            described: ApplicationError | None = error
        else:
            described = ApplicationError.from_exception(
                error,
                generation=connection_generation,
                completed_handshake=completed_handshake,
                service_id=service_id,
            )
        if described is None:
            return ErrorDecision(reason="the error says nothing about the server's state")
        async with self._condition:
            decision, cleared = self._act_on_error(address, described)
            if decision.acts:
                await _maybe_await(cleared)
                self._condition.notify_all()
            return decision

    def _act_on_error(self, address: Address, described: ApplicationError) -> tuple[ErrorDecision, Any]:
        """Decide on an application error and apply the decision (mark the server Unknown, clear its pool,
        tell its monitor), without awaiting; returns the decision and what the pool's ``clear`` returned."""
        server = self._servers.get(address)
        pool_generation = (
            server.pool.generation_for(described.service_id) if server is not None and server.pool is not None else 0
        )
        decision = application_error_decision(self.description, address, described, pool_generation)
        cleared: Any = None
        if not decision.acts:
            return decision, cleared
        if decision.mark_unknown is not None:
            self._apply(decision.mark_unknown)
        server = self._servers.get(address)
        if server is not None:
            if decision.clear_pool and server.pool is not None:
                cleared = server.pool.clear(
                    interrupt_in_use_connections=False, service_id=decision.service_id, error=described.error
                )
            if server.monitor is not None:
                if decision.cancel_check:
                    server.monitor.cancel_check()
                if decision.request_check:
                    server.monitor.request_check()
        return decision, cleared

    def report_connect_error(self, address: Address, error: BaseException, generation: int) -> None:
        """Synchronous entry for a pool's ``on_connect_error(error, generation)`` hook: a connection to
        ``address`` failed before its handshake completed. When no update is in progress the decision is
        applied at once, so the pool is cleared before the failed check-out is reported; otherwise it runs
        as soon as the topology's condition can be taken. Either way the rest (waking selections) runs on a
        task this topology tracks and awaits when it closes."""
        if self.closed:
            return
        loop = running_loop()
        name = f"mongio connect error {format_address(address)}"
        if self._condition.locked():
            coroutine = self.handle_application_error(address, error, generation, completed_handshake=False)
            self._track(loop.create_task(coroutine, name=name))
            return
        service_id = error.failed_service_id if isinstance(error, MongioError) else None
        if service_id is not None:
            # Load balanced: the error came after the hello, which told the connection's service.
            server = self._servers.get(address)
            if server is not None and server.pool is not None:
                generation = server.pool.generation_for(service_id)
        described = ApplicationError.from_exception(
            error, generation=generation, completed_handshake=False, service_id=service_id
        )
        if described is None:
            return
        decision, cleared = self._act_on_error(address, described)
        if decision.acts:
            self._track(loop.create_task(self._after_error(cleared), name=name))

    async def _after_error(self, cleared: Any) -> None:
        await _maybe_await(cleared)
        async with self._condition:
            self._condition.notify_all()

    def _track(self, task: asyncio.Task[Any] | asyncio.Future[Any]) -> None:
        """Keep a background task until it ends (``close()`` awaits those still running); log its failure."""
        if task.done():
            return
        self._retired.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self._retired.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("a topology background task failed", exc_info=task.exception())

    # -- server selection --------------------------------------------------------------------------------------

    def request_check_all(self) -> None:
        """Ask every monitor for an immediate check (each one still honours the 0.5 s minimum)."""
        for server in self._servers.values():
            if server.monitor is not None:
                server.monitor.request_check()

    def select_server_nowait(
        self,
        read_preference: ReadPreferenceLike | None = None,
        *,
        is_write: bool = False,
        server_selector: ServerSelector | None = None,
        deprioritized: Collection[Address] = (),
    ) -> Server | None:
        """The server an operation would get now, its operation counted, or ``None`` when none is suitable.

        Raises :class:`~mongio.errors.ConfigurationError` when waiting could not help (an unsupported wire
        version, an invalid ``maxStalenessSeconds``).
        """
        if self.closed:
            raise ClientClosedError("this topology was closed; make a new client")
        candidates = select_servers(
            self.description,
            read_preference,
            is_write=is_write,
            deprioritized=deprioritized,
            server_selector=server_selector,
        )
        servers = self._servers
        candidates = [sd for sd in candidates if sd.address in servers]
        if not candidates:
            return None
        chosen = choose_server(candidates, lambda address: servers[address].operation_count)
        server = servers[chosen.address]
        server.operation_count += 1
        return server

    async def select_server(
        self,
        read_preference: ReadPreferenceLike | None = None,
        *,
        is_write: bool = False,
        server_selector: ServerSelector | None = None,
        deprioritized: Collection[Address] = (),
        timeout: float | None = None,  # noqa: ASYNC109 - serverSelectionTimeoutMS, not a deadline for the caller
        operation: str = "",
        operation_id: int | None = None,
    ) -> Server:
        """Select a server for a read with ``read_preference`` (primary when ``None``) or for a write.

        Returns at once, without awaiting, when the current description has a suitable server. Otherwise it
        requests an immediate check of every server and waits for the topology to change, for at most
        ``timeout`` seconds (``serverSelectionTimeoutMS`` by default), then raises
        :class:`~mongio.errors.ServerSelectionTimeoutError` saying what was asked for and what the topology
        looks like. The selected server's operation count is incremented: call
        ``server.operation_finished()`` when the operation is over. ``deprioritized`` servers are used only
        when no other is suitable. ``operation`` and ``operation_id`` (the command name and the id its command
        events carry) only label the log messages.
        """
        if not self._opened:
            await self.open()
        logging_on = SERVER_SELECTION_LOGGER.isEnabledFor(_DEBUG)
        if logging_on:
            self._log_selection(
                "Server selection started",
                operation,
                read_preference,
                is_write,
                server_selector,
                operation_id=operation_id,
            )
        try:
            server = self.select_server_nowait(
                read_preference,
                is_write=is_write,
                server_selector=server_selector,
                deprioritized=deprioritized,
            )
        except Exception as exc:
            if logging_on:
                self._log_failure(exc, operation, read_preference, is_write, server_selector, operation_id)
            raise
        if server is None:
            server = await self._wait_for_server(
                read_preference,
                is_write=is_write,
                server_selector=server_selector,
                deprioritized=deprioritized,
                limit=self.settings.server_selection_timeout if timeout is None else timeout,
                operation=operation,
                operation_id=operation_id,
            )
        if SERVER_SELECTION_LOGGER.isEnabledFor(_DEBUG):
            self._log_selection(
                "Server selection succeeded",
                operation,
                read_preference,
                is_write,
                server_selector,
                server.address,
                operation_id=operation_id,
            )
        return server

    async def _wait_for_server(
        self,
        read_preference: ReadPreferenceLike | None,
        *,
        is_write: bool,
        server_selector: ServerSelector | None,
        deprioritized: Collection[Address],
        limit: float,
        operation: str,
        operation_id: int | None = None,
    ) -> Server:
        loop = running_loop()
        deadline = loop.time() + limit
        told_waiting = False
        try:
            async with self._condition:
                while True:
                    server = self.select_server_nowait(
                        read_preference,
                        is_write=is_write,
                        server_selector=server_selector,
                        deprioritized=deprioritized,
                    )
                    if server is not None:
                        return server
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise self._selection_error(
                            read_preference, is_write, server_selector, deprioritized, limit
                        )
                    self.request_check_all()
                    if not told_waiting and SERVER_SELECTION_LOGGER.isEnabledFor(_INFO):
                        told_waiting = True
                        self._log_waiting(
                            operation, read_preference, is_write, server_selector, remaining, operation_id
                        )
                    try:
                        async with timeout(remaining):
                            await self._condition.wait()
                    except TimeoutError:
                        pass  # one last look, then the error
        except Exception as exc:
            if SERVER_SELECTION_LOGGER.isEnabledFor(_DEBUG):
                self._log_failure(exc, operation, read_preference, is_write, server_selector, operation_id)
            raise

    def _selection_error(
        self,
        read_preference: ReadPreferenceLike | None,
        is_write: bool,
        server_selector: ServerSelector | None,
        deprioritized: Collection[Address],
        timeout: float,
    ) -> ServerSelectionTimeoutError:
        """The timeout error, naming why each server was rejected (worked out only now, never while
        selection succeeds)."""
        description = self.description
        reasons = rejection_reasons(
            description,
            read_preference,
            is_write=is_write,
            deprioritized=deprioritized,
            server_selector=server_selector,
        )
        wanted = (
            "a writable server" if is_write else f"a server for {_describe_read_preference(read_preference)}"
        )
        if server_selector is not None:
            wanted += " accepted by the custom server selector"
        return ServerSelectionTimeoutError(
            f"No server available: found no {wanted.removeprefix('a ')} within {timeout:g} s; "
            f"{describe_topology(description, reasons)}"
        )

    # -- selection logging -------------------------------------------------------------------------------------

    def _selection_fields(
        self,
        operation: str,
        read_preference: ReadPreferenceLike | None,
        is_write: bool,
        server_selector: ServerSelector | None,
        operation_id: int | None = None,
    ) -> tuple[dict[str, Any], str]:
        selector = "writable server" if is_write else _describe_read_preference(read_preference)
        if server_selector is not None:
            selector += " and a custom server selector"
        topology = repr(self.description)
        fields: dict[str, Any] = {"selector": selector, "operation": operation, "topologyDescription": topology}
        if operation_id is not None:
            fields["operationId"] = operation_id
        return fields, f"Selector: {selector}, topology description: {topology}"

    def _log_selection(
        self,
        message: str,
        operation: str,
        read_preference: ReadPreferenceLike | None,
        is_write: bool,
        server_selector: ServerSelector | None,
        address: Address | None = None,
        *,
        operation_id: int | None = None,
    ) -> None:
        fields, tail = self._selection_fields(operation, read_preference, is_write, server_selector, operation_id)
        fields["message"] = message
        verb = message.removeprefix("Server selection ")
        operation = _operation_label(operation, operation_id)
        if address is None:
            text = f"Server selection {verb} for operation {operation}. {tail}"
        else:
            host, port = address
            fields["serverHost"] = host
            if port is not None:
                fields["serverPort"] = port
            text = f"Server selection {verb} for operation {operation}. Selected server: {format_address(address)}. {tail}"
        SERVER_SELECTION_LOGGER.debug(LogMessage("serverSelection", fields, text))

    def _log_failure(
        self,
        error: BaseException,
        operation: str,
        read_preference: ReadPreferenceLike | None,
        is_write: bool,
        server_selector: ServerSelector | None,
        operation_id: int | None = None,
    ) -> None:
        fields, tail = self._selection_fields(operation, read_preference, is_write, server_selector, operation_id)
        failure = format_error(error)
        fields.update(message="Server selection failed", failure=failure)
        operation = _operation_label(operation, operation_id)
        text = f"Server selection failed for operation {operation}. Failure: {failure}. {tail}"
        SERVER_SELECTION_LOGGER.debug(LogMessage("serverSelection", fields, text))

    def _log_waiting(
        self,
        operation: str,
        read_preference: ReadPreferenceLike | None,
        is_write: bool,
        server_selector: ServerSelector | None,
        remaining: float,
        operation_id: int | None = None,
    ) -> None:
        fields, tail = self._selection_fields(operation, read_preference, is_write, server_selector, operation_id)
        remaining_ms = int(remaining * 1000)
        operation = _operation_label(operation, operation_id)
        fields.update(message="Waiting for suitable server to become available", remainingTimeMS=remaining_ms)
        text = (
            f"Waiting for server to become available for operation {operation}. "
            f"Remaining time: {remaining_ms} ms. {tail}."
        )
        SERVER_SELECTION_LOGGER.info(LogMessage("serverSelection", fields, text))
