"""Spec tests that pass only against a server holding nothing from earlier suites: they run on a test server of
their own instead of the one the other tests share (and are never skipped for it).

A server the tests did not start (``MONGODB_URI``, a deployment of the cluster harness) is used as it is: its
databases are not the tests' to throw away.
"""

from __future__ import annotations

from collections.abc import Iterable

from spec_runner.model import SpecCase
from spec_runner.skiplist import SkipEntry

# A fresh-server case is picked out as a skip-list entry is (suite, file and test globs, a reason): the same type.
FreshServerCase = SkipEntry


FRESH_SERVER_CASES: tuple[FreshServerCase, ...] = (
    FreshServerCase(
        suite="client-side-operations-timeout",
        file="retryability-legacy-timeouts.json",
        test="operation succeeds after one socket timeout - listDatabase*",
        reason=(
            "SecantusDB's listDatabases takes time in proportion to the number of databases it holds (measured: "
            "0.5 ms on a fresh server, 10 ms with 300 databases, 30 ms with 900); on the shared server, which by "
            "then holds the databases of every earlier suite, the retried listDatabases alone can exceed the "
            "file's socketTimeoutMS of 100 ms"
        ),
    ),
)


def needs_fresh_server(case: SpecCase) -> bool:
    """Whether ``case`` runs on a test server of its own."""
    return any(entry.matches(case) for entry in FRESH_SERVER_CASES)


def fresh_server_matches(cases: Iterable[SpecCase]) -> dict[str, list[SpecCase]]:
    """For ``--show-skips``: the cases each fresh-server entry takes (an entry taking none is stale)."""
    cases = list(cases)
    return {entry.label: [case for case in cases if entry.matches(case)] for entry in FRESH_SERVER_CASES}
