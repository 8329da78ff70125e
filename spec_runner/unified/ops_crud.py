"""CRUD operations of the unified test format on collections, databases and clients, over mongio's
PyMongo-named API (``insert_one``, ``find``, ``bulk_write``, ...).

Arguments are renamed from the format's camelCase to the driver's keyword arguments; results are returned
as the format sees them (``{"insertedId": ...}``, lists of documents, counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any

from spec_runner.unified.backend import api_call, write_concern
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import OperationCall, ResultShape, operation

# The format's argument names and the driver's keyword arguments, where they differ.
RENAMES: dict[str, str] = {
    "arrayFilters": "array_filters",
    "allowDiskUse": "allow_disk_use",
    "batchSize": "batch_size",
    "bypassDocumentValidation": "bypass_document_validation",
    "maxTimeMS": "max_time_ms",
    "maxAwaitTimeMS": "max_await_time_ms",
    "noCursorTimeout": "no_cursor_timeout",
    "returnKey": "return_key",
    "showRecordId": "show_record_id",
    "allowPartialResults": "allow_partial_results",
    "returnDocument": "return_document",
    "verboseResults": "verbose_results",
    "fieldName": "key",
    "rawData": "raw_data",
    "timeoutMode": "timeout_mode",
}


def models() -> Any:
    return import_module("mongio.operations.models")


def driver_arguments(
    arguments: Mapping[str, Any], *, keep: Sequence[str] = (), drop: Sequence[str] = ()
) -> dict[str, Any]:
    """The test's arguments as keyword arguments: renamed where the driver's name differs, ``keep`` left in
    camelCase (options a method passes to the server as they are), ``drop`` left out."""
    result: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in drop:
            continue
        name = key if key in keep else RENAMES.get(key, key)
        if name == "return_document":
            value = _return_document(value)
        result[name] = value
    return result


def _return_document(value: Any) -> Any:
    if value == "After":
        return models().ReturnDocument.AFTER
    if value == "Before":
        return models().ReturnDocument.BEFORE
    raise UnifiedTestError(f"returnDocument must be Before or After, not {value!r}")


def as_document(value: Any) -> Any:
    """A driver value as the format matches it (``RawBSONDocument`` and other mappings as dicts)."""
    if isinstance(value, Mapping):
        return {key: as_document(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_document(item) for item in value]
    return value


async def read_all(cursor: Any) -> list[Any]:
    """Every document of a driver cursor, closed afterwards."""
    try:
        documents = await cursor.to_list()
    finally:
        close = getattr(cursor, "close", None)
        if close is not None:
            await close()
    return [as_document(document) for document in documents]


# --- results as the format sees them --------------------------------------------------------------------


def _acknowledged(result: Any) -> bool:
    return bool(getattr(result, "acknowledged", True))


def insert_one_result(result: Any) -> Any:
    return {"insertedId": result.inserted_id}


def insert_many_result(result: Any) -> Any:
    return {"insertedIds": {str(index): value for index, value in enumerate(result.inserted_ids)}}


def update_result(result: Any) -> Any:
    if not _acknowledged(result):
        return {}
    document = {
        "matchedCount": result.matched_count,
        "modifiedCount": result.modified_count,
        "upsertedCount": 1 if getattr(result, "did_upsert", result.upserted_id is not None) else 0,
    }
    if result.upserted_id is not None:
        document["upsertedId"] = result.upserted_id
    return document


def delete_result(result: Any) -> Any:
    if not _acknowledged(result):
        return {}
    return {"deletedCount": result.deleted_count}


def bulk_write_result(result: Any) -> Any:
    if not _acknowledged(result):
        return {}
    document: dict[str, Any] = {
        "deletedCount": result.deleted_count,
        "insertedCount": result.inserted_count,
        "matchedCount": result.matched_count,
        "modifiedCount": result.modified_count,
        "upsertedCount": result.upserted_count,
        "upsertedIds": {str(index): value for index, value in result.upserted_ids.items()},
    }
    # PyMongo's result has no inserted ids; the tests allow them to be absent ($$unsetOrMatches).
    inserted = getattr(result, "inserted_ids", None)
    if isinstance(inserted, Mapping):
        document["insertedIds"] = {str(index): value for index, value in inserted.items()}
    return document


def bulk_error_result(error: BaseException) -> Any:
    """The partial result a ``BulkWriteError`` carries, as a bulk write result."""
    details = getattr(error, "details", None)
    if not isinstance(details, Mapping) or "nInserted" not in details:
        return MISSING
    return {
        "deletedCount": details.get("nRemoved", 0),
        "insertedCount": details.get("nInserted", 0),
        "matchedCount": details.get("nMatched", 0),
        "modifiedCount": details.get("nModified", 0),
        "upsertedCount": details.get("nUpserted", 0),
        "upsertedIds": {str(item["index"]): item["_id"] for item in details.get("upserted", ())},
    }


def client_update_result(result: Any) -> Any:
    """One update of a verbose client bulk write: the bulk write spec's ``UpdateResult`` has no
    ``upsertedCount``."""
    document = {"matchedCount": result.matched_count, "modifiedCount": result.modified_count}
    if result.did_upsert:
        document["upsertedId"] = result.upserted_id
    return document


def client_bulk_write_result(result: Any) -> Any:
    if result is None or not _acknowledged(result):
        return {}
    document: dict[str, Any] = {
        "insertedCount": result.inserted_count,
        "upsertedCount": result.upserted_count,
        "matchedCount": result.matched_count,
        "modifiedCount": result.modified_count,
        "deletedCount": result.deleted_count,
    }
    if result.has_verbose_results:
        document["insertResults"] = {
            str(index): {"insertedId": item.inserted_id} for index, item in result.insert_results.items()
        }
        document["updateResults"] = {
            str(index): client_update_result(item) for index, item in result.update_results.items()
        }
        document["deleteResults"] = {
            str(index): delete_result(item) for index, item in result.delete_results.items()
        }
    return document


def client_bulk_error_result(error: BaseException) -> Any:
    partial = getattr(error, "partial_result", None)
    return MISSING if partial is None else client_bulk_write_result(partial)


# --- write models -------------------------------------------------------------------------------------------

_MODEL_ARGUMENTS = {
    "insertOne": ("document",),
    "updateOne": ("filter", "update", "upsert", "collation", "arrayFilters", "hint", "sort"),
    "updateMany": ("filter", "update", "upsert", "collation", "arrayFilters", "hint"),
    "replaceOne": ("filter", "replacement", "upsert", "collation", "hint", "sort"),
    "deleteOne": ("filter", "collation", "hint"),
    "deleteMany": ("filter", "collation", "hint"),
}
_MODEL_CLASSES = {
    "insertOne": "InsertOne",
    "updateOne": "UpdateOne",
    "updateMany": "UpdateMany",
    "replaceOne": "ReplaceOne",
    "deleteOne": "DeleteOne",
    "deleteMany": "DeleteMany",
}


def write_model(request: Mapping[str, Any], *, client_level: bool = False) -> Any:
    """One ``requests``/``models`` item as a driver write model (``InsertOne(...)``, ...)."""
    if len(request) != 1:
        raise UnifiedTestError(f"a write model has exactly one key, not {dict(request)!r}")
    ((kind, fields),) = request.items()
    if kind not in _MODEL_CLASSES:
        raise UnifiedTestError(f"unknown write model {kind!r}")
    fields = dict(fields)
    namespace = fields.pop("namespace", None)
    if client_level and namespace is None:
        raise UnifiedTestError(f"{kind}: a client bulk write model needs a namespace")
    unknown = set(fields) - set(_MODEL_ARGUMENTS[kind])
    if unknown:
        raise UnifiedTestError(f"{kind}: unsupported field(s) {sorted(unknown)}")
    kwargs = driver_arguments(fields)
    if namespace is not None:
        kwargs["namespace"] = namespace
    return getattr(models(), _MODEL_CLASSES[kind])(**kwargs)


# --- collection writes ------------------------------------------------------------------------------------

_WRITE_OPTIONAL = ("session", "comment", "bypassDocumentValidation", "rawData", "timeoutMS")


@operation("insertOne", object="collection", required=("document",), optional=_WRITE_OPTIONAL)
async def insert_one(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    document = arguments.pop("document")
    return insert_one_result(await api_call(call.target.insert_one, document, **arguments))


@operation(
    "insertMany",
    object="collection",
    required=("documents",),
    optional=(*_WRITE_OPTIONAL, "ordered"),
    error_result=bulk_error_result,
)
async def insert_many(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    documents = arguments.pop("documents")
    return insert_many_result(await api_call(call.target.insert_many, documents, **arguments))


_UPDATE_OPTIONAL = (*_WRITE_OPTIONAL, "upsert", "collation", "hint", "let", "timeoutMS")


@operation(
    "updateOne",
    object="collection",
    required=("filter", "update"),
    optional=(*_UPDATE_OPTIONAL, "arrayFilters", "sort"),
)
async def update_one(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    return update_result(await api_call(call.target.update_one, **arguments))


@operation(
    "updateMany", object="collection", required=("filter", "update"), optional=(*_UPDATE_OPTIONAL, "arrayFilters")
)
async def update_many(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    return update_result(await api_call(call.target.update_many, **arguments))


@operation(
    "replaceOne", object="collection", required=("filter", "replacement"), optional=(*_UPDATE_OPTIONAL, "sort")
)
async def replace_one(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    return update_result(await api_call(call.target.replace_one, **arguments))


_DELETE_OPTIONAL = ("session", "comment", "collation", "hint", "let", "rawData", "timeoutMS")


@operation("deleteOne", object="collection", required=("filter",), optional=_DELETE_OPTIONAL)
async def delete_one(call: OperationCall) -> Any:
    return delete_result(await api_call(call.target.delete_one, **driver_arguments(call.arguments)))


@operation("deleteMany", object="collection", required=("filter",), optional=_DELETE_OPTIONAL)
async def delete_many(call: OperationCall) -> Any:
    return delete_result(await api_call(call.target.delete_many, **driver_arguments(call.arguments)))


@operation(
    "bulkWrite",
    object="collection",
    required=("requests",),
    optional=(*_WRITE_OPTIONAL, "ordered", "let"),
    error_result=bulk_error_result,
)
async def bulk_write(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    requests = [write_model(request) for request in arguments.pop("requests")]
    return bulk_write_result(await api_call(call.target.bulk_write, requests, **arguments))


# --- find and modify -------------------------------------------------------------------------------------

_FAM_OPTIONAL = (
    "session",
    "comment",
    "projection",
    "sort",
    "collation",
    "hint",
    "let",
    "maxTimeMS",
    "rawData",
    "timeoutMS",
)


@operation("findOneAndDelete", object="collection", required=("filter",), optional=_FAM_OPTIONAL)
async def find_one_and_delete(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS",))
    return as_document(await api_call(call.target.find_one_and_delete, **arguments))


@operation(
    "findOneAndReplace",
    object="collection",
    required=("filter", "replacement"),
    optional=(*_FAM_OPTIONAL, "upsert", "returnDocument", "bypassDocumentValidation"),
)
async def find_one_and_replace(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS", "bypassDocumentValidation"))
    return as_document(await api_call(call.target.find_one_and_replace, **arguments))


@operation(
    "findOneAndUpdate",
    object="collection",
    required=("filter", "update"),
    optional=(*_FAM_OPTIONAL, "upsert", "returnDocument", "bypassDocumentValidation", "arrayFilters"),
)
async def find_one_and_update(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS", "bypassDocumentValidation"))
    return as_document(await api_call(call.target.find_one_and_update, **arguments))


# --- reads -------------------------------------------------------------------------------------------------

FIND_OPTIONAL = (
    "session",
    "comment",
    "projection",
    "sort",
    "skip",
    "limit",
    "batchSize",
    "collation",
    "hint",
    "let",
    "max",
    "min",
    "maxTimeMS",
    "maxAwaitTimeMS",
    "returnKey",
    "showRecordId",
    "noCursorTimeout",
    "allowDiskUse",
    "allowPartialResults",
    "cursorType",
    "rawData",
    "timeoutMS",
    "timeoutMode",
)


def find_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``find``'s arguments as ``Collection.find`` keywords (``cursorType`` as a ``CursorType``)."""
    result = driver_arguments(arguments, drop=("cursorType",))
    cursor_type = arguments.get("cursorType")
    if cursor_type is not None:
        cursor_types = import_module("mongio.cursor").CursorType
        names = {
            "tailable": "TAILABLE",
            "tailableAwait": "TAILABLE_AWAIT",
            "nonTailable": "NON_TAILABLE",
        }
        result["cursor_type"] = getattr(cursor_types, names[cursor_type])
    return result


