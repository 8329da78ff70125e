"""The SDAM listener interfaces, and the publisher that delivers SDAM and heartbeat events and logs.

Class, attribute and method names are PyMongo's (``pymongo.monitoring``) so listeners port by changing the
import. Listener methods run synchronously on the event loop: keep them quick and never block in them. An
exception a listener raises is logged (logger ``mongio.events``) and otherwise ignored.

Log messages follow the SDAM and server selection logging specifications: they go to the ``mongio.topology``
and ``mongio.serverSelection`` loggers at ``DEBUG`` level (the "waiting for a suitable server" message at
``INFO``). With no listener registered and those loggers disabled, publishing builds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mongio.events.logs import LogMessage, document_text, format_error
from mongio.topology.server_description import Address, format_address

if TYPE_CHECKING:
    # The event classes are imported when a topology first publishes (only when someone receives them).
    from mongio.topology.sdam_events import (
        SdamEvent,
        ServerClosedEvent,
        ServerDescriptionChangedEvent,
        ServerHeartbeatFailedEvent,
        ServerHeartbeatStartedEvent,
        ServerHeartbeatSucceededEvent,
        ServerOpeningEvent,
        TopologyClosedEvent,
        TopologyDescriptionChangedEvent,
        TopologyOpeningEvent,
    )

__all__ = [
    "SERVER_SELECTION_LOGGER",
    "TOPOLOGY_LOGGER",
    "SdamPublisher",
    "ServerHeartbeatFailedEvent",
    "ServerHeartbeatListener",
    "ServerHeartbeatStartedEvent",
    "ServerHeartbeatSucceededEvent",
    "ServerListener",
    "TopologyListener",
]

TOPOLOGY_LOGGER = logging.getLogger("mongio.topology")
SERVER_SELECTION_LOGGER = logging.getLogger("mongio.serverSelection")
_EVENTS_LOGGER = logging.getLogger("mongio.events")
_DEBUG = logging.DEBUG


class ServerHeartbeatListener:
    """Base class for heartbeat listeners: every method does nothing until overridden."""

    def started(self, event: ServerHeartbeatStartedEvent) -> None:
        """A heartbeat started."""

    def succeeded(self, event: ServerHeartbeatSucceededEvent) -> None:
        """A heartbeat succeeded."""

    def failed(self, event: ServerHeartbeatFailedEvent) -> None:
        """A heartbeat failed."""


class ServerListener:
    """Base class for server listeners: every method does nothing until overridden."""

    def opened(self, event: ServerOpeningEvent) -> None:
        """A server was added to the topology."""

    def description_changed(self, event: ServerDescriptionChangedEvent) -> None:
        """A server's description changed."""

    def closed(self, event: ServerClosedEvent) -> None:
        """A server was removed from the topology."""


class TopologyListener:
    """Base class for topology listeners: every method does nothing until overridden."""

    def opened(self, event: TopologyOpeningEvent) -> None:
        """The topology was opened."""

    def description_changed(self, event: TopologyDescriptionChangedEvent) -> None:
        """The topology description changed."""

    def closed(self, event: TopologyClosedEvent) -> None:
        """The topology was closed."""


def _deliver(listeners: Iterable[Any], method: str, event: object) -> None:
    for listener in listeners:
        try:
            getattr(listener, method)(event)
        except Exception:
            _EVENTS_LOGGER.exception("SDAM listener %r failed in %s", listener, method)


def _server_fields(address: Address) -> dict[str, Any]:
    host, port = address
    fields: dict[str, Any] = {"serverHost": host}
    if port is not None:
        fields["serverPort"] = port
    return fields


