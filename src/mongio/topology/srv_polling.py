"""Polling the SRV records of a ``mongodb+srv`` URI for mongoses joining or leaving (SRV polling spec).

One task per topology, started only for ``mongodb+srv`` clients: it sleeps ``rescanSRVIntervalMS`` (the lowest
TTL of the last answer, never under 60 seconds, counted from the end of the previous lookup), looks the
records up again, and hands the valid hosts to the topology, which adds and removes servers through the pure
update rule. A failed lookup, no records or no valid host leaves the topology alone and retries after
``heartbeatFrequencyMS``. The task ends once the topology is neither Unknown nor Sharded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from mongio.backend import gather, running_loop, sleep
from mongio.options.srv import MIN_RESCAN_INTERVAL, DnsResolver, SrvRescan, rescan
from mongio.topology.server_description import Address

__all__ = ["SrvLookup", "SrvPoller"]

_log = logging.getLogger("mongio.topology")

SrvLookup = Callable[[], Awaitable[SrvRescan]]
"""One rescan of the records (raises when nothing usable was found)."""


class SrvPoller:
    """Rescans ``hostname``'s SRV records until stopped or until ``should_poll()`` turns false.

    ``apply(hosts)`` receives each non-empty list of valid hosts. ``resolver`` replaces DNS (tests);
    ``min_interval`` is the specification's 60 seconds and is lowered only by tests.
    """

    def __init__(
        self,
        hostname: str,
        apply: Callable[[Sequence[Address]], Awaitable[None]],
        should_poll: Callable[[], bool],
        *,
        heartbeat_frequency: float,
        service_name: str = "mongodb",
        resolver: DnsResolver | None = None,
        initial_interval: float | None = None,
        min_interval: float = MIN_RESCAN_INTERVAL,
        lifetime: float | None = None,
    ) -> None:
        self._hostname = hostname
        self._apply = apply
        self._should_poll = should_poll
        self._heartbeat = heartbeat_frequency
        self._service_name = service_name
        self._resolver = resolver
        self._min_interval = min_interval
        self._interval = max(min_interval, initial_interval or 0.0)
        self._lifetime = lifetime
        self._task: asyncio.Task[None] | None = None
        self.rescans = 0
        """How many lookups were made (for diagnostics and tests)."""

    @property
    def interval(self) -> float:
        """Seconds until the next rescan, as last computed."""
        return self._interval

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def unfinished_tasks(self) -> list[asyncio.Task[None]]:
        """The polling task, while it has not finished."""
        task = self._task
        return [task] if task is not None and not task.done() else []

    def start(self) -> None:
        """Start polling (once); needs a running event loop."""
        if self._task is None:
            self._task = running_loop().create_task(
                self._run(), name=f"mongio srv polling {self._hostname}"
            )

    def stop(self) -> asyncio.Task[None] | None:
        """Cancel the task without waiting; returns it so the caller can await its end."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        return task

    def let_go(self) -> None:
        """Let go of the task without cancelling it: its event loop will never run it again (see
        :class:`~mongio.loop_runtime.bound.LoopBound`)."""
        self._task = None

    async def close(self) -> None:
        task = self.stop()
        if task is not None:
            await gather(task)

    async def _lookup(self) -> SrvRescan:
        return await rescan(
            self._hostname, service_name=self._service_name, resolver=self._resolver, lifetime=self._lifetime
        )

    async def _run(self) -> None:
        while self._should_poll():
            await sleep(self._interval)
            if not self._should_poll():
                return
            self.rescans += 1
            try:
                result = await self._lookup()
            except Exception as exc:
                _log.warning(
                    "SRV polling of %r found no usable hosts, topology unchanged: %s", self._hostname, exc
                )
                self._interval = self._heartbeat
                continue
            await self._apply(result.hosts)
            self._interval = max(self._min_interval, result.ttl or 0.0)
