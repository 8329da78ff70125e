"""The unified test format's own tests: ``valid-pass`` must pass, ``valid-fail`` must fail (a failing test is
the expected outcome there). The ``invalid`` files are the schema's, checked by the loader's tests."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite(
    "unified-test-format",
    directories=("valid-pass", "valid-fail"),
    expect_failure=("valid-fail",),
    standalone=True,
)
