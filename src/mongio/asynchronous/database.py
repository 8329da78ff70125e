"""``pymongo.asynchronous.database``: :class:`AsyncDatabase` is :class:`mongio.Database`."""

from mongio.database import Database

AsyncDatabase = Database

__all__ = ["AsyncDatabase"]
