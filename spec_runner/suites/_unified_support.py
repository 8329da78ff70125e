"""What the unified-format suites share: one test run against the server over the mongio backend.

Importing this module registers every driver-facing operation (the ``ops_*`` modules).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from spec_runner.model import CaseSkipped, RunContext, SpecCase, Suite
from spec_runner.server import TestServer, external_uri
from spec_runner.unified import (
    ops_collection,
    ops_crud,
    ops_cursor,
    ops_gridfs,
    ops_runner,
    ops_session,
    special,
)
from spec_runner.unified.backend import InternalClient, MongioBackend, server_facts
from spec_runner.unified.collect import unified_cases
from spec_runner.unified.loader import UnifiedTest, UnifiedTestFile
from spec_runner.unified.requirements import ServerFacts
from spec_runner.unified.runner import run_test, skip_reason

OPERATION_MODULES = (ops_collection, ops_crud, ops_cursor, ops_gridfs, ops_runner, ops_session, special)
"""Imported for their ``@operation`` registrations."""


async def run_unified(
    context: RunContext,
    test_file: UnifiedTestFile,
    test: UnifiedTest,
    *,
    standalone: bool = False,
    client_defaults: Mapping[str, Any] | None = None,
) -> None:
    """Run one test against ``context.uri``: its facts, a fresh runner connection and backend.

    With ``standalone``, a test whose requirements the run's server does not meet but which can run on a
    single server goes to the standalone server of ``standalone_uri`` instead. ``client_defaults`` are URI
    options given to every client entity that does not set them.
    """
    if context.uri is None:
        raise RuntimeError("the unified suites need a server (no URI in the run context)")
    uri = context.uri
    internal = InternalClient(uri)
    try:
        facts = await server_facts(internal)
        if standalone and _wants_standalone(test_file, test, facts):
            await internal.close()
            uri = await standalone_uri()
            internal = InternalClient(uri)
            facts = await server_facts(internal)
        backend = MongioBackend(uri, internal, facts, client_defaults)
        await run_test(test_file, test, facts=facts, backend=backend)
    finally:
        await internal.close()


def _wants_standalone(test_file: UnifiedTestFile, test: UnifiedTest, facts: ServerFacts) -> bool:
    if external_uri() is not None or facts.topology == "single":
        return False  # a deployment given from outside is the only one the tests may use
    if test.skip_reason is not None or skip_reason(test_file, test, facts) is None:
        return False
    requirements = [*(test_file.run_on_requirements or ()), *(test.run_on_requirements or ())]
    return any("single" in (requirement.get("topologies") or ()) for requirement in requirements)


_STANDALONE: list[TestServer] = []


async def standalone_uri() -> str:
    """The URI of a standalone SecantusDB, started on first use and kept for the rest of the process (the
    ``single`` topology's tests, beside the run's replica set member)."""
    if not _STANDALONE:
        # Starting waits for the process to answer: done in a worker thread so the loop keeps running.
        server = await asyncio.to_thread(TestServer("--standalone").start)
        atexit.register(server.stop)
        _STANDALONE.append(server)
    return _STANDALONE[0].uri


def expecting_failure(case: SpecCase) -> SpecCase:
    """For the format's ``valid-fail`` files: the case must fail, loading the file included (any error but
    a skip is the expected outcome); one that passes is the failure."""
    body = case.run

    async def run(context: RunContext) -> None:
        try:
            result = body(context)
            if inspect.isawaitable(result):
                await result
        except CaseSkipped:
            raise
        except Exception:
            return
        raise AssertionError(f"{case.name!r} was expected to fail, but it passed")

    return dataclasses.replace(case, run=run)


def unified_suite(
    name: str,
    *,
    directories: Sequence[str] | None = None,
    expect_failure: Sequence[str] = (),
    standalone: bool = False,
    client_defaults: Mapping[str, Any] | None = None,
) -> Suite:
    """A suite of the unified ``.json`` files under ``<name>/tests`` (or only its ``directories``); the
    cases of the ``expect_failure`` directories pass when they fail. With ``standalone``, the tests that
    need a single server run on one started for them (see ``run_unified``); ``client_defaults`` are URI
    options for every client entity that does not set them."""
    return Suite(
        name=name,
        collect=unified_collector(name, directories, expect_failure, standalone, client_defaults),
        needs_server=True,
    )


def unified_collector(
    name: str,
    directories: Sequence[str] | None = None,
    expect_failure: Sequence[str] = (),
    standalone: bool = False,
    client_defaults: Mapping[str, Any] | None = None,
) -> Callable[[Path], Iterator[SpecCase]]:
    """The ``collect`` of ``unified_suite``, for a suite that gathers other cases too."""
    run = functools.partial(run_unified, standalone=standalone, client_defaults=client_defaults)

    def collect(tests_dir: Path) -> Iterator[SpecCase]:
        if directories is None:
            yield from unified_cases(name, tests_dir, run)
            return
        for directory in directories:
            where = tests_dir / directory
            if not where.is_dir():
                continue
            for case in unified_cases(name, where, run):
                case = dataclasses.replace(case, file=f"{directory}/{case.file}")
                yield expecting_failure(case) if directory in expect_failure else case

    return collect
