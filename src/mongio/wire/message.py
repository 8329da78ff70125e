"""Parse any complete message: check its header, unwrap OP_COMPRESSED, dispatch on the opcode."""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from mongio.errors import ProtocolError
from mongio.wire.compression import decompress_message
from mongio.wire.header import (
    DEFAULT_MAX_MESSAGE_SIZE,
    HEADER,
    HEADER_SIZE,
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    OP_REPLY,
    MessageHeader,
    parse_header,
)
from mongio.wire.legacy import OpQuery, OpReply, parse_op_query, parse_op_reply
from mongio.wire.op_msg import OpMsg, parse_op_msg

__all__ = ["ParsedMessage", "parse_message"]


class ParsedMessage(NamedTuple):
    """A message as received: its header, the opcode it carries (the wrapped one when it came as
    OP_COMPRESSED), the compressor id it came with (None when it was not compressed), and its content."""

    header: MessageHeader
    opcode: int
    compressor_id: int | None
    content: OpMsg | OpReply | OpQuery

    @property
    def request_id(self) -> int:
        return self.header.request_id

    @property
    def response_to(self) -> int:
        return self.header.response_to


def parse_message(
    message: bytes | bytearray | memoryview,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    accepted_compressors: Collection[int] | None = None,
) -> ParsedMessage:
    """Parse one complete message (header included); its length must match the header's.

    Views in the result point into ``message`` (or into the decompressed copy), so decode them before the
    buffer is reused. Raises ``ProtocolError`` for anything malformed, and for an OP_COMPRESSED message whose
    compressor id is not in ``accepted_compressors`` (None: any compressor, as when reading requests).
    """
    view = memoryview(message)
    header = parse_header(view, max_message_size)
    if header.length != len(view):
        raise ProtocolError(f"message header says {header.length} bytes, {len(view)} were given")
    opcode = header.opcode
    compressor_id: int | None = None
    payload: bytes | bytearray | memoryview = view[HEADER_SIZE:]
    header_bytes: bytes | memoryview = view[:HEADER_SIZE]
    if opcode == OP_COMPRESSED:
        opcode, compressor_id, payload = decompress_message(view, max_message_size, accepted_compressors)
        # A checksum covers the message as it would look uncompressed, header included.
        header_bytes = HEADER.pack(HEADER_SIZE + len(payload), header.request_id, header.response_to, opcode)
    content: OpMsg | OpReply | OpQuery
    if opcode == OP_MSG:
        content = parse_op_msg(payload, header_bytes)
    elif opcode == OP_REPLY:
        content = parse_op_reply(payload)
    elif opcode == OP_QUERY:
        content = parse_op_query(payload)
    else:
        raise ProtocolError(f"unsupported opcode {opcode}")
    return ParsedMessage(header, opcode, compressor_id, content)
