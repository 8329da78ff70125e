"""The deprecated ``count`` helper's operation: the ``count`` command with a filter and its options.

Unlike ``count_documents`` (an aggregation) the ``count`` command may answer from collection metadata when
there is no filter, and may be off on a sharded cluster (orphaned documents, chunk migrations); it is kept
for code written against drivers that still have ``Collection.count``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.operations.base import ConnectionContext
from mongio.operations.crud import _add_common, _int, _mapping, _ReadOperation

if TYPE_CHECKING:
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import _ServerMode

__all__ = ["Count"]


class Count(_ReadOperation):
    """``count``: ``{count: <collection>, query: <filter>, skip, limit, hint, collation, maxTimeMS, comment}``,
    each option sent only when given; returns the reply's ``n``. A retryable read that takes the read
    concern and read preference like any other read."""

    command_name = "count"

    def __init__(
        self,
        database: str,
        collection: str,
        filter: Mapping[str, Any] | None = None,
        *,
        skip: int | None = None,
        limit: int | None = None,
        collation: Any = None,
        hint: Any = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        body: dict[str, Any] = {"count": collection}
        if filter is not None:
            body["query"] = _mapping(filter, "filter")
        if skip is not None:
            body["skip"] = _int(skip, "skip")
        # The count command takes a negative limit as its absolute value, as drivers always have.
        if limit is not None:
            body["limit"] = _int(limit, "limit", minimum=None)
        _add_common(
            body, collation=collation, hint=hint, comment=comment, max_time_ms=max_time_ms, raw_data=raw_data
        )
        super().__init__(
            database, read_preference=read_preference, read_concern=read_concern, codec_options=codec_options
        )
        self._body = body

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> int:
        return int(reply.get("n", 0))
