"""The standard message header every wire message starts with, the opcodes, request ids, and the size limits
a server announces (which bound, among other things, the length a header may claim)."""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from mongio.errors import ProtocolError

__all__ = [
    "DEFAULT_MAX_BSON_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_MAX_WRITE_BATCH_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "MAX_BSON_SIZE_CEILING",
    "MAX_MESSAGE_SIZE_CEILING",
    "MAX_WRITE_BATCH_SIZE_CEILING",
    "OP_COMPRESSED",
    "OP_MSG",
    "OP_QUERY",
    "OP_REPLY",
    "MessageHeader",
    "ServerLimits",
    "announced_limits",
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

# The most a server's hello is believed for each limit. MongoDB announces exactly the defaults above
# (maxWriteBatchSize since 3.6; 1,000 before). The ceilings leave room for a server that raises them: four
# times each size, ten times the batch (a count of statements, whose bytes the message size bounds anyway).
# A larger claim is lowered to the ceiling: believed, a hello claiming a terabyte would let any later reply's
# header claim up to 2 GiB, the most a length field holds. Sending less than a server allows is always safe,
# and no reply of a real server comes near the ceilings (a reply is one document of at most
# maxBsonObjectSize, or a batch of them within maxMessageSizeBytes).
MAX_BSON_SIZE_CEILING = 4 * DEFAULT_MAX_BSON_SIZE  # 64 MiB
MAX_MESSAGE_SIZE_CEILING = 4 * DEFAULT_MAX_MESSAGE_SIZE
MAX_WRITE_BATCH_SIZE_CEILING = 10 * DEFAULT_MAX_WRITE_BATCH_SIZE

_MAX_REQUEST_ID = 0x7FFFFFFF


def positive_ids(start: int) -> Iterator[int]:
    """Positive int32 ids from ``start`` up to the largest, then from 1 again, without end: ids wrap around
    well before they could collide in flight."""
    every_id = range(1, _MAX_REQUEST_ID + 1)
    return itertools.chain(range(start, _MAX_REQUEST_ID + 1), itertools.chain.from_iterable(itertools.repeat(every_id)))


# A random start makes request ids from two clients of one server unlikely to look related in its logs.
next_request_id: Callable[[], int] = positive_ids(random.randint(1, 1 << 24)).__next__
"""A fresh positive int32 request id (the iterator's own ``__next__``: one call per message, no wrapper)."""


class ServerLimits(NamedTuple):
    """The size limits a server announced in its hello, made sane by ``announced_limits``."""

    max_bson_size: int
    max_message_size: int
    max_write_batch_size: int


def announced_limits(hello: Mapping[str, Any]) -> ServerLimits:
    """The ``maxBsonObjectSize``, ``maxMessageSizeBytes`` and ``maxWriteBatchSize`` of a hello reply: a value
    that is not a positive integer is taken as absent (the server default), one above its ceiling
    (``MAX_*_CEILING``) is lowered to it."""
    return ServerLimits(
        _announced(hello.get("maxBsonObjectSize"), DEFAULT_MAX_BSON_SIZE, MAX_BSON_SIZE_CEILING),
        _announced(hello.get("maxMessageSizeBytes"), DEFAULT_MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE_CEILING),
        _announced(
            hello.get("maxWriteBatchSize"), DEFAULT_MAX_WRITE_BATCH_SIZE, MAX_WRITE_BATCH_SIZE_CEILING
        ),
    )


def _announced(value: Any, default: int, ceiling: int) -> int:
    # A double holding a whole number is as good as an integer; a bool is not a size.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return default
    return min(value, ceiling)


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
