"""Collection, database and index management and the command helpers: ``createCollection``,
``dropCollection``, ``listCollections``, ``listDatabases`` (and their ``...Names`` and ``...Objects`` forms),
``modifyCollection``, ``appendMetadata``, ``runCommand``,
``runCursorCommand``, ``createCommandCursor``, the index and search index operations, ``rename``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spec_runner.unified.backend import api_call, driver_api, read_preference
from spec_runner.unified.entities import EntityKind
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import OperationCall, ResultShape, operation
from spec_runner.unified.ops_crud import as_document, driver_arguments, read_all

# --- databases and collections ----------------------------------------------------------------------------


@operation(
    "createCollection",
    object="database",
    required=("collection",),
    any_arguments=True,
    saves_as=EntityKind.COLLECTION,
)
async def create_collection(call: OperationCall) -> Any:
    # The other arguments are create command options, passed under the server's names as PyMongo does.
    arguments = dict(call.arguments)
    name = arguments.pop("collection")
    session = arguments.pop("session", None)
    return await api_call(
        call.target.create_collection, name, session=session, check_exists=False, **arguments
    )


@operation(
    "dropCollection",
    object="database",
    required=("collection",),
    optional=("session", "comment", "encryptedFields"),
)
async def drop_collection(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    name = arguments.pop("collection")
    if "encryptedFields" in arguments:
        arguments["encrypted_fields"] = arguments.pop("encryptedFields")
    await api_call(call.target.drop_collection, name, **arguments)
    return MISSING


@operation(
    "listCollections",
    object="database",
    optional=(
        "filter",
        "session",
        "comment",
        "batchSize",
        "nameOnly",
        "authorizedCollections",
        "rawData",
        "timeoutMS",
        "timeoutMode",
    ),
    result=ResultShape.DOCUMENTS,
)
async def list_collections(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    if "timeoutMode" in arguments:
        arguments["timeout_mode"] = arguments.pop("timeoutMode")
    cursor = await api_call(call.target.list_collections, **arguments)
    return await read_all(cursor)


@operation(
    "listCollectionNames",
    object="database",
    optional=("filter", "session", "comment", "batchSize", "authorizedCollections", "timeoutMS"),
    result=ResultShape.VALUES,
)
async def list_collection_names(call: OperationCall) -> Any:
    return list(await api_call(call.target.list_collection_names, **dict(call.arguments)))


@operation(
    "listDatabases",
    object="client",
    optional=("filter", "session", "comment", "nameOnly", "authorizedDatabases", "rawData", "timeoutMS"),
    result=ResultShape.DOCUMENTS,
)
async def list_databases(call: OperationCall) -> Any:
    cursor = await api_call(call.target.list_databases, **dict(call.arguments))
    return await read_all(cursor)


@operation("appendMetadata", object="client", required=("driverInfoOptions",))
async def append_metadata(call: OperationCall) -> Any:
    # The handshake specification's MongoClient.appendMetadata(DriverInfoOptions).
    options = dict(call.arguments["driverInfoOptions"])
    unknown = set(options) - {"name", "version", "platform"}
    if unknown:
        raise UnifiedTestError(f"appendMetadata: unsupported driverInfoOptions field(s) {sorted(unknown)}")
    driver_info = driver_api("mongio.connection.handshake", "DriverInfo")(**options)
    await api_call(call.target.append_metadata, driver_info)
    return MISSING


@operation(
    "listDatabaseNames",
    object="client",
    optional=("filter", "session", "comment", "authorizedDatabases", "timeoutMS"),
    result=ResultShape.VALUES,
)
async def list_database_names(call: OperationCall) -> Any:
    return list(await api_call(call.target.list_database_names, **dict(call.arguments)))


@operation(
    "listCollectionObjects",
    object="database",
    optional=("filter", "session", "comment", "batchSize", "authorizedCollections", "timeoutMS"),
    result=ResultShape.VALUES,
)
async def list_collection_objects(call: OperationCall) -> Any:
    # The result is the list of driver objects itself: the format has no document form for them.
    cursor = await api_call(call.target.list_collection_objects, **dict(call.arguments))
    return await _read_objects(cursor)


@operation(
    "listDatabaseObjects",
    object="client",
    optional=("filter", "session", "comment", "authorizedDatabases", "timeoutMS"),
    result=ResultShape.VALUES,
)
async def list_database_objects(call: OperationCall) -> Any:
    cursor = await api_call(call.target.list_database_objects, **dict(call.arguments))
    return await _read_objects(cursor)


async def _read_objects(cursor: Any) -> list[Any]:
    try:
        return list(await cursor.to_list())
    finally:
        await cursor.close()


@operation("modifyCollection", object="database", required=("collection",), any_arguments=True)
async def modify_collection(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    session = arguments.pop("session", None)
    command = {"collMod": arguments.pop("collection"), **arguments}
    return as_document(await api_call(call.target.command, command, session=session))


@operation(
    "rename", object="collection", required=("to",), optional=("session", "comment", "dropTarget", "timeoutMS")
)
async def rename(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    new_name = arguments.pop("to")
    await api_call(call.target.rename, new_name, **arguments)
    return MISSING


@operation("drop", object="collection", optional=("session", "comment", "timeoutMS"))
async def drop(call: OperationCall) -> Any:
    await api_call(call.target.drop, **dict(call.arguments))
    return MISSING


# --- commands -----------------------------------------------------------------------------------------------


@operation(
    "runCommand",
    object="database",
    required=("command", "commandName"),
    optional=("session", "readPreference", "readConcern", "writeConcern", "timeoutMS"),
)
async def run_command(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    for unsupported in ("readConcern", "writeConcern"):
        if unsupported in arguments:
            raise UnifiedTestError(f"runCommand: {unsupported} must be given in the command document")
    command = arguments.pop("command")
    arguments.pop("commandName")
    kwargs: dict[str, Any] = {}
    if "session" in arguments:
        kwargs["session"] = arguments.pop("session")
    if "readPreference" in arguments:
        kwargs["read_preference"] = read_preference(arguments.pop("readPreference"))
    if "timeoutMS" in arguments:
        kwargs["timeoutMS"] = arguments.pop("timeoutMS")
    return as_document(await api_call(call.target.command, command, **kwargs))


_CURSOR_COMMAND_OPTIONAL = (
    "session",
    "comment",
    "batchSize",
    "maxTimeMS",
    "cursorType",
    "timeoutMode",
    "readPreference",
    "timeoutMS",
)


async def _cursor_command(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    command = arguments.pop("command")
    arguments.pop("commandName")
    kwargs: dict[str, Any] = {}
    if "session" in arguments:
        kwargs["session"] = arguments.pop("session")
    if "comment" in arguments:
        kwargs["comment"] = arguments.pop("comment")
    if "maxTimeMS" in arguments:
        # runCursorCommand's maxTimeMS applies to the getMores, as their maxAwaitTimeMS would.
        kwargs["max_await_time_ms"] = arguments.pop("maxTimeMS")
    if "readPreference" in arguments:
        kwargs["read_preference"] = read_preference(arguments.pop("readPreference"))
    if "timeoutMS" in arguments:
        kwargs["timeoutMS"] = arguments.pop("timeoutMS")
    if "timeoutMode" in arguments:
        kwargs["timeout_mode"] = arguments.pop("timeoutMode")
    batch_size = arguments.pop("batchSize", None)
    arguments.pop("cursorType", None)  # tailability comes from the command itself
    if arguments:
        raise UnifiedTestError(f"runCursorCommand: unsupported argument(s) {sorted(arguments)}")
    cursor = await api_call(call.target.cursor_command, command, **kwargs)
    if batch_size is not None:
        cursor.batch_size(batch_size)
    return cursor


@operation(
    "runCursorCommand",
    object="database",
    required=("command", "commandName"),
    optional=_CURSOR_COMMAND_OPTIONAL,
    result=ResultShape.DOCUMENTS,
)
async def run_cursor_command(call: OperationCall) -> Any:
    return await read_all(await _cursor_command(call))


@operation(
    "createCommandCursor",
    object="database",
    required=("command", "commandName"),
    optional=_CURSOR_COMMAND_OPTIONAL,
    saves_as=EntityKind.COMMAND_CURSOR,
)
async def create_command_cursor(call: OperationCall) -> Any:
    cursor = await _cursor_command(call)
    await cursor  # the command runs now, as the format requires; the cursor holds its first batch
    return cursor


# --- indexes ---------------------------------------------------------------------------------------------


@operation("createIndex", object="collection", required=("keys",), any_arguments=True)
async def create_index(call: OperationCall) -> Any:
    # Index options go into the index specification under the server's names (unique, name, ...).
    arguments = dict(call.arguments)
    keys = list(arguments.pop("keys").items())
    options = {
        k: arguments.pop(k)
        for k in ("session", "comment", "maxTimeMS", "commitQuorum", "rawData")
        if k in arguments
    }
    return await api_call(call.target.create_index, keys, **options, **arguments)


@operation(
    "createIndexes",
    object="collection",
    required=("models",),
    optional=("session", "comment", "maxTimeMS", "commitQuorum"),
)
async def create_indexes(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    index_model = _models().IndexModel
    indexes = []
    for model in arguments.pop("models"):
        options = dict(model.get("options", {}))
        indexes.append(index_model(list(model["keys"].items()), **options))
    return await api_call(call.target.create_indexes, indexes, **arguments)


def _models() -> Any:
    from importlib import import_module

    return import_module("mongio.operations.models")


@operation(
    "dropIndex",
    object="collection",
    required=("name",),
    optional=("session", "comment", "maxTimeMS", "rawData", "timeoutMS"),
)
async def drop_index(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    name = arguments.pop("name")
    await api_call(call.target.drop_index, name, **arguments)
    return MISSING


@operation("dropIndexes", object="collection", optional=("session", "comment", "maxTimeMS", "timeoutMS"))
async def drop_indexes(call: OperationCall) -> Any:
    await api_call(call.target.drop_indexes, **dict(call.arguments))
    return MISSING


@operation(
    "listIndexes",
    object="collection",
    optional=("session", "comment", "batchSize", "rawData", "timeoutMS", "timeoutMode"),
    result=ResultShape.DOCUMENTS,
)
async def list_indexes(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    cursor = await api_call(call.target.list_indexes, **arguments)
    return await read_all(cursor)


@operation(
    "listIndexNames", object="collection", optional=("session", "comment", "timeoutMS"), result=ResultShape.VALUES
)
async def list_index_names(call: OperationCall) -> Any:
    cursor = await api_call(call.target.list_indexes, **dict(call.arguments))
    return [index["name"] for index in await read_all(cursor)]


# --- Atlas Search indexes ---------------------------------------------------------------------------------


def _search_model(model: Mapping[str, Any]) -> Any:
    search_index_model = _models().SearchIndexModel
    return search_index_model(model["definition"], name=model.get("name"), type=model.get("type"))


@operation("createSearchIndex", object="collection", required=("model",), optional=("session", "comment"))
async def create_search_index(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    return await api_call(call.target.create_search_index, _search_model(arguments.pop("model")), **arguments)


@operation(
    "createSearchIndexes",
    object="collection",
    required=("models",),
    optional=("session", "comment"),
    result=ResultShape.VALUES,
)
async def create_search_indexes(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    models = [_search_model(model) for model in arguments.pop("models")]
    return list(await api_call(call.target.create_search_indexes, models, **arguments))


@operation("dropSearchIndex", object="collection", required=("name",), optional=("session", "comment"))
async def drop_search_index(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    await api_call(call.target.drop_search_index, arguments.pop("name"), **arguments)
    return MISSING


@operation(
    "listSearchIndexes",
    object="collection",
    optional=("name", "aggregationOptions", "session", "comment"),
    result=ResultShape.DOCUMENTS,
)
async def list_search_indexes(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    options = dict(arguments.pop("aggregationOptions", {}))
    cursor = await api_call(call.target.list_search_indexes, **arguments, **options)
    return await read_all(cursor)


@operation(
    "updateSearchIndex", object="collection", required=("name", "definition"), optional=("session", "comment")
)
async def update_search_index(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    await api_call(
        call.target.update_search_index, arguments.pop("name"), arguments.pop("definition"), **arguments
    )
    return MISSING
