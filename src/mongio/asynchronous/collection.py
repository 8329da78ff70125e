"""``pymongo.asynchronous.collection``: :class:`AsyncCollection` is :class:`mongio.Collection`."""

from mongio.collection import Collection
from mongio.operations.models import ReturnDocument

AsyncCollection = Collection

__all__ = ["AsyncCollection", "ReturnDocument"]
