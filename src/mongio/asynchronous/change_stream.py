"""``pymongo.asynchronous.change_stream``: the change stream classes under PyMongo's async names."""

from mongio.change_stream import (
    AsyncChangeStream,
    AsyncClusterChangeStream,
    AsyncCollectionChangeStream,
    AsyncDatabaseChangeStream,
)

__all__ = [
    "AsyncChangeStream",
    "AsyncClusterChangeStream",
    "AsyncCollectionChangeStream",
    "AsyncDatabaseChangeStream",
]
