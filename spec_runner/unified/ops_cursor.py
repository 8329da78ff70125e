"""Cursor and change stream operations: ``createFindCursor``, ``createChangeStream``,
``iterateUntilDocumentOrError``, ``iterateOnce`` and ``close``."""

from __future__ import annotations

import logging
from typing import Any

from mongio.execution import deadline
from spec_runner.unified.backend import api_call
from spec_runner.unified.entities import EntityKind
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import PROGRAMMING_ERRORS, OperationCall, operation
from spec_runner.unified.ops_crud import FIND_OPTIONAL, as_document, driver_arguments, find_arguments

_CURSORS = ("findCursor", "commandCursor", "changeStream")


@operation(
    "createFindCursor",
    object="collection",
    required=("filter",),
    optional=FIND_OPTIONAL,
    saves_as=EntityKind.FIND_CURSOR,
)
async def create_find_cursor(call: OperationCall) -> Any:
    arguments = find_arguments(call.arguments)
    filter_ = arguments.pop("filter")
    max_await_time_ms = arguments.pop("max_await_time_ms", None)
    cursor = await api_call(call.target.find, filter_, **arguments)
    if max_await_time_ms is not None:
        cursor.max_await_time_ms(max_await_time_ms)  # a builder method, as in PyMongo
    await cursor  # the find runs now, as the format requires; the cursor holds its first batch
    return cursor


CHANGE_STREAM_OPTIONAL = (
    "pipeline",
    "session",
    "comment",
    "batchSize",
    "fullDocument",
    "fullDocumentBeforeChange",
    "resumeAfter",
    "startAfter",
    "startAtOperationTime",
    "maxAwaitTimeMS",
    "collation",
    "showExpandedEvents",
    "timeoutMS",
)


# ``watch`` is the driver method ``createChangeStream`` proxies; the format asks files not to use it, but a runner
# serves it the same way (the change stream mongio returns has already run its aggregate).
@operation(
    "watch",
    object=("client", "database", "collection"),
    optional=CHANGE_STREAM_OPTIONAL,
    saves_as=EntityKind.CHANGE_STREAM,
)
@operation(
    "createChangeStream",
    object=("client", "database", "collection"),
    optional=CHANGE_STREAM_OPTIONAL,
    saves_as=EntityKind.CHANGE_STREAM,
)
async def create_change_stream(call: OperationCall) -> Any:
    renames = {
        "fullDocument": "full_document",
        "fullDocumentBeforeChange": "full_document_before_change",
        "resumeAfter": "resume_after",
        "startAfter": "start_after",
        "startAtOperationTime": "start_at_operation_time",
        "showExpandedEvents": "show_expanded_events",
    }
    arguments = {renames.get(k, k): v for k, v in driver_arguments(call.arguments).items()}
    pipeline = arguments.pop("pipeline", [])
    stream = await api_call(call.target.watch, pipeline, **arguments)
    if hasattr(stream, "__await__"):
        stream = await stream
    return stream


@operation("iterateUntilDocumentOrError", object=_CURSORS)
async def iterate_until_document_or_error(call: OperationCall) -> Any:
    cursor = call.target
    tailable = getattr(cursor, "_tailable", None)
    if tailable is not None and tailable():
        # A tailable cursor's next() gives up when a getMore brings nothing (as PyMongo's does), so waiting
        # for a document is the application's loop; the client-side timeout the cursor got bounds that
        # whole wait, as a mongio.timeout() block around the loop would.
        with deadline.timeout(cursor._csot_timeout):
            while True:
                document = await cursor.try_next()
                if document is not None:
                    return as_document(document)
                if not cursor.alive:
                    raise StopAsyncIteration
    return as_document(await cursor.next())


@operation("iterateOnce", object=_CURSORS)
async def iterate_once(call: OperationCall) -> Any:
    document = await call.target.try_next()
    return MISSING if document is None else as_document(document)


@operation("close", object="client", optional=("timeoutMS",))
async def close_client(call: OperationCall) -> Any:
    await api_call(call.target.close, **call.arguments)
    return MISSING


@operation("close", object=_CURSORS, optional=("timeoutMS",))
async def close_cursor(call: OperationCall) -> Any:
    # "Test runners MUST suppress all errors when closing the cursor" (killCursors failures included); the
    # runner's own mistakes still propagate.
    try:
        await api_call(call.target.close, **call.arguments)
    except PROGRAMMING_ERRORS:
        raise
    except Exception as exc:
        logging.getLogger("spec_runner.unified").debug("closing cursor %s: %s", call.operation.object, exc)
    return MISSING
