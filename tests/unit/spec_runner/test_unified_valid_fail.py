"""A valid-fail test of the unified format passes only when it fails for the reason its file is about."""

from __future__ import annotations

import pytest
from spec_runner.model import SpecCase
from spec_runner.suites.unified_test_format import check_intended_failure
from spec_runner.unified.errors import EntityError, MatchError, UnifiedTestError


def case(file: str, name: str = "foo") -> SpecCase:
    return SpecCase(suite="unified-test-format", file=file, name=name, run=lambda context: None)


def test_the_intended_failure_is_accepted() -> None:
    check_intended_failure(
        case("valid-fail/entity-database-client-undefined.json"),
        EntityError("no entity named 'foo' (defined: none)"),
    )
    check_intended_failure(
        case("valid-fail/operator-matchAsDocument.json", "matchAsDocument fails to decode Extended JSON"),
        MatchError("find.result[0].json", "cannot parse '{ \"x\" }' as Extended JSON"),
    )


def test_another_failure_of_the_same_test_is_refused() -> None:
    # The right kind with the wrong message, and the right message from the wrong kind.
    with pytest.raises(AssertionError, match="not as its file intends"):
        check_intended_failure(
            case("valid-fail/entity-database-client-undefined.json"), EntityError("no entity named 'client0'")
        )
    with pytest.raises(AssertionError, match="not as its file intends"):
        check_intended_failure(
            case(
                "valid-fail/assertNumberConnectionsCheckedOut.json",
                "operation fails if client entity does not exist",
            ),
            UnifiedTestError(
                "assertNumberConnectionsCheckedOut: missing required argument(s) ['connections']"
            ),
        )
    with pytest.raises(AssertionError, match="not as its file intends"):
        check_intended_failure(
            case("valid-fail/operation-failure.json", "Unsupported command"),
            ConnectionRefusedError("no server"),
        )


def test_a_file_without_an_entry_must_not_fail_through_a_runner_bug() -> None:
    check_intended_failure(case("valid-fail/new-upstream-file.json"), MatchError("x", "expected 1, got 2"))
    check_intended_failure(case("valid-fail/new-upstream-file.json"), UnifiedTestError("refused"))
    for bug in (
        AttributeError("'NoneType' object has no attribute 'x'"),
        TypeError("bad call"),
        KeyError("k"),
    ):
        with pytest.raises(AssertionError, match="through an error of the runner"):
            check_intended_failure(case("valid-fail/new-upstream-file.json"), bug)
