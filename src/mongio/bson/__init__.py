"""BSON for mongio: the codec, the BSON value types and the codec options.

Names follow PyMongo's ``bson`` package, so code ports by changing the import::

    from mongio.bson import ObjectId, encode, decode

    data = encode({"_id": ObjectId(), "n": 1})
    assert decode(data)["n"] == 1
"""

from __future__ import annotations

from mongio.bson import errors
from mongio.bson.binary import (
    ALL_UUID_SUBTYPES,
    BINARY_SUBTYPE,
    COLUMN_SUBTYPE,
    ENCRYPTED_SUBTYPE,
    FUNCTION_SUBTYPE,
    MD5_SUBTYPE,
    OLD_BINARY_SUBTYPE,
    OLD_UUID_SUBTYPE,
    SENSITIVE_SUBTYPE,
    USER_DEFINED_SUBTYPE,
    UUID_SUBTYPE,
    VECTOR_SUBTYPE,
    Binary,
    BinaryVector,
    BinaryVectorDtype,
    UuidRepresentation,
)
from mongio.bson.code import Code
from mongio.bson.codec_options import (
    DEFAULT_CODEC_OPTIONS,
    CodecOptions,
    TypeCodec,
    TypeDecoder,
    TypeEncoder,
    TypeRegistry,
)
from mongio.bson.datetime_ms import DatetimeConversion, DatetimeMS
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.errors import (
    BSONError,
    InvalidBSON,
    InvalidDocument,
    InvalidId,
    InvalidStringData,
    InvalidVector,
)
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.regex import Regex
from mongio.bson.son import SON
from mongio.bson.timestamp import Timestamp

__all__ = [
    "ALL_UUID_SUBTYPES",
    "BINARY_SUBTYPE",
    "COLUMN_SUBTYPE",
    "DEFAULT_CODEC_OPTIONS",
    "ENCRYPTED_SUBTYPE",
    "FUNCTION_SUBTYPE",
    "MD5_SUBTYPE",
    "OLD_BINARY_SUBTYPE",
    "OLD_UUID_SUBTYPE",
    "SENSITIVE_SUBTYPE",
    "SON",
    "USER_DEFINED_SUBTYPE",
    "UUID_SUBTYPE",
    "VECTOR_SUBTYPE",
    "BSONError",
    "Binary",
    "BinaryVector",
    "BinaryVectorDtype",
    "Code",
    "CodecOptions",
    "DBPointer",
    "DBRef",
    "DatetimeConversion",
    "DatetimeMS",
    "Decimal128",
    "Int64",
    "InvalidBSON",
    "InvalidDocument",
    "InvalidId",
    "InvalidStringData",
    "InvalidVector",
    "MaxKey",
    "MinKey",
    "ObjectId",
    "Regex",
    "Symbol",
    "Timestamp",
    "TypeCodec",
    "TypeDecoder",
    "TypeEncoder",
    "TypeRegistry",
    "Undefined",
    "UuidRepresentation",
    "errors",
]
