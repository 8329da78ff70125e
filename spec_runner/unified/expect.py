"""``expectError``: checking a raised exception against the test's expected error.

The checks read the exception through ``ErrorDescription``, a small view (message, code, code name, labels,
server response, write errors, partial result) built by ``describe_error`` from ``mongio.errors`` classes and
from anything shaped like them, so bulk write errors and later error classes fit without changes here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mongio.errors import BulkWriteError, MongioError, OperationFailure
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.matcher import MISSING, EntityLookup, Matcher

EXPECTED_ERROR_KEYS = frozenset(
    {
        "isError",
        "isClientError",
        "isTimeoutError",
        "errorContains",
        "errorCode",
        "errorCodeName",
        "errorLabelsContain",
        "errorLabelsOmit",
        "writeErrors",
        "writeConcernErrors",
        "errorResponse",
        "expectResult",
    }
)


@dataclass
class ErrorDescription:
    """What the expectations read from an error.

    ``messages``, ``codes`` and ``code_names`` hold the error's own values first, then those of the errors
    it aggregates (a bulk write's write errors and write concern errors), any of which satisfies
    ``errorContains`` and ``errorCodeName``. ``response`` is the server's reply document, ``None`` for a client
    error. ``write_errors`` maps a request index to its write error, ``write_concern_errors`` lists the write
    concern errors (client bulk write). ``partial_result`` is the result carried by the error, or ``MISSING``.
    """

    error: BaseException
    is_client_error: bool
    is_timeout: bool
    messages: list[str]
    code: int | None = None
    code_name: str | None = None
    labels: frozenset[str] = frozenset()
    response: Mapping[str, Any] | None = None
    aggregated_code_names: list[str] = field(default_factory=list)
    write_errors: Mapping[int, Mapping[str, Any]] | None = None
    write_concern_errors: Sequence[Mapping[str, Any]] | None = None
    partial_result: Any = MISSING


def _labels(error: BaseException) -> frozenset[str]:
    labels = getattr(error, "error_labels", None)
    if labels is not None:
        return frozenset(labels)
    details = getattr(error, "details", None)
    if isinstance(details, Mapping):
        return frozenset(details.get("errorLabels", ()))
    return frozenset()


def _message(error: BaseException) -> str:
    # The first argument is the message itself; str() of a server error also shows the whole reply.
    if error.args and isinstance(error.args[0], str):
        return error.args[0]
    return str(error)


def describe_error(error: BaseException) -> ErrorDescription:
    """Read an exception the driver raised.

    A server error is an ``OperationFailure`` (or anything with ``code`` and a ``details`` reply); a client
    bulk write exception is recognised by its ``write_errors``/``write_concern_errors`` attributes and reads
    its code and message from its top-level ``error``. Everything else is a client error.
    """
    if hasattr(error, "write_concern_errors") and hasattr(error, "write_errors"):
        return _describe_client_bulk_write(error)
    timeout = bool(getattr(error, "timeout", False)) if isinstance(error, MongioError) else False
    details = getattr(error, "details", None)
    if isinstance(error, OperationFailure) or (isinstance(details, Mapping) and hasattr(error, "code")):
        response = details if isinstance(details, Mapping) else None
        code_name = getattr(error, "code_name", None)
        if code_name is None and response is not None:
            code_name = response.get("codeName")
        described = ErrorDescription(
            error=error,
            is_client_error=False,
            is_timeout=timeout,
            messages=[_message(error)],
            code=getattr(error, "code", None),
            code_name=code_name,
            labels=_labels(error),
            response=response,
        )
        if isinstance(error, BulkWriteError) and response is not None:
            _add_aggregated(
                described, response.get("writeErrors", ()), response.get("writeConcernErrors", ())
            )
        return described
    return ErrorDescription(
        error=error,
        is_client_error=True,
        is_timeout=timeout,
        messages=[_message(error)],
        labels=_labels(error),
    )


def _add_aggregated(described: ErrorDescription, write_errors: Any, write_concern_errors: Any) -> None:
    for item in [*(write_errors or ()), *(write_concern_errors or ())]:
        if isinstance(item, Mapping):
            if "errmsg" in item:
                described.messages.append(str(item["errmsg"]))
            if "codeName" in item:
                described.aggregated_code_names.append(str(item["codeName"]))
            for label in item.get("errorLabels", ()):
                described.labels |= {label}


def _describe_client_bulk_write(error: BaseException) -> ErrorDescription:
    top = getattr(error, "error", None)
    if isinstance(top, BaseException):
        described = describe_error(top)
        described.error = error
    else:
        described = ErrorDescription(
            error=error, is_client_error=False, is_timeout=False, messages=[_message(error)]
        )
    described.labels |= _labels(error)
    described.write_errors = _indexed_write_errors(getattr(error, "write_errors", None) or {})
    described.write_concern_errors = [
        _write_concern_error(item) for item in getattr(error, "write_concern_errors", None) or []
    ]
    # A partial result already shaped as a document is taken as it is; a driver result object is left to the
    # operation's error_result, which turns it into the document the format matches.
    partial = getattr(error, "partial_result", None)
    if isinstance(partial, Mapping):
        described.partial_result = partial
    return described


def _indexed_write_errors(raw: Any) -> dict[int, Mapping[str, Any]]:
    # The specification's map from model index to write error, or PyMongo's list of the server's write
    # error documents, each with the model's index as "idx".
    if isinstance(raw, Mapping):
        return {int(index): value for index, value in raw.items()}
    return {int(item["idx"]): item for item in raw}


def _write_concern_error(raw: Any) -> Any:
    # PyMongo keeps the server's writeConcernError document (errmsg, errInfo); the format reads the
    # specification's WriteConcernError (message, details).
    if not isinstance(raw, Mapping) or "message" in raw or "errmsg" not in raw:
        return raw
    converted = dict(raw)
    converted["message"] = raw["errmsg"]
    if "errInfo" in raw:
        converted["details"] = raw["errInfo"]
    return converted


def check_expected_error(
    expected: Mapping[str, Any],
    error: BaseException | ErrorDescription | None,
    *,
    entities: EntityLookup | None = None,
) -> None:
    """Raise ``MatchError`` unless ``error`` (``None``: the operation succeeded) meets ``expected``."""
    unknown = set(expected) - EXPECTED_ERROR_KEYS
    if unknown:
        raise UnifiedTestError(f"expectError: unknown assertion(s) {sorted(unknown)}")
    if "isError" in expected and expected["isError"] is not True:
        raise UnifiedTestError(f"expectError.isError can only be true, not {expected['isError']!r}")
    if not expected:
        raise UnifiedTestError("expectError needs at least one assertion")
    if error is None:
        raise MatchError("expectError", f"expected an error ({dict(expected)}), but the operation succeeded")
    described = error if isinstance(error, ErrorDescription) else describe_error(error)
    shown = f"{type(described.error).__name__}: {described.error}"
    matcher = Matcher(entities)

    def fail(key: str, message: str) -> MatchError:
        return MatchError(f"expectError.{key}", f"{message}; the error was {shown}")

    if "isClientError" in expected and bool(expected["isClientError"]) != described.is_client_error:
        kind = "client" if described.is_client_error else "server"
        raise fail("isClientError", f"expected {expected['isClientError']}, got a {kind} error")
    if "isTimeoutError" in expected and bool(expected["isTimeoutError"]) != described.is_timeout:
        raise fail("isTimeoutError", f"expected {expected['isTimeoutError']}, got {described.is_timeout}")
    if "errorContains" in expected:
        needle = str(expected["errorContains"]).casefold()
        if not any(needle in message.casefold() for message in described.messages):
            raise fail("errorContains", f"no error message contains {expected['errorContains']!r}")
    if "errorCode" in expected and (described.is_client_error or described.code != expected["errorCode"]):
        raise fail("errorCode", f"expected server error code {expected['errorCode']}, got {described.code}")
    if "errorCodeName" in expected:
        wanted = str(expected["errorCodeName"]).casefold()
        names = [n for n in [described.code_name, *described.aggregated_code_names] if n is not None]
        if described.is_client_error or wanted not in {n.casefold() for n in names}:
            raise fail(
                "errorCodeName", f"expected code name {expected['errorCodeName']}, got {names or None}"
            )
    for label in expected.get("errorLabelsContain", ()):
        if label not in described.labels:
            raise fail("errorLabelsContain", f"label {label!r} missing from {sorted(described.labels)}")
    for label in expected.get("errorLabelsOmit", ()):
        if label in described.labels:
            raise fail("errorLabelsOmit", f"label {label!r} present in {sorted(described.labels)}")
    if "writeErrors" in expected:
        _check_write_errors(matcher, expected["writeErrors"], described)
    if "writeConcernErrors" in expected:
        _check_write_concern_errors(matcher, expected["writeConcernErrors"], described)
    if "errorResponse" in expected:
        if described.response is None:
            raise fail("errorResponse", "expected a server response, but the error has none")
        matcher.match(
            expected["errorResponse"], described.response, root=True, path="expectError.errorResponse"
        )
    if "expectResult" in expected:
        matcher.match(
            expected["expectResult"], described.partial_result, root=True, path="expectError.expectResult"
        )


def _check_write_errors(matcher: Matcher, expected: Mapping[str, Any], described: ErrorDescription) -> None:
    actual = dict(described.write_errors or {})
    wanted = {int(index): value for index, value in expected.items()}
    if set(wanted) != set(actual):
        raise MatchError(
            "expectError.writeErrors",
            f"expected write errors at indexes {sorted(wanted)}, got {sorted(actual)}",
        )
    for index, value in sorted(wanted.items()):
        matcher.match(value, actual[index], root=True, path=f"expectError.writeErrors.{index}")


def _check_write_concern_errors(
    matcher: Matcher, expected: Sequence[Mapping[str, Any]], described: ErrorDescription
) -> None:
    actual = list(described.write_concern_errors or [])
    if len(actual) != len(expected):
        raise MatchError(
            "expectError.writeConcernErrors",
            f"expected {len(expected)} write concern errors, got {len(actual)}: {actual}",
        )
    for index, (value, got) in enumerate(zip(expected, actual)):
        matcher.match(value, got, root=True, path=f"expectError.writeConcernErrors[{index}]")
