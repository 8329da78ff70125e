"""BSON for mongio: the codec, the BSON value types and the codec options.

Names follow PyMongo's ``bson`` package, so code ports by changing the import::

    from mongio.bson import ObjectId, encode, decode

    data = encode({"_id": ObjectId(), "n": 1})
    assert decode(data)["n"] == 1
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

# The codec's two modules are the reference implementation; when the optional C extension was built, its
# element loops run inside them (see ``_speedups.c``), with the same results and errors.
from mongio.bson import (
    _decoder,
    binary,
    code,
    codec_options,
    datetime_ms,
    dbref,
    decimal128,
    errors,
    int64,
    max_key,
    min_key,
    objectid,
    raw_bson,
    regex,
    son,
    timestamp,
    typings,
    tz_util,
)
from mongio.bson._compat import (
    BSON,
    BSONARR,
    BSONBIN,
    BSONBOO,
    BSONCOD,
    BSONCWS,
    BSONDAT,
    BSONDEC,
    BSONINT,
    BSONLON,
    BSONMAX,
    BSONMIN,
    BSONNUL,
    BSONNUM,
    BSONOBJ,
    BSONOID,
    BSONREF,
    BSONRGX,
    BSONSTR,
    BSONSYM,
    BSONTIM,
    BSONUND,
    gen_list_name,
    get_data_and_view,
)
from mongio.bson._decoder import decode, decode_all, decode_file_iter, decode_iter
from mongio.bson._encoder import MAX_BSON_SIZE, encode
from mongio.bson.binary import (
    ALL_UUID_REPRESENTATIONS,
    ALL_UUID_SUBTYPES,
    BINARY_SUBTYPE,
    COLUMN_SUBTYPE,
    CSHARP_LEGACY,
    ENCRYPTED_SUBTYPE,
    FUNCTION_SUBTYPE,
    JAVA_LEGACY,
    MD5_SUBTYPE,
    OLD_BINARY_SUBTYPE,
    OLD_UUID_SUBTYPE,
    PYTHON_LEGACY,
    SENSITIVE_SUBTYPE,
    STANDARD,
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
from mongio.bson.datetime_ms import EPOCH_AWARE, EPOCH_NAIVE, DatetimeConversion, DatetimeMS
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
from mongio.bson.tz_util import utc

if TYPE_CHECKING:
    from mongio.bson import json_util

# Imported on first use (PEP 562): most programs never convert to or from extended JSON.
_LAZY_SUBMODULES = frozenset({"json_util"})

RE_TYPE = re.Pattern
"""The type of compiled regular expressions, which encode as BSON regular expressions."""

__all__ = [
    "ALL_UUID_REPRESENTATIONS",
    "ALL_UUID_SUBTYPES",
    "BINARY_SUBTYPE",
    "BSON",
    "BSONARR",
    "BSONBIN",
    "BSONBOO",
    "BSONCOD",
    "BSONCWS",
    "BSONDAT",
    "BSONDEC",
    "BSONINT",
    "BSONLON",
    "BSONMAX",
    "BSONMIN",
    "BSONNUL",
    "BSONNUM",
    "BSONOBJ",
    "BSONOID",
    "BSONREF",
    "BSONRGX",
    "BSONSTR",
    "BSONSYM",
    "BSONTIM",
    "BSONUND",
    "COLUMN_SUBTYPE",
    "CSHARP_LEGACY",
    "DEFAULT_CODEC_OPTIONS",
    "ENCRYPTED_SUBTYPE",
    "EPOCH_AWARE",
    "EPOCH_NAIVE",
    "FUNCTION_SUBTYPE",
    "JAVA_LEGACY",
    "MAX_BSON_SIZE",
    "MD5_SUBTYPE",
    "OLD_BINARY_SUBTYPE",
    "OLD_UUID_SUBTYPE",
    "PYTHON_LEGACY",
    "RE_TYPE",
    "SENSITIVE_SUBTYPE",
    "SON",
    "STANDARD",
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
    "binary",
    "code",
    "codec_options",
    "datetime_ms",
    "dbref",
    "decimal128",
    "decode",
    "decode_all",
    "decode_file_iter",
    "decode_iter",
    "encode",
    "errors",
    "gen_list_name",
    "get_data_and_view",
    "has_c",
    "int64",
    "is_valid",
    "json_util",
    "max_key",
    "min_key",
    "objectid",
    "raw_bson",
    "regex",
    "son",
    "timestamp",
    "typings",
    "tz_util",
    "utc",
]


def is_valid(bson: bytes | bytearray | memoryview) -> bool:
    """Whether ``bson`` is exactly one well-formed BSON document (every value decodable); the parameter's
    name is PyMongo's."""
    try:
        decode(bson)
    except InvalidBSON:
        return False
    return True


def has_c() -> bool:
    """Whether the compiled element loops are in use (False: the pure-Python ones, because the C extension
    was not built or ``MONGIO_NO_SPEEDUPS`` is set)."""
    return _decoder._read_document is not _decoder._python_read_document


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})
