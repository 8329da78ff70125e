"""Monitoring events, their listeners, and the specifications' log messages.

Connection pool events (:mod:`mongio.events.cmap`) and :class:`ConnectionPoolListener` use PyMongo's names
(``pymongo.monitoring``), so listeners port by changing the import; so do command events
(:mod:`mongio.events.command`) and :class:`CommandListener`. Pass listeners in the client's
``event_listeners``. Log messages go through the standard :mod:`logging` module (see
:mod:`mongio.events.logs`).
"""

import importlib
from typing import TYPE_CHECKING, Any

from mongio.events.command import (
    COMMAND_LOGGER_NAME,
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.events.listeners import CmapPublisher, ConnectionPoolListener
from mongio.events.logs import CONNECTION_LOGGER_NAME, LogMessage
from mongio.events.reasons import ConnectionCheckOutFailedReason, ConnectionClosedReason

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

# The pool event classes are imported on first use (PEP 562): a client without pool listeners makes none.
_CMAP_EVENTS = frozenset(
    {
        "ConnectionCheckOutFailedEvent",
        "ConnectionCheckOutStartedEvent",
        "ConnectionCheckedInEvent",
        "ConnectionCheckedOutEvent",
        "ConnectionClosedEvent",
        "ConnectionCreatedEvent",
        "ConnectionReadyEvent",
        "PoolClearedEvent",
        "PoolClosedEvent",
        "PoolCreatedEvent",
        "PoolReadyEvent",
    }
)


def __getattr__(name: str) -> Any:
    if name in _CMAP_EVENTS:
        return getattr(importlib.import_module("mongio.events.cmap"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CMAP_EVENTS})
