""":class:`MinKey` under the module name PyMongo's ``bson.min_key`` has."""

from mongio.bson.minmax import MinKey

__all__ = ["MinKey"]
