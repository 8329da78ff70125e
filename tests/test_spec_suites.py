"""Every spec test the runner knows, one pytest item each (ids name the suite, the file and the test)."""

from __future__ import annotations

from typing import Any

import pytest
from spec_runner.model import CaseSkipped, RunContext, SpecCase, SuiteMissing, specs_root
from spec_runner.registry import known_suites
from spec_runner.runner import run_case_sync
from spec_runner.skiplist import skip_reason


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


@pytest.mark.parametrize("case", _parameters())
def test_spec(case: SpecCase | str, request: pytest.FixtureRequest) -> None:
    if isinstance(case, str):
        pytest.fail(case)  # a suite whose tests are missing is an error, never a pass
    reason = skip_reason(case)
    if reason is not None:
        pytest.skip(reason)
    uri = request.getfixturevalue("server_uri") if case.needs_server else None
    try:
        run_case_sync(case, RunContext(uri=uri, specs_root=specs_root()))
    except CaseSkipped as skipped:
        pytest.skip(skipped.reason)
