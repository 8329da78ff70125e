"""Index commands: ``createIndexes``, ``listIndexes``, ``dropIndexes`` and the Atlas Search index commands.

The search index commands (and the ``$listSearchIndexes`` aggregate) are proxied by the server to a search
process that refuses a ``readConcern`` or ``writeConcern``: they take neither, whatever the collection's
concerns say. ``createIndexes`` and ``dropIndexes`` take the write concern; ``listIndexes`` no read concern.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.errors import ConfigurationError
from mongio.operations.base import (
    Command,
    ConnectionContext,
    CursorState,
    Operation,
    Retryability,
    add_raw_data,
    for_server,
    parse_cursor,
)
from mongio.operations.crud import Aggregate
from mongio.operations.models import (
    IndexModel,
    SearchIndexModel,
    gen_index_name,
    index_document,
    index_model_document,
)

if TYPE_CHECKING:
    from mongio.options.protocols import IndexModelLike, SearchIndexModelLike
    from mongio.options.read_preference import _ServerMode
    from mongio.options.write_concern import WriteConcern

__all__ = [
    "CreateIndexes",
    "CreateSearchIndexes",
    "DropIndexes",
    "DropSearchIndex",
    "ListIndexes",
    "ListSearchIndexes",
    "UpdateSearchIndex",
]

_COMMIT_QUORUM_MIN_WIRE_VERSION = 9  # MongoDB 4.4


class _SimpleCommand(Operation[Any]):
    """An operation whose command is fixed when it is made and whose result is the reply."""

    def __init__(
        self,
        database: str,
        body: dict[str, Any],
        *,
        write_concern: WriteConcern | None = None,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__(
            database,
            write_concern=write_concern,
            read_preference=read_preference,
            codec_options=codec_options,
        )
        self.command_name = next(iter(body))
        self._body = body

    @property
    def body(self) -> dict[str, Any]:
        return self._body

    def build(self, context: ConnectionContext) -> Command:
        return Command(for_server(dict(self._body), context))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> Any:
        return reply


def _add(body: dict[str, Any], comment: Any, max_time_ms: int | None, raw_data: bool | None = None) -> None:
    if max_time_ms is not None:
        body["maxTimeMS"] = max_time_ms
    if comment is not None:
        body["comment"] = comment
    add_raw_data(body, raw_data)


class CreateIndexes(_SimpleCommand):
    """``createIndexes`` for ``IndexModel``s (or ready specification documents); returns the index names."""

    takes_write_concern = True

    def __init__(
        self,
        database: str,
        collection: str,
        indexes: Sequence[IndexModel | IndexModelLike | Mapping[str, Any]],
        *,
        commit_quorum: int | str | None = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        specs: list[Mapping[str, Any]] = []
        for index in indexes:
            model_document = index_model_document(index)
            if model_document is not None:
                specs.append(model_document)
            elif isinstance(index, Mapping) and "key" in index:
                spec = dict(index)
                spec.setdefault("name", gen_index_name(index_document(spec["key"])))
                specs.append(spec)
            else:
                raise TypeError(f"{index!r} is not an IndexModel")
        if not specs:
            raise ValueError("create_indexes needs at least one index")
        body: dict[str, Any] = {"createIndexes": collection, "indexes": specs}
        if commit_quorum is not None:
            body["commitQuorum"] = commit_quorum
        _add(body, comment, max_time_ms, raw_data)
        super().__init__(database, body, write_concern=write_concern, codec_options=codec_options)
        self.names = [str(spec["name"]) for spec in specs]

    def build(self, context: ConnectionContext) -> Command:
        if "commitQuorum" in self.body and context.max_wire_version < _COMMIT_QUORUM_MIN_WIRE_VERSION:
            # Older servers would ignore or misread it: refuse rather than build indexes differently.
            raise ConfigurationError("commit_quorum needs MongoDB 4.4 or later")
        return super().build(context)

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> list[str]:
        return self.names


class ListIndexes(Operation[CursorState]):
    """``listIndexes``: a cursor over the index specifications; a missing collection has none."""

    command_name = "listIndexes"
    retryability = Retryability.READ
    ignores_namespace_not_found = True

    def __init__(
        self,
        database: str,
        collection: str,
        *,
        batch_size: int | None = None,
        comment: Any = None,
        raw_data: bool | None = None,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__(database, read_preference=read_preference, codec_options=codec_options)
        cursor: dict[str, Any] = {} if batch_size is None else {"batchSize": batch_size}
        self._body: dict[str, Any] = {"listIndexes": collection, "cursor": cursor}
        if comment is not None:
            self._body["comment"] = comment
        add_raw_data(self._body, raw_data)
        self.collection = collection
        self.comment = comment

    def build(self, context: ConnectionContext) -> Command:
        return Command(for_server(dict(self._body), context))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        return parse_cursor(reply)

    def empty_result(self) -> CursorState:
        return CursorState(0, f"{self.database}.{self.collection}", [])


class DropIndexes(_SimpleCommand):
    """``dropIndexes`` of one index (by name or by its keys) or of all but ``_id`` (``"*"``); dropping from a
    missing collection is not an error (a drop is idempotent, as PyMongo's is)."""

    takes_write_concern = True
    ignores_namespace_not_found = True

    def __init__(
        self,
        database: str,
        collection: str,
        index: Any = "*",
        *,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        model_document = index_model_document(index)
        if model_document is not None:
            name = model_document["name"]
        elif isinstance(index, str):
            name = index
        else:
            name = gen_index_name(index_document(index))
        body: dict[str, Any] = {"dropIndexes": collection, "index": name}
        _add(body, comment, max_time_ms, raw_data)
        super().__init__(database, body, write_concern=write_concern, codec_options=codec_options)

    def empty_result(self) -> Any:
        return {"ok": 1}


def _search_index_document(model: Any) -> dict[str, Any]:
    """The ``indexes`` entry of one search index: from mongio's model, a mapping of its arguments, or another
    library's model (PyMongo's ``SearchIndexModel``, whose ``document`` holds the same fields)."""
    if isinstance(model, SearchIndexModel):
        return model.document
    if isinstance(model, Mapping):
        return SearchIndexModel(**model).document
    document = getattr(model, "document", None)
    if type(model).__name__ == "SearchIndexModel" and isinstance(document, Mapping):
        return dict(document)
    raise TypeError(f"a search index must be a SearchIndexModel or a mapping, not {type(model).__name__}")


class CreateSearchIndexes(_SimpleCommand):
    """``createSearchIndexes``; returns the names the server gave."""

    def __init__(
        self,
        database: str,
        collection: str,
        models: Sequence[SearchIndexModel | SearchIndexModelLike | Mapping[str, Any]],
        *,
        comment: Any = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        documents = [_search_index_document(model) for model in models]
        body: dict[str, Any] = {"createSearchIndexes": collection, "indexes": documents}
        _add(body, comment, None)
        super().__init__(database, body, codec_options=codec_options)

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> list[str]:
        return [str(created["name"]) for created in reply.get("indexesCreated", ())]


class UpdateSearchIndex(_SimpleCommand):
    """``updateSearchIndex``: give index ``name`` a new ``definition``."""

    def __init__(
        self,
        database: str,
        collection: str,
        name: str,
        definition: Mapping[str, Any],
        *,
        comment: Any = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        body: dict[str, Any] = {"updateSearchIndex": collection, "name": name, "definition": definition}
        _add(body, comment, None)
        super().__init__(database, body, codec_options=codec_options)


class DropSearchIndex(_SimpleCommand):
    """``dropSearchIndex`` by name; dropping from a missing collection is not an error."""

    ignores_namespace_not_found = True

    def __init__(
        self,
        database: str,
        collection: str,
        name: str,
        *,
        comment: Any = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        body: dict[str, Any] = {"dropSearchIndex": collection, "name": name}
        _add(body, comment, None)
        super().__init__(database, body, codec_options=codec_options)

    def empty_result(self) -> Any:
        return {"ok": 1}


class ListSearchIndexes(Aggregate):
    """``list_search_indexes``: an ``aggregate`` whose pipeline is the ``$listSearchIndexes`` stage (with the
    index ``name`` when given), taking the aggregation options but never a read concern."""

    takes_read_concern = False

    def __init__(
        self,
        database: str,
        collection: str,
        name: str | None = None,
        *,
        allow_disk_use: bool | None = None,
        batch_size: int | None = None,
        collation: Any = None,
        hint: Any = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        max_await_time_ms: int | None = None,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        stage: dict[str, Any] = {} if name is None else {"name": name}
        super().__init__(
            database,
            collection,
            [{"$listSearchIndexes": stage}],
            allow_disk_use=allow_disk_use,
            batch_size=batch_size,
            collation=collation,
            hint=hint,
            let=let,
            comment=comment,
            max_time_ms=max_time_ms,
            max_await_time_ms=max_await_time_ms,
            read_preference=read_preference,
            codec_options=codec_options,
        )