@operation(
    "find", object="collection", required=("filter",), optional=FIND_OPTIONAL, result=ResultShape.DOCUMENTS
)
async def find(call: OperationCall) -> Any:
    arguments = find_arguments(call.arguments)
    filter_ = arguments.pop("filter")
    max_await_time_ms = arguments.pop("max_await_time_ms", None)
    cursor = await api_call(call.target.find, filter_, **arguments)
    if max_await_time_ms is not None:
        cursor.max_await_time_ms(max_await_time_ms)  # a builder method, as in PyMongo
    return await read_all(cursor)


@operation("findOne", object="collection", required=("filter",), optional=FIND_OPTIONAL)
async def find_one(call: OperationCall) -> Any:
    arguments = find_arguments(call.arguments)
    filter_ = arguments.pop("filter")
    result = await api_call(call.target.find_one, filter_, **arguments)
    return MISSING if result is None else as_document(result)


AGGREGATE_OPTIONAL = (
    "session",
    "comment",
    "let",
    "allowDiskUse",
    "batchSize",
    "bypassDocumentValidation",
    "collation",
    "hint",
    "maxTimeMS",
    "maxAwaitTimeMS",
    "rawData",
    "timeoutMS",
    "timeoutMode",
)


def aggregate_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    # aggregate passes its options to the server under the server's names (as PyMongo's does).
    return driver_arguments(
        arguments,
        keep=("allowDiskUse", "batchSize", "bypassDocumentValidation", "maxTimeMS", "maxAwaitTimeMS"),
    )


