"""PyMongo's ``pymongo.read_concern`` names."""

from mongio.options.read_concern import DEFAULT_READ_CONCERN, ReadConcern

__all__ = ["DEFAULT_READ_CONCERN", "ReadConcern"]
