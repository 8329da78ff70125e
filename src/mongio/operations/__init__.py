"""Operations: one small class per command family, each turning arguments into a command and the server's
reply into a result, and saying whether it is a retryable read, a retryable write or neither. No I/O: the
executor runs them. The write models, result types and index constants are public API (PyMongo's names).
"""

from mongio.operations.base import (
    Command,
    ConnectionContext,
    CursorState,
    DocumentSequence,
    Operation,
    Retryability,
    ServerLimits,
)
from mongio.operations.bulk import BulkWrite, WriteBatch
from mongio.operations.client_bulk import ClientBulkWrite, ClientBulkWriteBatch, ClientBulkWriteException
from mongio.operations.crud import CursorType
from mongio.operations.models import (
    ASCENDING,
    DESCENDING,
    GEO2D,
    GEOSPHERE,
    HASHED,
    TEXT,
    DeleteMany,
    DeleteOne,
    IndexModel,
    InsertOne,
    ReplaceOne,
    ReturnDocument,
    SearchIndexModel,
    UpdateMany,
    UpdateOne,
    WriteModel,
)
from mongio.operations.results import (
    BulkWriteResult,
    ClientBulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)

__all__ = [
    "ASCENDING",
    "DESCENDING",
    "GEO2D",
    "GEOSPHERE",
    "HASHED",
    "TEXT",
    "BulkWrite",
    "BulkWriteResult",
    "ClientBulkWrite",
    "ClientBulkWriteBatch",
    "ClientBulkWriteException",
    "ClientBulkWriteResult",
    "Command",
    "ConnectionContext",
    "CursorState",
    "CursorType",
    "DeleteMany",
    "DeleteOne",
    "DeleteResult",
    "DocumentSequence",
    "IndexModel",
    "InsertManyResult",
    "InsertOne",
    "InsertOneResult",
    "Operation",
    "ReplaceOne",
    "Retryability",
    "ReturnDocument",
    "SearchIndexModel",
    "ServerLimits",
    "UpdateMany",
    "UpdateOne",
    "UpdateResult",
    "WriteBatch",
    "WriteModel",
]
