"""The retryable-writes specification's unified tests, against the server."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

# After a "not writable primary" or "node is recovering" error the server is Unknown until its monitor's next
# reply; with the streaming protocol that reply comes once per heartbeatFrequencyMS (a check request is
# ignored while the awaited hello is in progress), so the smallest allowed frequency keeps each such retry
# from waiting 10 s. A client that sets heartbeatFrequencyMS keeps its own.
SUITE = unified_suite(
    "retryable-writes", directories=("unified",), client_defaults={"heartbeatFrequencyMS": 500}, auth=True
)