@operation(
    "aggregate",
    object=("collection", "database"),
    required=("pipeline",),
    optional=AGGREGATE_OPTIONAL,
    result=ResultShape.DOCUMENTS,
)
async def aggregate(call: OperationCall) -> Any:
    arguments = aggregate_arguments(call.arguments)
    pipeline = arguments.pop("pipeline")
    cursor = await api_call(call.target.aggregate, pipeline, **arguments)
    return await read_all(cursor)


@operation(
    "distinct",
    object="collection",
    required=("fieldName", "filter"),
    optional=("session", "comment", "collation", "hint", "maxTimeMS", "rawData", "timeoutMS"),
    result=ResultShape.VALUES,
)
async def distinct(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS",))
    key = arguments.pop("key")
    return [as_document(v) for v in await api_call(call.target.distinct, key, **arguments)]


@operation(
    "countDocuments",
    object="collection",
    required=("filter",),
    optional=("session", "comment", "skip", "limit", "collation", "hint", "maxTimeMS", "rawData", "timeoutMS"),
)
async def count_documents(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS",))
    filter_ = arguments.pop("filter")
    return await api_call(call.target.count_documents, filter_, **arguments)


@operation(
    "estimatedDocumentCount",
    object="collection",
    optional=("comment", "maxTimeMS", "rawData", "timeoutMS"),
)
async def estimated_document_count(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS",))
    return await api_call(call.target.estimated_document_count, **arguments)


@operation(
    "count",
    object="collection",
    optional=(
        "filter", "session", "comment", "skip", "limit", "collation", "hint", "maxTimeMS", "rawData", "timeoutMS"
    ),
)
async def count(call: OperationCall) -> Any:
    # The deprecated count helper, which passes maxTimeMS under the server's name as PyMongo 3's did.
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS",))
    filter_ = arguments.pop("filter", None)
    return await api_call(call.target.count, filter_, **arguments)


@operation(
    "mapReduce",
    object="collection",
    required=("map", "reduce", "out"),
    optional=("session", "query", "sort", "limit", "finalize", "scope", "collation", "maxTimeMS", "timeoutMS"),
)
async def map_reduce(call: OperationCall) -> Any:
    # The deprecated helper; an inline run's result is its list of results, as the format expects.
    arguments = driver_arguments(call.arguments, keep=("maxTimeMS",))
    map_, reduce, out = arguments.pop("map"), arguments.pop("reduce"), arguments.pop("out")
    response = await api_call(call.target.map_reduce, map_, reduce, out, full_response=True, **arguments)
    return response.get("results") if isinstance(out, Mapping) and "inline" in out else response


# --- client-level bulk write --------------------------------------------------------------------------------


@operation(
    "clientBulkWrite",
    object="client",
    required=("models",),
    optional=(
        "session",
        "comment",
        "ordered",
        "bypassDocumentValidation",
        "let",
        "verboseResults",
        "writeConcern",
        "rawData",
        "timeoutMS",
    ),
    error_result=client_bulk_error_result,
)
async def client_bulk_write(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    requests = [write_model(model, client_level=True) for model in arguments.pop("models")]
    if "writeConcern" in arguments:
        arguments["write_concern"] = write_concern(arguments.pop("writeConcern"))
    return client_bulk_write_result(await api_call(call.target.bulk_write, requests, **arguments))
