"""``python -m spec_runner [--specs ROOT] [--uri URI] [--topology TOPOLOGY|all [--compressors LIST]] [--json FILE]
[--backend asyncio|trio] [--show-skips] [SUITE ...]``

Without ``--uri`` or ``--topology``, the suites run on every topology the cluster harness builds (single,
replicaset, sharded, load-balanced), one table each."""

from __future__ import annotations

import argparse
import json
import sys

from spec_runner.fresh_server import fresh_server_matches
from spec_runner.model import SpecCase, specs_root
from spec_runner.registry import known_suites
from spec_runner.runner import BACKENDS, Report, collect, format_table, run
from spec_runner.skiplist import SkipMatches, skip_matches

# Every topology the runner can build here, in the order ``--topology all`` runs them.
TOPOLOGIES = ("single", "replicaset", "sharded", "load-balanced")


def format_skip_matches(matches: SkipMatches, *, verbose: bool = False) -> str:
    """Each rule and entry, its count per suite and the tests it skips (all of them with ``verbose``, else up
    to ten); an entry that skips nothing in the selected suites says so."""
    lines = []
    for label, cases in matches.by_entry.items():
        per_suite: dict[str, int] = {}
        for case in cases:
            per_suite[case.suite] = per_suite.get(case.suite, 0) + 1
        counts = ", ".join(f"{suite}: {count}" for suite, count in sorted(per_suite.items())) or "nothing"
        lines.append(f"{label} -> {len(cases)} test(s) [{counts}]")
        shown = cases if verbose else cases[:10]
        lines.extend(f"    {case.id}" for case in shown)
        if len(shown) < len(cases):
            lines.append(f"    ... {len(cases) - len(shown)} more (use -v)")
        if verbose:
            lines.append(f"    reason: {matches.reasons[label]}")
    if matches.unmatched:
        lines += ["", f"{len(matches.unmatched)} rule(s) and entries skip no test of the selected suites:"]
        lines.extend(f"    {label}" for label in matches.unmatched)
    return "\n".join(lines)


def format_fresh_server_matches(fresh: dict[str, list[SpecCase]]) -> str:
    """The tests each fresh-server entry (spec_runner.fresh_server) runs on a server of their own."""
    lines = ["", "Run on a fresh server (not skipped):"]
    for label, cases in fresh.items():
        lines.append(f"{label} -> {len(cases) or 'no'} test(s)")
        lines.extend(f"    {case.id}" for case in cases)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec_runner", description=__doc__)
    parser.add_argument("suites", nargs="*", metavar="SUITE", help="suite directory, optionally with a sub-path")
    parser.add_argument("--specs", metavar="ROOT", help="specifications root (default $MONGO_SPECS or ../shared/...)")
    parser.add_argument("--uri", help="run server suites against this deployment instead of starting one")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--topology",
        choices=(*TOPOLOGIES, "all"),
        help="single: one SecantusDB (a one-member replica set); replicaset, sharded, load-balanced: a deployment "
        "of the cluster harness (spec_runner.cluster); all: each in turn, a table each (the default, unless "
        "--uri names a deployment)",
    )
    parser.add_argument(
        "--compressors",
        metavar="LIST",
        help="with --topology: every client compresses with these (comma-separated: snappy,zlib,zstd)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="asyncio",
        help="the event loop the tests (and the driver) run on: asyncio (the default), or trio through anyio",
    )
    parser.add_argument("--list", action="store_true", help="list the suites the runner knows and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure with its traceback")
    parser.add_argument(
        "--show-skips",
        action="store_true",
        help="print each skip-list rule and entry with the tests it skips in the selected suites (runs nothing)",
    )
    args = parser.parse_args(argv)

    if args.list:
        print("\n".join(known_suites()))
        return 0
    if args.show_skips:
        report = Report()
        cases = collect(args.suites, specs_root(args.specs), report)
        matches = skip_matches(cases)
        fresh = fresh_server_matches(cases)
        print(format_skip_matches(matches, verbose=args.verbose))
        print(format_fresh_server_matches(fresh))
        for error in report.errors:
            print(f"ERROR: {error}", file=sys.stderr)
        # Over every suite, an item that takes no test is stale: an error, as it is for the tests.
        stale = (matches.unmatched or not all(fresh.values())) and not args.suites
        return 0 if not report.errors and not stale else 1
    topologies: list[str | None] = [args.topology]
    if args.topology == "all" or (args.topology is None and not args.uri):
        # The test server cannot compress: with --compressors, "all" is the harness's topologies.
        topologies = [name for name in TOPOLOGIES if not (args.compressors and name == "single")]
    results: dict[str, object] = {}
    ok = True
    for topology in topologies:
        if len(topologies) > 1:
            print(f"== topology: {topology}", flush=True)
        report = run(
            args.suites,
            specs_root(args.specs),
            uri=args.uri,
            verbose=args.verbose,
            topology=topology,
            compressors=args.compressors.split(",") if args.compressors else None,
            backend=args.backend,
        )
        print_report(report, verbose=args.verbose)
        results[topology or "uri"] = report.as_json()
        ok = ok and report.ok
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results if len(topologies) > 1 else results.popitem()[1], out, indent=2)
    return 0 if ok else 1


def print_report(report: Report, *, verbose: bool) -> None:
    """The table, the collection errors, and the failures (the first 50 unless ``verbose``)."""
    print(format_table(report), flush=True)
    for error in report.errors:
        print(f"ERROR: {error}", file=sys.stderr)
    for failure in report.failures[: None if verbose else 50]:
        print(f"FAIL {failure['suite']}/{failure['file']} :: {failure['test']}\n    {failure['error']}")
    if not verbose and len(report.failures) > 50:
        print(f"... {len(report.failures) - 50} more failures (use -v or --json)")

if __name__ == "__main__":
    sys.exit(main())
