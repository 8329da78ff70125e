"""The deprecated ``mapReduce`` command (``Collection.map_reduce`` / ``inline_map_reduce``).

With ``out: {inline: 1}`` it is a read: it takes the read concern and may go to a secondary. With any other
``out`` it writes a collection: it takes the write concern and goes to the primary. Neither is retried
(retryable-reads.md leaves ``mapReduce`` out: the server cannot stop it when the client goes away).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.operations.base import Command, ConnectionContext, Operation, add_raw_data, for_server
from mongio.operations.crud import _collation, _int

if TYPE_CHECKING:
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import _ServerMode
    from mongio.options.write_concern import WriteConcern

__all__ = ["MapReduce"]


def is_inline(out: Any) -> bool:
    """True when ``out`` asks for the results in the reply rather than in a collection."""
    return isinstance(out, Mapping) and "inline" in out


class MapReduce(Operation[dict[str, Any]]):
    """``{mapReduce: <collection>, map, reduce, out, ...}``; ``extra`` holds the other fields of the command
    (``query``, ``sort``, ``limit``, ``finalize``, ``scope``, ``jsMode``, ``verbose``...) as given. Returns the
    whole reply."""

    command_name = "mapReduce"

    def __init__(
        self,
        database: str,
        collection: str,
        map: Any,
        reduce: Any,
        out: Any,
        *,
        collation: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        if not isinstance(out, str | Mapping):
            raise TypeError(f"out must be a collection name or a mapping, not {type(out).__name__}")
        self.inline = is_inline(out)
        body: dict[str, Any] = {"mapReduce": collection, "map": map, "reduce": reduce, "out": out}
        if collation is not None:
            body["collation"] = _collation(collation)
        if max_time_ms is not None:
            body["maxTimeMS"] = _int(max_time_ms, "max_time_ms")
        add_raw_data(body, raw_data)
        if extra:
            body.update(extra)
        # An inline run only reads (any read preference, the read concern); one with an output collection
        # writes it (the primary, the write concern).
        super().__init__(
            database,
            read_preference=read_preference if self.inline else None,
            read_concern=read_concern if self.inline else None,
            write_concern=None if self.inline else write_concern,
            codec_options=codec_options,
        )
        self.takes_read_concern = self.inline
        self.takes_write_concern = not self.inline
        self._body = body

    @property
    def body(self) -> dict[str, Any]:
        """The command as built (a copy is sent)."""
        return self._body

    def build(self, context: ConnectionContext) -> Command:
        return Command(for_server(dict(self._body), context))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
        return reply