class SdamPublisher:
    """Delivers one topology's SDAM events to its listeners and its log messages to ``mongio.topology``.

    ``listeners`` may mix :class:`ServerListener`, :class:`TopologyListener` and
    :class:`ServerHeartbeatListener` instances (other listener kinds are ignored here).
    """

    __slots__ = ("_heartbeat", "_server", "_topology", "topology_id")

    def __init__(self, topology_id: Any, listeners: Iterable[object] = ()) -> None:
        self.topology_id = topology_id
        listeners = tuple(listeners)
        self._server = tuple(item for item in listeners if isinstance(item, ServerListener))
        self._topology = tuple(item for item in listeners if isinstance(item, TopologyListener))
        self._heartbeat = tuple(item for item in listeners if isinstance(item, ServerHeartbeatListener))

    @property
    def sdam_enabled(self) -> bool:
        """Whether an SDAM event or log message would be delivered now."""
        return bool(self._server or self._topology) or TOPOLOGY_LOGGER.isEnabledFor(_DEBUG)

    @property
    def heartbeat_enabled(self) -> bool:
        """Whether a heartbeat event or log message would be delivered now."""
        return bool(self._heartbeat) or TOPOLOGY_LOGGER.isEnabledFor(_DEBUG)

    # -- SDAM events --------------------------------------------------------------------------------------

    def publish(self, events: Iterable[SdamEvent]) -> None:
        """Deliver SDAM events in order, with the matching log messages."""
        from mongio.topology.sdam_events import (
            ServerClosedEvent,
            ServerDescriptionChangedEvent,
            ServerOpeningEvent,
            TopologyClosedEvent,
            TopologyDescriptionChangedEvent,
            TopologyOpeningEvent,
        )

        logging_on = TOPOLOGY_LOGGER.isEnabledFor(_DEBUG)
        for event in events:
            if isinstance(event, ServerDescriptionChangedEvent):
                # No log message: the topology change message carries the same information.
                _deliver(self._server, "description_changed", event)
            elif isinstance(event, ServerOpeningEvent):
                _deliver(self._server, "opened", event)
                if logging_on:
                    self._log_server(
                        "Starting server monitoring", "Starting monitoring for server", event.server_address
                    )
            elif isinstance(event, ServerClosedEvent):
                _deliver(self._server, "closed", event)
                if logging_on:
                    self._log_server(
                        "Stopped server monitoring", "Stopped monitoring for server", event.server_address
                    )
            elif isinstance(event, TopologyDescriptionChangedEvent):
                _deliver(self._topology, "description_changed", event)
                if logging_on:
                    previous, new = repr(event.previous_description), repr(event.new_description)
                    text = (
                        f"Description changed for topology with ID {self.topology_id}. "
                        f"Previous description: {previous}. New description: {new}"
                    )
                    self._log(
                        "Topology description changed", text, previousDescription=previous, newDescription=new
                    )
            elif isinstance(event, TopologyOpeningEvent):
                _deliver(self._topology, "opened", event)
                if logging_on:
                    text = f"Starting monitoring for topology with ID {self.topology_id}"
                    self._log("Starting topology monitoring", text)
            elif isinstance(event, TopologyClosedEvent):
                _deliver(self._topology, "closed", event)
                if logging_on:
                    text = f"Stopped monitoring for topology with ID {self.topology_id}"
                    self._log("Stopped topology monitoring", text)

    def _log(self, message: str, text: str, **fields: Any) -> None:
        data: dict[str, Any] = {"message": message, "topologyId": self.topology_id}
        data.update((key, value) for key, value in fields.items() if value is not None)
        TOPOLOGY_LOGGER.debug(LogMessage("topology", data, text))

    def _log_server(self, message: str, prefix: str, address: Address) -> None:
        text = f"{prefix} {format_address(address)} in topology with ID {self.topology_id}"
        self._log(message, text, **_server_fields(address))

    # -- heartbeats ---------------------------------------------------------------------------------------

    def _heartbeat_where(
        self, address: Address, connection_id: int | None, server_connection_id: int | None
    ) -> tuple[str, dict[str, Any]]:
        fields = _server_fields(address)
        fields["driverConnectionId"] = connection_id
        fields["serverConnectionId"] = server_connection_id
        text = (
            f"{format_address(address)} on connection with driver-generated ID {connection_id} and "
            f"server-generated ID {server_connection_id} in topology with ID {self.topology_id}"
        )
        return text, fields

    def heartbeat_started(
        self,
        address: Address,
        awaited: bool,
        connection_id: int | None = None,
        server_connection_id: int | None = None,
        *,
        event: bool = True,
        log: bool = True,
    ) -> None:
        """A heartbeat is starting (call only when :attr:`heartbeat_enabled`). A check that first opens its
        connection publishes the event before connecting (``log=False``) and logs once the connection and
        its ids exist (``event=False``): the log message names the monitoring connection."""
        if self._heartbeat and event:
            from mongio.topology.sdam_events import ServerHeartbeatStartedEvent

            _deliver(self._heartbeat, "started", ServerHeartbeatStartedEvent(address, awaited))
        if log and TOPOLOGY_LOGGER.isEnabledFor(_DEBUG):
            where, fields = self._heartbeat_where(address, connection_id, server_connection_id)
            text = f"Heartbeat started for {where}. Awaited: {awaited}"
            self._log("Server heartbeat started", text, awaited=awaited, **fields)

    def heartbeat_succeeded(
        self,
        address: Address,
        duration: float,
        reply: Mapping[str, Any],
        awaited: bool,
        connection_id: int | None = None,
        server_connection_id: int | None = None,
    ) -> None:
        """A heartbeat succeeded (call only when :attr:`heartbeat_enabled`)."""
        if self._heartbeat:
            from mongio.topology.sdam_events import ServerHeartbeatSucceededEvent

            event = ServerHeartbeatSucceededEvent(duration, reply, address, awaited)
            _deliver(self._heartbeat, "succeeded", event)
        if TOPOLOGY_LOGGER.isEnabledFor(_DEBUG):
            where, fields = self._heartbeat_where(address, connection_id, server_connection_id)
            ms = duration * 1000.0
            shown = document_text(reply)
            text = f"Heartbeat succeeded in {ms:g} ms for {where}. Awaited: {awaited}. Reply: {shown}"
            self._log(
                "Server heartbeat succeeded", text, awaited=awaited, durationMS=ms, reply=shown, **fields
            )

    def heartbeat_failed(
        self,
        address: Address,
        duration: float,
        error: BaseException,
        awaited: bool,
        connection_id: int | None = None,
        server_connection_id: int | None = None,
    ) -> None:
        """A heartbeat failed (call only when :attr:`heartbeat_enabled`)."""
        if self._heartbeat:
            from mongio.topology.sdam_events import ServerHeartbeatFailedEvent

            event = ServerHeartbeatFailedEvent(duration, error, address, awaited)
            _deliver(self._heartbeat, "failed", event)
        if TOPOLOGY_LOGGER.isEnabledFor(_DEBUG):
            where, fields = self._heartbeat_where(address, connection_id, server_connection_id)
            ms = duration * 1000.0
            failure = format_error(error)
            text = f"Heartbeat failed in {ms:g} ms for {where}. Awaited: {awaited}. Failure: {failure}"
            self._log(
                "Server heartbeat failed", text, awaited=awaited, durationMS=ms, failure=failure, **fields
            )


# The heartbeat event classes live in mongio.topology.sdam_events, imported on first use (PEP 562).
_HEARTBEAT_EVENTS = frozenset(
    {"ServerHeartbeatFailedEvent", "ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent"}
)


def __getattr__(name: str) -> Any:
    if name in _HEARTBEAT_EVENTS:
        from mongio.topology import sdam_events

        return getattr(sdam_events, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HEARTBEAT_EVENTS})
