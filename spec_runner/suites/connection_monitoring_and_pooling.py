"""Connection Monitoring and Pooling: the ``cmap-format`` tests, run against mongio's pool, and the
``logging`` files, run in the unified runner against the server (a standalone one for their ``single``
topology requirement).

The pool is given a mock connection factory, as the format's README allows for the unit tests. The
``integration`` files differ only in their ``failPoint``, a ``failCommand`` on the handshake (``hello`` /
``isMaster``) that blocks it or makes it fail for connections with the test's ``appName``; the mock
factory applies the same fail point to the connections it makes (blocking for ``blockTimeMS``, then
failing with ``errorCode`` or a closed connection), so those files run without a server too, and their
``runOn`` server versions do not apply.

The format's "threads" are workers (``spec_runner.unified.threads.OperationWorker``) of the test's task
group. An error the pool raises establishing a connection is handled the way server monitoring handles a
pre-handshake error: the pool is cleared. The pool's background task runs when there is work for it, never on an interval, so a
positive ``backgroundThreadIntervalMS`` has nothing to set; a negative one ("never begin a run") makes the
pool without its background task. Expected error messages are matched as prefixes (ignoring case),
because mongio's messages go on to name the pool's address and the limits that were hit.

The ``logging`` directory holds unified-format tests, collected by the unified runner instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from spec_runner.model import RunContext, SpecCase, Suite, relative_file
from spec_runner.suites._unified_support import unified_collector
from spec_runner.unified.threads import OperationWorker

NAME = "connection-monitoring-and-pooling"
ADDRESS = ("localhost", 27017)
DEFAULT_EVENT_TIMEOUT = 10.0  # seconds, for waitForEvent without a timeout

_EVENT_TYPES = {
    "PoolCreatedEvent": "ConnectionPoolCreated",
    "PoolReadyEvent": "ConnectionPoolReady",
    "PoolClearedEvent": "ConnectionPoolCleared",
    "PoolClosedEvent": "ConnectionPoolClosed",
    "ConnectionCreatedEvent": "ConnectionCreated",
    "ConnectionReadyEvent": "ConnectionReady",
    "ConnectionClosedEvent": "ConnectionClosed",
    "ConnectionCheckOutStartedEvent": "ConnectionCheckOutStarted",
    "ConnectionCheckOutFailedEvent": "ConnectionCheckOutFailed",
    "ConnectionCheckedOutEvent": "ConnectionCheckedOut",
    "ConnectionCheckedInEvent": "ConnectionCheckedIn",
}
# The format's field names -> the event attributes.
_EVENT_FIELDS = {
    "address": "address",
    "connectionId": "connection_id",
    "duration": "duration",
    "options": "options",
    "reason": "reason",
    "serviceId": "service_id",
    "interruptInUseConnections": "interrupt_connections",
}


def event_type(event: object) -> str:
    return _EVENT_TYPES[type(event).__name__]


def event_fields(event: object) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": event_type(event)}
    for name, attribute in _EVENT_FIELDS.items():
        if hasattr(event, attribute):
            fields[name] = getattr(event, attribute)
    return fields


def assert_matches(actual: Any, expected: Any, path: str = "") -> None:
    """The format's MATCH: ``expected`` is a subset of ``actual``; 42 and "42" stand for any value."""
    where = path or "value"
    if expected == 42 or expected == "42":
        assert actual is not None, f"{where}: expected a value, got none"
    elif isinstance(expected, Mapping):
        assert isinstance(actual, Mapping), f"{where}: expected a document, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}: missing {key!r} in {dict(actual)!r}"
            assert_matches(actual[key], value, f"{path}.{key}" if path else key)
    elif isinstance(expected, list):
        assert isinstance(actual, list | tuple), f"{where}: expected an array, got {actual!r}"
        assert len(actual) >= len(expected), f"{where}: expected {len(expected)} items, got {actual!r}"
        for index, value in enumerate(expected):
            assert_matches(actual[index], value, f"{path}[{index}]")
    elif isinstance(expected, bool) or expected is None:
        assert actual is expected, f"{where}: expected {expected!r}, got {actual!r}"
    elif isinstance(expected, int | float):
        assert isinstance(actual, int | float) and not isinstance(actual, bool) and actual == expected, (
            f"{where}: expected {expected!r}, got {actual!r}"
        )
    else:
        assert actual == expected, f"{where}: expected {expected!r}, got {actual!r}"


