"""The OpenTelemetry specification's unified tests (operation and transaction spans), against the server."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite("open-telemetry", directories=("operation", "transaction"))
