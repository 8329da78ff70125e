"""Runs one reference suite natively and with mongio swapped in, against one test server, and compares them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from spec_runner.server import TestServer

from compat_suites.classification import CLASSES, Entry, classify, load
from compat_suites.outcomes import format_tally, module_of, read_report, tally
from compat_suites.sources import unpacked
from compat_suites.suites import Suite

REPO = Path(__file__).resolve().parents[1]
DRIVERS = ("native", "mongio")


@dataclass(frozen=True)
class Difference:
    test_id: str
    native: str
    mongio: str
    entry: Entry | None


def pytest_command(
    suite: Suite, root: Path, driver: str, report: Path, select: str | None, paths: tuple[str, ...]
) -> list[str]:
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "compat_suites.timeout",
        "-c", str(root / "pyproject.toml"), "--rootdir", str(root),
        "-o", f"addopts={' '.join(_quoted(option) for option in suite.addopts)}",
        f"--junitxml={report}",
    ]  # fmt: skip
    if driver == "mongio":
        command += ["-p", suite.swap_plugin]
    for test_id, _reason in suite.deselected:
        command += ["--deselect", test_id]
    if select:
        command += ["-k", select]
    return command + list(paths)


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


def run_driver(
    suite: Suite, root: Path, server: TestServer, driver: str, select: str | None, paths: tuple[str, ...]
) -> dict[str, str]:
    report = root / f"{driver}.xml"
    report.unlink(missing_ok=True)
    command = pytest_command(suite, root, driver, report, select, paths)
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
    """Prints the tallies, file by file, and the differing tests by class and reason; 1 when one is unclassified."""
    print_tallies(results)
    by_class: dict[str, list[Difference]] = defaultdict(list)
    for difference in found:
        by_class[difference.entry.kind if difference.entry else "unclassified"].append(difference)
    print(f"\n{len(found)} tests differ (native -> mongio):")
    for kind in (*CLASSES, "unclassified"):
        print(f"  {kind}: {len(by_class.get(kind, []))}")
    for kind in (*CLASSES, "unclassified"):
        print_class(kind, by_class.get(kind, []))
    for entry in entries:
        if not any(difference.entry is entry for difference in found):
            print(f"\nnote: no differing test matched the entry {entry.patterns[0]!r} ({entry.kind})")
    unclassified = len(by_class.get("unclassified", []))
    if unclassified:
        print(f"\nFAIL: {unclassified} differing tests are not in compat_suites/classification.yaml")
        return 1
    return 0


def print_tallies(results: dict[str, dict[str, str]]) -> None:
    modules = sorted({module_of(test_id) for per in results.values() for test_id in per})
    width = max(len(module) for module in [*modules, "total"])
    print(f"\n{'':{width}}  {'native':38}  mongio")
    for module in [*modules, "total"]:
        counts = [
            tally({t: o for t, o in results[d].items() if module in ("total", module_of(t))}) for d in DRIVERS
        ]
        print(f"{module:{width}}  {format_tally(counts[0]):38}  {format_tally(counts[1])}")


def print_class(kind: str, members: list[Difference]) -> None:
    """The differing tests of one class, grouped by the reason their entry gives."""
    if not members:
        return
    print(f"\n{kind} ({len(members)}):")
    by_reason: dict[str, list[Difference]] = defaultdict(list)
    for difference in members:
        by_reason[difference.entry.why if difference.entry else "(no entry)"].append(difference)
    for why, group in by_reason.items():
        print(f"  [{len(group)}] {why}")
        for difference in group:
            print(f"      {difference.test_id}: {difference.native} -> {difference.mongio}")


def run(suite: Suite, origin: str, select: str | None, files: list[str] | None = None) -> int:
    entries = load(suite.source.name)
    paths = suite.paths_of(files)
    root = unpacked(suite.source, origin)
    results: dict[str, dict[str, str]] = {}
    for driver in DRIVERS:
        # A server of its own for each driver: one run's data (PyMongo's large-batch tests write hundreds of
        # megabytes) would otherwise fill the storage engine's cache for the next, which then fails with
        # WT_CACHE_FULL whatever the driver does.
        with TestServer() as server:
            results[driver] = run_driver(suite, root, server, driver, select, paths)
    for test_id, reason in suite.deselected:
        print(f"left out of both runs: {test_id}: {reason}")
    return report(results, differences(results, entries), entries)


def report_last_run(suite: Suite, origin: str) -> int:
    """The comparison of the last run's reports, read again (after the classification changed, say)."""
    entries = load(suite.source.name)
    root = unpacked(suite.source, origin)
    reports = {driver: root / f"{driver}.xml" for driver in DRIVERS}
    missing = [str(path) for path in reports.values() if not path.exists()]
    if missing:
        raise SystemExit(f"no report of a previous run: {', '.join(missing)}")
    results = {driver: read_report(path) for driver, path in reports.items()}
    return report(results, differences(results, entries), entries)
