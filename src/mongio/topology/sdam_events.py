"""Server Discovery and Monitoring events (server heartbeats among them), as plain immutable data, and the
rules for when each is due.

The class and attribute names are PyMongo's (``pymongo.monitoring``) so listeners port unchanged. The
helpers compute which events a change of topology description calls for, in the order the specification
requires; the ``Topology`` publishes them, and only when someone listens (this module is imported then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType

__all__ = [
    "SdamEvent",
    "ServerClosedEvent",
    "ServerDescriptionChangedEvent",
    "ServerHeartbeatFailedEvent",
    "ServerHeartbeatStartedEvent",
    "ServerHeartbeatSucceededEvent",
    "ServerOpeningEvent",
    "TopologyClosedEvent",
    "TopologyDescriptionChangedEvent",
    "TopologyOpeningEvent",
    "closing_events",
    "opening_events",
    "update_events",
]


@dataclass(frozen=True)
class ServerDescriptionChangedEvent:
    """A server's description changed (round trip times aside)."""

    previous_description: ServerDescription
    new_description: ServerDescription
    server_address: Address
    topology_id: Any


@dataclass(frozen=True)
class ServerOpeningEvent:
    """A server was added to the topology; its monitor starts next."""

    server_address: Address
    topology_id: Any


@dataclass(frozen=True)
class ServerClosedEvent:
    """A server was removed from the topology and its monitor stopped."""

    server_address: Address
    topology_id: Any


@dataclass(frozen=True)
class TopologyDescriptionChangedEvent:
    """The topology description changed."""

    previous_description: TopologyDescription
    new_description: TopologyDescription
    topology_id: Any


@dataclass(frozen=True)
class TopologyOpeningEvent:
    """A topology was created: always the first event of a client."""

    topology_id: Any


@dataclass(frozen=True)
class TopologyClosedEvent:
    """A topology was closed: always the last event of a client."""

    topology_id: Any


SdamEvent = (
    ServerDescriptionChangedEvent
    | ServerOpeningEvent
    | ServerClosedEvent
    | TopologyDescriptionChangedEvent
    | TopologyOpeningEvent
    | TopologyClosedEvent
)



@dataclass(frozen=True, slots=True)
class ServerHeartbeatStartedEvent:
    """A monitor is about to send ``hello`` (or to open its connection, or to read the next streamed reply).

    ``connection_id`` is the server's address; ``awaited`` is true for an awaitable (streaming) ``hello``.
    """

    connection_id: Address
    awaited: bool = False


@dataclass(frozen=True, slots=True)
class ServerHeartbeatSucceededEvent:
    """A monitor's ``hello`` succeeded. ``duration`` is in seconds; ``reply`` is the server's reply.

    For an awaited heartbeat the duration includes the time the server held the reply back, so it says
    nothing about the round trip time.
    """

    duration: float
    reply: Mapping[str, Any]
    connection_id: Address
    awaited: bool = False


@dataclass(frozen=True, slots=True)
class ServerHeartbeatFailedEvent:
    """A monitor's ``hello`` failed: a network error, a timeout, or an ``ok: 0`` reply (``reply``)."""

    duration: float
    reply: BaseException
    connection_id: Address
    awaited: bool = False

    @property
    def failure(self) -> BaseException:
        """The error (the specification's name for ``reply``)."""
        return self.reply

def _empty(description: TopologyDescription) -> TopologyDescription:
    return TopologyDescription(TopologyType.Unknown, {}, None, None, None, description.topology_settings)


def _membership_events(
    topology_id: Any, previous: TopologyDescription, new: TopologyDescription
) -> list[SdamEvent]:
    before = previous.server_descriptions()
    after = new.server_descriptions()
    events: list[SdamEvent] = [ServerOpeningEvent(a, topology_id) for a in after if a not in before]
    events.extend(ServerClosedEvent(a, topology_id) for a in before if a not in after)
    return events


def opening_events(topology_id: Any, initial: TopologyDescription) -> list[SdamEvent]:
    """The events of a new topology: opening, the change from an empty Unknown one, one opening per seed."""
    empty = _empty(initial)
    events: list[SdamEvent] = [
        TopologyOpeningEvent(topology_id),
        TopologyDescriptionChangedEvent(empty, initial, topology_id),
    ]
    events.extend(ServerOpeningEvent(address, topology_id) for address in initial.server_descriptions())
    return events


def update_events(
    topology_id: Any,
    previous: TopologyDescription,
    new: TopologyDescription,
    server_description: ServerDescription | None = None,
) -> list[SdamEvent]:
    """The events for replacing ``previous`` by ``new`` after processing ``server_description``.

    In order: the server's description change (when it is not equal to the old one), an opening event per
    added server, a closed event per removed one, then the topology description change (when the two are
    not equal). An ignored update (``new is previous``) publishes nothing.
    """
    if new is previous:
        return []
    events: list[SdamEvent] = []
    if server_description is not None:
        old = previous.get(server_description.address)
        if old is not None and old != server_description:
            events.append(
                ServerDescriptionChangedEvent(
                    old, server_description, server_description.address, topology_id
                )
            )
    events.extend(_membership_events(topology_id, previous, new))
    if new != previous:
        events.append(TopologyDescriptionChangedEvent(previous, new, topology_id))
    return events


def closing_events(topology_id: Any, last: TopologyDescription) -> list[SdamEvent]:
    """The events of closing: each server closed, the change to an empty Unknown topology, then closed."""
    empty = _empty(last)
    events: list[SdamEvent] = [
        ServerClosedEvent(address, topology_id) for address in last.server_descriptions()
    ]
    events.append(TopologyDescriptionChangedEvent(last, empty, topology_id))
    events.append(TopologyClosedEvent(topology_id))
    return events
