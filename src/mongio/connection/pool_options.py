"""``PoolOptions``: the settings every connection pool of one client shares."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from mongio.errors import ConfigurationError
from mongio.events.listeners import ConnectionPoolListener

__all__ = ["DEFAULT_MAX_CONNECTING", "DEFAULT_MAX_POOL_SIZE", "PoolOptions"]

DEFAULT_MAX_POOL_SIZE = 100
DEFAULT_MAX_CONNECTING = 2


def _ms(seconds: float) -> int | float:
    ms = round(seconds * 1000.0, 6)  # undo the float noise of a milliseconds -> seconds round trip
    return int(ms) if ms.is_integer() else ms


def _check_count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return value


def _check_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value < 0:
        raise ConfigurationError(f"{name} must be a number of seconds >= 0, not {value!r}")
    return float(value)


class PoolOptions:
    """Connection pool settings (the Connection Monitoring and Pooling options).

    - ``max_pool_size``: most connections the pool holds, idle, in use and being established together
      (``maxPoolSize``, default 100; 0 means no limit).
    - ``min_pool_size``: connections the pool keeps open in the background once ready (``minPoolSize``).
    - ``max_connecting``: most connections being established at once (``maxConnecting``, default 2).
    - ``wait_queue_timeout``: seconds a check-out may wait for a connection (``waitQueueTimeoutMS``);
      ``None`` or 0 waits as long as it takes (the operation's own timeout, if any, still applies).
    - ``max_idle_time_seconds``: seconds an idle connection may stay in the pool (``maxIdleTimeMS``);
      ``None`` or 0 keeps it forever.
    - ``load_balanced``: the pool's server is a load balancer, so clearing is per ``serviceId``.
    - ``event_listeners``: :class:`~mongio.events.ConnectionPoolListener` objects to notify.

    Options passed explicitly (even with their default value) are reported in ``PoolCreatedEvent.options``
    and the "Connection pool created" log message, under their URI names.
    """

    __slots__ = (
        "event_listeners",
        "load_balanced",
        "max_connecting",
        "max_idle_time_seconds",
        "max_pool_size",
        "min_pool_size",
        "non_default_options",
        "wait_queue_timeout",
    )

    def __init__(
        self,
        *,
        max_pool_size: int | None = None,
        min_pool_size: int | None = None,
        max_connecting: int | None = None,
        wait_queue_timeout: float | None = None,
        max_idle_time_seconds: float | None = None,
        load_balanced: bool = False,
        event_listeners: Iterable[ConnectionPoolListener] = (),
    ) -> None:
        given: dict[str, Any] = {}
        self.max_pool_size = DEFAULT_MAX_POOL_SIZE
        if max_pool_size is not None:
            self.max_pool_size = given["maxPoolSize"] = _check_count("maxPoolSize", max_pool_size, 0)
        self.min_pool_size = 0
        if min_pool_size is not None:
            self.min_pool_size = given["minPoolSize"] = _check_count("minPoolSize", min_pool_size, 0)
        self.max_connecting = DEFAULT_MAX_CONNECTING
        if max_connecting is not None:
            self.max_connecting = given["maxConnecting"] = _check_count("maxConnecting", max_connecting, 1)
        self.max_idle_time_seconds: float | None = None
        if max_idle_time_seconds is not None:
            seconds = _check_seconds("maxIdleTimeMS", max_idle_time_seconds)
            given["maxIdleTimeMS"] = _ms(seconds)
            self.max_idle_time_seconds = seconds or None
        self.wait_queue_timeout: float | None = None
        if wait_queue_timeout is not None:
            seconds = _check_seconds("waitQueueTimeoutMS", wait_queue_timeout)
            given["waitQueueTimeoutMS"] = _ms(seconds)
            self.wait_queue_timeout = seconds or None
        if 0 < self.max_pool_size < self.min_pool_size:
            raise ConfigurationError(
                f"minPoolSize={self.min_pool_size} cannot be greater than maxPoolSize={self.max_pool_size}"
            )
        self.load_balanced = bool(load_balanced)
        self.event_listeners: tuple[ConnectionPoolListener, ...] = tuple(event_listeners)
        self.non_default_options: Mapping[str, Any] = given

    @classmethod
    def from_uri_options(
        cls,
        options: Mapping[str, Any],
        *,
        load_balanced: bool = False,
        event_listeners: Iterable[ConnectionPoolListener] = (),
    ) -> PoolOptions:
        """Build from URI-style names (``maxPoolSize``, ``minPoolSize``, ``maxConnecting``,
        ``waitQueueTimeoutMS``, ``maxIdleTimeMS``, milliseconds for the times); other keys are ignored."""

        def seconds(name: str) -> float | None:
            value = options.get(name)
            return None if value is None else _check_seconds(name, value) / 1000.0

        return cls(
            max_pool_size=options.get("maxPoolSize"),
            min_pool_size=options.get("minPoolSize"),
            max_connecting=options.get("maxConnecting"),
            wait_queue_timeout=seconds("waitQueueTimeoutMS"),
            max_idle_time_seconds=seconds("maxIdleTimeMS"),
            load_balanced=load_balanced,
            event_listeners=event_listeners,
        )

    def __repr__(self) -> str:
        return f"PoolOptions({dict(self.non_default_options)!r}, load_balanced={self.load_balanced})"
