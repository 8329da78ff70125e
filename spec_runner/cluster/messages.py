"""Reading, decoding and building wire messages for the cluster harness's proxies.

Built on mongio's own codec (``mongio.wire``, ``mongio.bson``): the harness is test infrastructure, and the
driver's codec is already shown correct against the test server by the rest of the suite.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import decode, encode
from mongio.wire import (
    COMPRESSOR_IDS,
    HEADER,
    HEADER_SIZE,
    OP_MSG,
    OP_QUERY,
    Compressor,
    OpMsg,
    OpMsgFlags,
    OpQuery,
    compress_message,
    encode_op_msg,
    encode_op_reply,
    next_request_id,
    parse_message,
)
from mongio.wire.compression import decompress_message

COMPRESSOR_NAMES = {number: name for name, number in COMPRESSOR_IDS.items()}
MAX_MESSAGE_SIZE = 48_000_000 * 2


async def read_message(reader: asyncio.StreamReader) -> bytes:
    """One whole message, header included (``IncompleteReadError`` when the peer hangs up)."""
    header = await reader.readexactly(HEADER_SIZE)
    length = int.from_bytes(header[:4], "little", signed=True)
    if length < HEADER_SIZE or length > MAX_MESSAGE_SIZE:
        raise ConnectionError(f"a message header announced {length} bytes")
    return header + await reader.readexactly(length - HEADER_SIZE)


@dataclass
class Message:
    """A request or reply as received, and the uncompressed form it carries."""

    raw: bytes
    """Exactly what came off the wire."""
    plain: bytes
    """The same message uncompressed (``raw`` itself when it was not compressed)."""
    request_id: int
    response_to: int
    opcode: int
    compressor_id: int | None
    flags: int
    document: dict[str, Any]
    sequences: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def command_name(self) -> str:
        return next(iter(self.document), "")

    @property
    def more_to_come(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & OpMsgFlags.MORE_TO_COME)

    @property
    def exhaust_allowed(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & OpMsgFlags.EXHAUST_ALLOWED)

    @property
    def compressor_name(self) -> str | None:
        return None if self.compressor_id is None else COMPRESSOR_NAMES.get(self.compressor_id)


def parse(raw: bytes) -> Message:
    """Decode a whole OP_MSG or OP_QUERY (possibly wrapped in OP_COMPRESSED)."""
    parsed = parse_message(raw, MAX_MESSAGE_SIZE)
    plain = raw
    if parsed.compressor_id is not None:
        opcode, _compressor, payload = decompress_message(memoryview(raw), MAX_MESSAGE_SIZE)
        header = HEADER.pack(HEADER_SIZE + len(payload), parsed.request_id, parsed.response_to, opcode)
        plain = header + bytes(payload)
    content = parsed.content
    sequences: dict[str, list[dict[str, Any]]] = {}
    if isinstance(content, OpMsg):
        flags = content.flags
        document = decode(content.body)
        sequences = {name: [decode(doc) for doc in docs] for name, docs in content.sequences.items()}
    elif isinstance(content, OpQuery):
        flags = content.flags
        document = decode(content.query)
    else:
        raise ConnectionError(f"unexpected opcode {parsed.opcode} in a request")
    return Message(
        raw=raw,
        plain=plain,
        request_id=parsed.request_id,
        response_to=parsed.response_to,
        opcode=parsed.opcode,
        compressor_id=parsed.compressor_id,
        flags=flags,
        document=document,
        sequences=sequences,
    )


def parse_reply_document(plain: bytes) -> tuple[int, dict[str, Any]]:
    """(flags, body) of an uncompressed OP_MSG reply."""
    parsed = parse_message(plain, MAX_MESSAGE_SIZE)
    content = parsed.content
    if not isinstance(content, OpMsg):
        raise ConnectionError(f"the backend answered with opcode {parsed.opcode}")
    return content.flags, decode(content.body)


def uncompressed(raw: bytes) -> bytes:
    """``raw`` without its OP_COMPRESSED wrapping (unchanged when it has none)."""
    if int.from_bytes(raw[12:16], "little") != 2012:
        return raw
    opcode, _compressor, payload = decompress_message(memoryview(raw), MAX_MESSAGE_SIZE)
    request_id = int.from_bytes(raw[4:8], "little", signed=True)
    response_to = int.from_bytes(raw[8:12], "little", signed=True)
    return HEADER.pack(HEADER_SIZE + len(payload), request_id, response_to, opcode) + bytes(payload)


def build_request(document: dict[str, Any], sequences: dict[str, list[dict[str, Any]]], flags: int) -> bytes:
    """A fresh OP_MSG carrying ``document`` (and its sequences) to the backend."""
    encoded = [(name, [encode(doc) for doc in docs]) for name, docs in sequences.items()]
    checksum_free = flags & ~int(OpMsgFlags.CHECKSUM_PRESENT)
    return bytes(encode_op_msg(next_request_id(), encode(document), encoded, checksum_free))


def build_reply(
    request: Message,
    document: dict[str, Any],
    *,
    more_to_come: bool = False,
    compressor: str | None = None,
    response_to: int | None = None,
) -> bytes:
    """A reply to ``request`` in its own opcode, compressed with ``compressor`` when given (``response_to``:
    the previous reply's id, for the next reply of an exhaust stream)."""
    body = encode(document)
    answering = request.request_id if response_to is None else response_to
    if request.opcode == OP_QUERY:
        message = bytes(encode_op_reply(next_request_id(), answering, [body]))
    else:
        flags = OpMsgFlags.MORE_TO_COME if more_to_come else 0
        message = bytes(encode_op_msg(next_request_id(), body, flags=flags, response_to=answering))
    return compress(message, compressor)


def compress(message: bytes, compressor: str | None) -> bytes:
    if compressor is None or compressor == "noop":
        return message
    return bytes(compress_message(message, Compressor(compressor)))


def request_id_of(message: bytes) -> int:
    return int.from_bytes(message[4:8], "little", signed=True)


def retarget(message: bytes, response_to: int) -> bytes:
    """``message`` (uncompressed) answering ``response_to`` instead."""
    out = bytearray(message)
    out[8:12] = response_to.to_bytes(4, "little", signed=True)
    return bytes(out)
