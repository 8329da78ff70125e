""":class:`MaxKey` under the module name PyMongo's ``bson.max_key`` has."""

from mongio.bson.minmax import MaxKey

__all__ = ["MaxKey"]
