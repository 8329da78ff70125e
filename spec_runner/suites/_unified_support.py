"""What the unified-format suites share: one test run against the server over the mongio backend.

Importing this module registers every driver-facing operation (the ``ops_*`` modules).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator, Sequence
from pathlib import Path

from spec_runner.model import CaseSkipped, RunContext, SpecCase, Suite
from spec_runner.unified import ops_collection, ops_crud, ops_cursor, ops_runner, ops_session, special
from spec_runner.unified.backend import InternalClient, MongioBackend, server_facts
from spec_runner.unified.collect import unified_cases
from spec_runner.unified.loader import UnifiedTest, UnifiedTestFile
from spec_runner.unified.runner import run_test

OPERATION_MODULES = (ops_collection, ops_crud, ops_cursor, ops_runner, ops_session, special)
"""Imported for their ``@operation`` registrations."""


async def run_unified(context: RunContext, test_file: UnifiedTestFile, test: UnifiedTest) -> None:
    """Run one test against ``context.uri``: its facts, a fresh runner connection and backend."""
    if context.uri is None:
        raise RuntimeError("the unified suites need a server (no URI in the run context)")
    internal = InternalClient(context.uri)
    try:
        facts = await server_facts(internal)
        backend = MongioBackend(context.uri, internal, facts)
        await run_test(test_file, test, facts=facts, backend=backend)
    finally:
        await internal.close()


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
) -> Suite:
    """A suite of the unified ``.json`` files under ``<name>/tests`` (or only its ``directories``); the
    cases of the ``expect_failure`` directories pass when they fail."""

    def collect(tests_dir: Path) -> Iterator[SpecCase]:
        if directories is None:
            yield from unified_cases(name, tests_dir, run_unified)
            return
        for directory in directories:
            where = tests_dir / directory
            if not where.is_dir():
                continue
            for case in unified_cases(name, where, run_unified):
                case = dataclasses.replace(case, file=f"{directory}/{case.file}")
                yield expecting_failure(case) if directory in expect_failure else case

    return Suite(name=name, collect=collect, needs_server=True)
