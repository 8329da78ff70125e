"""Collection and database commands: ``create``, ``drop``, ``renameCollection``, ``listCollections``,
``listDatabases``, ``dropDatabase``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.errors import InvalidName
from mongio.operations.base import (
    Command,
    ConnectionContext,
    CursorState,
    Operation,
    Retryability,
    add_raw_data,
    check_write_concern_reply,
    for_server,
    parse_cursor,
)

if TYPE_CHECKING:
    from mongio.options.read_preference import _ServerMode
    from mongio.options.write_concern import WriteConcern

__all__ = [
    "Create",
    "Drop",
    "DropDatabase",
    "ListCollections",
    "ListDatabases",
    "RenameCollection",
    "validate_collection_name",
]

# create's options as PyMongo's create_collection takes them (snake_case or the server's camelCase).
_CREATE_OPTION_NAMES = {
    "capped": "capped",
    "size": "size",
    "max": "max",
    "validator": "validator",
    "validation_level": "validationLevel",
    "validationLevel": "validationLevel",
    "validation_action": "validationAction",
    "validationAction": "validationAction",
    "collation": "collation",
    "timeseries": "timeseries",
    "clustered_index": "clusteredIndex",
    "clusteredIndex": "clusteredIndex",
    "expire_after_seconds": "expireAfterSeconds",
    "expireAfterSeconds": "expireAfterSeconds",
    "change_stream_pre_and_post_images": "changeStreamPreAndPostImages",
    "changeStreamPreAndPostImages": "changeStreamPreAndPostImages",
    "view_on": "viewOn",
    "viewOn": "viewOn",
    "pipeline": "pipeline",
    "storage_engine": "storageEngine",
    "storageEngine": "storageEngine",
    "index_option_defaults": "indexOptionDefaults",
    "indexOptionDefaults": "indexOptionDefaults",
    "encrypted_fields": "encryptedFields",
    "encryptedFields": "encryptedFields",
}


def validate_collection_name(name: Any) -> str:
    """A collection name the server can take: a non-empty str without ``$`` (outside ``oplog.$main``) or NUL,
    not starting or ending with ``.``."""
    if not isinstance(name, str):
        raise TypeError(f"collection name must be a str, not {type(name).__name__}")
    if not name or ".." in name:
        raise InvalidName("collection names cannot be empty")
    if "$" in name and not (name.startswith(("oplog.$main", "$cmd"))):
        raise InvalidName(f"collection names must not contain '$': {name!r}")
    if name[0] == "." or name[-1] == ".":
        raise InvalidName(f"collection names must not start or end with '.': {name!r}")
    if "\x00" in name:
        raise InvalidName("collection names must not contain the null character")
    return name


class _Command(Operation[Any]):
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
        return Command(dict(self._body))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> Any:
        if self.takes_write_concern:
            # The read and write concern specification: a helper for a command that writes reports the
            # reply's writeConcernError (an ok: 1 reply) as a WriteConcernError.
            check_write_concern_reply(reply)
        return reply


class Create(_Command):
    """``create``: a collection (capped, time series, clustered, with a validator...) or a view.

    Options may be given in PyMongo's snake_case or the server's camelCase; unknown ones are passed through
    so options newer than this driver still work.
    """

    operation_name = "createCollection"
    takes_write_concern = True

    def __init__(
        self,
        database: str,
        name: str,
        *,
        comment: Any = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        **options: Any,
    ) -> None:
        body: dict[str, Any] = {"create": validate_collection_name(name)}
        for key, value in options.items():
            if value is None:
                continue
            server_name = _CREATE_OPTION_NAMES.get(key, key)
            if server_name == "collation" and not isinstance(value, Mapping):
                value = getattr(value, "document", value)
            body[server_name] = value
        if "timeseries" in body and not isinstance(body["timeseries"], Mapping):
            raise TypeError("timeseries must be a mapping such as {'timeField': 'ts'}")
        if "clusteredIndex" in body:
            clustered = body["clusteredIndex"]
            if not isinstance(clustered, Mapping) or "key" not in clustered:
                raise TypeError("clusteredIndex must be a mapping with 'key' (and 'unique': True)")
        if "pipeline" in body and "viewOn" not in body:
            raise TypeError("pipeline is only for views; give view_on too")
        if comment is not None:
            body["comment"] = comment
        super().__init__(database, body, write_concern=write_concern, codec_options=codec_options)


class Drop(_Command):
    """``drop`` a collection; dropping one that does not exist is not an error."""

    operation_name = "dropCollection"
    takes_write_concern = True
    ignores_namespace_not_found = True

    def __init__(
        self,
        database: str,
        name: str,
        *,
        comment: Any = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        body: dict[str, Any] = {"drop": validate_collection_name(name)}
        if comment is not None:
            body["comment"] = comment
        super().__init__(database, body, write_concern=write_concern, codec_options=codec_options)

    def empty_result(self) -> Any:
        return {"ok": 1}


class RenameCollection(_Command):
    """``renameCollection`` (run on ``admin``) from ``db.source`` to ``target`` (in the same database unless
    ``target`` is a full namespace ``other.target``)."""

    takes_write_concern = True

    def __init__(
        self,
        database: str,
        source: str,
        target: str,
        *,
        drop_target: bool | None = None,
        comment: Any = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        **extra: Any,
    ) -> None:
        validate_collection_name(source)
        if not isinstance(target, str):
            raise TypeError(f"new_name must be a str, not {type(target).__name__}")
        if not target or ".." in target or target[0] == "." or target[-1] == ".":
            raise InvalidName(f"{target!r} is not a valid collection name")
        if "$" in target and not target.startswith("oplog.$main"):
            raise InvalidName(f"collection names must not contain '$': {target!r}")
        body: dict[str, Any] = {"renameCollection": f"{database}.{source}", "to": f"{database}.{target}"}
        if drop_target is not None:
            body["dropTarget"] = drop_target
        if comment is not None:
            body["comment"] = comment
        body.update(extra)
        super().__init__("admin", body, write_concern=write_concern, codec_options=codec_options)


class ListCollections(Operation[CursorState]):
    """``listCollections`` with ``filter``, ``nameOnly`` and ``authorizedCollections``; a cursor."""

    command_name = "listCollections"
    retryability = Retryability.READ

    def __init__(
        self,
        database: str,
        *,
        filter: Mapping[str, Any] | None = None,
        name_only: bool | None = None,
        authorized_collections: bool | None = None,
        batch_size: int | None = None,
        comment: Any = None,
        raw_data: bool | None = None,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__(database, read_preference=read_preference, codec_options=codec_options)
        body: dict[str, Any] = {
            "listCollections": 1,
            "cursor": {} if batch_size is None else {"batchSize": batch_size},
        }
        if filter is not None:
            if not isinstance(filter, Mapping):
                raise TypeError(f"filter must be a mapping, not {type(filter).__name__}")
            body["filter"] = filter
        if name_only is not None:
            body["nameOnly"] = name_only
        if authorized_collections is not None:
            body["authorizedCollections"] = authorized_collections
        if comment is not None:
            body["comment"] = comment
        add_raw_data(body, raw_data)
        self._body = body
        self.comment = comment

    def build(self, context: ConnectionContext) -> Command:
        return Command(for_server(dict(self._body), context))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        return parse_cursor(reply)


class ListDatabases(Operation[list[dict[str, Any]]]):
    """``listDatabases`` (on ``admin``); returns the ``databases`` list (names only with ``name_only``)."""

    command_name = "listDatabases"
    retryability = Retryability.READ

    def __init__(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        name_only: bool | None = None,
        authorized_databases: bool | None = None,
        comment: Any = None,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__("admin", read_preference=read_preference, codec_options=codec_options)
        body: dict[str, Any] = {"listDatabases": 1}
        if filter is not None:
            body["filter"] = filter
        if name_only is not None:
            body["nameOnly"] = name_only
        if authorized_databases is not None:
            body["authorizedDatabases"] = authorized_databases
        if comment is not None:
            body["comment"] = comment
        self._body = body

    def build(self, context: ConnectionContext) -> Command:
        return Command(dict(self._body))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> list[dict[str, Any]]:
        databases: list[dict[str, Any]] = reply.get("databases", [])
        return databases


class DropDatabase(_Command):
    """``dropDatabase``."""

    takes_write_concern = True

    def __init__(
        self,
        database: str,
        *,
        comment: Any = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        body: dict[str, Any] = {"dropDatabase": 1}
        if comment is not None:
            body["comment"] = comment
        super().__init__(database, body, write_concern=write_concern, codec_options=codec_options)
