"""The command-logging-and-monitoring specification's unified tests, against the server (a standalone one for
those that need a single server)."""

from __future__ import annotations

from spec_runner.suites._unified_support import FAIL_POINT_RECOVERY, unified_suite

SUITE = unified_suite(
    "command-logging-and-monitoring", standalone=True, client_defaults=FAIL_POINT_RECOVERY
)
