"""pytest plugin bounding each phase of each test of a reference suite: a hung test fails, the run goes on.

Loaded with ``-p compat_suites.timeout`` in both runs of a suite; ``COMPAT_TEST_TIMEOUT`` (seconds) sets the bound.
When a phase (set-up, call, tear-down) outlives it, the stacks of every thread go to the log, so the hang can be
diagnosed, and ``TestTimedOut`` is raised in the main thread, where the suites' event loops run. If the test swallows
it or hangs again while unwinding, it is raised again every ``REPEAT`` seconds until the phase ends.
Main thread only, through ``SIGALRM``: the suites run their tests there.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from types import FrameType

import pytest

TIMEOUT_ENV = "COMPAT_TEST_TIMEOUT"
# Generous: on a loaded machine PyMongo's test_numerous_inserts (100,100 documents) alone can take minutes.
DEFAULT_TIMEOUT = 300.0
REPEAT = 10.0


class TestTimedOut(Exception):
    """A phase of a test ran longer than the suite's bound."""

    __test__ = False  # not a pytest test class


def phase_timeout() -> float:
    return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    # The process's own stderr (the log), not the one pytest captures for the test.
    log = sys.__stderr__
    if log is not None:
        print(f"\n--- compat_suites: test phase over {phase_timeout():g} s; stacks:", file=log, flush=True)
        faulthandler.dump_traceback(file=log, all_threads=True)
    raise TestTimedOut(f"test phase ran longer than {phase_timeout():g} s ({TIMEOUT_ENV})")


@contextmanager
def _bounded() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, phase_timeout(), REPEAT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _bounded():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _bounded():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    with _bounded():
        return (yield)
