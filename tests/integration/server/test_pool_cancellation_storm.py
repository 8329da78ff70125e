"""The cancellation storm through the client, on asyncio and on trio: 10,000 operations (inserts, finds,
pings) run by a hundred workers sharing ten connections, each operation cut by anyio's ``move_on_after`` at a
random moment (while it waits for a connection, while its command is on the wire, or not at all).

Afterwards the pool's CMAP books balance (every check-out was checked in, never more than ``maxPoolSize``
connections), every insert the server acknowledged is in the collection, every reply that came back answered the
operation that asked (a connection cut mid-command and reused would hand one operation another's reply), and
no task the client started is left once it is closed. The test with the pool alone, cancelled through asyncio
Tasks, is ``test_pool_cancellation.py``; both keep their books with ``tests.support.pool_books``.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio.client import MongoClient
from tests.support.pool_books import PoolBooks

pytestmark = [pytest.mark.server, pytest.mark.slow]

OPERATIONS = 10_000
WORKERS = 100
MAX_POOL_SIZE = 10
# Half the operations get a deadline drawn up to this many seconds (about the time one takes with a hundred
# workers queued for ten connections, so the cut lands anywhere from the wait for a connection to the reply);
# the other half get one they always meet.
LONGEST_CUT = 0.03
AMPLE = 10.0


@dataclass
class StormTally:
    """What the workers saw; ``wrong_replies`` holds replies that did not answer their operation."""

    completed: Counter[str] = field(default_factory=Counter)
    cut: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    acknowledged: set[int] = field(default_factory=set)
    wrong_replies: list[str] = field(default_factory=list)


async def _one_operation(client: MongoClient[Any], kind: str, key: int, tally: StormTally) -> None:
    collection = client.storm.items
    if kind == "insert":
        result = await collection.insert_one({"_id": key, "kind": kind})
        if result.inserted_id != key:
            tally.wrong_replies.append(f"insert {key} answered with id {result.inserted_id!r}")
        elif result.acknowledged:
            tally.acknowledged.add(key)
    elif kind == "find":
        document = await collection.find_one({"_id": key})
        if document is not None and document["_id"] != key:
            tally.wrong_replies.append(f"find {key} answered with document {document!r}")
    else:
        reply = await client.admin.command("ping", comment=key)
        if reply.get("ok") != 1:
            tally.wrong_replies.append(f"ping {key} answered {reply!r}")


async def _worker(client: MongoClient[Any], plan: list[tuple[str, int, float]], tally: StormTally) -> None:
    for kind, key, deadline in plan:
        with anyio.move_on_after(deadline) as scope:
            try:
                await _one_operation(client, kind, key, tally)
            except Exception as exc:  # an error no cut explains; reported by the test
                tally.errors.append(f"{kind} {key}: {type(exc).__name__}: {exc}")
        if scope.cancelled_caught:
            tally.cut[kind] += 1
        else:
            tally.completed[kind] += 1


def _plans(rng: random.Random) -> list[list[tuple[str, int, float]]]:
    """Each worker's operations: (kind, key, deadline in seconds). Finds ask for keys inserted earlier, so
    some find a document; keys are unique, so each acknowledged insert names its own document."""
    plans: list[list[tuple[str, int, float]]] = [[] for _ in range(WORKERS)]
    for key in range(OPERATIONS):
        kind = rng.choices(["insert", "find", "ping"], weights=[40, 40, 20])[0]
        target = key if kind != "find" else rng.randrange(max(key, 1))
        deadline = rng.uniform(0, LONGEST_CUT) if rng.random() < 0.5 else AMPLE
        plans[key % WORKERS].append((kind, target, deadline))
    return plans


async def _storm(uri: str) -> tuple[StormTally, PoolBooks, dict[str, Any]]:
    rng = random.Random(20261206)
    books = PoolBooks()
    tasks_before = running_tasks()
    client: MongoClient[Any] = MongoClient(
        uri, maxPoolSize=MAX_POOL_SIZE, event_listeners=[books], appname="cancellationStorm"
    )
    tally = StormTally()
    figures: dict[str, Any] = {}
    async with client:
        await client.storm.items.drop()
        started = time.perf_counter()
        async with anyio.create_task_group() as workers:
            for plan in _plans(rng):
                workers.start_soon(_worker, client, plan, tally)
        figures["seconds"] = time.perf_counter() - started
        # Check-outs and check-ins balance once no operation runs; the pool still serves after the storm.
        figures["balance"] = books.balance_problems(MAX_POOL_SIZE)
        # A connection cut with its command on the wire is closed (never handed out again), the pool still open.
        figures["closed_during_storm"] = sum(books.closed_reasons.values())
        stored = await client.storm.items.distinct("_id")
        figures["stored"] = len(stored)
        figures["missing"] = sorted(tally.acknowledged - set(stored))[:20]
        await client.storm.items.drop()
    figures["tasks_left"] = tasks_started_since(tasks_before)
    return tally, books, figures


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ten_thousand_operations_cut_at_random_moments(server_uri: str, backend: str) -> None:
    tally, books, figures = anyio.run(_storm, server_uri, backend=backend)

    assert tally.errors == []
    assert tally.wrong_replies == []
    # The storm proves something only if operations were cut and others completed, of every kind.
    for kind in ("insert", "find", "ping"):
        assert tally.cut[kind] >= 100, tally.cut
        assert tally.completed[kind] >= 100, tally.completed
    assert sum(tally.cut.values()) + sum(tally.completed.values()) == OPERATIONS
    # Some cuts landed while a command was on the wire: the pool closed those connections.
    assert figures["closed_during_storm"] > 0, "no connection was closed: no cut landed mid-command"

    assert figures["balance"] == []
    assert books.checked_out == books.checked_in
    assert figures["missing"] == [], "acknowledged inserts are missing from the collection"
    assert figures["tasks_left"] == []
    assert books.open == 0

    print(
        f"\n{backend}: {OPERATIONS} operations in {figures['seconds']:.2f}s, completed {dict(tally.completed)}, "
        f"cut {dict(tally.cut)}; {len(tally.acknowledged)} acknowledged inserts, {figures['stored']} documents "
        f"stored, none missing; {books.summary()}"
    )
