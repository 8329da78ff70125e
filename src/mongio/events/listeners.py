"""Listeners for connection pool events, and the publisher a pool reports through.

Subclass :class:`ConnectionPoolListener`, override the methods you care about, and pass an instance in the
client's (or the pool's) ``event_listeners``. Listener methods are called synchronously from the event
loop, so they must be quick and must not block; an exception a listener raises is logged (logger
``mongio.events``) and otherwise ignored, so a faulty listener cannot break the pool.

The publisher builds an event only when a listener is registered, and a log message only when the
``mongio.connection`` logger is enabled for ``DEBUG``: with neither, publishing costs a couple of checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from mongio.events.logs import CONNECTION_LOGGER, LogMessage, format_error
from mongio.events.reasons import Address, ConnectionCheckOutFailedReason, ConnectionClosedReason

if TYPE_CHECKING:
    from mongio.events.cmap import (
        ConnectionCheckedInEvent,
        ConnectionCheckedOutEvent,
        ConnectionCheckOutFailedEvent,
        ConnectionCheckOutStartedEvent,
        ConnectionClosedEvent,
        ConnectionCreatedEvent,
        ConnectionReadyEvent,
        PoolClearedEvent,
        PoolClosedEvent,
        PoolCreatedEvent,
        PoolReadyEvent,
    )

__all__ = ["CmapPublisher", "ConnectionPoolListener"]

_DEBUG = logging.DEBUG
_EVENTS_LOGGER = logging.getLogger("mongio.events")

# The texts the logging specification requires for each reason.
_CLOSED_REASON_TEXT = {
    ConnectionClosedReason.STALE: "Connection became stale because the pool was cleared",
    ConnectionClosedReason.IDLE: "Connection has been available but unused for longer than the configured max idle time",
    ConnectionClosedReason.ERROR: "An error occurred while using the connection",
    ConnectionClosedReason.POOL_CLOSED: "Connection pool was closed",
}
_CHECKOUT_FAILED_TEXT = {
    ConnectionCheckOutFailedReason.TIMEOUT: "Wait queue timeout elapsed without a connection becoming available",
    ConnectionCheckOutFailedReason.CONN_ERROR: "An error occurred while trying to establish a new connection",
    ConnectionCheckOutFailedReason.POOL_CLOSED: "Connection pool was closed",
}
# The order in which the pool-created message lists the options.
_CREATED_OPTION_ORDER = (
    "maxIdleTimeMS",
    "minPoolSize",
    "maxPoolSize",
    "maxConnecting",
    "waitQueueTimeoutMS",
)


class ConnectionPoolListener:
    """Base class for connection pool listeners: every method does nothing until overridden."""

    def pool_created(self, event: PoolCreatedEvent) -> None:
        """A pool was created (paused: it serves no check-out until marked ready)."""

    def pool_ready(self, event: PoolReadyEvent) -> None:
        """A pool was marked ready."""

    def pool_cleared(self, event: PoolClearedEvent) -> None:
        """A pool was cleared."""

    def pool_closed(self, event: PoolClosedEvent) -> None:
        """A pool was closed."""

    def connection_created(self, event: ConnectionCreatedEvent) -> None:
        """A connection was created; its establishment begins."""

    def connection_ready(self, event: ConnectionReadyEvent) -> None:
        """A connection finished its handshake and authentication."""

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        """A connection was closed and left the pool."""

    def connection_check_out_started(self, event: ConnectionCheckOutStartedEvent) -> None:
        """A check-out started."""

    def connection_check_out_failed(self, event: ConnectionCheckOutFailedEvent) -> None:
        """A check-out failed."""

    def connection_checked_out(self, event: ConnectionCheckedOutEvent) -> None:
        """A connection was checked out."""

    def connection_checked_in(self, event: ConnectionCheckedInEvent) -> None:
        """A connection was checked back in."""


def _deliver(listeners: tuple[ConnectionPoolListener, ...], method: str, event: object) -> None:
    for listener in listeners:
        try:
            getattr(listener, method)(event)
        except Exception:
            _EVENTS_LOGGER.exception("connection pool listener %r failed in %s", listener, method)


def _event_classes() -> ModuleType:
    from mongio.events import cmap

    return cmap


class CmapPublisher:
    """Publishes one pool's events to its listeners and its log messages to ``mongio.connection``.

    The pool calls one method per event with the raw values; the event object and the log message are
    made only when someone will receive them.
    """

    __slots__ = ("_address", "_common", "_events", "_listeners", "_where")

    def __init__(self, address: Address, listeners: Iterable[ConnectionPoolListener] = ()) -> None:
        self._address = address
        self._listeners = tuple(listeners)
        # The event classes are imported only for a pool that has listeners, the only one that makes events.
        self._events: Any = _event_classes() if self._listeners else None
        host, port = address
        self._common: dict[str, Any] = {"serverHost": host}
        if port is not None:
            self._common["serverPort"] = port
        self._where = host if port is None else (f"[{host}]:{port}" if ":" in host else f"{host}:{port}")

    @property
    def address(self) -> Address:
        return self._address

    @property
    def listeners(self) -> tuple[ConnectionPoolListener, ...]:
        return self._listeners

    @property
    def enabled(self) -> bool:
        """True when an event or a log message would be delivered now."""
        return bool(self._listeners) or CONNECTION_LOGGER.isEnabledFor(_DEBUG)

    def _log(self, message: str, text: str, **fields: Any) -> None:
        data = {"message": message, **self._common}
        data.update((key, value) for key, value in fields.items() if value is not None)
        CONNECTION_LOGGER.debug(LogMessage("connection", data, text))

    # Pool events.

    def pool_created(self, options: Mapping[str, Any]) -> None:
        if self._listeners:
            _deliver(
                self._listeners, "pool_created", self._events.PoolCreatedEvent(self._address, dict(options))
            )
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            shown = {name: options[name] for name in _CREATED_OPTION_ORDER if name in options}
            listed = ", ".join(f"{name}={value}" for name, value in shown.items())
            text = f"Connection pool created for {self._where}" + (
                f" using options {listed}" if listed else ""
            )
            self._log("Connection pool created", text, **shown)

    def pool_ready(self) -> None:
        if self._listeners:
            _deliver(self._listeners, "pool_ready", self._events.PoolReadyEvent(self._address))
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            self._log("Connection pool ready", f"Connection pool ready for {self._where}")

    def pool_cleared(self, service_id: Any = None, interrupt_connections: bool = False) -> None:
        if self._listeners:
            event = self._events.PoolClearedEvent(self._address, service_id, interrupt_connections)
            _deliver(self._listeners, "pool_cleared", event)
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            service = None if service_id is None else str(service_id)
            text = f"Connection pool for {self._where} cleared" + (
                f" for serviceId {service}" if service is not None else ""
            )
            self._log("Connection pool cleared", text, serviceId=service)

    def pool_closed(self) -> None:
        if self._listeners:
            _deliver(self._listeners, "pool_closed", self._events.PoolClosedEvent(self._address))
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            self._log("Connection pool closed", f"Connection pool closed for {self._where}")

    # Connection events.

    def connection_created(self, connection_id: int) -> None:
        if self._listeners:
            _deliver(
                self._listeners,
                "connection_created",
                self._events.ConnectionCreatedEvent(self._address, connection_id),
            )
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            text = f"Connection created: address={self._where}, driver-generated ID={connection_id}"
            self._log("Connection created", text, driverConnectionId=connection_id)

    def connection_ready(self, connection_id: int, created: float) -> None:
        """``created``: the ``time.monotonic()`` of the connection's creation."""
        if not self._listeners and not CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            return
        duration = time.monotonic() - created
        if self._listeners:
            event = self._events.ConnectionReadyEvent(self._address, connection_id, duration)
            _deliver(self._listeners, "connection_ready", event)
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            ms = duration * 1000.0
            text = (
                f"Connection ready: address={self._where}, driver-generated ID={connection_id}, "
                f"established in={ms:g} ms"
            )
            self._log("Connection ready", text, driverConnectionId=connection_id, durationMS=ms)

    def connection_closed(self, connection_id: int, reason: str, error: BaseException | None = None) -> None:
        if self._listeners:
            event = self._events.ConnectionClosedEvent(self._address, connection_id, reason)
            _deliver(self._listeners, "connection_closed", event)
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            reason_text = _CLOSED_REASON_TEXT.get(reason, reason)
            error_text = format_error(error) if error is not None else None
            text = f"Connection closed: address={self._where}, driver-generated ID={connection_id}. Reason: {reason_text}"
            if error_text is not None:
                text += f". Error: {error_text}"
            self._log(
                "Connection closed",
                text,
                driverConnectionId=connection_id,
                reason=reason_text,
                error=error_text,
            )

    def connection_check_out_started(self) -> None:
        if self._listeners:
            _deliver(
                self._listeners,
                "connection_check_out_started",
                self._events.ConnectionCheckOutStartedEvent(self._address),
            )
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            self._log("Connection checkout started", f"Checkout started for connection to {self._where}")

    def connection_check_out_failed(
        self, reason: str, started: float, error: BaseException | None = None
    ) -> None:
        """``started``: the ``time.monotonic()`` at which the check-out started."""
        if not self._listeners and not CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            return
        duration = time.monotonic() - started
        if self._listeners:
            event = self._events.ConnectionCheckOutFailedEvent(self._address, reason, duration)
            _deliver(self._listeners, "connection_check_out_failed", event)
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            ms = duration * 1000.0
            reason_text = _CHECKOUT_FAILED_TEXT.get(reason, reason)
            error_text = format_error(error) if error is not None else None
            text = f"Checkout failed for connection to {self._where}. Reason: {reason_text}"
            if error_text is not None:
                text += f". Error: {error_text}"
            text += f". Duration: {ms:g} ms"
            self._log("Connection checkout failed", text, reason=reason_text, error=error_text, durationMS=ms)

    def connection_checked_out(self, connection_id: int, started: float) -> None:
        """``started``: the ``time.monotonic()`` at which the check-out started."""
        if not self._listeners and not CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            return
        duration = time.monotonic() - started
        if self._listeners:
            event = self._events.ConnectionCheckedOutEvent(self._address, connection_id, duration)
            _deliver(self._listeners, "connection_checked_out", event)
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            ms = duration * 1000.0
            text = (
                f"Connection checked out: address={self._where}, driver-generated ID={connection_id}, "
                f"duration={ms:g} ms"
            )
            self._log("Connection checked out", text, driverConnectionId=connection_id, durationMS=ms)

    def connection_checked_in(self, connection_id: int) -> None:
        if self._listeners:
            _deliver(
                self._listeners,
                "connection_checked_in",
                self._events.ConnectionCheckedInEvent(self._address, connection_id),
            )
        if CONNECTION_LOGGER.isEnabledFor(_DEBUG):
            text = f"Connection checked in: address={self._where}, driver-generated ID={connection_id}"
            self._log("Connection checked in", text, driverConnectionId=connection_id)