class EventRecorder:
    """A listener keeping every pool event in order, and waking ``wait_for`` callers as they arrive."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self._waiters: list[tuple[str, int, anyio.Event]] = []

    def count(self, name: str) -> int:
        return sum(1 for event in self.events if event_type(event) == name)

    def _record(self, event: object) -> None:
        self.events.append(event)
        if self._waiters:
            name = event_type(event)
            for waited, count, seen in self._waiters:
                if waited == name and not seen.is_set() and self.count(name) >= count:
                    seen.set()

    async def wait_for(self, name: str, count: int, seconds: float) -> None:
        if self.count(name) >= count:
            return
        entry = (name, count, anyio.Event())
        self._waiters.append(entry)
        try:
            with anyio.fail_after(seconds):
                await entry[2].wait()
        except TimeoutError:
            raise AssertionError(
                f"waited {seconds:g} s for {count} {name} event(s), saw {self.count(name)}: "
                f"{[event_type(e) for e in self.events]}"
            ) from None
        finally:
            self._waiters.remove(entry)

    def __getattr__(self, name: str) -> Any:
        # Every ConnectionPoolListener method records its event.
        if name.startswith(("pool_", "connection_")):
            return self._record
        raise AttributeError(name)


class MockConnection:
    """A connection that does no I/O: the pool only needs its id, generation and closed state."""

    def __init__(self, connection_id: int, generation: int) -> None:
        self.id = connection_id
        self.generation = generation
        self.service_id: Any = None
        self.last_used = time.monotonic()
        self._closed = False
        self.in_exchange = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, reason: str = "") -> None:
        self._closed = True

    def hung_up_while_idle(self) -> bool:
        return self._closed  # no peer to hang up


class HandshakeFailPoint:
    """A ``failCommand`` fail point on the handshake, applied by the mock factory instead of a server."""

    def __init__(self, command: Mapping[str, Any] | None, app_name: str | None) -> None:
        self.remaining: float = 0
        self.data: Mapping[str, Any] = {}
        if not command or command.get("configureFailPoint") != "failCommand":
            return
        data = command.get("data", {})
        commands = {str(c).lower() for c in data.get("failCommands", ())}
        if not commands & {"hello", "ismaster"}:
            return
        if data.get("appName") is not None and data.get("appName") != app_name:
            return
        mode = command.get("mode")
        if mode == "alwaysOn":
            self.remaining = float("inf")
        elif isinstance(mode, Mapping) and "times" in mode:
            self.remaining = int(mode["times"])
        self.data = data

    async def apply(self) -> None:
        if self.remaining <= 0:
            return
        self.remaining -= 1
        from mongio.errors import AutoReconnect, OperationFailure

        if self.data.get("blockConnection"):
            await anyio.sleep(int(self.data.get("blockTimeMS", 0)) / 1000.0)
        if self.data.get("closeConnection"):
            raise AutoReconnect(f"connection to {ADDRESS[0]}:{ADDRESS[1]} closed during the handshake")
        if "errorCode" in self.data:
            code = int(self.data["errorCode"])
            reply = {"ok": 0, "code": code, "errmsg": "Failing command via 'failCommand' failpoint"}
            raise OperationFailure(str(reply["errmsg"]), code, reply)


class CmapTestRunner:
    def __init__(self, spec: Mapping[str, Any]) -> None:
        from mongio.connection.pool import Pool
        from mongio.connection.pool_options import PoolOptions

        self.spec = spec
        options = dict(spec.get("poolOptions") or {})
        self.recorder = EventRecorder()
        self.fail_point = HandshakeFailPoint(spec.get("failPoint"), options.get("appName"))
        pool_options = PoolOptions.from_uri_options(options, event_listeners=[self.recorder])  # type: ignore[list-item]
        self.pool: Pool[MockConnection] = Pool(
            ADDRESS,
            self._connect,
            pool_options,
            on_connect_error=self._connect_error,
            background_task=options.get("backgroundThreadIntervalMS", 1) >= 0,
        )
        self.threads: dict[str, OperationWorker] = {}
        self.labels: dict[str, MockConnection] = {}
        self._tasks: TaskGroup | None = None  # the threads' task group, while ``run`` runs

    async def _connect(self, connection_id: int, generation: int) -> MockConnection:
        await self.fail_point.apply()
        return MockConnection(connection_id, generation)

    def _connect_error(self, error: BaseException, generation: int) -> None:
        # What server monitoring does with an error while connecting: clear the pool it came from.
        if generation >= self.pool.generation:
            self.pool.clear(error=error)

    async def execute(self, operation: Mapping[str, Any]) -> None:
        name = operation["name"]
        pool = self.pool
        if name == "start":
            target = operation["target"]
            if self._tasks is None:
                raise AssertionError("a thread can start only while the test runs")
            self.threads[target] = OperationWorker(f"cmap thread {target}", self.execute, self._tasks)
        elif name == "wait":
            await anyio.sleep(operation["ms"] / 1000.0)
        elif name == "waitForThread":
            thread = self.threads[operation["target"]]
            await thread.finish()
            if thread.error is not None:
                raise thread.error
        elif name == "waitForEvent":
            timeout = operation.get("timeout")
            await self.recorder.wait_for(
                operation["event"],
                operation["count"],
                DEFAULT_EVENT_TIMEOUT if timeout is None else timeout / 1000.0,
            )
        elif name == "checkOut":
            conn = await pool.check_out()
            if operation.get("label"):
                self.labels[operation["label"]] = conn
        elif name == "checkIn":
            pool.check_in(self.labels[operation["connection"]])
        elif name == "clear":
            pool.clear(interrupt_in_use_connections=bool(operation.get("interruptInUseConnections", False)))
        elif name == "close":
            await pool.close()
        elif name == "ready":
            pool.ready()
        else:
            raise AssertionError(f"unknown operation {name!r}")

    async def run(self) -> None:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                error = await self._operations_error()
                events = list(self.recorder.events)
            finally:
                # The threads end before the task group does: none is left to the group's exit.
                for thread in self.threads.values():
                    await thread.close()
                self._tasks = None
        try:
            self._check_error(error)
            self._check_events(events)
        finally:
            await self.pool.close()

    async def _operations_error(self) -> Exception | None:
        """Run the test's operations (those of a thread are sent to it); the error that stopped them."""
        try:
            for operation in self.spec["operations"]:
                thread_name = operation.get("thread")
                if thread_name is None:
                    await self.execute(operation)
                else:
                    self.threads[thread_name].schedule(operation)
        except Exception as exc:
            return exc
        return None

    def _check_error(self, error: BaseException | None) -> None:
        expected = self.spec.get("error")
        if expected is None:
            if error is not None:
                raise AssertionError(f"unexpected error: {type(error).__name__}: {error}") from error
            return
        assert error is not None, f"expected {expected['type']}, but no error was raised"
        names = [cls.__name__ for cls in type(error).__mro__]
        assert expected["type"] in names, f"expected {expected['type']}, got {type(error).__name__}: {error}"
        if "message" in expected:
            message = str(error)
            assert message.lower().startswith(str(expected["message"]).lower()), (
                f"expected a message starting {expected['message']!r}, got {message!r}"
            )
        if "address" in expected:
            assert_matches(getattr(error, "address", None), expected["address"], "error.address")

    def _check_events(self, events: list[object]) -> None:
        ignore = set(self.spec.get("ignore") or ())
        actual = [event_fields(event) for event in events if event_type(event) not in ignore]
        for index, expected in enumerate(self.spec.get("events") or ()):
            assert index < len(actual), (
                f"expected event {index} {expected}, but only {len(actual)} were seen: "
                f"{[e['type'] for e in actual]}"
            )
            assert_matches(actual[index], expected, f"events[{index}]")


async def _run_test(spec: Mapping[str, Any], context: RunContext) -> None:
    await CmapTestRunner(spec).run()


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    for path in sorted((tests_dir / "cmap-format").glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        yield SpecCase(
            suite=NAME,
            file=relative_file(tests_dir, path),
            name=str(spec.get("description", path.stem)),
            run=partial(_run_test, spec),
        )


_collect_logging = unified_collector(NAME, directories=("logging",), standalone=True, auth=True)


def _collect_all(tests_dir: Path) -> Iterator[SpecCase]:
    yield from collect(tests_dir)
    yield from _collect_logging(tests_dir)


SUITE = Suite(name=NAME, collect=_collect_all, needs_server=True)
