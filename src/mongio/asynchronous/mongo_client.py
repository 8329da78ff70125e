"""``pymongo.asynchronous.mongo_client``: :class:`AsyncMongoClient` is :class:`mongio.MongoClient`."""

from mongio.client import AsyncMongoClient

__all__ = ["AsyncMongoClient"]
