"""PyMongo's ``pymongo.read_preferences`` names: the five modes and the helpers that build them."""

from mongio.options.read_preference import (
    Nearest,
    Primary,
    PrimaryPreferred,
    ReadPreference,
    ReadPreferenceMode,
    Secondary,
    SecondaryPreferred,
    make_read_preference,
    read_pref_mode_from_name,
)

__all__ = [
    "Nearest",
    "Primary",
    "PrimaryPreferred",
    "ReadPreference",
    "ReadPreferenceMode",
    "Secondary",
    "SecondaryPreferred",
    "make_read_preference",
    "read_pref_mode_from_name",
]
