"""mongio: an asyncio-native MongoDB driver.

The names here are the ones PyMongo's top-level package exports, so ported code changes only its imports::

    from mongio import ASCENDING, AsyncMongoClient, InsertOne, ReturnDocument

    async with AsyncMongoClient("mongodb://localhost") as client:
        await client.shop.orders.insert_one({"item": "tea"})
"""

from mongio.client import AsyncMongoClient, MongoClient
from mongio.collection import Collection
from mongio.cursor import CommandCursor, Cursor
from mongio.database import Database
from mongio.execution.deadline import TimeoutMode, timeout
from mongio.operations import (
    ASCENDING,
    DESCENDING,
    GEO2D,
    GEOSPHERE,
    HASHED,
    TEXT,
    BulkWriteResult,
    ClientBulkWriteResult,
    CursorType,
    DeleteMany,
    DeleteOne,
    DeleteResult,
    IndexModel,
    InsertManyResult,
    InsertOne,
    InsertOneResult,
    ReplaceOne,
    ReturnDocument,
    SearchIndexModel,
    UpdateMany,
    UpdateOne,
    UpdateResult,
)
from mongio.options import ReadConcern, ReadPreference, WriteConcern
from mongio.sessions.client_session import ClientSession
from mongio.topology.topology_description import MAX_SUPPORTED_WIRE_VERSION, MIN_SUPPORTED_WIRE_VERSION
from mongio.version import __version__, get_version_string, has_c, version, version_tuple

__all__ = [
    "ASCENDING",
    "DESCENDING",
    "GEO2D",
    "GEOSPHERE",
    "HASHED",
    "MAX_SUPPORTED_WIRE_VERSION",
    "MIN_SUPPORTED_WIRE_VERSION",
    "TEXT",
    "AsyncMongoClient",
    "BulkWriteResult",
    "ClientBulkWriteResult",
    "ClientSession",
    "Collection",
    "CommandCursor",
    "Cursor",
    "CursorType",
    "Database",
    "DeleteMany",
    "DeleteOne",
    "DeleteResult",
    "IndexModel",
    "InsertManyResult",
    "InsertOne",
    "InsertOneResult",
    "MongoClient",
    "ReadConcern",
    "ReadPreference",
    "ReplaceOne",
    "ReturnDocument",
    "SearchIndexModel",
    "TimeoutMode",
    "UpdateMany",
    "UpdateOne",
    "UpdateResult",
    "WriteConcern",
    "__version__",
    "get_version_string",
    "has_c",
    "timeout",
    "version",
    "version_tuple",
]
