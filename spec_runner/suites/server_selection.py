"""Server Selection: the selection tables (``server_selection/``), the round-trip-time average (``rtt/``) and
the two-random-choices distribution (``in_window/``), run against the pure selection code.

``logging/`` is in the unified test format: its files run in the unified runner against the server (those for a
single server against a standalone one started for them).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mongio.topology.selection import RoundTripTimeTracker, choose_server, select_servers
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType
from spec_runner.model import RunContext, SpecCase, Suite, relative_file
from spec_runner.suites._topology_support import (
    address as parse_address,
)
from spec_runner.suites._topology_support import (
    address_text,
    from_extended_json,
    json_files,
    read_preference,
    run_selection_table,
    server_from_table,
)
from spec_runner.suites._unified_support import unified_collector

NAME = "server-selection"


def _run_rtt(test: Mapping[str, Any]) -> None:
    previous = test["avg_rtt_ms"]
    tracker = RoundTripTimeTracker(None if previous == "NULL" else float(previous) / 1000)
    tracker.add_sample(float(test["new_rtt_ms"]) / 1000)
    got = tracker.average
    want = float(test["new_avg_rtt"]) / 1000
    if got is None or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
        raise AssertionError(
            f"new average {got if got is None else got * 1000} ms, expected {want * 1000} ms"
        )


def _run_in_window(test: Mapping[str, Any], seed: str) -> None:
    table = test["topology_description"]
    servers = [server_from_table(s) for s in table["servers"]]
    settings = TopologySettings(seeds=tuple(sd.address for sd in servers))
    td = TopologyDescription(
        TopologyType[table["type"]], {sd.address: sd for sd in servers}, None, None, None, settings
    )
    counts = {parse_address(s["address"]): int(s["operation_count"]) for s in test["mocked_topology_state"]}
    nearest = read_preference({"mode": "Nearest"})
    rng = random.Random(seed)  # a fixed seed: the frequencies are checked, not the luck of one run
    iterations = int(test["iterations"])
    chosen: Counter[str] = Counter()
    for _ in range(iterations):
        in_window = select_servers(td, nearest)
        server = choose_server(in_window, counts.__getitem__, rng)
        chosen[address_text(server.address)] += 1
    outcome = test["outcome"]
    tolerance = float(outcome["tolerance"])
    problems = []
    for where, expected in outcome["expected_frequencies"].items():
        frequency = chosen[address_text(parse_address(where))] / iterations
        exact = expected in (0, 1)
        if (exact and frequency != expected) or (not exact and abs(frequency - expected) > tolerance):
            problems.append(
                f"{where}: selected {frequency:.3f} of the time, expected {expected} ± {tolerance}"
            )
    if problems:
        raise AssertionError("; ".join(problems))


def _collect(tests_dir: Path) -> Iterator[SpecCase]:
    for path in json_files(tests_dir / "server_selection"):
        name = path.relative_to(tests_dir / "server_selection").with_suffix("").as_posix()

        def run_table(ctx: RunContext, path: Path = path) -> None:
            run_selection_table(from_extended_json(json.loads(path.read_text(encoding="utf-8"))))

        yield SpecCase(suite=NAME, file=relative_file(tests_dir, path), name=name, run=run_table)

    for path in json_files(tests_dir / "rtt"):

        def run_rtt(ctx: RunContext, path: Path = path) -> None:
            _run_rtt(json.loads(path.read_text(encoding="utf-8")))

        yield SpecCase(suite=NAME, file=relative_file(tests_dir, path), name=path.stem, run=run_rtt)

    for path in json_files(tests_dir / "in_window"):
        test = json.loads(path.read_text(encoding="utf-8"))

        def run_window(ctx: RunContext, path: Path = path) -> None:
            _run_in_window(json.loads(path.read_text(encoding="utf-8")), seed=path.name)

        yield SpecCase(
            suite=NAME,
            file=relative_file(tests_dir, path),
            name=test.get("description", path.stem),
            run=run_window,
        )


_collect_unified = unified_collector(NAME, directories=("logging",), standalone=True)


def _collect_all(tests_dir: Path) -> Iterator[SpecCase]:
    yield from _collect(tests_dir)
    yield from _collect_unified(tests_dir)


SUITE = Suite(name=NAME, collect=_collect_all, needs_server=True)
