"""PyMongo's ``pymongo.results`` names: the result of each write."""

from mongio.operations.results import (
    BulkWriteResult,
    ClientBulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)

__all__ = [
    "BulkWriteResult",
    "ClientBulkWriteResult",
    "DeleteResult",
    "InsertManyResult",
    "InsertOneResult",
    "UpdateResult",
]
