"""Every spec test the runner knows, one pytest item each (ids name the suite, the file and the test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from spec_runner.cluster import Deployment, build_deployment
from spec_runner.cluster.gating import gated_on
from spec_runner.fresh_server import needs_fresh_server
from spec_runner.model import CaseSkipped, RunContext, SpecCase, SuiteMissing, specs_root
from spec_runner.registry import known_suites
from spec_runner.runner import run_case_sync
from spec_runner.server import TestServer, external_uri
from spec_runner.skiplist import skip_reason
from spec_runner.timed_cases import collector_held, is_timed


def _parameters() -> list[Any]:
    root = specs_root()
    params: list[Any] = []
    for name, suite in known_suites().items():
        try:
            cases = suite.cases(root)
        except SuiteMissing as exc:
            params.append(pytest.param(str(exc), id=f"{name}::MISSING"))
            continue
        params.extend(
            pytest.param(case, id=case.id, marks=[pytest.mark.server] if case.needs_server else [])
            for case in cases
        )
    return params


@pytest.fixture(scope="session")
def timed_server_uri() -> Iterator[str]:
    """The test server only the timed spec cases use (spec_runner.timed_cases), started on first use."""
    with TestServer() as server:
        yield server.uri


@pytest.mark.parametrize("case", _parameters())
def test_spec(case: SpecCase | str, request: pytest.FixtureRequest) -> None:
    if isinstance(case, str):
        pytest.fail(case)  # a suite whose tests are missing is an error, never a pass
    reason = skip_reason(case)
    if reason is not None:
        pytest.skip(reason)
    backend = str(request.config.getoption("--backend"))
    with collector_held(case):
        if not case.needs_server:
            _run_spec_case(case, None, backend)
        elif external_uri() is not None:
            _run_spec_case(case, request.getfixturevalue("server_uri"), backend)
        elif needs_fresh_server(case):
            with TestServer() as server:
                _run_spec_case(case, server.uri, backend)
        elif is_timed(case):
            _run_spec_case(case, request.getfixturevalue("timed_server_uri"), backend)
        else:
            _run_spec_case(case, request.getfixturevalue("server_uri"), backend)


def _run_spec_case(case: SpecCase, uri: str | None, backend: str) -> None:
    try:
        run_case_sync(case, RunContext(uri=uri, specs_root=specs_root()), backend)
    except CaseSkipped as skipped:
        pytest.skip(skipped.reason)


# The cases only a harness topology can run (their runOnRequirements leave out single and replicaset); the
# rest of each topology's run is `python -m spec_runner --topology TOPOLOGY` (README, "Topologies").
TOPOLOGY_RUNS = ("sharded", "load-balanced")
# Spec cases the harness serves that fail on gaps of the driver (none at present); strict, so each one fails
# loudly once the driver is fixed and must then leave this list.
KNOWN_DRIVER_GAPS: dict[str, str] = {}


def _topology_parameters() -> list[Any]:
    root = specs_root()
    params: list[Any] = []
    for topology in TOPOLOGY_RUNS:
        for suite in known_suites().values():
            if not suite.needs_server:
                continue
            try:
                cases = suite.cases(root)
            except SuiteMissing:
                continue  # reported by test_spec
            for case in gated_on(topology, cases, root):
                marks = [pytest.mark.server]
                if case.id in KNOWN_DRIVER_GAPS:
                    marks.append(pytest.mark.xfail(reason=KNOWN_DRIVER_GAPS[case.id], strict=True))
                params.append(pytest.param(topology, case, id=f"{topology}:{case.id}", marks=marks))
    return params


@pytest.fixture(scope="session")
def cluster_deployment() -> Iterator[Callable[[str], Deployment]]:
    """A harness deployment per topology, built on first use and kept for the session."""
    built: dict[str, Deployment] = {}
    with ExitStack() as stack:

        def get(topology: str) -> Deployment:
            if topology not in built:
                built[topology] = stack.enter_context(build_deployment(topology))
            return built[topology]

        yield get


@pytest.mark.parametrize(("topology", "case"), _topology_parameters())
def test_spec_on_topology(
    topology: str, case: SpecCase, cluster_deployment: Callable[[str], Deployment], request: pytest.FixtureRequest
) -> None:
    reason = skip_reason(case)
    if reason is not None:
        pytest.skip(reason)
    deployment = cluster_deployment(topology)
    deployment.reset()
    context = RunContext(uri=deployment.single_mongos_uri, specs_root=specs_root(), deployment=deployment)
    try:
        with collector_held(case):
            run_case_sync(case, context, str(request.config.getoption("--backend")))
    except CaseSkipped as skipped:
        pytest.skip(skipped.reason)
