"""OP_MSG: the one opcode of requests and replies. Sans-I/O: bytes in, bytes (or views of them) out.

A message is a header, ``flagBits``, exactly one kind-0 section (the command or reply document), any number of
kind-1 sections (document sequences, e.g. an insert's ``documents``), and an optional CRC-32C checksum.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

# Documents are written straight into the message: no intermediate bytes, no copy.
from mongio.bson._encoder import encode_into as _encode_into
from mongio.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.errors import DocumentTooLarge, ProtocolError
from mongio.wire.compression import Compressor, compress_message, may_compress
from mongio.wire.crc32c import crc32c
from mongio.wire.header import (
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    HEADER,
    HEADER_SIZE,
    OP_MSG,
)

__all__ = [
    "CHECKSUM_PRESENT",
    "COMMAND_OVERHEAD",
    "EXHAUST_ALLOWED",
    "LARGE_PACKED_SIZE",
    "MORE_TO_COME",
    "REQUIRED_BITS_MASK",
    "OpMsg",
    "OpMsgFlags",
    "PackedDocuments",
    "encode_command",
    "encode_command_parts",
    "encode_op_msg",
    "parse_op_msg",
]


class PackedDocuments(NamedTuple):
    """Documents already encoded back to back (an insert's batch, encoded in one pass) and already checked
    against ``maxBsonObjectSize`` one by one: a document sequence takes them with one copy."""

    data: bytes | bytearray | memoryview


class OpMsgFlags(enum.IntFlag):
    """The ``flagBits`` of an OP_MSG."""

    CHECKSUM_PRESENT = 1 << 0
    MORE_TO_COME = 1 << 1
    EXHAUST_ALLOWED = 1 << 16


# Plain ints for the hot paths: IntFlag arithmetic costs a Python-level call per operation.
CHECKSUM_PRESENT = 1 << 0
MORE_TO_COME = 1 << 1
EXHAUST_ALLOWED = 1 << 16
# Bits 0-15 are "required": a receiver must reject any it does not know. Bits 16-31 are optional and ignored.
_KNOWN_REQUIRED_BITS = CHECKSUM_PRESENT | MORE_TO_COME
REQUIRED_BITS_MASK = 0xFFFF

# A command document may exceed maxBsonObjectSize by this much, so that a maximum-size user document still fits
# in a command that wraps it; servers allow the same.
COMMAND_OVERHEAD = 16 * 1024

_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")
_FLAGS_AND_KIND0 = struct.Struct("<IB")


def encode_op_msg(
    request_id: int,
    body: bytes | bytearray | memoryview,
    sequences: Sequence[tuple[str, Sequence[bytes | bytearray | memoryview]]] = (),
    flags: int = 0,
    *,
    response_to: int = 0,
    checksum: bool = False,
) -> bytearray:
    """A complete OP_MSG from an already-encoded body document and encoded document sequences.

    ``checksum`` appends a CRC-32C; the driver never sends one, it exists so tests can build such messages.
    """
    if checksum:
        flags |= CHECKSUM_PRESENT
    # Zero-filled: flagBits 0 and the body's section kind (0) are in place unless flags are set.
    out = bytearray(HEADER_SIZE + _FLAGS_AND_KIND0.size)
    if flags:
        _FLAGS_AND_KIND0.pack_into(out, HEADER_SIZE, flags, 0)
    out += body
    for identifier, documents in sequences:
        _append_sequence(out, identifier, documents)
    length = len(out) + (4 if checksum else 0)
    HEADER.pack_into(out, 0, length, request_id, response_to, OP_MSG)
    if checksum:
        out += _UINT32.pack(crc32c(out))
    return out


# The start of a kind-1 section (kind byte, size placeholder, identifier) by identifier: the driver uses a
# handful of identifiers, so each is encoded and checked once. Capped in case a caller makes up many.
_SECTION_HEADS: dict[str, bytes] = {}
_SECTION_HEADS_KEPT = 32


def _section_head(identifier: str) -> bytes:
    """The bytes that open the kind-1 section ``identifier``, its size left zero (at offset 1)."""
    head = _SECTION_HEADS.get(identifier)
    if head is None:
        name = identifier.encode()
        if b"\x00" in name:
            raise ProtocolError(f"document sequence identifier {identifier!r} contains a NUL byte")
        head = b"\x01\x00\x00\x00\x00" + name + b"\x00"
        if len(_SECTION_HEADS) < _SECTION_HEADS_KEPT:
            _SECTION_HEADS[identifier] = head
    return head


def _append_sequence(
    out: bytearray, identifier: str, documents: Sequence[bytes | bytearray | memoryview]
) -> int:
    """Append a kind-1 section; returns where its size field is."""
    start = len(out) + 1
    out += _section_head(identifier)
    for document in documents:
        out += document
    _INT32.pack_into(out, start, len(out) - start)
    return start


def encode_command(
    request_id: int,
    db: str,
    command: Mapping[str, Any],
    *,
    document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]] | None = None,
    flags: int = 0,
    codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    max_bson_size: int = DEFAULT_MAX_BSON_SIZE,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    compressor: Compressor | None = None,
) -> bytearray:
    """Encode ``command`` for database ``db`` as one OP_MSG, ready for a single ``transport.write()``.

    ``$db`` is added to the encoded body unless ``command`` already has it; ``command`` itself is never changed.
    Each ``document_sequences`` entry becomes a kind-1 section (documents given as mappings are encoded here,
    ``bytes`` are taken as already-encoded BSON, :class:`PackedDocuments` as several such documents, checked by
    whoever packed them). The message is compressed with ``compressor`` unless the
    command is one that must never be compressed.

    Raises ``DocumentTooLarge`` when the command, or one sequence document, exceeds ``max_bson_size`` plus the
    command overhead, or when the whole message exceeds ``max_message_size``; the
    caller's batch splitting is expected to prevent the last one.
    """
    parts = encode_command_parts(
        request_id,
        db,
        command,
        document_sequences=document_sequences,
        flags=flags,
        codec_options=codec_options,
        max_bson_size=max_bson_size,
        max_message_size=max_message_size,
        compressor=compressor,
    )
    first = parts[0]
    if len(parts) == 1 and isinstance(first, bytearray):
        return first
    return bytearray().join(parts)


LARGE_PACKED_SIZE = 128 * 1024
"""Packed documents from this size on are not copied into the message but are a part of it of their own."""


def encode_command_parts(
    request_id: int,
    db: str,
    command: Mapping[str, Any],
    *,
    document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]] | None = None,
    flags: int = 0,
    codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    max_bson_size: int = DEFAULT_MAX_BSON_SIZE,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    compressor: Compressor | None = None,
) -> list[bytearray | bytes | memoryview]:
    """:func:`encode_command` as buffers that make the message when written one after the other: a single
    bytearray, except that :class:`PackedDocuments` of :data:`LARGE_PACKED_SIZE` bytes or more (a large
    insert's documents) are parts of their own, as given, instead of being copied in. A compressed message is
    one part. The packed documents must not change until the parts are written."""
    # Zero-filled: flagBits 0 and the body's section kind (0) are in place unless flags are set.
    out = bytearray(HEADER_SIZE + _FLAGS_AND_KIND0.size)
    if flags:
        _FLAGS_AND_KIND0.pack_into(out, HEADER_SIZE, flags, 0)
    # Encoded straight into the message; the limits are checked below.
    _encode_into(out, command, codec_options)
    if "$db" not in command:
        # Splice the $db element in before the body's terminating NUL instead of copying the command mapping.
        del out[-1]
        name = db.encode()
        out += b"\x02$db\x00"
        out += _INT32.pack(len(name) + 1)
        out += name
        out += b"\x00\x00"
        _INT32.pack_into(out, _BODY_START, len(out) - _BODY_START)
    size = len(out)
    body_size = size - _BODY_START
    if body_size > max_bson_size + COMMAND_OVERHEAD:
        raise DocumentTooLarge(
            f"command {_command_name(command)!r} is {body_size} bytes, over the server's limit of "
            f"{max_bson_size + COMMAND_OVERHEAD} (maxBsonObjectSize {max_bson_size} plus {COMMAND_OVERHEAD})"
        )
    parts: list[bytearray | bytes | memoryview] = [out]
    length = (
        _append_sequences(parts, out, document_sequences, codec_options, max_bson_size)
        if document_sequences
        else size
    )
    if length > max_message_size:
        raise DocumentTooLarge(
            f"the {_command_name(command)!r} message is {length} bytes, over the server's "
            f"maxMessageSizeBytes of {max_message_size}; split the batch"
        )
    HEADER.pack_into(out, 0, length, request_id, 0, OP_MSG)
    if compressor is not None and may_compress(_command_name(command)):
        return [compress_message(out if len(parts) == 1 else b"".join(parts), compressor)]
    return parts


# Where the kind-0 section's document starts: after the header, flagBits and the section's kind byte.
_BODY_START = HEADER_SIZE + _FLAGS_AND_KIND0.size


def _append_sequences(
    parts: list[bytearray | bytes | memoryview],
    out: bytearray,
    document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]],
    codec_options: CodecOptions,
    max_bson_size: int,
) -> int:
    """Append the kind-1 sections to the message ``parts``, whose only part so far is ``out``: large packed
    documents become parts of their own, what follows them a new bytearray. Returns the message's length."""
    before = 0  # the bytes of the parts before ``out``
    for identifier, documents in document_sequences.items():
        size_part, size_at = out, len(out) + 1
        out += _SECTION_HEADS.get(identifier) or _section_head(identifier)
        section_start = before + size_at
        for index, document in enumerate(documents):
            if isinstance(document, PackedDocuments):
                if len(document.data) < LARGE_PACKED_SIZE:
                    out += document.data
                    continue
                before += len(out) + len(document.data)
                out = bytearray()
                parts += (document.data, out)
                continue
            start = len(out)
            if isinstance(document, bytes | bytearray):
                out += document
            else:
                _encode_into(out, document, codec_options)
            size = len(out) - start
            # The server's own limit for a document in a command; whoever plans the batch may keep a lower one.
            if size > max_bson_size + COMMAND_OVERHEAD:
                raise DocumentTooLarge(
                    f"document {index} of {identifier!r} is {size} bytes, over the server's "
                    f"maxBsonObjectSize of {max_bson_size} plus the {COMMAND_OVERHEAD} bytes of command overhead"
                )
        _INT32.pack_into(size_part, size_at, before + len(out) - section_start)
    if len(parts) > 1 and not out:
        del parts[-1]
    return before + len(out)


def _command_name(command: Mapping[str, Any]) -> str:
    for key in command:
        return str(key)
    return ""


class OpMsg(NamedTuple):
    """A parsed OP_MSG. ``body`` and the sequence documents are views into the parsed buffer: decode them
    before that buffer is reused."""

    flags: int
    body: memoryview
    sequences: dict[str, list[memoryview]]

    @property
    def more_to_come(self) -> bool:
        return bool(self.flags & MORE_TO_COME)


def parse_op_msg(
    payload: bytes | bytearray | memoryview, header: bytes | bytearray | memoryview | None = None
) -> OpMsg:
    """Parse the part of an OP_MSG after its header.

    ``header`` is the 16-byte header the checksum covers; it is required only when the message carries a
    checksum (for a message that arrived compressed, pass the header it would have had uncompressed).
    Anything the protocol forbids raises ``ProtocolError``: unknown required flag bits, a bad checksum, no or
    several kind-0 sections, an unknown section kind, lengths that overrun the message, duplicate identifiers.
    """
    view = memoryview(payload)
    end = len(view)
    if end < _FLAGS_AND_KIND0.size + 5:
        raise ProtocolError(f"OP_MSG of {end + HEADER_SIZE} bytes is too short to hold a document")
    flags = _UINT32.unpack_from(view)[0]
    unknown = flags & REQUIRED_BITS_MASK & ~_KNOWN_REQUIRED_BITS
    if unknown:
        raise ProtocolError(
            f"OP_MSG sets flag bits {unknown:#x} that are required to be understood and unknown"
        )
    if flags & CHECKSUM_PRESENT:
        end -= 4
        if header is None:
            raise ProtocolError("OP_MSG has a checksum but no header was given to verify it against")
        expected = _UINT32.unpack_from(view, end)[0]
        actual = crc32c(view[:end], crc32c(header))
        if actual != expected:
            raise ProtocolError(
                f"OP_MSG checksum mismatch: message says {expected:#010x}, content gives {actual:#010x}"
            )
    body: memoryview | None = None
    sequences: dict[str, list[memoryview]] = {}
    offset = 4
    while offset < end:
        kind = view[offset]
        offset += 1
        if kind == 0:
            if body is not None:
                raise ProtocolError("OP_MSG has more than one kind-0 (body) section")
            size = _document_size(view, offset, end, "body section")
            body = view[offset : offset + size]
            offset += size
        elif kind == 1:
            if end - offset < 4:
                raise ProtocolError("OP_MSG document sequence section is cut short")
            size = _INT32.unpack_from(view, offset)[0]
            section_end = offset + size
            if size < 5 or section_end > end:
                raise ProtocolError(f"OP_MSG document sequence size {size} does not fit the message")
            # The identifier is short: look for its NUL in the first bytes before copying the whole section.
            terminator = bytes(view[offset + 4 : min(section_end, offset + 68)]).find(b"\x00")
            if terminator < 0 and section_end > offset + 68:
                terminator = bytes(view[offset + 4 : section_end]).find(b"\x00")
            if terminator < 0:
                raise ProtocolError("OP_MSG document sequence identifier is not NUL-terminated")
            identifier = bytes(view[offset + 4 : offset + 4 + terminator]).decode("utf-8", "replace")
            if identifier in sequences:
                raise ProtocolError(f"OP_MSG has two document sequences named {identifier!r}")
            documents: list[memoryview] = []
            position = offset + 5 + terminator
            while position < section_end:
                doc_size = _document_size(view, position, section_end, f"document sequence {identifier!r}")
                documents.append(view[position : position + doc_size])
                position += doc_size
            sequences[identifier] = documents
            offset = section_end
        else:
            raise ProtocolError(f"OP_MSG has a section of unknown kind {kind}")
    if body is None:
        raise ProtocolError("OP_MSG has no kind-0 (body) section")
    return OpMsg(flags, body, sequences)


def _document_size(view: memoryview, offset: int, end: int, where: str) -> int:
    if end - offset < 5:
        raise ProtocolError(f"OP_MSG {where} is cut short: {end - offset} bytes left where a document starts")
    size: int = _INT32.unpack_from(view, offset)[0]
    if size < 5 or offset + size > end:
        raise ProtocolError(f"OP_MSG {where} holds a document of length {size} that does not fit the message")
    if view[offset + size - 1] != 0:
        raise ProtocolError(f"OP_MSG {where} holds a document that is not NUL-terminated")
    return size
