"""``python -m spec_runner [--specs ROOT] [--uri URI] [--topology TOPOLOGY [--compressors LIST]] [--json FILE]
[--show-skips] [SUITE ...]``"""

from __future__ import annotations

import argparse
import json
import sys

from spec_runner.model import specs_root
from spec_runner.registry import known_suites
from spec_runner.runner import Report, collect, format_table, run
from spec_runner.skiplist import SkipMatches, skip_matches


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
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec_runner", description=__doc__)
    parser.add_argument("suites", nargs="*", metavar="SUITE", help="suite directory, optionally with a sub-path")
    parser.add_argument("--specs", metavar="ROOT", help="specifications root (default $MONGO_SPECS or ../shared/...)")
    parser.add_argument("--uri", help="run server suites against this deployment instead of starting one")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--topology",
        choices=("single", "replicaset", "sharded", "load-balanced"),
        help="run against a deployment of the cluster harness (spec_runner.cluster) of this topology; "
        "default: one SecantusDB (a one-member replica set)",
    )
    parser.add_argument(
        "--compressors",
        metavar="LIST",
        help="with --topology: every client compresses with these (comma-separated: snappy,zlib,zstd)",
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
        print(format_skip_matches(skip_matches(cases), verbose=args.verbose))
        for error in report.errors:
            print(f"ERROR: {error}", file=sys.stderr)
        return 0 if not report.errors else 1
    report = run(
        args.suites,
        specs_root(args.specs),
        uri=args.uri,
        verbose=args.verbose,
        topology=args.topology,
        compressors=args.compressors.split(",") if args.compressors else None,
    )
    print(format_table(report))
    for error in report.errors:
        print(f"ERROR: {error}", file=sys.stderr)
    for failure in report.failures[: None if args.verbose else 50]:
        print(f"FAIL {failure['suite']}/{failure['file']} :: {failure['test']}\n    {failure['error']}")
    if not args.verbose and len(report.failures) > 50:
        print(f"... {len(report.failures) - 50} more failures (use -v or --json)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report.as_json(), out, indent=2)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
