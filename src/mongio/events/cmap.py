"""Connection pool events (Connection Monitoring and Pooling), as plain immutable data.

The class and attribute names are PyMongo's (``pymongo.monitoring``) so listeners written for PyMongo port
unchanged. ``address`` is the ``(host, port)`` pair of the server the pool is for (``(path, None)`` for a
Unix domain socket); every ``duration`` is in seconds, measured on the monotonic clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.events.reasons import Address, ConnectionCheckOutFailedReason, ConnectionClosedReason

__all__ = [
    "Address",
    "ConnectionCheckOutFailedEvent",
    "ConnectionCheckOutFailedReason",
    "ConnectionCheckOutStartedEvent",
    "ConnectionCheckedInEvent",
    "ConnectionCheckedOutEvent",
    "ConnectionClosedEvent",
    "ConnectionClosedReason",
    "ConnectionCreatedEvent",
    "ConnectionReadyEvent",
    "PoolClearedEvent",
    "PoolClosedEvent",
    "PoolCreatedEvent",
    "PoolReadyEvent",
]


@dataclass(frozen=True, slots=True)
class PoolCreatedEvent:
    """A pool was created; ``options`` holds the pool options that were set explicitly, by their URI names."""

    address: Address
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PoolReadyEvent:
    """A pool was marked ready: check-outs and background connection creation may proceed."""

    address: Address


@dataclass(frozen=True, slots=True)
class PoolClearedEvent:
    """A pool was cleared: its existing connections are stale.

    ``service_id`` is set in load-balanced mode, when only one service's connections were cleared;
    ``interrupt_connections`` says whether connections in use were interrupted too.
    """

    address: Address
    service_id: Any = None
    interrupt_connections: bool = False


@dataclass(frozen=True, slots=True)
class PoolClosedEvent:
    """A pool was closed."""

    address: Address


@dataclass(frozen=True, slots=True)
class ConnectionCreatedEvent:
    """A connection was created and is about to be established (connected, handshaken, authenticated)."""

    address: Address
    connection_id: int


@dataclass(frozen=True, slots=True)
class ConnectionReadyEvent:
    """A connection finished its setup; ``duration`` is the time since its ``ConnectionCreatedEvent``."""

    address: Address
    connection_id: int
    duration: float


@dataclass(frozen=True, slots=True)
class ConnectionClosedEvent:
    """A connection left the pool for good; ``reason`` is a :class:`ConnectionClosedReason` value."""

    address: Address
    connection_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class ConnectionCheckOutStartedEvent:
    """A task started checking a connection out."""

    address: Address


@dataclass(frozen=True, slots=True)
class ConnectionCheckOutFailedEvent:
    """A check-out failed; ``reason`` is a :class:`ConnectionCheckOutFailedReason` value and ``duration``
    the time since the matching ``ConnectionCheckOutStartedEvent``."""

    address: Address
    reason: str
    duration: float


@dataclass(frozen=True, slots=True)
class ConnectionCheckedOutEvent:
    """A connection was checked out; ``duration`` is the time since the check-out started."""

    address: Address
    connection_id: int
    duration: float


@dataclass(frozen=True, slots=True)
class ConnectionCheckedInEvent:
    """A connection was checked back in (it may be closed right after, if it can no longer be used)."""

    address: Address
    connection_id: int
