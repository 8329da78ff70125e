"""The unified test format's own tests: ``valid-pass`` must pass, ``valid-fail`` must fail (a failing test is
the expected outcome there). The ``invalid`` files are the schema's, checked by the loader's tests."""

from __future__ import annotations

from spec_runner.suites._unified_support import run_expecting_failure, run_unified, unified_suite
from spec_runner.unified.collect import RunOne


def _runner(directory: str) -> RunOne:
    return run_expecting_failure if directory == "valid-fail" else run_unified


SUITE = unified_suite("unified-test-format", directories=("valid-pass", "valid-fail"), run_for=_runner)
