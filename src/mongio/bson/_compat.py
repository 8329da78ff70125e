"""Package-level names of PyMongo's ``bson`` that ported code uses: the :class:`BSON` bytes class, the
element type bytes (``BSONNUM``, ``BSONSTR``, ...), and two helpers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any, Final

from mongio.bson._decoder import decode
from mongio.bson._encoder import encode
from mongio.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions

__all__ = [
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
    "gen_list_name",
    "get_data_and_view",
]

# The BSON element type bytes (bsonspec.org), under PyMongo's names.
BSONNUM: Final = b"\x01"  # double
BSONSTR: Final = b"\x02"  # string
BSONOBJ: Final = b"\x03"  # embedded document
BSONARR: Final = b"\x04"  # array
BSONBIN: Final = b"\x05"  # binary
BSONUND: Final = b"\x06"  # undefined (deprecated)
BSONOID: Final = b"\x07"  # ObjectId
BSONBOO: Final = b"\x08"  # boolean
BSONDAT: Final = b"\x09"  # UTC datetime
BSONNUL: Final = b"\x0a"  # null
BSONRGX: Final = b"\x0b"  # regular expression
BSONREF: Final = b"\x0c"  # DBPointer (deprecated)
BSONCOD: Final = b"\x0d"  # JavaScript code
BSONSYM: Final = b"\x0e"  # symbol (deprecated)
BSONCWS: Final = b"\x0f"  # JavaScript code with scope (deprecated)
BSONINT: Final = b"\x10"  # int32
BSONTIM: Final = b"\x11"  # timestamp
BSONLON: Final = b"\x12"  # int64
BSONDEC: Final = b"\x13"  # decimal128
BSONMIN: Final = b"\xff"  # MinKey
BSONMAX: Final = b"\x7f"  # MaxKey


class BSON(bytes):
    """BSON bytes with the encode and decode functions as methods, for code written against the older API::

        data = BSON.encode({"a": 1})
        assert data.decode() == {"a": 1}

    New code can call :func:`~mongio.bson.encode` and :func:`~mongio.bson.decode`, which this uses.
    """

    @classmethod
    def encode(
        cls,
        document: Mapping[str, Any],
        check_keys: bool = False,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> BSON:
        """``document`` encoded as a :class:`BSON` (see :func:`~mongio.bson.encode`)."""
        return cls(encode(document, check_keys, codec_options))

    def decode(self, codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> Any:  # type: ignore[override]
        """The document these bytes hold (see :func:`~mongio.bson.decode`)."""
        return decode(self, codec_options)


def gen_list_name() -> Iterator[bytes]:
    """The element names of a BSON array: ``b"0\\x00"``, ``b"1\\x00"``, ... without end."""
    for index in itertools.count():
        yield b"%d\x00" % index


def get_data_and_view(data: Any) -> tuple[Any, memoryview]:
    """``data`` and a memoryview of it; buffers other than bytes and bytearray are copied first, so the view
    cannot change under the reader."""
    if not isinstance(data, (bytes, bytearray)):
        data = memoryview(data).tobytes()
    return data, memoryview(data)
