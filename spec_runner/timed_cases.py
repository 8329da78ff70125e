"""Spec tests whose outcome turns on tens of milliseconds, and the two things that keep them honest on a shared,
noisy machine: a test server that only they use, and no pause of the test process's garbage collector while one
runs.

The client-side-operations-timeout files race a client timeout against a server-side block with margins of
25 ms (``socketTimeoutMS=100`` against ``blockTimeMS=125``; a retry must then finish within the next 100 ms).
Two pauses that are not the driver's were measured to exceed that:

- **The shared server slows as a run goes on.** SecantusDB is a Python server that keeps what every earlier test
  wrote (retryable-write records, databases, sessions). A retryable ``findAndModify`` on a connection of its own,
  400 times, measured just before this suite in a full ``pytest`` run: median 11.1 ms, 99th percentile 121 ms,
  longest 139 ms, 32 of the 400 over 100 ms. On a fresh server: median 4.1 ms, longest 14.4 ms, none over 50 ms.
  So the timed cases share a server started for them (when the run starts its own; a deployment given by
  ``MONGODB_URI`` or built by the cluster harness is used as it is).
- **The test process's own collector.** A full collection of the pytest process's heap took up to 220 ms even
  with collection's objects frozen (``tests/conftest.py``). It is held off while a timed case runs, and runs
  after it; reference counting still frees everything acyclic meanwhile.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from spec_runner.model import SpecCase
from spec_runner.skiplist import SkipEntry

# Timed cases are picked out as skip-list entries are (suite, file and test globs, a reason): the same type.
TimedCases = SkipEntry

TIMED_CASES: tuple[TimedCases, ...] = (
    TimedCases(
        suite="client-side-operations-timeout",
        file="*",
        test="*",
        reason="client timeouts of tens to hundreds of milliseconds raced against server-side blocks, with margins "
        "down to 25 ms",
    ),
)


def is_timed(case: SpecCase) -> bool:
    """Whether ``case`` runs on the timed cases' own server, with the collector held off."""
    return any(entry.matches(case) for entry in TIMED_CASES)


@contextmanager
def collector_held(case: SpecCase) -> Iterator[None]:
    """Hold off automatic garbage collection while a timed ``case`` runs (any other case: do nothing)."""
    if not is_timed(case) or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
