"""The retryable-reads specification's unified tests, against the server."""

from __future__ import annotations

from spec_runner.suites._unified_support import FAIL_POINT_RECOVERY, unified_suite

SUITE = unified_suite(
    "retryable-reads", directories=("unified",), client_defaults=FAIL_POINT_RECOVERY, auth=True
)
