"""The failover durability soak: many tasks writing and reading through a deployment of the cluster harness
while faults are injected and operations are cancelled at random points; then every acknowledged write is
checked.

    python -m spec_runner.cluster.soak [--topology replicaset|sharded|both] [--writers 50] [--faults 100]
                                       [--cancellations 10000] [--seed 1] [--backend asyncio|trio]
    python -m spec_runner.cluster.soak --pressure [--writers 20] [--max-pool-size 5] [--faults 15]

Each writer inserts documents with unique ids and increments its own counter document (both retryable
writes); readers read back acknowledged documents (retryable reads); a fault driver injects elections,
member kills and restarts (mongos kills in a sharded cluster), lost and cut replies, overload bursts,
state-change and network errors, delays and black holes; cancellers start operations and cancel them after a
random delay (in server selection, check-out, the write, the wait for the reply or a retry's backoff).

Afterwards: every acknowledged insert is present exactly once, each counter lies between its acknowledged
increments and those plus the ones whose outcome is unknown (more is a write applied twice), no read returned
a wrong document, no connection is left checked out, every pooled connection answers its own next request,
and no task outlives the client.

The errors the application saw are counted by class and code, in two groups: those no retry could have
avoided and those the retry rules should have absorbed (a NotWritablePrimary on a write, for one: an election
leaves room for the retry within timeoutMS). No retry could avoid a timeout (the operation's timeoutMS ran out,
a black hole say), an overload still refused once the backoff budget was spent, or any error of an operation
that met an overload on an earlier attempt: from then on it has at most ``maxAdaptiveRetries`` retries in all
(client backpressure, "Interaction with Other Retry Policies"), so a fault or two more ends it.

``--pressure`` is the pool-pressure run: writers only, more of them than ``--max-pool-size`` connections, and an
election every second (``--faults`` of them) and no other fault, so writes keep waiting for a connection while
their primary steps down; a retryable write must see no error at all.
"""

from __future__ import annotations

import argparse
import collections
import contextvars
import functools
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from mongio.client import MongoClient
from mongio.error_classification import is_timeout
from mongio.errors import MongioError
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from spec_runner.cluster.deployment import Deployment, replica_set, sharded
from spec_runner.cluster.faults import Fault, FaultKind, FaultPlan
from spec_runner.cluster.members import Role
from spec_runner.runner import BACKENDS
from spec_runner.task_census import running_tasks, tasks_started_since

IN_FLIGHT = 50
"""How many cancelled operations run at once."""
DATABASE = "soak"
DOCUMENTS = "documents"
COUNTERS = "counters"


@dataclass
class SoakSettings:
    writers: int = 50
    readers: int = 10
    faults: int = 100
    cancellations: int = 10_000
    seed: int = 1
    timeout_ms: int = 5_000
    """The client's timeoutMS: what a black-holed operation costs."""
    max_pool_size: int = 100
    pressure: bool = False
    """Writers only, ``faults`` elections a second apart, no other fault and no cancellation."""
    election_interval: float = 1.0


