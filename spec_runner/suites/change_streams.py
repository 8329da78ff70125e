"""The change streams specification's unified tests."""

from __future__ import annotations

from spec_runner.suites._unified_support import FAIL_POINT_RECOVERY, unified_suite

SUITE = unified_suite("change-streams", directories=("unified",), client_defaults=FAIL_POINT_RECOVERY)
