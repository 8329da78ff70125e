"""The runner's vocabulary: a suite collects cases from a specification directory; a case runs one test."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spec_runner.cluster import Deployment

DEFAULT_SPECS_ROOT = Path(__file__).resolve().parent.parent.parent / "shared" / "specifications" / "source"


def specs_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """ROOT: the explicit argument, else ``$MONGO_SPECS``, else ``../shared/specifications/source``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MONGO_SPECS")
    return Path(env) if env else DEFAULT_SPECS_ROOT


@dataclass
class RunContext:
    """What a running case may use: the server's URI (``None`` for server-less suites) and, when the run
    goes through the cluster harness, its deployment (``uri`` then names one mongos of a sharded cluster)."""

    uri: str | None = None
    specs_root: Path = field(default_factory=specs_root)
    deployment: Deployment | None = None


CaseBody = Callable[[RunContext], Awaitable[None] | None]


@dataclass(frozen=True)
class CaseSource:
    """Where a unified test is written: its file and its position in the file's ``tests`` (what the skip
    list's capability rules read)."""

    path: Path
    index: int


@dataclass(frozen=True)
class SpecCase:
    """One spec test. ``run`` raises (usually ``AssertionError``) when the test fails."""

    suite: str
    file: str  # path relative to the suite's ``tests/`` directory, POSIX separators
    name: str  # the test's description, unique within its file
    run: CaseBody
    needs_server: bool = False
    source: CaseSource | None = None  # set for unified format tests

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.file}::{self.name}"


class CaseSkipped(Exception):
    """Raised by a running case whose own test file says it does not apply here (an unmet
    ``runOnRequirements`` or a ``skipReason`` of the unified format). The reason is reported with the
    other skips; it must say what was required and what the server is. Known limitations of the test
    server go in ``skips.yaml`` instead."""

    def __init__(self, reason: str) -> None:
        if not reason.strip():
            raise ValueError("a skipped case needs a reason")
        super().__init__(reason)
        self.reason = reason


class SuiteMissing(Exception):
    """The suite's directory is missing or holds no test files: an error, never a pass."""


@dataclass(frozen=True)
class Suite:
    """A specification directory the runner knows.

    ``collect(tests_dir)`` yields the cases found under ``<ROOT>/<name>/tests``; it must cope with any
    subset of the upstream files being present.
    """

    name: str
    collect: Callable[[Path], Iterator[SpecCase]]
    needs_server: bool = False

    def cases(self, root: Path, sub_path: str | None = None) -> list[SpecCase]:
        tests_dir = root / self.name / "tests"
        if not tests_dir.is_dir():
            raise SuiteMissing(f"suite {self.name!r}: no directory {tests_dir}")
        cases = list(self.collect(tests_dir))
        if sub_path:
            prefix = sub_path.strip("/") + "/"
            cases = [c for c in cases if c.file.startswith(prefix) or c.file == sub_path.strip("/")]
        if not cases:
            where = f"{tests_dir}/{sub_path}" if sub_path else str(tests_dir)
            raise SuiteMissing(f"suite {self.name!r}: no tests found under {where}")
        return cases


def relative_file(tests_dir: Path, path: Path) -> str:
    return path.relative_to(tests_dir).as_posix()


def unique_names(names: Iterator[str] | list[str]) -> Iterator[str]:
    """Spec files sometimes repeat a description; suffix repeats so every case id stays unique."""
    seen: dict[str, int] = {}
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        yield name if count == 0 else f"{name} [{count + 1}]"
