"""Max Staleness: the selection tables with ``maxStalenessSeconds``, run against the pure selection code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from spec_runner.model import RunContext, SpecCase, Suite, relative_file
from spec_runner.suites._topology_support import from_extended_json, json_files, run_selection_table

NAME = "max-staleness"


def _collect(tests_dir: Path) -> Iterator[SpecCase]:
    for path in json_files(tests_dir):
        name = path.relative_to(tests_dir).with_suffix("").as_posix()

        def run(ctx: RunContext, path: Path = path) -> None:
            run_selection_table(from_extended_json(json.loads(path.read_text(encoding="utf-8"))))

        yield SpecCase(suite=NAME, file=relative_file(tests_dir, path), name=name, run=run)


SUITE = Suite(name=NAME, collect=_collect, needs_server=False)
