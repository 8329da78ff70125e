"""The client-side operations timeout specification's unified tests, against the server."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite("client-side-operations-timeout")
