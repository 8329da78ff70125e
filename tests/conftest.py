"""Shared fixtures: the test server (SecantusDB, or MONGODB_URI) and an event-loop error guard; the
``--backend`` option.

``pytest --backend trio`` runs every async test and fixture on trio through anyio's pytest plugin (and the spec
cases through ``spec_runner.runner.run_case_sync`` on trio) instead of pytest-asyncio's event loop; tests that
exercise asyncio itself are skipped there, each with its reason (``tests/support/backends.py``). Without the
option nothing changes: pytest-asyncio runs everything as before and the anyio plugin runs nothing."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest
from spec_runner.runner import BACKENDS
from spec_runner.server import TestServer, external_uri

from tests.support.backends import asyncio_only_reason


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=BACKENDS,
        default="asyncio",
        help="the event loop async tests and spec cases run on: asyncio (pytest-asyncio, the default) or trio "
        "(anyio's pytest plugin)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--backend") != "asyncio":
        # pytest-asyncio then leaves unmarked async tests and fixtures alone ...
        config.option.asyncio_mode = "strict"


def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.getoption("--backend") != "asyncio":
        # ... and anyio's plugin takes every async test, each module finding the ``anyio`` mark on the session.
        session.add_marker(pytest.mark.anyio)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Collection leaves about half a million long-lived objects (the spec cases and their parsed files). Left
    # in the collector's oldest generation they made every later full collection cost up to a second
    # (measured with gc.callbacks in a spec-suite run: 1,077 ms at worst, 170 ms once frozen), and a pause that
    # long exceeds the 25 ms margins of the timing-based spec cases (socketTimeoutMS=100 against a 125 ms
    # block) can end in a spurious timeout. Frozen, they are never traversed again, and full collections cost
    # only what the tests themselves keep.
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--backend") == "asyncio":
        return
    for item in items:
        reason = asyncio_only_reason(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"asyncio only: {reason}"))


@pytest.fixture(scope="session")
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The backend anyio's plugin runs async tests on (with ``--backend`` other than asyncio)."""
    return str(request.config.getoption("--backend"))


def first_host(uri: str) -> tuple[str, int]:
    """The first host of a mongodb:// URI, for tests that talk to the server below the driver."""
    rest = uri.split("://", 1)[1]
    hosts = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    first = hosts.split(",")[0]
    if first.startswith("["):
        host, _, port = first[1:].partition("]:")
        return host.rstrip("]"), int(port or 27017)
    host, _, port = first.partition(":")
    return host, int(port or 27017)


@pytest.fixture(scope="session")
def server_uri() -> Iterator[str]:
    """The URI of a running server: MONGODB_URI if set, else a SecantusDB started for this test session."""
    uri = external_uri()
    if uri is not None:
        yield uri
        return
    with TestServer() as server:
        yield server.uri


@pytest.fixture(scope="session")
def server_address(server_uri: str) -> tuple[str, int]:
    return first_host(server_uri)


class _LoopErrorCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def fail_on_event_loop_errors() -> Iterator[None]:
    """An exception the event loop only logged (a task that died unobserved, a destroyed pending task)
    is a bug: fail the test that caused it."""
    collector = _LoopErrorCollector()
    asyncio_logger = logging.getLogger("asyncio")
    asyncio_logger.addHandler(collector)
    try:
        yield
    finally:
        asyncio_logger.removeHandler(collector)
    if collector.records:
        messages = "\n".join(record.getMessage() for record in collector.records)
        pytest.fail(f"the event loop logged errors during the test:\n{messages}")
