"""OP_QUERY and OP_REPLY, kept only for a legacy hello to servers that predate OP_MSG handshakes.

Encoding a query and parsing a reply is what a driver needs; the reverse pair lets a test peer answer.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from mongio.errors import ProtocolError
from mongio.wire.header import HEADER, HEADER_SIZE, OP_QUERY, OP_REPLY

__all__ = [
    "QUERY_FAILURE",
    "OpQuery",
    "OpReply",
    "encode_op_query",
    "encode_op_reply",
    "parse_op_query",
    "parse_op_reply",
]

_INT32 = struct.Struct("<i")
_SKIP_AND_RETURN = struct.Struct("<ii")
_REPLY_FIELDS = struct.Struct("<iqii")  # responseFlags, cursorID, startingFrom, numberReturned

CURSOR_NOT_FOUND = 1 << 0
QUERY_FAILURE = 1 << 1


def encode_op_query(
    request_id: int,
    full_collection_name: str,
    query: bytes | bytearray | memoryview,
    *,
    flags: int = 0,
    number_to_skip: int = 0,
    number_to_return: int = -1,
) -> bytearray:
    """A complete OP_QUERY; for a command, ``full_collection_name`` is ``"<db>.$cmd"`` and return is -1."""
    out = bytearray(HEADER_SIZE)
    out += _INT32.pack(flags)
    out += full_collection_name.encode()
    out.append(0)
    out += _SKIP_AND_RETURN.pack(number_to_skip, number_to_return)
    out += query
    HEADER.pack_into(out, 0, len(out), request_id, 0, OP_QUERY)
    return out


class OpQuery(NamedTuple):
    flags: int
    full_collection_name: str
    number_to_skip: int
    number_to_return: int
    query: memoryview


def parse_op_query(payload: bytes | bytearray | memoryview) -> OpQuery:
    """Parse the part of an OP_QUERY after its header (any returnFieldsSelector is ignored)."""
    view = memoryview(payload)
    if len(view) < 4 + 1 + 8 + 5:
        raise ProtocolError(f"OP_QUERY of {len(view) + HEADER_SIZE} bytes is too short")
    flags = _INT32.unpack_from(view)[0]
    terminator = bytes(view[4:]).find(b"\x00")
    if terminator < 0:
        raise ProtocolError("OP_QUERY collection name is not NUL-terminated")
    name = bytes(view[4 : 4 + terminator]).decode("utf-8", "replace")
    offset = 4 + terminator + 1
    if len(view) - offset < 8 + 5:
        raise ProtocolError("OP_QUERY is cut short after its collection name")
    skip, to_return = _SKIP_AND_RETURN.unpack_from(view, offset)
    offset += 8
    size = _INT32.unpack_from(view, offset)[0]
    if size < 5 or offset + size > len(view):
        raise ProtocolError(f"OP_QUERY query document length {size} does not fit the message")
    return OpQuery(flags, name, skip, to_return, view[offset : offset + size])


def encode_op_reply(
    request_id: int,
    response_to: int,
    documents: list[bytes],
    *,
    response_flags: int = 0,
    cursor_id: int = 0,
    starting_from: int = 0,
) -> bytearray:
    out = bytearray(HEADER_SIZE)
    out += _REPLY_FIELDS.pack(response_flags, cursor_id, starting_from, len(documents))
    for document in documents:
        out += document
    HEADER.pack_into(out, 0, len(out), request_id, response_to, OP_REPLY)
    return out


class OpReply(NamedTuple):
    """A parsed OP_REPLY; ``documents`` are views into the parsed buffer."""

    response_flags: int
    cursor_id: int
    starting_from: int
    documents: list[memoryview]


def parse_op_reply(payload: bytes | bytearray | memoryview) -> OpReply:
    """Parse the part of an OP_REPLY after its header; its documents must exactly fill the message."""
    view = memoryview(payload)
    if len(view) < _REPLY_FIELDS.size:
        raise ProtocolError(f"OP_REPLY of {len(view) + HEADER_SIZE} bytes is too short")
    flags, cursor_id, starting_from, count = _REPLY_FIELDS.unpack_from(view)
    documents: list[memoryview] = []
    offset = _REPLY_FIELDS.size
    for index in range(count):
        if len(view) - offset < 5:
            raise ProtocolError(f"OP_REPLY announces {count} documents but holds only {index}")
        size = _INT32.unpack_from(view, offset)[0]
        if size < 5 or offset + size > len(view):
            raise ProtocolError(f"OP_REPLY document {index} has length {size} that does not fit the message")
        documents.append(view[offset : offset + size])
        offset += size
    if offset != len(view):
        raise ProtocolError(f"OP_REPLY has {len(view) - offset} bytes after its {count} documents")
    return OpReply(flags, cursor_id, starting_from, documents)
