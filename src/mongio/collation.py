"""PyMongo's ``pymongo.collation`` names: :class:`Collation` and its setting constants."""

from mongio.options.collation import (
    Collation,
    CollationAlternate,
    CollationCaseFirst,
    CollationMaxVariable,
    CollationStrength,
    collation_document,
)

validate_collation_or_none = collation_document

__all__ = [
    "Collation",
    "CollationAlternate",
    "CollationCaseFirst",
    "CollationMaxVariable",
    "CollationStrength",
    "validate_collation_or_none",
]
