"""PyMongo's ``pymongo.monitoring`` names: the event classes, the listener base classes and
:func:`register`.

Listeners need not derive from these classes: one written against PyMongo's (or against none, defining
``started``/``succeeded``/``failed``) is recognised too (see :mod:`mongio.listener_registry`). Pass
listeners in a client's ``event_listeners`` or :func:`register` them for every client made afterwards.
"""

from mongio.events.cmap import (
    ConnectionCheckedInEvent,
    ConnectionCheckedOutEvent,
    ConnectionCheckOutFailedEvent,
    ConnectionCheckOutFailedReason,
    ConnectionCheckOutStartedEvent,
    ConnectionClosedEvent,
    ConnectionClosedReason,
    ConnectionCreatedEvent,
    ConnectionReadyEvent,
    PoolClearedEvent,
    PoolClosedEvent,
    PoolCreatedEvent,
    PoolReadyEvent,
)
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.events.listeners import ConnectionPoolListener
from mongio.listener_registry import register
from mongio.topology.heartbeat_events import ServerHeartbeatListener, ServerListener, TopologyListener
from mongio.topology.sdam_events import (
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

TopologyOpenedEvent = TopologyOpeningEvent
# PyMongo's common base of the topology events, as the tuple ``isinstance`` takes.
TopologyEvent = (TopologyOpeningEvent, TopologyDescriptionChangedEvent, TopologyClosedEvent)

__all__ = [
    "CommandFailedEvent",
    "CommandListener",
    "CommandStartedEvent",
    "CommandSucceededEvent",
    "ConnectionCheckOutFailedEvent",
    "ConnectionCheckOutFailedReason",
    "ConnectionCheckOutStartedEvent",
    "ConnectionCheckedInEvent",
    "ConnectionCheckedOutEvent",
    "ConnectionClosedEvent",
    "ConnectionClosedReason",
    "ConnectionCreatedEvent",
    "ConnectionPoolListener",
    "ConnectionReadyEvent",
    "PoolClearedEvent",
    "PoolClosedEvent",
    "PoolCreatedEvent",
    "PoolReadyEvent",
    "ServerClosedEvent",
    "ServerDescriptionChangedEvent",
    "ServerHeartbeatFailedEvent",
    "ServerHeartbeatListener",
    "ServerHeartbeatStartedEvent",
    "ServerHeartbeatSucceededEvent",
    "ServerListener",
    "ServerOpeningEvent",
    "TopologyClosedEvent",
    "TopologyDescriptionChangedEvent",
    "TopologyEvent",
    "TopologyListener",
    "TopologyOpenedEvent",
    "register",
]
