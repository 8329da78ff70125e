"""Runs one reference suite natively and with mongio swapped in, against one test server, and compares them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from compat_suites.classification import CLASSES, Entry, classify, load
from compat_suites.outcomes import format_tally, module_of, read_report, tally
from compat_suites.sources import unpacked
from compat_suites.suites import Suite
from spec_runner.server import TestServer

REPO = Path(__file__).resolve().parents[1]
DRIVERS = ("native", "mongio")


@dataclass(frozen=True)
class Difference:
    test_id: str
    native: str
    mongio: str
    entry: Entry | None


def pytest_command(suite: Suite, root: Path, driver: str, report: Path, select: str | None) -> list[str]:
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-c", str(root / "pyproject.toml"), "--rootdir", str(root),
        "-o", f"addopts={' '.join(_quoted(option) for option in suite.addopts)}",
        f"--junitxml={report}",
    ]  # fmt: skip
    if driver == "mongio":
        command += ["-p", suite.swap_plugin]
    if select:
        command += ["-k", select]
    return command + list(suite.paths)


def _quoted(option: str) -> str:
    return f'"{option}"' if " " in option else option


def suite_environment(server: TestServer) -> dict[str, str]:
    """The variables the suites' harnesses read, pointing them at the test server; this checkout first on the path."""
    path = [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]
    return dict(
        os.environ,
        DB_IP=server.host,
        DB_PORT=str(server.port),
        PYTHONPATH=os.pathsep.join(part for part in path if part),
    )


def run_driver(suite: Suite, root: Path, server: TestServer, driver: str, select: str | None) -> dict[str, str]:
    report = root / f"{driver}.xml"
    report.unlink(missing_ok=True)
    command = pytest_command(suite, root, driver, report, select)
    log = root / f"{driver}.log"
    print(f"== {suite.source.name} / {driver}: pytest {' '.join(command[3:])}\n   (output in {log})", flush=True)
    with log.open("w") as output:
        subprocess.run(command, cwd=root, env=suite_environment(server), stdout=output, stderr=subprocess.STDOUT,
                       check=False)  # fmt: skip
    if not report.exists():
        raise SystemExit(f"{suite.source.name} / {driver}: pytest wrote no report; see {log}")
    return read_report(report)


def differences(results: dict[str, dict[str, str]], entries: list[Entry]) -> list[Difference]:
    native, mongio = results["native"], results["mongio"]
    return [
        Difference(test_id, native.get(test_id, "-"), mongio.get(test_id, "-"), classify(test_id, entries))
        for test_id in sorted(native.keys() | mongio.keys())
        if native.get(test_id) != mongio.get(test_id)
    ]


def report(results: dict[str, dict[str, str]], found: list[Difference], entries: list[Entry]) -> int:
    """Prints the tallies, file by file, and the differing tests by class; 1 when one is unclassified."""
    modules = sorted({module_of(test_id) for per in results.values() for test_id in per})
    print(f"\n{'':50} {'native':>36}   {'mongio':>36}")
    for module in [*modules, "total"]:
        counts = [
            tally({t: o for t, o in results[d].items() if module in ("total", module_of(t))}) for d in DRIVERS
        ]
        print(f"{module:50} {format_tally(counts[0]):>36}   {format_tally(counts[1]):>36}")
    by_class: dict[str, list[Difference]] = defaultdict(list)
    for difference in found:
        by_class[difference.entry.kind if difference.entry else "unclassified"].append(difference)
    print(f"\n{len(found)} tests differ (native -> mongio):")
    for kind in (*CLASSES, "unclassified"):
        members = by_class.get(kind, [])
        print(f"  {kind}: {len(members)}")
    for kind in (*CLASSES, "unclassified"):
        members = by_class.get(kind, [])
        if not members:
            continue
        print(f"\n{kind} ({len(members)}):")
        reasons: Counter[str] = Counter()
        for difference in members:
            why = difference.entry.why if difference.entry else ""
            reasons[why] += 1
            print(f"  {difference.test_id}: {difference.native} -> {difference.mongio}")
    unused = [entry for entry in entries if not any(d.entry is entry for d in found)]
    for entry in unused:
        print(f"\nnote: no differing test matched the entry {entry.patterns[0]!r} ({entry.kind})")
    if by_class.get("unclassified"):
        print(f"\nFAIL: {len(by_class['unclassified'])} differing tests are not in compat_suites/classification.yaml")
        return 1
    return 0


def run(suite: Suite, origin: str, select: str | None) -> int:
    entries = load(suite.source.name)
    root = unpacked(suite.source, origin)
    results: dict[str, dict[str, str]] = {}
    with TestServer() as server:
        for driver in DRIVERS:
            results[driver] = run_driver(suite, root, server, driver, select)
    return report(results, differences(results, entries), entries)
