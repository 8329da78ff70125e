"""Session operations: ``startTransaction``, ``commitTransaction``, ``abortTransaction``, ``withTransaction``,
``endSession`` and ``getSnapshotTime``; and the client's ``dropDatabase``, which only the causal-consistency
tests use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spec_runner.unified.backend import api_call, read_concern, read_preference, write_concern
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.loader import Operation
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import (
    PROGRAMMING_ERRORS,
    OperationCall,
    check_outcome,
    operation,
    prepare,
)

_TRANSACTION_OPTIONS = ("readConcern", "writeConcern", "readPreference", "maxCommitTimeMS", "timeoutMS")


def transaction_keywords(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``startTransaction``/``withTransaction`` options as the driver's keyword arguments."""
    kwargs: dict[str, Any] = {}
    for key, value in arguments.items():
        if key == "readConcern":
            kwargs["read_concern"] = read_concern(value)
        elif key == "writeConcern":
            kwargs["write_concern"] = write_concern(value)
        elif key == "readPreference":
            kwargs["read_preference"] = read_preference(value)
        elif key == "maxCommitTimeMS":
            kwargs["max_commit_time_ms"] = value
        elif key == "timeoutMS":
            kwargs["timeoutMS"] = value
        else:
            raise UnifiedTestError(f"unsupported transaction option {key!r}")
    return kwargs


@operation("startTransaction", object="session", optional=_TRANSACTION_OPTIONS)
async def start_transaction(call: OperationCall) -> Any:
    # PyMongo's async start_transaction is a coroutine returning a context manager; mongio's may be either
    # (api_call awaits a coroutine and leaves a context manager alone).
    await api_call(call.target.start_transaction, **transaction_keywords(call.arguments))
    return MISSING


@operation("commitTransaction", object="session", optional=("timeoutMS",))
async def commit_transaction(call: OperationCall) -> Any:
    await api_call(call.target.commit_transaction, **call.arguments)
    return MISSING


@operation("abortTransaction", object="session", optional=("timeoutMS",))
async def abort_transaction(call: OperationCall) -> Any:
    await api_call(call.target.abort_transaction, **call.arguments)
    return MISSING


@operation("withTransaction", object="session", required=("callback",), optional=_TRANSACTION_OPTIONS)
async def with_transaction(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    operations = [Operation.parse(raw) for raw in arguments.pop("callback")]

    async def callback(session: Any) -> None:
        # Each operation is checked as the test says, and its error still reaches withTransaction whatever
        # expectError or ignoreResultAndError say (the format requires it).
        for op in operations:
            spec, op_call = prepare(call.context, op)
            result: Any = MISSING
            error: Exception | None = None
            try:
                result = await spec.function(op_call)
            except PROGRAMMING_ERRORS:
                raise
            except Exception as exc:
                error = exc
            check_outcome(call.context, op, spec, result, error)
            if error is not None:
                raise error

    await api_call(call.target.with_transaction, callback, **transaction_keywords(arguments))
    return MISSING


@operation("endSession", object="session")
async def end_session(call: OperationCall) -> Any:
    await api_call(call.target.end_session)
    return MISSING


@operation("getSnapshotTime", object="session")
async def get_snapshot_time(call: OperationCall) -> Any:
    return call.target.snapshot_time


@operation("dropDatabase", object="client", required=("database",), optional=("session",))
async def drop_database(call: OperationCall) -> Any:
    # Only the causal-consistency tests use it (a write that carries afterClusterTime in a session).
    arguments = dict(call.arguments)
    await api_call(call.target.drop_database, arguments.pop("database"), **arguments)
    return MISSING
