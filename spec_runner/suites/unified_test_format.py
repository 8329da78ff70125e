"""The unified test format's own tests: ``valid-pass`` must pass, ``valid-fail`` must fail (a failing test is
the expected outcome there), each for the reason its file is about. The ``invalid`` files are the schema's,
checked by the loader's tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from spec_runner.model import SpecCase
from spec_runner.suites._unified_support import FAIL_POINT_RECOVERY, unified_suite
from spec_runner.unified.errors import EntityError, MatchError, UnifiedTestError, UnsupportedSchemaVersion
from spec_runner.unified.operations import PROGRAMMING_ERRORS, UnsupportedOperation


@dataclass(frozen=True)
class IntendedFailure:
    """How a ``valid-fail`` test must fail: an error of one of ``kinds`` whose message matches ``pattern``."""

    file: str  # glob on the path under tests/
    test: str  # glob on the description
    kinds: tuple[type[BaseException], ...]
    pattern: str

    def applies(self, case: SpecCase) -> bool:
        return fnmatchcase(case.file, self.file) and fnmatchcase(case.name, self.test)


# What each valid-fail file is about, read from its name, description and tests.
INTENDED_FAILURES: tuple[IntendedFailure, ...] = (
    IntendedFailure(
        "valid-fail/assertNumberConnectionsCheckedOut.json", "*client field is not specified",
        (UnifiedTestError,), r"missing required argument\(s\) \['client'\]",
    ),
    IntendedFailure(
        "valid-fail/assertNumberConnectionsCheckedOut.json", "*connections field is not specified",
        (UnifiedTestError,), r"missing required argument\(s\) \['connections'\]",
    ),
    IntendedFailure(
        "valid-fail/assertNumberConnectionsCheckedOut.json", "*client entity does not exist",
        (EntityError,), r"no entity named 'client1'",
    ),
    IntendedFailure(
        "valid-fail/assertNumberConnectionsCheckedOut.json", "*number of connections is incorrect",
        (MatchError,), r"expected 1 connections checked out, found 0",
    ),
    IntendedFailure("valid-fail/entity-*-undefined.json", "*", (EntityError,), r"no entity named 'foo'"),
    IntendedFailure(
        "valid-fail/entity-client-apiVersion-unsupported.json", "*",
        (Exception,), r"server_will_never_support_this_api_version",
    ),
    IntendedFailure(
        "valid-fail/entity-findCursor-malformed.json", "*",
        (UnifiedTestError,), r"createFindCursor: missing required argument\(s\) \['filter'\]",
    ),
    IntendedFailure("valid-fail/entity-findCursor.json", "*", (EntityError,), r"no entity named 'cursor0'"),
    IntendedFailure(
        "valid-fail/ignoreResultAndError-malformed.json", "*",
        (UnifiedTestError,), r"insertOne: (missing required|unsupported) argument",
    ),
    IntendedFailure(
        "valid-fail/ignoreResultAndError.json", "*", (MatchError,), r"unexpected error DuplicateKeyError",
    ),
    IntendedFailure(
        "valid-fail/kmsProviders-*.json", "*", (UnifiedTestError,), r"kmsProviders|clientEncryption",
    ),
    IntendedFailure(
        "valid-fail/operation-failure.json", "*", (MatchError,), r"unexpected error OperationFailure",
    ),
    IntendedFailure(
        "valid-fail/operation-unsupported.json", "*",
        (UnsupportedOperation,), r"unsupported operation 'unsupportedOperation'",
    ),
    IntendedFailure("valid-fail/operator-matchAsDocument.json", "*", (MatchError,), r"^find\.result\[0\]\.json"),
    IntendedFailure("valid-fail/operator-matchAsRoot.json", "*", (MatchError,), r"^find\.result\[0\]\.x"),
    IntendedFailure(
        "valid-fail/returnDocument-enum-invalid.json", "*",
        (UnifiedTestError,), r"returnDocument must be Before or After, not 'invalid'",
    ),
    IntendedFailure(
        "valid-fail/schemaVersion-unsupported.json", "*",
        (UnsupportedSchemaVersion,), r"schemaVersion 0\.1 is not supported",
    ),
)  # fmt: skip


def check_intended_failure(case: SpecCase, error: Exception) -> None:
    """Raise ``AssertionError`` unless ``error`` is the failure ``case``'s file is about.

    A file without an entry (one added upstream later) must at least fail through the runner's own checks (a
    mismatch or a refused test) or an error the driver raised, never through a bug of the runner itself.
    """
    shown = f"{type(error).__name__}: {error}"
    intended = next((entry for entry in INTENDED_FAILURES if entry.applies(case)), None)
    if intended is None:
        own_check = isinstance(error, UnifiedTestError | AssertionError)
        if not own_check and isinstance(error, (*PROGRAMMING_ERRORS, TypeError)):
            raise AssertionError(f"{case.name!r} failed, but through an error of the runner: {shown}") from error
        return
    if not isinstance(error, intended.kinds) or re.search(intended.pattern, str(error)) is None:
        kinds = " or ".join(kind.__name__ for kind in intended.kinds)
        raise AssertionError(
            f"{case.name!r} failed, but not as its file intends ({kinds} matching {intended.pattern!r}): {shown}"
        ) from error


SUITE = unified_suite(
    "unified-test-format",
    directories=("valid-pass", "valid-fail"),
    expect_failure=("valid-fail",),
    standalone=True,
    client_defaults=FAIL_POINT_RECOVERY,
    failure_check=check_intended_failure,
)
