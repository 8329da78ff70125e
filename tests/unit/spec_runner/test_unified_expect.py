"""expectError against mongio's errors and error-shaped objects."""

from __future__ import annotations

from typing import Any

import pytest
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.expect import check_expected_error, describe_error
from spec_runner.unified.matcher import MISSING

from mongio.errors import (
    BulkWriteError,
    ConfigurationError,
    NetworkTimeout,
    OperationFailure,
    ServerSelectionTimeoutError,
    WriteConcernError,
)


def server_error(
    code: int = 11000, name: str = "DuplicateKey", message: str = "E11000 duplicate key", labels: Any = ()
) -> OperationFailure:
    reply = {"ok": 0, "errmsg": message, "code": code, "codeName": name}
    if labels:
        reply["errorLabels"] = list(labels)
    return OperationFailure(message, code, reply)


def ok(expected: dict[str, Any], error: BaseException | None) -> None:
    check_expected_error(expected, error)


def fails(expected: dict[str, Any], error: BaseException | None) -> MatchError:
    with pytest.raises(MatchError) as info:
        check_expected_error(expected, error)
    return info.value


def test_an_error_was_expected_but_none_raised() -> None:
    error = fails({"isError": True}, None)
    assert "succeeded" in str(error)


def test_is_error() -> None:
    ok({"isError": True}, ValueError("x"))


def test_is_error_false_or_an_empty_expectation_is_a_test_error() -> None:
    # The format: "Test files MUST NOT specify false"; expectedError needs at least one key.
    with pytest.raises(UnifiedTestError, match="isError can only be true"):
        check_expected_error({"isError": False}, ValueError("x"))
    with pytest.raises(UnifiedTestError, match="at least one assertion"):
        check_expected_error({}, ValueError("x"))


def test_client_and_server_errors() -> None:
    ok({"isClientError": True}, ConfigurationError("bad option"))
    ok({"isClientError": True}, NetworkTimeout("timed out"))
    ok({"isClientError": True}, TypeError("not a document"))
    ok({"isClientError": False}, server_error())
    error = fails({"isClientError": True}, server_error())
    assert error.path == "expectError.isClientError"
    assert "server error" in str(error)
    fails({"isClientError": False}, ConfigurationError("x"))


def test_timeout_errors() -> None:
    ok({"isTimeoutError": True}, ServerSelectionTimeoutError("no server"))
    ok({"isTimeoutError": False}, ConfigurationError("x"))
    fails({"isTimeoutError": True}, server_error())
    fails({"isTimeoutError": False}, NetworkTimeout("t"))


def test_error_contains_is_case_insensitive_and_reads_the_message() -> None:
    ok({"errorContains": "e11000 DUPLICATE"}, server_error())
    fails({"errorContains": "codeName"}, server_error())  # the message, not the whole reply
    fails({"errorContains": "nope"}, ConfigurationError("bad option"))


def test_error_code_and_code_name() -> None:
    ok({"errorCode": 11000, "errorCodeName": "duplicatekey"}, server_error())
    assert "11000" in str(fails({"errorCode": 26}, server_error()))
    fails({"errorCodeName": "NamespaceNotFound"}, server_error())
    fails({"errorCode": 11000}, ConfigurationError("client errors have no server code"))


def test_error_labels() -> None:
    error = server_error(labels=["RetryableWriteError"])
    ok(
        {"errorLabelsContain": ["RetryableWriteError"], "errorLabelsOmit": ["TransientTransactionError"]},
        error,
    )
    fails({"errorLabelsContain": ["TransientTransactionError"]}, error)
    fails({"errorLabelsOmit": ["RetryableWriteError"]}, error)
    ok({"errorLabelsContain": ["NoWritesPerformed"]}, NetworkTimeout("x", error_labels=["NoWritesPerformed"]))


def test_error_response_is_a_root_level_match() -> None:
    error = server_error()
    ok({"errorResponse": {"code": 11000}}, error)
    fails({"errorResponse": {"code": 11001}}, error)
    assert "no" in str(fails({"errorResponse": {"code": 1}}, ConfigurationError("x")))


def test_write_concern_error_is_a_server_error() -> None:
    reply = {
        "ok": 1,
        "writeConcernError": {"code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting"},
    }
    error = WriteConcernError("waiting", 64, reply)
    ok({"isClientError": False, "errorCode": 64}, error)


def test_bulk_write_error_aggregates_its_write_errors() -> None:
    details = {
        "writeErrors": [{"index": 1, "code": 11000, "codeName": "DuplicateKey", "errmsg": "E11000 dup"}],
        "writeConcernErrors": [
            {"code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication"}
        ],
        "nInserted": 1,
    }
    error = BulkWriteError(details)
    ok({"errorContains": "e11000", "errorCodeName": "DuplicateKey"}, error)
    ok({"errorContains": "replication", "errorCodeName": "WriteConcernFailed"}, error)
    fails({"errorCodeName": "NamespaceNotFound"}, error)


class FakeClientBulkWriteError(Exception):
    """Shaped like the client-level bulk write exception: a top-level error, write errors by index, write
    concern errors and a partial result."""

    def __init__(
        self, error: BaseException | None, write_errors: dict[int, Any], partial_result: Any
    ) -> None:
        super().__init__("client bulk write failed")
        self.error = error
        self.write_errors = write_errors
        self.write_concern_errors = [{"code": 64, "errmsg": "wc"}]
        self.partial_result = partial_result


def test_client_bulk_write_shape() -> None:
    error = FakeClientBulkWriteError(
        server_error(code=8, name="UnknownError", message="top level"),
        {1: {"code": 11000, "message": "dup"}},
        {"insertedCount": 1, "extra": True},
    )
    ok(
        {
            "errorCode": 8,
            "errorContains": "top level",
            "writeErrors": {"1": {"code": 11000}},
            "writeConcernErrors": [{"code": 64}],
            "expectResult": {"insertedCount": 1},
        },
        error,
    )
    assert fails({"writeErrors": {"0": {"code": 11000}}}, error).path == "expectError.writeErrors"
    assert fails({"writeErrors": {"1": {"code": 1}}}, error).path == "expectError.writeErrors.1.code"
    fails({"writeConcernErrors": []}, error)
    assert (
        fails({"writeConcernErrors": [{"code": 65}]}, error).path == "expectError.writeConcernErrors[0].code"
    )
    fails({"expectResult": {"insertedCount": 2}}, error)


def test_expect_result_without_a_partial_result() -> None:
    error = FakeClientBulkWriteError(None, {}, None)
    assert describe_error(error).partial_result is MISSING
    ok({"expectResult": {"$$unsetOrMatches": {"insertedCount": 0}}}, error)
    fails({"expectResult": {"insertedCount": 0}}, error)


def test_unknown_assertion_is_a_test_error() -> None:
    with pytest.raises(UnifiedTestError):
        check_expected_error({"isWeird": True}, ValueError())


def test_describe_error_of_a_server_error() -> None:
    described = describe_error(server_error(labels=["TransientTransactionError"]))
    assert not described.is_client_error
    assert described.code == 11000
    assert described.code_name == "DuplicateKey"
    assert described.labels == {"TransientTransactionError"}
    assert described.response is not None and described.response["errmsg"] == "E11000 duplicate key"
