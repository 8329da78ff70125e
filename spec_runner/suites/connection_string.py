"""The connection string specification's tests, through :func:`mongio.options.parse_uri`.

These tests are about splitting a string into its parts, so they exercise the parser on its own: whether
the credentials are complete (a password may still come from a keyword argument) is the client options'
business, tested by the ``auth`` suite.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from spec_runner.model import SpecCase, Suite
from spec_runner.suites._uri_cases import (
    check_auth,
    check_hosts,
    check_options,
    collect_files,
    expect_outcome,
)

NAME = "connection-string"


def _run(case: Mapping[str, Any]) -> None:
    from mongio.options import parse_uri

    def attempt() -> tuple[Any, tuple[str, ...]]:
        parsed = parse_uri(case["uri"], warn=False)
        return parsed, parsed.warnings

    parsed = expect_outcome(case, attempt)
    if parsed is None:
        return
    uri = case["uri"]
    check_hosts(uri, case.get("hosts"), parsed.hosts)
    check_auth(uri, case.get("auth"), parsed)
    check_options(uri, case.get("options"), parsed.options)


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    return collect_files(NAME, tests_dir, _run)


SUITE = Suite(name=NAME, collect=collect)
