"""BSON for mongio: the codec, the BSON value types and the codec options.

Names follow PyMongo's ``bson`` package, so code ports by changing the import::

    from mongio.bson import ObjectId, encode, decode

    data = encode({"_id": ObjectId(), "n": 1})
    assert decode(data)["n"] == 1
"""

from __future__ import annotations

# The codec's two modules are the reference implementation; when the optional C extension was built, its
# element loops run inside them (see ``_speedups.c``), with the same results and errors.
from mongio.bson import _decoder, errors
from mongio.bson._decoder import decode, decode_all, decode_file_iter, decode_iter
from mongio.bson._encoder import MAX_BSON_SIZE, encode
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
from mongio.bson.raw import RawBSONDocument
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
    "MAX_BSON_SIZE",
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
    "RawBSONDocument",
    "Regex",
    "Symbol",
    "Timestamp",
    "TypeCodec",
    "TypeDecoder",
    "TypeEncoder",
    "TypeRegistry",
    "Undefined",
    "UuidRepresentation",
    "decode",
    "decode_all",
    "decode_file_iter",
    "decode_iter",
    "encode",
    "errors",
    "has_c",
    "is_valid",
]


def is_valid(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is exactly one well-formed BSON document (every value decodable)."""
    try:
        decode(data)
    except InvalidBSON:
        return False
    return True


def has_c() -> bool:
    """Whether the compiled element loops are in use (False: the pure-Python ones, because the C extension
    was not built or ``MONGIO_NO_SPEEDUPS`` is set)."""
    return _decoder._read_document is not _decoder._python_read_document
