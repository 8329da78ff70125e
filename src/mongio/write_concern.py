"""PyMongo's ``pymongo.write_concern`` names."""

from mongio.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern

__all__ = ["DEFAULT_WRITE_CONCERN", "WriteConcern"]
