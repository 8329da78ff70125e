"""The standard message header every wire message starts with, the opcodes, and request ids."""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from mongio.errors import ProtocolError

__all__ = [
    "DEFAULT_MAX_BSON_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_MAX_WRITE_BATCH_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "OP_COMPRESSED",
    "OP_MSG",
    "OP_QUERY",
    "OP_REPLY",
    "MessageHeader",
    "next_request_id",
    "parse_header",
]

OP_REPLY = 1
OP_QUERY = 2004
OP_COMPRESSED = 2012
OP_MSG = 2013

HEADER = struct.Struct("<iiii")
HEADER_SIZE = HEADER.size

# What a server allows when its handshake reply does not say otherwise.
DEFAULT_MAX_BSON_SIZE = 16 * 1024 * 1024
# The maxWriteBatchSize of a server whose hello does not say (every server since 3.6 says 100,000).
DEFAULT_MAX_WRITE_BATCH_SIZE = 100_000
DEFAULT_MAX_MESSAGE_SIZE = 48_000_000

_MAX_REQUEST_ID = 0x7FFFFFFF


def positive_ids(start: int) -> Iterator[int]:
    """Positive int32 ids from ``start`` up to the largest, then from 1 again, without end: ids wrap around
    well before they could collide in flight."""
    every_id = range(1, _MAX_REQUEST_ID + 1)
    return itertools.chain(range(start, _MAX_REQUEST_ID + 1), itertools.chain.from_iterable(itertools.repeat(every_id)))


# A random start makes request ids from two clients of one server unlikely to look related in its logs.
next_request_id: Callable[[], int] = positive_ids(random.randint(1, 1 << 24)).__next__
"""A fresh positive int32 request id (the iterator's own ``__next__``: one call per message, no wrapper)."""


class MessageHeader(NamedTuple):
    """The 16-byte header: total length, request id, the request it answers, and the opcode."""

    length: int
    request_id: int
    response_to: int
    opcode: int


def parse_header(
    data: bytes | bytearray | memoryview, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
) -> MessageHeader:
    """Parse and check a header; a length that cannot be a message raises ``ProtocolError``."""
    if len(data) < HEADER_SIZE:
        raise ProtocolError(f"a message header needs {HEADER_SIZE} bytes, got {len(data)}")
    header = MessageHeader._make(HEADER.unpack_from(data))
    check_message_length(header.length, max_message_size)
    return header


def check_message_length(length: int, max_message_size: int) -> None:
    if length < HEADER_SIZE:
        raise ProtocolError(f"message length {length} is shorter than its own {HEADER_SIZE}-byte header")
    if length > max_message_size:
        raise ProtocolError(
            f"message length {length} exceeds the maximum message size {max_message_size} (maxMessageSizeBytes)"
        )
