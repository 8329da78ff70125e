"""python -m compat_suites motor|pymongo [--from git|sdist] [-k EXPR] [--file NAME]; see docs/testing.md."""

from __future__ import annotations

import argparse

from compat_suites.runner import report_last_run, run
from compat_suites.suites import SUITES


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat_suites",
        description="Run Motor's or PyMongo's own async tests natively and through mongio, and compare them.",
    )
    parser.add_argument("suite", choices=sorted(SUITES))
    parser.add_argument(
        "--from", dest="origin", choices=("git", "sdist"), default="git",
        help="where the suite's tests come from: its git repository at the pinned tag (default; "
        "MONGIO_COMPAT_<SUITE>_GIT names a local clone or mirror) or its source distribution on PyPI",
    )  # fmt: skip
    parser.add_argument("-k", dest="select", help="pytest -k expression, to run part of the suite")
    parser.add_argument(
        "--file", dest="files", action="append", metavar="NAME",
        help="run only this test file of the suite (its name, e.g. test_bulk.py); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--last", action="store_true",
        help="do not run the tests: compare the reports of the last run again (after editing the classification)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.last:
        return report_last_run(SUITES[args.suite], args.origin)
    return run(SUITES[args.suite], args.origin, args.select, args.files)


if __name__ == "__main__":
    raise SystemExit(main())
