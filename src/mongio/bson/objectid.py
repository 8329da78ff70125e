"""The BSON ObjectId: 4-byte big-endian seconds, 5 random bytes per process, a 3-byte big-endian counter."""

from __future__ import annotations

import binascii
import datetime
import itertools
import os
import struct
import time
from typing import Any, Final

from mongio.bson._type_marker import type_marker
from mongio.bson.errors import InvalidId
from mongio.bson.tz_util import utc

__all__ = ["ObjectId", "reset_after_fork", "utc"]

_COUNTER_LIMIT: Final = 0xFFFFFF
_OBJECTID_MARKER: Final = 7
_PACK_SECONDS: Final = struct.Struct(">I").pack
_UTC: Final = datetime.UTC


def _fresh_process_state() -> tuple[bytes, itertools.count[int]]:
    # os.urandom draws from the OS pool without blocking; a counter from itertools.count is advanced
    # atomically by CPython, so ObjectIds can be made from several threads without a lock.
    return os.urandom(5), itertools.count(int.from_bytes(os.urandom(3), "big"))


_random, _counter = _fresh_process_state()


def reset_after_fork() -> None:
    """Draw the process's random bytes and counter anew: a forked child calls it (mongio's runtime does, in
    its fork hook) so as not to share its parent's and mint the same ids."""
    global _random, _counter
    _random, _counter = _fresh_process_state()


def generation_state() -> tuple[bytes, itertools.count[int]]:
    """The process's random bytes and counter, for the compiled encoder to make ids as ``ObjectId()`` does
    (read anew at every use: a forked child gets fresh ones)."""
    return _random, _counter


class ObjectId:
    """A 12-byte BSON ObjectId (type 0x07).

    ``ObjectId()`` makes a new, unique id; ``ObjectId("5f0c...")`` parses 24 hex digits; ``ObjectId(b12)``
    wraps 12 raw bytes; ``ObjectId(other)`` copies another ObjectId, PyMongo's included, which it also
    equals, orders against and hashes like. Ids order by creation second, then process, then counter, as their bytes do.
    """

    __slots__ = ("__id",)

    _type_marker = _OBJECTID_MARKER

    def __init__(self, oid: str | bytes | ObjectId | None = None) -> None:
        if oid is None:
            self.__id = (
                _PACK_SECONDS(int(time.time()) & 0xFFFFFFFF)
                + _random
                + (next(_counter) & _COUNTER_LIMIT).to_bytes(3, "big")
            )
        elif isinstance(oid, bytes) and len(oid) == 12:
            self.__id = bytes(oid)
        elif isinstance(oid, str):
            if len(oid) != 24:
                raise InvalidId(f"{oid!r} is not a valid ObjectId: it must be 24 hex digits or 12 bytes")
            try:
                parsed = bytes.fromhex(oid)
            except ValueError:
                parsed = b""
            if len(parsed) != 12:  # fromhex skips whitespace: "00112233445566778899aa  " parses short
                raise InvalidId(f"{oid!r} is not a valid ObjectId: it must be 24 hex digits")
            self.__id = parsed
        elif (data := _id_bytes(oid)) is not None:
            self.__id = data
        else:
            raise InvalidId(
                f"{oid!r} is not a valid ObjectId: expected 24 hex digits, 12 bytes or an ObjectId, "
                f"not {type(oid).__name__}"
            )

    @classmethod
    def _from_bytes(cls, data: bytes) -> ObjectId:
        # The decoder's fast path: the 12 bytes are already validated by their position in the document.
        oid = cls.__new__(cls)
        oid.__id = data
        return oid

    @classmethod
    def from_datetime(cls, generation_time: datetime.datetime) -> ObjectId:
        """An ObjectId for range queries on creation time: the given second, all other bytes zero.

        A naive ``datetime`` is taken as UTC. Never insert such an id: it is not unique.
        """
        if generation_time.utcoffset() is not None:
            generation_time = generation_time.astimezone(_UTC).replace(tzinfo=None)
        seconds = int((generation_time - datetime.datetime(1970, 1, 1)).total_seconds())
        if not 0 <= seconds <= 0xFFFFFFFF:
            raise ValueError(f"{generation_time} is outside the range an ObjectId can hold (1970 to 2106)")
        return cls(_PACK_SECONDS(seconds) + b"\x00" * 8)

    @classmethod
    def is_valid(cls, oid: Any) -> bool:
        """Whether ``oid`` is an ObjectId or something ``ObjectId(oid)`` accepts."""
        if not oid:
            return False
        try:
            ObjectId(oid)
        except (InvalidId, TypeError):
            return False
        return True

    @property
    def binary(self) -> bytes:
        """The 12 bytes of this id."""
        return self.__id

    @property
    def generation_time(self) -> datetime.datetime:
        """When the id was made, to the second, as an aware UTC ``datetime`` (the 4 leading bytes, unsigned)."""
        seconds = int.from_bytes(self.__id[:4], "big")
        return datetime.datetime.fromtimestamp(seconds, _UTC)

    def __getstate__(self) -> bytes:
        return self.__id

    def __setstate__(self, value: Any) -> None:
        # Older pickles stored a dict holding the id under a mangled name.
        if isinstance(value, dict):
            value = value.get("_ObjectId__id", value.get("__id"))
        if isinstance(value, str):
            value = value.encode("latin-1")
        self.__id = bytes(value)

    def __str__(self) -> str:
        return binascii.hexlify(self.__id).decode()

    def __repr__(self) -> str:
        return f"ObjectId('{self}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ObjectId):  # the common case, without a call
            return self.__id == other.__id
        other_id = _id_bytes(other)
        if other_id is None:
            return NotImplemented
        return self.__id == other_id

    def __ne__(self, other: object) -> bool:
        other_id = _id_bytes(other)
        if other_id is None:
            return NotImplemented
        return self.__id != other_id

    def __lt__(self, other: object) -> bool:
        other_id = _id_bytes(other)
        if other_id is None:
            return NotImplemented
        return self.__id < other_id

    def __le__(self, other: object) -> bool:
        other_id = _id_bytes(other)
        if other_id is None:
            return NotImplemented
        return self.__id <= other_id

    def __gt__(self, other: object) -> bool:
        other_id = _id_bytes(other)
        if other_id is None:
            return NotImplemented
        return self.__id > other_id

    def __ge__(self, other: object) -> bool:
        other_id = _id_bytes(other)
        if other_id is None:
            return NotImplemented
        return self.__id >= other_id

    def __hash__(self) -> int:
        # As PyMongo's ObjectId hashes, so equal ids of either library are one dict key.
        return hash(self.__id)


def _id_bytes(value: object) -> bytes | None:
    """The 12 bytes of an ObjectId of mongio or of another library following the ``_type_marker``
    convention (PyMongo's), or None for anything else."""
    if isinstance(value, ObjectId):
        return value.binary
    if type_marker(value) == _OBJECTID_MARKER:
        data = getattr(value, "binary", None)
        if isinstance(data, bytes) and len(data) == 12:
            return data
    return None
