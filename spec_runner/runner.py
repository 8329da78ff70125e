"""Runs selected suites' cases, applying the skip list, and tallies the outcome per suite."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from spec_runner.cluster import build_deployment
from spec_runner.fresh_server import needs_fresh_server
from spec_runner.model import CaseSkipped, RunContext, SpecCase, SuiteMissing
from spec_runner.registry import known_suites, split_selector
from spec_runner.server import TestServer, external_uri
from spec_runner.skiplist import skip_reason
from spec_runner.timed_cases import collector_held, is_timed


@dataclass
class SuiteTally:
    files: set[str] = field(default_factory=set)
    tests: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "files": len(self.files),
            "tests": self.tests,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
        }


@dataclass
class Report:
    suites: dict[str, SuiteTally] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)
    skips: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # suites that could not be collected

    @property
    def ok(self) -> bool:
        return not self.failures and not self.errors

    def as_json(self) -> dict[str, Any]:
        return {
            "suites": {name: tally.as_json() for name, tally in self.suites.items()},
            "failures": self.failures,
            "skips": self.skips,
            "errors": self.errors,
        }


def collect(selectors: list[str], root: Path, report: Report) -> list[SpecCase]:
    suites = known_suites()
    chosen = selectors or list(suites)
    cases: list[SpecCase] = []
    for selector in chosen:
        name, sub_path = split_selector(selector)
        suite = suites.get(name)
        if suite is None:
            report.errors.append(f"unknown suite {name!r}; known: {', '.join(suites)}")
            continue
        try:
            cases.extend(suite.cases(root, sub_path))
        except SuiteMissing as exc:
            report.errors.append(str(exc))
    return cases


# The event loops a run can use: asyncio (the default), or trio through anyio.
BACKENDS = ("asyncio", "trio")


def run_async(function: Callable[..., Coroutine[Any, Any, None]], *args: Any, backend: str = "asyncio") -> None:
    """Run ``function(*args)`` to completion in an event loop of its own: ``asyncio.run`` on asyncio (exactly
    as before there was a choice), ``anyio.run`` on trio."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "asyncio":
        asyncio.run(function(*args))
    else:
        anyio.run(function, *args, backend=backend)


def run_case_sync(case: SpecCase, context: RunContext, backend: str = "asyncio") -> None:
    """Runs one case to completion, in its own event loop on ``backend`` if it is a coroutine (used by pytest)."""
    result = case.run(context)
    if inspect.isawaitable(result):
        run_async(_await, result, backend=backend)


async def _await(awaitable: Awaitable[Any]) -> None:
    await awaitable


async def _run_case(case: SpecCase, context: RunContext) -> None:
    result = case.run(context)
    if inspect.isawaitable(result):
        await result


async def _run_on_fresh_server(case: SpecCase, context: RunContext) -> None:
    """Run ``case`` on a test server started for it alone (spec_runner.fresh_server)."""
    async with AsyncExitStack() as stack:
        uri = await _start_server(stack)
        await _run_case(case, dataclasses.replace(context, uri=uri))


async def _start_server(stack: AsyncExitStack) -> str:
    """Start a test server in a worker thread, stopped (in one too) when ``stack`` closes; its URI."""
    server = await anyio.to_thread.run_sync(TestServer().start)
    stack.push_async_callback(anyio.to_thread.run_sync, server.stop)
    return server.uri


class _TimedServer:
    """The test server the timed cases share (spec_runner.timed_cases), started on the first one's arrival."""

    def __init__(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        self._uri: str | None = None

    async def uri(self) -> str:
        if self._uri is None:
            self._uri = await _start_server(self._stack)
        return self._uri


async def _run_placed(case: SpecCase, context: RunContext, own_server: bool, timed_server: _TimedServer) -> None:
    """Run ``case`` where it belongs when this run started the server: on a fresh server, on the timed cases'
    server, or on the shared one (any server the run was given is used as it is)."""
    with collector_held(case):
        if own_server and needs_fresh_server(case):
            await _run_on_fresh_server(case, context)
        elif own_server and is_timed(case):
            await _run_case(case, dataclasses.replace(context, uri=await timed_server.uri()))
        else:
            await _run_case(case, context)


async def _run_all(
    cases: list[SpecCase], context: RunContext, report: Report, verbose: bool, own_server: bool = False
) -> None:
    """Run ``cases`` one after the other; with ``own_server`` (the server is one this run started), those that
    need a fresh server get one each, and the timed ones share one of their own."""
    async with AsyncExitStack() as stack:
        timed_server = _TimedServer(stack)
        for case in cases:
            _tally_outcome(case, report, verbose, await _outcome(case, context, own_server, timed_server))


async def _outcome(
    case: SpecCase, context: RunContext, own_server: bool, timed_server: _TimedServer
) -> str | BaseException | None:
    """What became of ``case``: a skip reason, the exception it failed with, or None once it passed."""
    reason = skip_reason(case)
    if reason is not None:
        return reason
    try:
        await _run_placed(case, context, own_server, timed_server)
    except CaseSkipped as skipped:
        return skipped.reason
    except Exception as exc:
        return exc
    return None


def _tally_outcome(case: SpecCase, report: Report, verbose: bool, outcome: str | BaseException | None) -> None:
    tally = report.suites.setdefault(case.suite, SuiteTally())
    tally.files.add(case.file)
    tally.tests += 1
    if outcome is None:
        tally.passed += 1
    elif isinstance(outcome, str):
        tally.skipped += 1
        report.skips.append({"suite": case.suite, "file": case.file, "test": case.name, "reason": outcome})
    else:
        tally.failed += 1
        error = "".join(traceback.format_exception_only(outcome)).strip()
        if verbose:
            error = "".join(traceback.format_exception(outcome)).strip()
        report.failures.append({"suite": case.suite, "file": case.file, "test": case.name, "error": error})


def run(
    selectors: list[str],
    root: Path,
    uri: str | None = None,
    verbose: bool = False,
    topology: str | None = None,
    compressors: list[str] | None = None,
    backend: str = "asyncio",
) -> Report:
    """Run the selected suites against ``uri``, else a test server started here; with ``topology``
    (``replicaset``, ``sharded``, ``load-balanced``) against a deployment of the cluster harness, whose
    clients then compress with ``compressors`` (OP_COMPRESSED, served by the harness's proxies). The cases run
    in one event loop of ``backend`` (``asyncio`` or ``trio``, see ``BACKENDS``)."""
    report = Report()
    cases = collect(selectors, root, report)
    with ExitStack() as stack:
        deployment = None
        uri = uri or external_uri()
        wanted = any(case.needs_server and skip_reason(case) is None for case in cases)
        if compressors and topology in (None, "single"):
            raise ValueError("--compressors needs a --topology of the cluster harness (the test server cannot compress)")
        if topology not in (None, "single") and wanted:
            if uri is not None:
                raise ValueError("--topology builds its own deployment: it cannot be combined with a URI")
            deployment = build_deployment(topology)
            deployment.client_compressors = list(compressors or ())
            stack.enter_context(deployment)
            uri = deployment.single_mongos_uri
        own_server = deployment is None and uri is None and wanted
        if own_server:
            uri = stack.enter_context(TestServer()).uri
        context = RunContext(uri=uri, specs_root=root, deployment=deployment)
        run_async(_run_all, cases, context, report, verbose, own_server, backend=backend)
    return report


def format_table(report: Report) -> str:
    header = ("suite", "files", "tests", "passed", "failed", "skipped")
    rows = [header] + [
        (name, *(str(v) for v in tally.as_json().values())) for name, tally in report.suites.items()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
