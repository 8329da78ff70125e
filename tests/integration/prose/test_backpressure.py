"""Client backpressure against the test server: the README's prose tests, exact backoffs and token-bucket
balances with the jitter injected, and inserts that stay exactly-once while connections keep failing.

Prose test 5 (``baseBackoffMS``) needs the server parameter ``externalClientBaseBackoffMS``, which SecantusDB
does not have; the unit tests check the driver's side (tests/unit/execution/test_executor.py,
test_retry_policy.py).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest
from spec_runner.raw_wire import command_once

from mongio import MongoClient
from mongio.errors import DuplicateKeyError, MongioError, OperationFailure
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from tests.conftest import first_host

pytestmark = pytest.mark.server

OVERLOAD_LABELS = ["SystemOverloadedError", "RetryableError"]


class FixedJitter(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


class Commands(CommandListener):
    """Counts one command's attempts, failures and successes; wakes ``next_outcome`` on every outcome (and
    ``wake`` at any time)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started_count = 0
        self.failed_count = 0
        self.succeeded_count = 0
        self._changed = anyio.Event()
        self._then: tuple[Server, Mapping[str, Any]] | None = None

    def started(self, event: CommandStartedEvent) -> None:
        if event.command_name == self.name:
            self.started_count += 1

    def succeeded(self, event: CommandSucceededEvent) -> None:
        if event.command_name == self.name:
            self.succeeded_count += 1
            self._changed.set()

    def failed(self, event: CommandFailedEvent) -> None:
        if event.command_name == self.name:
            self.failed_count += 1
            self._changed.set()
            then, self._then = self._then, None
            if then is not None:
                # Blocking, so the fail point is in place before the driver goes on to the retry.
                then[0].set_now(then[1])

    def then_set(self, server: Server, command: Mapping[str, Any]) -> None:
        """Set ``command`` on ``server`` once the next attempt has failed."""
        self._then = (server, command)

    async def next_outcome(self) -> None:
        """Wait for the next outcome (or ``wake``)."""
        self._changed = anyio.Event()
        await self._changed.wait()

    def wake(self) -> None:
        """Wake whoever waits in ``next_outcome``."""
        self._changed.set()


def fail_command(mode: Any, **data: Any) -> dict[str, Any]:
    return {"configureFailPoint": "failCommand", "mode": mode, "data": data}


class Server:
    """Sets a fail point with a blocking one-shot command (for listeners, which cannot await)."""

    def __init__(self, uri: str) -> None:
        self.host, self.port = first_host(uri)

    def set_now(self, command: Mapping[str, Any]) -> None:
        reply = command_once(self.host, self.port, {**command, "$db": "admin"})
        assert reply.get("ok") == 1, reply


@pytest.fixture
async def admin(server_uri: str) -> AsyncIterator[MongoClient]:
    """A client for fail points; the fail point is turned off after the test."""
    async with MongoClient(server_uri) as client:
        try:
            yield client
        finally:
            await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


