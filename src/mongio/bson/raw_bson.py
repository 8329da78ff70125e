""":class:`RawBSONDocument` and its codec options under the module name PyMongo's ``bson.raw_bson`` has."""

from typing import Final

from mongio.bson.codec_options import CodecOptions
from mongio.bson.raw import DEFAULT_RAW_BSON_OPTIONS, RawBSONDocument

__all__ = ["DEFAULT", "DEFAULT_RAW_BSON_OPTIONS", "CodecOptions", "RawBSONDocument"]

DEFAULT: Final = DEFAULT_RAW_BSON_OPTIONS
"""The same options as :data:`DEFAULT_RAW_BSON_OPTIONS` (PyMongo's older name)."""
