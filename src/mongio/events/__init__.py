"""Monitoring events, their listeners, and the specifications' log messages.

Connection pool events (:mod:`mongio.events.cmap`) and :class:`ConnectionPoolListener` use PyMongo's names
(``pymongo.monitoring``), so listeners port by changing the import. Log messages go through the standard
:mod:`logging` module (see :mod:`mongio.events.logs`).
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
from mongio.events.listeners import CmapPublisher, ConnectionPoolListener
from mongio.events.logs import CONNECTION_LOGGER_NAME, LogMessage

__all__ = [
    "CONNECTION_LOGGER_NAME",
    "CmapPublisher",
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
