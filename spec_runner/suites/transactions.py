"""The transactions specification's unified tests, against the server."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

# A commit or abort retried after a "not writable primary" or "node is recovering" error waits for the
# server's monitor to find it again; with the streaming protocol that takes a heartbeatFrequencyMS (a check
# request is ignored while the awaited hello is in progress), so the smallest allowed frequency keeps each
# such retry from waiting 10 s. A client that sets heartbeatFrequencyMS keeps its own.
SUITE = unified_suite("transactions", directories=("unified",), client_defaults={"heartbeatFrequencyMS": 500})
