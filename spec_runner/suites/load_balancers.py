"""The load-balancers specification's unified tests. They need a load-balanced deployment, which the test server
cannot be: every file is on the skip list with that reason."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite("load-balancers")
