"""Monitoring events, their listeners, and the specifications' log messages.

Connection pool events (:mod:`mongio.events.cmap`) and :class:`ConnectionPoolListener` use PyMongo's names
(``pymongo.monitoring``), so listeners port by changing the import; so do command events
(:mod:`mongio.events.command`) and :class:`CommandListener`. Pass listeners in the client's
``event_listeners``. Log messages go through the standard :mod:`logging` module (see
:mod:`mongio.events.logs`).
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
    COMMAND_LOGGER_NAME,
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.events.listeners import CmapPublisher, ConnectionPoolListener
from mongio.events.logs import CONNECTION_LOGGER_NAME, LogMessage

__all__ = [
    "COMMAND_LOGGER_NAME",
    "CONNECTION_LOGGER_NAME",
    "CmapPublisher",
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
    "LogMessage",
    "PoolClearedEvent",
    "PoolClosedEvent",
    "PoolCreatedEvent",
    "PoolReadyEvent",
]
