"""``pymongo.asynchronous.bulk``: PyMongo keeps its bulk write machinery here; its public face is the
write models and results, which mongio gives under the same names."""

from mongio.operations.models import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from mongio.operations.results import BulkWriteResult

__all__ = ["BulkWriteResult", "DeleteMany", "DeleteOne", "InsertOne", "ReplaceOne", "UpdateMany", "UpdateOne"]
