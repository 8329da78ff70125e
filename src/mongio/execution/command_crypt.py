"""Automatic encryption as the executor sees it: an operation hook around the command exchange.

A client with ``auto_encryption_opts`` gives its executor a :class:`CommandCrypt`. Every command an attempt
sends is then serialized whole (document sequences folded into the body, as the client-side encryption
specification requires, since libmongocrypt reads one BSON document) and encrypted before its started event,
and every reply is decrypted after its succeeded event: command monitoring, logging and tracing see the
command as sent and the reply as received, never plaintext of an encrypted field. With
``bypass_auto_encryption`` the hook only decrypts (:attr:`CommandCrypt.encrypts_commands` is False).

The BSON work lives here so that the exchange only calls these functions; the encryption itself (the
libmongocrypt state machine, key vault reads, markings) is the hook's, in :mod:`mongio.encryption`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from mongio.bson import RawBSONDocument, decode, encode
from mongio.bson.codec_options import CodecOptions
from mongio.operations.base import Command, Operation
from mongio.wire.op_msg import PackedDocuments

__all__ = [
    "AUTO_ENCRYPTION_SPLIT_SIZE",
    "RAW_REPLY",
    "CommandCrypt",
    "decrypted_reply",
    "encrypted_command",
]

AUTO_ENCRYPTION_SPLIT_SIZE = 2_097_152
"""Bytes of statements a write batch carries at most before automatic encryption (2 MiB; the client-side
encryption specification's "Size limits for Write Commands"): encryption makes a command larger."""

RAW_REPLY = CodecOptions(document_class=RawBSONDocument)
"""How a reply to decrypt is received: its bytes untouched."""

# Commands and replies handed to libmongocrypt and back keep every value as it is (no tz conversion, UUIDs
# as binary): the operation's own codec options decode only the final, decrypted reply.
_AS_IS = CodecOptions()
_INT32 = struct.Struct("<i")


class CommandCrypt(Protocol):
    """What the executor asks of automatic encryption (``mongio.encryption.auto_encrypter.AutoEncrypter``
    provides it)."""

    @property
    def encrypts_commands(self) -> bool:
        """False with ``bypass_auto_encryption``: commands go as they are, replies are still decrypted."""

    async def encrypt_command(self, database: str, command: bytes) -> bytes:
        """The command (BSON) with the fields its schema names encrypted."""

    async def decrypt_reply(self, reply: bytes) -> bytes:
        """The reply (BSON) with every encrypted value decrypted."""


def _sequence_documents(sequence: Sequence[Any]) -> Iterator[Any]:
    """A document sequence's documents as the body's array takes them: encoded ones kept as raw documents
    (their bytes copied as they are), packed runs split apart."""
    for part in sequence:
        if isinstance(part, PackedDocuments):
            yield from _split_packed(memoryview(part.data))
        elif isinstance(part, bytes | bytearray | memoryview):
            yield RawBSONDocument(part)
        else:
            yield part


def _split_packed(data: memoryview) -> Iterator[RawBSONDocument]:
    """Documents encoded back to back (each was checked when it was encoded), one by one."""
    offset = 0
    while offset < len(data):
        size = _INT32.unpack_from(data, offset)[0]
        yield RawBSONDocument(data[offset : offset + size])
        offset += size


async def encrypted_command(
    crypt: CommandCrypt, op: Operation[Any], command: Command, observed: bool
) -> tuple[RawBSONDocument, None, Command]:
    """``command`` as one document, encrypted: what goes on the wire (a body, no document sequences), and
    (``observed``: for the command's events and span) the same command decoded, else an empty one."""
    body: Mapping[str, Any] = command.body
    if command.sequences:
        whole = dict(body)
        for identifier, sequence in command.sequences.items():
            whole[identifier] = list(_sequence_documents(sequence))
        body = whole
    encoded = encode(body, codec_options=op.codec_options, max_size=None)
    encrypted = await crypt.encrypt_command(op.database, bytes(encoded))
    shown: dict[str, Any] = decode(encrypted, _AS_IS) if observed else {}
    return RawBSONDocument(encrypted), None, Command(shown)


async def decrypted_reply(crypt: CommandCrypt, reply: Mapping[str, Any], codec_options: CodecOptions) -> dict[str, Any]:
    """A reply received with :data:`RAW_REPLY`, decrypted and decoded as the operation decodes replies."""
    assert isinstance(reply, RawBSONDocument)
    decrypted = await crypt.decrypt_reply(reply.raw)
    document: dict[str, Any] = decode(decrypted, codec_options)
    return document


def observed_reply(reply: Mapping[str, Any], codec_options: CodecOptions) -> dict[str, Any]:
    """A reply received with :data:`RAW_REPLY`, still encrypted, decoded for the cluster clock, the session,
    and the command's succeeded or failed event."""
    assert isinstance(reply, RawBSONDocument)
    document: dict[str, Any] = decode(reply.raw, codec_options)
    return document
