"""Turning a directory of unified test files into spec cases, for the suites that run them.

Each test of each unified ``.json`` file becomes one case; the file is loaded (and its schema version and
structure checked) when the case runs, so an unsupported or malformed file fails each of its tests rather
than the collection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from spec_runner.model import CaseSource, RunContext, SpecCase, relative_file, unique_names
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.loader import (
    UnifiedTest,
    UnifiedTestFile,
    file_test_descriptions,
    is_unified_file,
    load,
)

RunOne = Callable[[RunContext, UnifiedTestFile, UnifiedTest], Awaitable[None]]
"""Runs one test of a loaded file against the server in the run context (see ``runner.run_test``)."""


def _case_body(
    path: Path, index: int, load_file: Callable[[Path], UnifiedTestFile], run_one: RunOne
) -> Callable[[RunContext], Awaitable[None]]:
    async def run(context: RunContext) -> None:
        test_file = load_file(path)
        await run_one(context, test_file, test_file.tests[index])

    return run


def file_cases(
    suite: str,
    path: Path,
    file: str,
    names: list[str],
    load_file: Callable[[Path], UnifiedTestFile],
    run_one: RunOne,
    *,
    needs_server: bool = True,
) -> Iterator[SpecCase]:
    """One case per test of the file at ``path`` (``file``: its name in the suite; ``names``: its tests'
    descriptions), each loading the file with ``load_file`` when it runs."""
    for index, name in enumerate(unique_names(names)):
        yield SpecCase(
            suite=suite,
            file=file,
            name=name,
            run=_case_body(path, index, load_file, run_one),
            needs_server=needs_server,
            source=CaseSource(path, index),
        )


def _unreadable(path: Path) -> Callable[[RunContext], None]:
    def run(context: RunContext) -> None:
        load(path)  # raises with the file's problems
        raise UnifiedTestError(f"{path}: no tests could be read")

    return run


def unified_cases(
    suite: str, tests_dir: Path, run_one: RunOne, *, needs_server: bool = True
) -> Iterator[SpecCase]:
    """One case per test of every unified ``.json`` file under ``tests_dir`` (``.yml`` twins ignored)."""
    for path in sorted(tests_dir.rglob("*.json")):
        if not is_unified_file(path):
            continue
        file = relative_file(tests_dir, path)
        names = file_test_descriptions(path)
        if not names:
            yield SpecCase(
                suite=suite, file=file, name="(file)", run=_unreadable(path), needs_server=needs_server
            )
            continue
        yield from file_cases(suite, path, file, names, load, run_one, needs_server=needs_server)
