"""BSON binary data (type 0x05): :class:`Binary` with its subtypes, UUIDs in each representation, and vectors.

UUIDs follow the BSON Binary UUID specification: a ``uuid.UUID`` is only stored implicitly when a
:class:`UuidRepresentation` other than ``UNSPECIFIED`` is chosen (``STANDARD`` for new applications), and
:meth:`Binary.from_uuid` / :meth:`Binary.as_uuid` convert explicitly. Vectors (subtype 9) follow the BSON
Binary Vector specification: :meth:`Binary.from_vector` / :meth:`Binary.as_vector`.
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Final

from mongio.bson._type_marker import type_marker
from mongio.bson.errors import InvalidVector

# from_uuid's parameter is named ``uuid`` as in PyMongo, which hides the module inside it.
_UUID = uuid.UUID

__all__ = [
    "ALL_UUID_REPRESENTATIONS",
    "ALL_UUID_SUBTYPES",
    "BINARY_SUBTYPE",
    "COLUMN_SUBTYPE",
    "CSHARP_LEGACY",
    "ENCRYPTED_SUBTYPE",
    "FUNCTION_SUBTYPE",
    "JAVA_LEGACY",
    "MD5_SUBTYPE",
    "OLD_BINARY_SUBTYPE",
    "OLD_UUID_SUBTYPE",
    "PYTHON_LEGACY",
    "SENSITIVE_SUBTYPE",
    "STANDARD",
    "USER_DEFINED_SUBTYPE",
    "UUID_REPRESENTATION_NAMES",
    "UUID_SUBTYPE",
    "VECTOR_SUBTYPE",
    "Binary",
    "BinaryVector",
    "BinaryVectorDtype",
    "UuidRepresentation",
]

_BINARY_MARKER: Final = 5

BINARY_SUBTYPE: Final = 0
FUNCTION_SUBTYPE: Final = 1
OLD_BINARY_SUBTYPE: Final = 2
OLD_UUID_SUBTYPE: Final = 3
UUID_SUBTYPE: Final = 4
MD5_SUBTYPE: Final = 5
ENCRYPTED_SUBTYPE: Final = 6
COLUMN_SUBTYPE: Final = 7
SENSITIVE_SUBTYPE: Final = 8
VECTOR_SUBTYPE: Final = 9
USER_DEFINED_SUBTYPE: Final = 128

ALL_UUID_SUBTYPES: Final = (OLD_UUID_SUBTYPE, UUID_SUBTYPE)


class UuidRepresentation(enum.IntEnum):
    """How a native ``uuid.UUID`` is stored in BSON, and which binary subtype decodes back to one.

    ``UNSPECIFIED`` (the default) refuses to encode a ``uuid.UUID`` and decodes subtypes 3 and 4 to
    :class:`Binary`. ``STANDARD`` stores RFC 4122 byte order as subtype 4. The three legacy values store
    subtype 3 in the byte order an older driver used and decode only subtype 3 to ``uuid.UUID``.
    """

    UNSPECIFIED = 0
    PYTHON_LEGACY = 3
    STANDARD = 4
    JAVA_LEGACY = 5
    CSHARP_LEGACY = 6


# The representations as module constants and their display names, as PyMongo's bson.binary has them.
STANDARD: Final = UuidRepresentation.STANDARD
PYTHON_LEGACY: Final = UuidRepresentation.PYTHON_LEGACY
JAVA_LEGACY: Final = UuidRepresentation.JAVA_LEGACY
CSHARP_LEGACY: Final = UuidRepresentation.CSHARP_LEGACY
ALL_UUID_REPRESENTATIONS: Final = (
    UuidRepresentation.UNSPECIFIED,
    STANDARD,
    PYTHON_LEGACY,
    JAVA_LEGACY,
    CSHARP_LEGACY,
)
UUID_REPRESENTATION_NAMES: Final = {
    representation: f"UuidRepresentation.{representation.name}" for representation in UuidRepresentation
}


def _java_legacy_order(data: bytes) -> bytes:
    return data[7::-1] + data[15:7:-1]


def _csharp_legacy_order(data: bytes) -> bytes:
    return data[3::-1] + data[5:3:-1] + data[7:5:-1] + data[8:]


class BinaryVectorDtype(enum.Enum):
    """The element type of a vector (the first byte of a subtype 9 payload)."""

    INT8 = b"\x03"
    FLOAT32 = b"\x27"
    PACKED_BIT = b"\x10"


_DTYPES_BY_BYTE: Final = {dtype.value[0]: dtype for dtype in BinaryVectorDtype}


class BinaryVector:
    """A vector's elements, element type and padding (the count of ignored low bits in the last byte).

    For ``PACKED_BIT`` the elements are the packed bytes as ints in [0, 255]; ``padding`` (0 to 7) says how
    many low bits of the last byte are not part of the vector. Equality compares dtype, padding and data.
    """

    __slots__ = ("data", "dtype", "padding")

    def __init__(self, data: Sequence[float | int], dtype: BinaryVectorDtype, padding: int = 0) -> None:
        self.data = list(data)
        self.dtype = dtype
        self.padding = padding

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinaryVector):
            return NotImplemented
        return (self.dtype, self.padding, self.data) == (other.dtype, other.padding, other.data)

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"BinaryVector(dtype={self.dtype}, padding={self.padding}, data={self.data!r})"


def _check_padding(dtype: BinaryVectorDtype, padding: Any, count: int) -> None:
    if not isinstance(padding, int) or isinstance(padding, bool):
        raise InvalidVector(f"vector padding must be an int, not {type(padding).__name__}")
    if dtype is BinaryVectorDtype.PACKED_BIT:
        if not 0 <= padding <= 7:
            raise InvalidVector(f"PACKED_BIT vector padding must be in [0, 7], got {padding}")
        if padding and count == 0:
            raise InvalidVector("an empty PACKED_BIT vector must have padding 0")
    elif padding != 0:
        raise InvalidVector(f"{dtype.name} vectors take no padding, got {padding}")


def _pack_vector(values: list[Any], dtype: BinaryVectorDtype, padding: int) -> bytes:
    _check_padding(dtype, padding, len(values))
    if dtype is BinaryVectorDtype.FLOAT32:
        for value in values:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InvalidVector(f"FLOAT32 vector elements must be numbers, got {value!r}")
        try:
            return struct.pack(f"<{len(values)}f", *values)
        except (OverflowError, struct.error) as exc:
            raise InvalidVector(f"a FLOAT32 vector element is out of float32 range: {exc}") from None
    low, high = (-128, 127) if dtype is BinaryVectorDtype.INT8 else (0, 255)
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidVector(f"{dtype.name} vector elements must be ints, got {value!r}")
        if not low <= value <= high:
            raise InvalidVector(f"{dtype.name} vector elements must be in [{low}, {high}], got {value}")
    if dtype is BinaryVectorDtype.INT8:
        return struct.pack(f"<{len(values)}b", *values)
    if padding and values[-1] & ((1 << padding) - 1):
        raise InvalidVector(f"the {padding} ignored low bits of the last PACKED_BIT byte must be zero")
    return bytes(values)


class Binary(bytes):
    """BSON binary data with a subtype (0 to 255).

    ``bytes`` values encode as subtype 0 and subtype 0 decodes to ``bytes``; other subtypes decode to
    :class:`Binary`. Two :class:`Binary` values are equal when both their bytes and subtypes are; a
    :class:`Binary` never equals plain ``bytes``.
    """

    _type_marker = _BINARY_MARKER
    __subtype: int

    def __new__(cls, data: bytes | bytearray | memoryview, subtype: int = BINARY_SUBTYPE) -> Binary:
        if not isinstance(subtype, int) or isinstance(subtype, bool):
            raise TypeError(f"Binary subtype must be an int, not {type(subtype).__name__}")
        if not 0 <= subtype <= 255:
            raise ValueError(f"Binary subtype must be in [0, 255], got {subtype}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"Binary data must be bytes-like, not {type(data).__name__}")
        self = bytes.__new__(cls, data)
        self.__subtype = subtype
        return self

    @property
    def subtype(self) -> int:
        """The BSON binary subtype."""
        return self.__subtype

    @classmethod
    def from_uuid(cls, uuid: _UUID, uuid_representation: int = UuidRepresentation.STANDARD) -> Binary:
        """Store ``uuid`` in the given representation (subtype 4 for ``STANDARD``, 3 for the legacy ones).

        ``UNSPECIFIED`` raises ``ValueError``: a stored UUID must say which byte order it uses.
        """
        if not isinstance(uuid, _UUID):
            raise TypeError(f"from_uuid takes a uuid.UUID, not {type(uuid).__name__}")
        data = uuid.bytes
        if uuid_representation == UuidRepresentation.STANDARD:
            return cls(data, UUID_SUBTYPE)
        if uuid_representation == UuidRepresentation.PYTHON_LEGACY:
            return cls(data, OLD_UUID_SUBTYPE)
        if uuid_representation == UuidRepresentation.JAVA_LEGACY:
            return cls(_java_legacy_order(data), OLD_UUID_SUBTYPE)
        if uuid_representation == UuidRepresentation.CSHARP_LEGACY:
            return cls(_csharp_legacy_order(data), OLD_UUID_SUBTYPE)
        if uuid_representation == UuidRepresentation.UNSPECIFIED:
            raise ValueError(
                "cannot store a uuid.UUID with UuidRepresentation.UNSPECIFIED: choose STANDARD (or a legacy "
                "representation) or build the Binary with Binary.from_uuid(value, UuidRepresentation.STANDARD)"
            )
        raise ValueError(f"{uuid_representation!r} is not a UuidRepresentation")

    def as_uuid(self, uuid_representation: int = UuidRepresentation.STANDARD) -> uuid.UUID:
        """Read this binary as a ``uuid.UUID`` in the given representation.

        Raises ``ValueError`` when the subtype does not match the representation (4 for ``STANDARD``, 3 for
        the legacy ones), for ``UNSPECIFIED``, or when the data is not 16 bytes.
        """
        if uuid_representation not in _UUID_REPRESENTATIONS:
            raise ValueError(f"{uuid_representation!r} is not a UuidRepresentation")
        if uuid_representation == UuidRepresentation.UNSPECIFIED:
            raise ValueError("cannot read a UUID with UuidRepresentation.UNSPECIFIED")
        expected = UUID_SUBTYPE if uuid_representation == UuidRepresentation.STANDARD else OLD_UUID_SUBTYPE
        if self.__subtype != expected:
            raise ValueError(
                f"cannot read binary subtype {self.__subtype} as a UUID in representation "
                f"{UuidRepresentation(uuid_representation).name} (it needs subtype {expected})"
            )
        if len(self) != 16:
            raise ValueError(f"a UUID needs 16 bytes, this binary has {len(self)}")
        data = bytes(self)
        if uuid_representation == UuidRepresentation.JAVA_LEGACY:
            data = _java_legacy_order(data)
        elif uuid_representation == UuidRepresentation.CSHARP_LEGACY:
            data = _csharp_legacy_order(data)
        return uuid.UUID(bytes=data)

    @classmethod
    def from_vector(
        cls,
        vector: BinaryVector | Iterable[float | int],
        dtype: BinaryVectorDtype | None = None,
        padding: int | None = None,
    ) -> Binary:
        """Pack a vector as subtype 9: either a :class:`BinaryVector`, or numbers with their ``dtype``.

        Raises :class:`~mongio.bson.errors.InvalidVector` (a ``ValueError``) when an element does not fit the
        dtype or the padding breaks the vector rules (including non-zero ignored bits in ``PACKED_BIT``).
        """
        if isinstance(vector, BinaryVector):
            if dtype is not None or padding is not None:
                raise ValueError("pass dtype and padding inside the BinaryVector, not beside it")
            values, dtype, padding = vector.data, vector.dtype, vector.padding
        else:
            if dtype is None:
                raise ValueError("from_vector needs a dtype when given plain numbers")
            values = list(vector)
            padding = 0 if padding is None else padding
        if not isinstance(dtype, BinaryVectorDtype):
            raise InvalidVector(f"{dtype!r} is not a BinaryVectorDtype")
        payload = _pack_vector(values, dtype, padding)
        return cls(dtype.value + bytes((padding,)) + payload, VECTOR_SUBTYPE)

    def as_vector(self) -> BinaryVector:
        """Unpack a subtype 9 binary into a :class:`BinaryVector`, validating it.

        Raises :class:`~mongio.bson.errors.InvalidVector` for a wrong subtype, an unknown dtype, a bad
        padding, a FLOAT32 payload that is not a whole number of floats, or non-zero ignored bits.
        """
        if self.__subtype != VECTOR_SUBTYPE:
            raise InvalidVector(f"binary subtype {self.__subtype} is not a vector (subtype 9)")
        if len(self) < 2:
            raise InvalidVector("a vector needs at least its dtype and padding bytes")
        dtype = _DTYPES_BY_BYTE.get(self[0])
        if dtype is None:
            raise InvalidVector(f"unknown vector dtype 0x{self[0]:02x}")
        padding = self[1]
        payload = memoryview(self)[2:]
        _check_padding(dtype, padding, len(payload))
        values: list[Any]
        if dtype is BinaryVectorDtype.FLOAT32:
            if len(payload) % 4:
                raise InvalidVector(
                    f"a FLOAT32 vector payload must be a multiple of 4 bytes, got {len(payload)}"
                )
            values = list(struct.unpack(f"<{len(payload) // 4}f", payload))
        elif dtype is BinaryVectorDtype.INT8:
            values = list(struct.unpack(f"<{len(payload)}b", payload))
        else:
            values = list(payload)
            if padding and values[-1] & ((1 << padding) - 1):
                raise InvalidVector(
                    f"the {padding} ignored low bits of the last PACKED_BIT byte are not zero"
                )
        return BinaryVector(values, dtype, padding)

    def __getnewargs__(self) -> tuple[bytes, int]:  # type: ignore[override]
        return bytes(self), self.__subtype

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Binary):
            return self.__subtype == other.subtype and bytes.__eq__(self, other)
        if isinstance(other, bytes) and type_marker(other) == _BINARY_MARKER:
            # Another library's binary (PyMongo's): the same subtype and bytes are the same BSON value.
            return self.__subtype == getattr(other, "subtype", None) and bytes.__eq__(self, other)
        # Never equal to plain bytes: a subtype-0 Binary and bytes are different BSON values only by type.
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        # PyMongo's formula, so equal binaries of either library are one dict key.
        return bytes.__hash__(self) ^ hash(self.__subtype)

    def __repr__(self) -> str:
        if self.__subtype == 9 and len(self) >= 2 and self[0] in _DTYPES_BY_BYTE:
            return f"<Binary vector {_DTYPES_BY_BYTE[self[0]].name} padding={self[1]} {bytes(self)[2:]!r}>"
        return f"Binary({bytes(self)!r}, {self.__subtype})"


_UUID_REPRESENTATIONS: Final = frozenset(int(r) for r in UuidRepresentation)