class Backoffs:
    """Records each backoff the executor asks for, then waits it out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await anyio.sleep(delay)


def instrumented(client: MongoClient, jitter: float) -> Backoffs:
    backoffs = Backoffs()
    client._executor.retry_random = FixedJitter(jitter)
    client._executor.backoff_sleep = backoffs
    return backoffs


def spec_backoff(jitter: float, attempt: int, base: float = 0.1) -> float:
    """client-backpressure.md: jitter * min(MAX_BACKOFF, BASE_BACKOFF * 2^attempt)."""
    return jitter * min(10.0, base * 2.0**attempt)


# -- the README's prose tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("jitter", [0.0, 1.0 - 2**-53])
async def test_prose_1_retries_back_off_exponentially(
    server_uri: str, admin: MongoClient, jitter: float
) -> None:
    async with MongoClient(server_uri) as client:
        backoffs = instrumented(client, jitter)
        await admin.admin.command(
            fail_command("alwaysOn", failCommands=["insert"], errorCode=2, errorLabels=OVERLOAD_LABELS)
        )
        with pytest.raises(OperationFailure):
            await client["backpressure"]["prose_1"].insert_one({"a": 1})
    # Jitter 0 waits nothing; jitter ~1 waits 0.2 + 0.4 = 0.6 s in two backoffs.
    expected = [spec_backoff(jitter, 1), spec_backoff(jitter, 2)] if jitter else []
    assert backoffs.delays == pytest.approx(expected)
    assert sum(backoffs.delays) == pytest.approx(0.6 if jitter else 0.0)


@pytest.mark.parametrize(("max_adaptive_retries", "attempts"), [(None, 3), (1, 2), (0, 1)])
async def test_prose_3_and_4_overload_errors_are_retried_max_adaptive_retries_times(
    server_uri: str, admin: MongoClient, max_adaptive_retries: int | None, attempts: int
) -> None:
    commands = Commands("find")
    options: dict[str, Any] = {}
    if max_adaptive_retries is not None:
        options["maxAdaptiveRetries"] = max_adaptive_retries
    async with MongoClient(server_uri, event_listeners=[commands], **options) as client:
        instrumented(client, 0.0)
        await admin.admin.command(
            fail_command("alwaysOn", failCommands=["find"], errorCode=462, errorLabels=OVERLOAD_LABELS)
        )
        with pytest.raises(OperationFailure) as info:
            await client["backpressure"]["prose_3"].find_one({})
    assert info.value.has_error_label("RetryableError")
    assert info.value.has_error_label("SystemOverloadedError")
    assert commands.started_count == attempts


# -- exact numbers: attempts, backoffs, the token bucket -----------------------------------------------------


async def test_overload_retries_backoffs_and_token_bucket_match_the_specification(
    server_uri: str, admin: MongoClient
) -> None:
    jitter = 0.5
    inserts = Commands("insert")
    async with MongoClient(
        server_uri, adaptiveRetries=True, appname="backpressure-exact", event_listeners=[inserts]
    ) as client:
        backoffs = instrumented(client, jitter)
        server = Server(server_uri)
        bucket = client._executor._token_bucket
        assert bucket is not None and bucket.tokens == bucket.capacity == 1000
        collection = client["backpressure"]["exact"]
        await collection.drop()
        overload = {"failCommands": ["insert"], "errorCode": 462, "errorLabels": OVERLOAD_LABELS}
        steps: list[tuple[str, int, list[float], float]] = []

        async def step(name: str, run: Any) -> None:
            started, delays = inserts.started_count, len(backoffs.delays)
            await run()
            steps.append((name, inserts.started_count - started, backoffs.delays[delays:], bucket.tokens))

        # 1. Overloaded for good: the first attempt and maxAdaptiveRetries (2) retries, each paying a token.
        await admin.admin.command(fail_command("alwaysOn", **overload))

        async def fails() -> None:
            with pytest.raises(OperationFailure):
                await collection.insert_one({"_id": 1})

        await step("always overloaded", fails)
        await admin.admin.command(fail_command("off"))
        # 2. A first-attempt success gives 0.1 back.
        await step("success", lambda: collection.insert_one({"_id": 2}))
        # 3. One overload error, then success: one token paid, 1.1 back.
        await admin.admin.command(fail_command({"times": 1}, **overload))
        await step("overloaded once", lambda: collection.insert_one({"_id": 3}))
        # 4. A retryable error that is no overload (no token, no backoff), a retry that meets an overload
        #    error (1 token; the limit becomes 2 retries; backoff for retry 2), then success (1.1 back).
        retryable = {"failCommands": ["insert"], "errorCode": 9001, "errorLabels": ["RetryableWriteError"]}
        await admin.admin.command(fail_command({"times": 1}, **retryable))
        inserts.then_set(server, fail_command({"times": 1}, **overload))
        await step("retryable, then overloaded", lambda: collection.insert_one({"_id": 4}))
        # 5. An overload error (1 token, backoff for retry 1), a retry that fails with another error (1 token
        #    back: the server could answer), a second retry (the limit is 2 now) that succeeds (1.1 back).
        await admin.admin.command(fail_command({"times": 1}, **overload))
        inserts.then_set(server, fail_command({"times": 1}, **retryable))
        await step("overloaded, then retryable", lambda: collection.insert_one({"_id": 5}))
        assert await collection.count_documents({}) == 4

    for name, attempts, delays, tokens in steps:
        print(f"{name}: {attempts} attempts, backoffs {delays}, tokens {tokens}")
    (a_attempts, a_delays, a_tokens), (b_attempts, b_delays, b_tokens) = (s[1:] for s in steps[:2])
    assert (a_attempts, b_attempts) == (3, 1)
    assert a_delays == pytest.approx([spec_backoff(jitter, 1), spec_backoff(jitter, 2)])  # 0.1 s, 0.2 s
    assert b_delays == []
    assert a_tokens == 1000 - 2  # two retries paid; the last failure returns nothing (an overload error)
    assert b_tokens == pytest.approx(998 + 0.1, abs=1e-9)
    _, c_attempts, c_delays, c_tokens = steps[2]
    assert c_attempts == 2
    assert c_delays == pytest.approx([spec_backoff(jitter, 1)])
    assert c_tokens == pytest.approx(998.1 - 1 + 1.1, abs=1e-9)
    _, d_attempts, d_delays, d_tokens = steps[3]
    assert d_attempts == 3
    assert d_delays == pytest.approx([spec_backoff(jitter, 2)])
    assert d_tokens == pytest.approx(998.2 - 1 + 1.1, abs=1e-9)
    _, e_attempts, e_delays, e_tokens = steps[4]
    assert e_attempts == 3
    assert e_delays == pytest.approx([spec_backoff(jitter, 1)])
    assert e_tokens == pytest.approx(998.3 - 1 + 1 + 1.1, abs=1e-9)


# -- durability ---------------------------------------------------------------------------------------------

TASKS = 20
INSERTS = 5_000
# Faults, in turn, each for a few inserts: connections closed by the server, a retryable error code, the
# server declaring itself overloaded, and replies that come too late (the client gives up on the connection
# while the server still runs the insert; the retry must not write it twice). The reply is held well past the
# client's socket timeout and the timeout well past an insert's own time: the test server does not make a retry
# wait for the attempt it repeats (the same lsid and txnNumber), so on a loaded machine two attempts of one insert
# that the server ran at once would each try the write, and one would fail with a duplicate key.
FAULTS: list[dict[str, Any]] = [
    {"closeConnection": True},
    {"errorCode": 9001, "errorLabels": ["RetryableWriteError"]},
    {"errorCode": 462, "errorLabels": OVERLOAD_LABELS},
    {"blockConnection": True, "blockTimeMS": 1_500},
    {"errorCode": 91, "errorLabels": ["RetryableWriteError"]},
]
FAULT_TIMES = 3  # attempts failed per fault
INSERTS_BETWEEN_FAULTS = 60


async def test_inserts_stay_exactly_once_while_connections_fail(server_uri: str, admin: MongoClient) -> None:
    inserts = Commands("insert")
    app = "backpressure-durability"
    async with MongoClient(
        server_uri,
        appname=app,
        event_listeners=[inserts],
        heartbeatFrequencyMS=500,
        socketTimeoutMS=750,
        maxPoolSize=TASKS,
    ) as client:
        collection = client["backpressure"]["durability"]
        await collection.drop()
        acknowledged: list[int] = []
        failed: dict[int, MongioError] = {}
        done = anyio.Event()
        faults_set: list[str] = []

        async def worker(first: int) -> None:
            for _id in range(first, INSERTS, TASKS):
                try:
                    await collection.insert_one({"_id": _id, "task": first})
                except MongioError as exc:
                    failed[_id] = exc
                else:
                    acknowledged.append(_id)

        async def faults() -> None:
            for fault in itertools.cycle(FAULTS):
                failures = inserts.failed_count
                await admin.admin.command(
                    fail_command({"times": FAULT_TIMES}, failCommands=["insert"], appName=app, **fault)
                )
                faults_set.append(next(iter(fault)))
                while inserts.failed_count < failures + FAULT_TIMES and not done.is_set():
                    await inserts.next_outcome()
                successes = inserts.succeeded_count
                while inserts.succeeded_count < successes + INSERTS_BETWEEN_FAULTS and not done.is_set():
                    await inserts.next_outcome()
                if done.is_set():
                    return

        async with anyio.create_task_group() as injecting:
            injecting.start_soon(faults)
            try:
                async with anyio.create_task_group() as workers:
                    for first in range(TASKS):
                        workers.start_soon(worker, first)
            finally:
                done.set()
                inserts.wake()
        await admin.admin.command(fail_command("off"))
        stored = [doc["_id"] async for doc in collection.find({}, {"_id": 1})]

    retries = inserts.started_count - INSERTS
    raised = Counter(type(exc).__name__ for exc in failed.values())
    print(
        f"\n{INSERTS} inserts by {TASKS} tasks: {len(faults_set)} faults set ({FAULT_TIMES} attempts each), "
        f"{inserts.started_count} insert commands sent, {retries} retries, {inserts.failed_count} attempts "
        f"failed; {len(acknowledged)} acknowledged, {len(failed)} raised {dict(raised)}; "
        f"{len(stored)} documents stored"
    )
    assert len(stored) == len(set(stored))
    assert set(acknowledged) <= set(stored)  # every acknowledged insert is there, once
    assert not [exc for exc in failed.values() if isinstance(exc, DuplicateKeyError)]  # no retry wrote twice
    assert set(stored) <= set(acknowledged) | set(failed)
    assert retries > 0 and len(faults_set) >= len(FAULTS)
