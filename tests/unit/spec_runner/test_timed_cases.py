"""The timed spec cases (spec_runner.timed_cases): which they are, the server they share in a run that starts
its own, and the garbage collector held off while one runs."""

from __future__ import annotations

import gc
from contextlib import AsyncExitStack
from typing import Any

import pytest
from spec_runner import runner
from spec_runner.fresh_server import needs_fresh_server
from spec_runner.model import RunContext, SpecCase
from spec_runner.runner import Report, run_async
from spec_runner.timed_cases import TIMED_CASES, collector_held, is_timed

from tests.support.spec_cases import every_spec_case

CSOT = "client-side-operations-timeout"
# A CSOT case that also needs a server of its own (spec_runner.fresh_server): fresh wins over timed.
FRESH_CSOT = (
    "retryability-legacy-timeouts.json",
    "operation succeeds after one socket timeout - listDatabases on client",
)


def _case(suite: str, file: str, name: str, body: Any) -> SpecCase:
    return SpecCase(suite, file, name, body, needs_server=True)


def test_the_timeout_suite_is_timed_and_no_other() -> None:
    cases = every_spec_case()
    timed_suites = {case.suite for case in cases if is_timed(case)}
    assert timed_suites == {CSOT}
    assert all(is_timed(case) for case in cases if case.suite == CSOT)
    for entry in TIMED_CASES:
        assert any(entry.matches(case) for case in cases), f"timed entry matching no spec test: {entry.label}"


def test_the_collector_is_held_off_only_while_a_timed_case_runs() -> None:
    timed = _case(CSOT, "x.json", "t", None)
    plain = _case("crud", "x.json", "t", None)
    assert gc.isenabled()
    with collector_held(timed):
        assert not gc.isenabled()
    assert gc.isenabled()
    with collector_held(plain):
        assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"), collector_held(timed):
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_someone_else_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_held(_case(CSOT, "x.json", "t", None)):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_timed_cases_share_a_server_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    stopped: list[str] = []

    async def start_server(stack: AsyncExitStack) -> str:
        uri = f"mongodb://127.0.0.1:{len(started) + 1}/"
        started.append(uri)

        async def stop() -> None:
            stopped.append(uri)

        stack.push_async_callback(stop)
        return uri

    monkeypatch.setattr(runner, "_start_server", start_server)
    seen: list[tuple[str, str | None, bool]] = []

    def recorder(name: str) -> Any:
        async def body(context: RunContext) -> None:
            seen.append((name, context.uri, gc.isenabled()))

        return body

    cases = [
        _case("crud", "a.json", "plain 1", recorder("plain 1")),
        _case(CSOT, "b.json", "timed 1", recorder("timed 1")),
        _case(CSOT, *FRESH_CSOT, recorder("fresh")),
        _case(CSOT, "c.json", "timed 2", recorder("timed 2")),
        _case("crud", "a.json", "plain 2", recorder("plain 2")),
    ]
    assert needs_fresh_server(cases[2])
    shared = "mongodb://127.0.0.1:27017/"
    report = Report()
    run_async(runner._run_all, cases, RunContext(uri=shared), report, False, True)

    assert report.failures == []
    timed_uri, fresh_uri = started  # the timed server on the first timed case, then the fresh case's own
    assert seen == [
        ("plain 1", shared, True),
        ("timed 1", timed_uri, False),
        ("fresh", fresh_uri, False),
        ("timed 2", timed_uri, False),
        ("plain 2", shared, True),
    ]
    assert sorted(stopped) == sorted(started)  # the fresh one right after its case, the timed one at the end
    assert stopped[-1] == timed_uri


def test_a_run_given_its_server_uses_it_for_the_timed_cases_too(monkeypatch: pytest.MonkeyPatch) -> None:
    async def start_server(stack: AsyncExitStack) -> str:
        raise AssertionError("a run given a server starts none")

    monkeypatch.setattr(runner, "_start_server", start_server)
    uris: list[str | None] = []

    async def body(context: RunContext) -> None:
        uris.append(context.uri)

    given = "mongodb://db.example.com:27017/"
    cases = [_case(CSOT, "b.json", "timed", body), _case(CSOT, *FRESH_CSOT, body)]
    report = Report()
    run_async(runner._run_all, cases, RunContext(uri=given), report, False, False)
    assert report.failures == []
    assert uris == [given, given]
