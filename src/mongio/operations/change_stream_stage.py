"""The pure rules of change streams: the ``$changeStream`` stage, where a resumed stream starts again, and the
``aggregate`` that opens one (it keeps what the stream needs from the reply: the ``operationTime`` and the
wire version of the server that answered). Which errors a stream resumes after is decided in
:mod:`mongio.error_classification` (:func:`~mongio.error_classification.is_resumable`).

No I/O here; :mod:`mongio.change_stream` runs the stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mongio.operations.base import ConnectionContext, CursorState
from mongio.operations.crud import Aggregate

if TYPE_CHECKING:
    from mongio.bson import CodecOptions
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import _ServerMode

__all__ = [
    "ChangeStreamAggregate",
    "change_stream_options",
    "resume_options",
]

# The stage options that say where a stream starts; a resume replaces all three.
_START_POINTS = ("resumeAfter", "startAfter", "startAtOperationTime")


def change_stream_options(
    *,
    full_document: str | None = None,
    full_document_before_change: str | None = None,
    resume_after: Mapping[str, Any] | None = None,
    start_after: Mapping[str, Any] | None = None,
    start_at_operation_time: Any = None,
    show_expanded_events: bool | None = None,
    all_changes_for_cluster: bool = False,
) -> dict[str, Any]:
    """The options of the ``$changeStream`` stage, with only the ones given.

    Values are passed through unchecked (an unknown ``fullDocument`` mode or two start points at once are
    the server's to refuse), except that resume tokens must be documents.
    """
    options: dict[str, Any] = {}
    if full_document is not None:
        options["fullDocument"] = full_document
    if full_document_before_change is not None:
        options["fullDocumentBeforeChange"] = full_document_before_change
    if resume_after is not None:
        options["resumeAfter"] = _token(resume_after, "resume_after")
    if start_after is not None:
        options["startAfter"] = _token(start_after, "start_after")
    if start_at_operation_time is not None:
        options["startAtOperationTime"] = start_at_operation_time
    if show_expanded_events is not None:
        options["showExpandedEvents"] = show_expanded_events
    if all_changes_for_cluster:
        options["allChangesForCluster"] = True
    return options


def resume_options(
    original: Mapping[str, Any],
    resume_token: Any,
    *,
    start_after_pending: bool,
    operation_time: Any,
) -> dict[str, Any]:
    """The ``$changeStream`` options of the ``aggregate`` that resumes a stream opened with ``original``.

    With a cached resume token: ``startAfter`` while a stream opened with ``startAfter`` has not returned a
    change yet (``start_after_pending``), else ``resumeAfter``. Without one: ``startAtOperationTime`` when the
    stream has an operation time (given, or saved from its first ``aggregate``). Otherwise the original
    options as they were.
    """
    options = {key: value for key, value in original.items() if key not in _START_POINTS}
    if resume_token is not None:
        options["startAfter" if start_after_pending else "resumeAfter"] = resume_token
    elif operation_time is not None:
        options["startAtOperationTime"] = operation_time
    else:
        return dict(original)
    return options


def _token(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a resume token document, not {type(value).__name__}")
    return value


class ChangeStreamAggregate(Aggregate):
    """The ``aggregate`` that opens (or resumes) a change stream: ``[{$changeStream: options}, *pipeline]``
    on a collection, or on a database when ``collection`` is None.

    Its reply handler keeps the reply's ``operationTime`` and the connection's wire version, which decide
    how the stream resumes later.
    """

    def __init__(
        self,
        database: str,
        collection: str | None,
        options: Mapping[str, Any],
        pipeline: Sequence[Mapping[str, Any]],
        *,
        batch_size: int | None = None,
        collation: Any = None,
        comment: Any = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions,
    ) -> None:
        if not isinstance(pipeline, list | tuple):
            raise TypeError(f"pipeline must be a list, not {type(pipeline).__name__}")
        super().__init__(
            database,
            collection,
            [{"$changeStream": dict(options)}, *pipeline],
            batch_size=batch_size,
            collation=collation,
            comment=comment,
            read_preference=read_preference,
            read_concern=read_concern,
            codec_options=codec_options,
        )
        self.operation_time: Any = None
        self.max_wire_version: int | None = None

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        self.operation_time = reply.get("operationTime")
        self.max_wire_version = context.max_wire_version
        return super().handle_response(reply, context)
