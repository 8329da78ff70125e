"""The versioned-api specification's unified tests, against the server (a standalone one for
those that need a single server)."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite("versioned-api", standalone=True)