@dataclass
class SoakReport:
    topology: str
    acknowledged_inserts: int = 0
    acknowledged_increments: int = 0
    unknown_increments: int = 0
    lost_writes: int = 0
    duplicate_writes: int = 0
    wrong_reads: int = 0
    reads: int = 0
    cancelled: int = 0
    checked_out_after: int = 0
    stale_replies: int = 0
    leaked_tasks: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    unavoidable_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    """Errors no retry could have avoided (timeouts, overload past the backoff budget), by class and code."""
    avoidable_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    """Errors the retry rules should have absorbed, by class and code."""
    recoveries: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (
            self.lost_writes or self.duplicate_writes or self.wrong_reads or self.checked_out_after
            or self.stale_replies or self.leaked_tasks
        )  # fmt: skip

    def table(self) -> str:
        rows = [
            ("topology", self.topology),
            ("acknowledged inserts", self.acknowledged_inserts),
            ("acknowledged increments", self.acknowledged_increments),
            ("increments with unknown outcome", self.unknown_increments),
            ("reads checked", self.reads),
            ("operations cancelled", self.cancelled),
            ("lost acknowledged writes", self.lost_writes),
            ("duplicated writes", self.duplicate_writes),
            ("wrong reads", self.wrong_reads),
            ("connections left checked out", self.checked_out_after),
            ("connections answering a stale reply", self.stale_replies),
            ("tasks leaked", self.leaked_tasks),
            ("faults injected", sum(self.faults.values())),
        ]
        rows += [(f"  {kind}", count) for kind, count in sorted(self.faults.items())]
        seen = sum(self.unavoidable_errors.values()) + sum(self.avoidable_errors.values())
        rows.append(("errors the application saw", seen))
        rows.append(("  no retry could avoid (timeout, overload)", sum(self.unavoidable_errors.values())))
        rows += [(f"    {name}", count) for name, count in sorted(self.unavoidable_errors.items())]
        rows.append(("  a retry should have avoided", sum(self.avoidable_errors.values())))
        rows += [(f"    {name}", count) for name, count in sorted(self.avoidable_errors.items())]
        if self.recoveries:
            rows.append(("elections", len(self.recoveries)))
            rows.append(("recovery after election, median (ms)", round(statistics.median(self.recoveries) * 1000, 1)))
            rows.append(("recovery after election, worst (ms)", round(max(self.recoveries) * 1000, 1)))
        rows.append(("seconds", round(self.seconds, 1)))
        width = max(len(str(name)) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


class OverloadWitness(CommandListener):
    """Whether the current task's latest operation met an overload (``SystemOverloadedError``) on one of its
    attempts. The executor runs an operation's attempts, and publishes their events, in the task that awaits
    it: what the listener notes in that task's context variables is the task's own (each task runs in a copy
    of its parent's context)."""

    def __init__(self) -> None:
        # The current task's latest operation's id, and whether an attempt of it was refused as overloaded.
        self._latest: contextvars.ContextVar[tuple[int | None, bool] | None] = contextvars.ContextVar(
            "latest operation", default=None
        )

    def started(self, event: CommandStartedEvent) -> None:
        latest = self._latest.get()
        if latest is None or latest[0] != event.operation_id:
            self._latest.set((event.operation_id, False))

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        failure = event.failure
        labels = failure.get("errorLabels", ()) if isinstance(failure, dict) else ()
        latest = self._latest.get()
        if latest is not None and "SystemOverloadedError" in labels:
            self._latest.set((latest[0], True))

    def overloaded(self) -> bool:
        """Whether the current task's latest operation met an overload."""
        latest = self._latest.get()
        return latest is not None and latest[1]


class Soak:
    """One soak run against a started deployment."""

    def __init__(self, deployment: Deployment, settings: SoakSettings) -> None:
        self.deployment = deployment
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.report = SoakReport(deployment.topology)
        self.acknowledged: dict[str, tuple[int, int]] = {}  # _id -> (writer, sequence)
        self.increments = collections.Counter[int]()
        self.unknown = collections.Counter[int]()
        self.stop = anyio.Event()
        self.client: MongoClient | None = None
        self.overloads = OverloadWitness()

    def _collection(self, name: str) -> Any:
        assert self.client is not None
        return self.client.get_database(DATABASE).get_collection(name)

    def _saw(self, error: BaseException) -> None:
        """Count an error an operation of the current task ended with."""
        after_overload = self.overloads.overloaded()
        name, unavoidable = classify_error(error, after_overload=after_overload)
        counter = self.report.unavoidable_errors if unavoidable else self.report.avoidable_errors
        counter[name] += 1

    async def run(self) -> SoakReport:
        started = time.monotonic()
        tasks_before = running_tasks()
        self.client = MongoClient(
            self.deployment.uri,
            timeoutMS=self.settings.timeout_ms,
            maxPoolSize=self.settings.max_pool_size,
            heartbeatFrequencyMS=500,
            event_listeners=[self.overloads],
        )
        await self.client.aconnect()
        await self._collection(DOCUMENTS).drop()
        await self._collection(COUNTERS).drop()
        async with anyio.create_task_group() as workers:
            for number in range(self.settings.writers):
                workers.start_soon(self._writer, number)
            for number in range(self.settings.readers):
                workers.start_soon(self._reader, number)
            try:
                if self.settings.pressure:
                    await self._elect_every_interval()
                else:
                    async with anyio.create_task_group() as drivers:
                        drivers.start_soon(self._inject_faults)
                        drivers.start_soon(self._cancel_operations)
            finally:
                self.stop.set()
        self.report.faults.update(self.deployment.injected_faults())
        self.deployment.reset()
        await self._verify()
        await self.client.close()
        self.report.leaked_tasks = len(tasks_started_since(tasks_before))
        self.report.seconds = time.monotonic() - started
        return self.report

    # -- the application -------------------------------------------------------------------------------

    async def _writer(self, number: int) -> None:
        documents, counters = self._collection(DOCUMENTS), self._collection(COUNTERS)
        sequence = 0
        while not self.stop.is_set():
            sequence += 1
            identifier = f"w{number}-{sequence}"
            try:
                await documents.insert_one({"_id": identifier, "writer": number, "seq": sequence})
                self.acknowledged[identifier] = (number, sequence)
            except Exception as error:
                self._saw(error)
            try:
                await counters.update_one({"_id": number}, {"$inc": {"n": 1}}, upsert=True)
                self.increments[number] += 1
            except Exception as error:
                self._saw(error)
                self.unknown[number] += 1

    async def _reader(self, number: int) -> None:
        documents = self._collection(DOCUMENTS)
        rng = random.Random(self.settings.seed * 1000 + number)
        while not self.stop.is_set():
            if not self.acknowledged:
                await anyio.sleep(0.01)
                continue
            identifier = rng.choice(list(self.acknowledged))
            writer, sequence = self.acknowledged[identifier]
            try:
                found = await documents.find_one({"_id": identifier})
            except Exception as error:
                self._saw(error)
                continue
            self.report.reads += 1
            if found != {"_id": identifier, "writer": writer, "seq": sequence}:
                self.report.wrong_reads += 1

    async def _cancel_operations(self) -> None:
        """Start ``cancellations`` operations, at most ``IN_FLIGHT`` at a time, each cut at a random moment
        of its first 4 ms (its cancel scope's deadline) unless it finished by then."""
        documents = self._collection(DOCUMENTS)
        slots = anyio.Semaphore(IN_FLIGHT)
        async with anyio.create_task_group() as in_flight:
            for index in range(self.settings.cancellations):
                operation: Callable[[], Awaitable[Any]]
                if index % 2:
                    operation = functools.partial(documents.find_one, {"_id": f"w0-{index}"})
                else:
                    operation = functools.partial(documents.insert_one, {"_id": f"c-{index}", "cancelled": True})
                await slots.acquire()
                deadline = anyio.current_time() + self.rng.random() * 0.004
                in_flight.start_soon(self._cancelled_at, operation, deadline, slots)

    async def _cancelled_at(
        self, operation: Callable[[], Awaitable[Any]], deadline: float, slot: anyio.Semaphore
    ) -> None:
        try:
            with anyio.CancelScope(deadline=deadline) as scope:
                await operation()
        except Exception as error:
            self._saw(error)
        finally:
            slot.release()
        if scope.cancelled_caught:
            self.report.cancelled += 1

    # -- the faults ------------------------------------------------------------------------------------

    def _fault_actions(self) -> list[Callable[[], Awaitable[None]]]:
        scripted = [self._scripted(kind) for kind in FaultKind]
        if self.deployment.topology == "replicaset":
            return [self._election, self._kill_and_restart, *scripted]
        return [self._kill_and_restart, *scripted]

    def _fired(self) -> int:
        return sum(self.report.faults.values()) + sum(self.deployment.injected_faults().values())

    async def _inject_faults(self) -> None:
        """Until ``faults`` have fired (a planned one fires at the member's next data command): every kind in
        turn first, then at random."""
        actions = self._fault_actions()
        index = 0
        while self._fired() < self.settings.faults and index < 20 * self.settings.faults:
            action = actions[index] if index < len(actions) else self.rng.choice(actions)
            index += 1
            await action()
            await anyio.sleep(0.02 + self.rng.random() * 0.05)

    async def _elect_every_interval(self) -> None:
        """The pressure run's faults: ``faults`` elections, ``election_interval`` seconds apart."""
        for _ in range(self.settings.faults):
            await anyio.sleep(self.settings.election_interval)
            await self._election()

    def _scripted(self, kind: FaultKind) -> Callable[[], Awaitable[None]]:
        async def inject() -> None:
            target = self._data_member()
            burst = 5 if kind is FaultKind.OVERLOAD else 1
            plan = FaultPlan([Fault(kind, seconds=0.05)] * burst, commands=["insert", "update", "find"])
            self.deployment.set_faults(target, plan)  # counted as they fire, from the plans

        return inject

    def _data_member(self) -> Any:
        if self.deployment.topology == "replicaset":
            return self.deployment.primary or self.deployment.members[0]
        return self.rng.choice(self.deployment.members)

    def _note(self, kind: str) -> None:
        self.report.faults[kind] += 1

    async def _election(self) -> None:
        started = time.monotonic()
        await anyio.to_thread.run_sync(self.deployment.failover)
        self._note("election")
        await self._until_a_write_succeeds()
        self.report.recoveries.append(time.monotonic() - started)

    async def _until_a_write_succeeds(self) -> None:
        probes = self._collection("probes")
        while True:
            try:
                await probes.insert_one({"at": time.time()})
                return
            except Exception as error:
                self._saw(error)

    async def _kill_and_restart(self) -> None:
        victim = self.rng.choice(self.deployment.members)
        started = time.monotonic()
        was_primary = victim.role is Role.PRIMARY
        await anyio.to_thread.run_sync(self.deployment.kill, victim)
        self._note("member killed" if self.deployment.topology == "replicaset" else "mongos killed")
        if was_primary:
            await anyio.to_thread.run_sync(self.deployment.failover)
            self._note("election")
            await self._until_a_write_succeeds()
            self.report.recoveries.append(time.monotonic() - started)
        await anyio.sleep(0.1 + self.rng.random() * 0.2)
        await anyio.to_thread.run_sync(self.deployment.restart, victim)

    # -- the checks ------------------------------------------------------------------------------------

    async def _verify(self) -> None:
        report = self.report
        report.acknowledged_inserts = len(self.acknowledged)
        report.acknowledged_increments = sum(self.increments.values())
        report.unknown_increments = sum(self.unknown.values())
        stored = {doc["_id"]: doc async for doc in self._collection(DOCUMENTS).find({"_id": {"$regex": "^w"}})}
        report.lost_writes = sum(1 for identifier in self.acknowledged if identifier not in stored)
        counters = {doc["_id"]: doc.get("n", 0) async for doc in self._collection(COUNTERS).find({})}
        for writer in range(self.settings.writers):
            value = counters.get(writer, 0)
            if value > self.increments[writer] + self.unknown[writer]:
                report.duplicate_writes += value - self.increments[writer] - self.unknown[writer]
            elif value < self.increments[writer]:
                report.lost_writes += self.increments[writer] - value
        report.checked_out_after = self._checked_out()
        report.stale_replies = await self._stale_replies()

    def _checked_out(self) -> int:
        topology = self.client._topology if self.client is not None else None
        if topology is None:
            return 0
        pools = [server.pool for server in topology.servers.values() if server.pool is not None]
        return sum(int(getattr(pool, "in_use_connection_count", 0)) for pool in pools)

    async def _stale_replies(self) -> int:
        """Run many reads at once, so every pooled connection serves one: a connection still holding a reply
        it never read would answer with the wrong document."""
        documents = self._collection(DOCUMENTS)
        sample = list(self.acknowledged)[:500]
        stale = 0

        async def read(identifier: str) -> None:
            nonlocal stale
            doc = await documents.find_one({"_id": identifier})
            if doc is None or doc["_id"] != identifier:
                stale += 1

        async with anyio.create_task_group() as reads:
            for identifier in sample:
                reads.start_soon(read, identifier)
        return stale


def classify_error(error: BaseException, *, after_overload: bool = False) -> tuple[str, bool]:
    """The error's class and code as the report names it, and whether no retry could have avoided it: a
    timeout (the operation's time ran out), an overload the server still refused after the backoffs, or any
    error of an operation that met an overload before (``after_overload``: its retries were capped)."""
    code = getattr(error, "code", None)
    name = type(error).__name__ + (f" (code {code})" if code is not None else "")
    overloaded = isinstance(error, MongioError) and error.has_error_label("SystemOverloadedError")
    if after_overload and not overloaded and not is_timeout(error):
        return f"{name} after an overload capped the retries", True
    return name, is_timeout(error) or overloaded


async def soak_topology(topology: str, settings: SoakSettings) -> SoakReport:
    """Build a deployment of ``topology``, soak it, stop it."""
    build = replica_set if topology == "replicaset" else sharded
    deployment = await anyio.to_thread.run_sync(lambda: build().start())
    try:
        return await Soak(deployment, settings).run()
    finally:
        await anyio.to_thread.run_sync(deployment.stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec_runner.cluster.soak", description=__doc__)
    parser.add_argument("--topology", choices=("replicaset", "sharded", "both"), default="both")
    parser.add_argument("--writers", type=int, default=None, help="50; 20 with --pressure")
    parser.add_argument("--readers", type=int, default=10)
    parser.add_argument("--faults", type=int, default=None, help="100; with --pressure, 15 elections")
    parser.add_argument("--cancellations", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-pool-size", type=int, default=None, help="100; 5 with --pressure")
    parser.add_argument("--pressure", action="store_true", help="the pool-pressure run (replica set only)")
    parser.add_argument("--backend", choices=BACKENDS, default="asyncio", help="the event loop the client runs on")
    args = parser.parse_args(argv)
    if args.pressure:
        settings = SoakSettings(
            writers=args.writers or 20, readers=0, faults=args.faults or 15, cancellations=0,
            seed=args.seed, max_pool_size=args.max_pool_size or 5, pressure=True,
        )  # fmt: skip
        args.topology = "replicaset"
    else:
        settings = SoakSettings(
            writers=args.writers or 50, readers=args.readers, faults=args.faults or 100,
            cancellations=args.cancellations, seed=args.seed, max_pool_size=args.max_pool_size or 100,
        )  # fmt: skip
    topologies = ["replicaset", "sharded"] if args.topology == "both" else [args.topology]
    ok = True
    for topology in topologies:
        report = anyio.run(soak_topology, topology, settings, backend=args.backend)
        print(report.table())
        print()
        ok = ok and report.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
