"""A hostile MongoDB-wire server on 127.0.0.1: it answers the handshake honestly, then misbehaves as scripted.

Built on :class:`~tests.support.loopback_peer.LoopbackPeer` (which decodes and records every request). The
hello (and legacy isMaster) reply is made from a :class:`Handshake`, whose size limits, compressors and
topology can be set to anything, including lies. Every other command is answered sanely (an empty cursor for
a cursor command, ``{ok: 1}`` otherwise) unless a :class:`Behaviour` is scripted for its name:

    async with HostileServer(Handshake(compressors=["zstd"])) as server:
        server.misbehave("find", Bomb("zstd", inflated=128 * MIB))
        async with MongoClient(server.uri, directConnection=True, compressors="zstd") as client:
            with pytest.raises(ProtocolError):
                await client.db.coll.find_one({})
            server.behave()                      # sane again: the client must still work
            assert await client.db.coll.find_one({}) is None

The behaviours: :class:`Sane`, :class:`BadLength` (a header whose length is wrong, negative or forged),
:class:`ForgedLength` (a header declaring a size, then a trickle of bytes that never completes it, then a
hang-up), :class:`AllAtOnce` (another behaviour, given to several requests together),
:class:`WrongResponseTo`, :class:`DeepNesting`, :class:`InvalidUtf8`, :class:`Truncated`, :class:`Trickle` (a
good reply, a few bytes at a time), :class:`Bomb` (OP_COMPRESSED that inflates far beyond its declared
``uncompressedSize``), :class:`ForeignCompressor` (a reply compressed with a compressor nobody negotiated) and
:class:`Stall` (never answer). Messages that are well-formed are made with mongio's own
encoders; only the hostile part is made by hand.

The server stops with its ``async with`` block: every connection closed and every task it started finished.
A behaviour that fails for a reason other than the client hanging up fails the block's exit.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import zlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import Int64, encode
from mongio.wire import (
    COMPRESSOR_IDS,
    HEADER,
    HEADER_SIZE,
    OP_COMPRESSED,
    OP_MSG,
    Compressor,
    compress_message,
    encode_op_msg,
    next_request_id,
)
from tests.support.backends import AsyncioServer, served
from tests.support.loopback_peer import (
    CLOSE,
    NO_REPLY,
    HandlerResult,
    LoopbackPeer,
    Reply,
    Request,
    default_reply,
)

__all__ = [
    "MIB",
    "AllAtOnce",
    "BadLength",
    "Behaviour",
    "Bomb",
    "DeepNesting",
    "ForeignCompressor",
    "ForgedLength",
    "Handshake",
    "HostileServer",
    "InvalidUtf8",
    "Sane",
    "Stall",
    "Trickle",
    "Truncated",
    "WrongResponseTo",
    "bomb_payload",
    "nested_document",
    "sane_document",
]

MIB = 1024 * 1024

_CURSOR_COMMANDS = frozenset({"find", "aggregate", "getmore", "listcollections", "listindexes"})
# originalOpcode, uncompressedSize, compressorId: what follows the header of an OP_COMPRESSED message.
_COMPRESSED_PREFIX = struct.Struct("<iiB")
_INT32 = struct.Struct("<i")


# -- the handshake ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Handshake:
    """What the server's hello says about itself; every field may be a lie.

    ``compressors`` are those the server offers (the reply names the ones the client also asked for);
    ``set_name`` makes it a replica set primary instead of a standalone; ``fields`` are set last, over
    everything else (e.g. ``{"maxWriteBatchSize": -1}``).
    """

    max_message_size: int = 48_000_000
    max_bson_size: int = 16 * MIB
    compressors: Sequence[str] = ()
    set_name: str | None = None
    logical_session_timeout_minutes: int | None = 30
    fields: Mapping[str, Any] = field(default_factory=dict)

    def reply(self, request: Request, peer: LoopbackPeer) -> dict[str, Any]:
        """The hello (or isMaster) reply to ``request``, made by ``peer`` (whose compressors are ours)."""
        reply = default_reply(request, peer)
        reply["maxMessageSizeBytes"] = self.max_message_size
        reply["maxBsonObjectSize"] = self.max_bson_size
        if self.logical_session_timeout_minutes is not None:
            reply["logicalSessionTimeoutMinutes"] = self.logical_session_timeout_minutes
        if self.set_name is not None:
            host, port = peer.address
            reply["setName"] = self.set_name
            reply["hosts"] = [f"{host}:{port}"]
            reply["me"] = f"{host}:{port}"
            reply["secondary"] = False
        reply.update(self.fields)
        return reply


# -- well-formed parts ----------------------------------------------------------------------------------------


def sane_document(request: Request) -> dict[str, Any]:
    """What a well-behaved server answers: an empty, exhausted cursor for a cursor command, else ``{ok: 1}``."""
    name = request.command_name
    if name.lower() not in _CURSOR_COMMANDS:
        return {"ok": 1}
    collection = request.document.get("collection") if name.lower() == "getmore" else request.document[name]
    batch = "nextBatch" if name.lower() == "getmore" else "firstBatch"
    namespace = f"{request.db}.{collection if isinstance(collection, str) else '$cmd.aggregate'}"
    return {"cursor": {"id": Int64(0), "ns": namespace, batch: []}, "ok": 1}


def reply_message(request: Request, body: bytes, *, response_to: int | None = None) -> bytes:
    """An uncompressed OP_MSG answering ``request`` (or claiming to answer ``response_to``) with ``body``."""
    answered = request.header.request_id if response_to is None else response_to
    return bytes(encode_op_msg(next_request_id(), body, response_to=answered))


def header_declaring(request: Request, length: int) -> bytes:
    """A 16-byte OP_MSG header answering ``request`` that declares a message of ``length`` bytes."""
    return HEADER.pack(length, next_request_id(), request.header.request_id, OP_MSG)


def nested_document(levels: int) -> bytes:
    """A BSON document ``{ok: 1, a: {a: {a: ...}}}`` nested ``levels`` deep, encoded by hand (an encoder
    refuses to make it)."""
    inner = b"\x05\x00\x00\x00\x00"
    for _ in range(levels - 1):
        element = b"\x03a\x00" + inner
        inner = _INT32.pack(4 + len(element) + 1) + element + b"\x00"
    ok = encode({"ok": 1})
    elements = ok[4:-1] + b"\x03a\x00" + inner
    return _INT32.pack(4 + len(elements) + 1) + elements + b"\x00"


def invalid_utf8_document() -> bytes:
    """``{ok: 1, errmsg: <a string whose bytes are not UTF-8>}``: encoded by mongio, then the string's
    bytes swapped for ``ff fe`` (same length, so every length field stays right)."""
    marker = "\x01\x02"
    encoded = encode({"ok": 1, "errmsg": marker})
    return encoded.replace(marker.encode() + b"\x00", b"\xff\xfe\x00")


# -- compression bombs ---------------------------------------------------------------------------------------

_ZERO_CHUNK = bytes(MIB)


def _zlib_bomb(inflated: int) -> bytes:
    deflater = zlib.compressobj(9)
    parts = [deflater.compress(_ZERO_CHUNK[: min(MIB, inflated - done)]) for done in range(0, inflated, MIB)]
    parts.append(deflater.flush())
    return b"".join(parts)


def _zstd_bomb(inflated: int) -> bytes:
    import zstandard

    # The frame header states the content size, as any one-shot zstd compressor writes it.
    compressor = zstandard.ZstdCompressor(level=1).compressobj(size=inflated)
    parts = [
        compressor.compress(_ZERO_CHUNK[: min(MIB, inflated - done)]) for done in range(0, inflated, MIB)
    ]
    parts.append(compressor.flush())
    return b"".join(parts)


def _snappy_bomb(inflated: int) -> bytes:
    """Raw snappy, by hand: the length preamble, a one-byte literal, then copies of 64 bytes at offset 1
    (3 bytes each, about 21 times smaller than what they inflate to)."""
    preamble = bytearray()
    value = inflated
    while value >= 0x80:
        preamble.append(value & 0x7F | 0x80)
        value >>= 7
    preamble.append(value)
    copies, rest = divmod(inflated - 1, 64)
    tail = bytes([((rest - 1) << 2) | 2, 1, 0]) if rest else b""
    return bytes(preamble) + b"\x00\x00" + b"\xfe\x01\x00" * copies + tail


_BOMB_MAKERS = {"zlib": _zlib_bomb, "zstd": _zstd_bomb, "snappy": _snappy_bomb}


@functools.lru_cache(maxsize=8)
def bomb_payload(compressor: str, inflated: int) -> bytes:
    """Compressed data of ``compressor`` (``"zlib"``, ``"snappy"`` or ``"zstd"``) that inflates to
    ``inflated`` zero bytes, made without holding them (kept: a bomb of 1 GiB takes a while to make)."""
    return _BOMB_MAKERS[compressor](inflated)


# -- behaviours -----------------------------------------------------------------------------------------------


class Behaviour(ABC):
    """What the server does with one request instead of answering it properly."""

    @abstractmethod
    async def answer(self, request: Request) -> HandlerResult:
        """Write to ``request.connection.writer`` and/or return what the loopback peer should do."""

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={value!r}" for name, value in vars(self).items() if not name.startswith("_")
        )
        return f"{type(self).__name__}({fields})"


async def send_slowly(request: Request, data: bytes, *, chunk: int, interval: float) -> None:
    """Write ``data`` to the client ``chunk`` bytes at a time, ``interval`` seconds apart; stops early (with
    ``ConnectionError``) once the client hung up."""
    writer = request.connection.writer
    view = memoryview(data)
    for offset in range(0, len(view), chunk):
        if writer.is_closing():
            raise ConnectionResetError("the client hung up")
        writer.write(view[offset : offset + chunk])
        await writer.drain()
        if interval:
            await asyncio.sleep(interval)


class Sane(Behaviour):
    """A well-behaved answer (:func:`sane_document`), compressed like the request."""

    async def answer(self, request: Request) -> HandlerResult:
        return sane_document(request)


class BadLength(Behaviour):
    """A sane reply whose header's length field says ``length`` (too short, negative, or more than sent)."""

    def __init__(self, length: int) -> None:
        self.length = length

    async def answer(self, request: Request) -> HandlerResult:
        message = bytearray(reply_message(request, encode(sane_document(request))))
        _INT32.pack_into(message, 0, self.length)
        return Reply(raw=bytes(message))


class ForgedLength(Behaviour):
    """A header declaring a ``declared``-byte message, then ``send`` bytes of it (``chunk`` bytes every
    ``interval`` seconds), then a hang-up: a client that allocates what the header claims pays for
    ``declared`` bytes, one that grows with what arrives for ``send``."""

    def __init__(
        self, declared: int, *, send: int = MIB, chunk: int = 64 * 1024, interval: float = 0.0
    ) -> None:
        self.declared = declared
        self.send = send
        self.chunk = chunk
        self.interval = interval

    async def answer(self, request: Request) -> HandlerResult:
        writer = request.connection.writer
        writer.write(header_declaring(request, self.declared))
        await writer.drain()
        await send_slowly(request, bytes(self.send), chunk=self.chunk, interval=self.interval)
        return CLOSE


class WrongResponseTo(Behaviour):
    """A sane reply that says it answers another request."""

    async def answer(self, request: Request) -> HandlerResult:
        other = (request.header.request_id + 1000) & 0x7FFFFFFF
        return Reply(raw=reply_message(request, encode(sane_document(request)), response_to=other))


class DeepNesting(Behaviour):
    """A reply whose document nests ``levels`` subdocuments deep."""

    def __init__(self, levels: int = 10_000) -> None:
        self.levels = levels
        self._body = nested_document(levels)

    async def answer(self, request: Request) -> HandlerResult:
        return Reply(raw=reply_message(request, self._body))


class InvalidUtf8(Behaviour):
    """A reply holding a string that is not UTF-8."""

    async def answer(self, request: Request) -> HandlerResult:
        return Reply(raw=reply_message(request, invalid_utf8_document()))


class Truncated(Behaviour):
    """The first ``keep`` bytes of a sane reply, then a hang-up."""

    def __init__(self, keep: int = 20) -> None:
        self.keep = keep

    async def answer(self, request: Request) -> HandlerResult:
        return Reply(raw=reply_message(request, encode(sane_document(request))), cut_after=self.keep)


class Trickle(Behaviour):
    """A sane reply sent ``chunk`` bytes every ``interval`` seconds (a reply of ~100 bytes takes seconds)."""

    def __init__(self, *, chunk: int = 1, interval: float = 0.05) -> None:
        self.chunk = chunk
        self.interval = interval

    async def answer(self, request: Request) -> HandlerResult:
        message = reply_message(request, encode(sane_document(request)))
        await send_slowly(request, message, chunk=self.chunk, interval=self.interval)
        return NO_REPLY


class Bomb(Behaviour):
    """An OP_COMPRESSED reply of ``compressor`` declaring ``declared`` uncompressed bytes, whose data
    inflates to ``inflated`` bytes."""

    def __init__(self, compressor: str, *, inflated: int, declared: int = 200) -> None:
        self.compressor = compressor
        self.inflated = inflated
        self.declared = declared
        self._data = bomb_payload(compressor, inflated)

    @property
    def wire_size(self) -> int:
        """The bytes the reply takes on the wire."""
        return HEADER_SIZE + _COMPRESSED_PREFIX.size + len(self._data)

    async def answer(self, request: Request) -> HandlerResult:
        prefix = _COMPRESSED_PREFIX.pack(OP_MSG, self.declared, COMPRESSOR_IDS[self.compressor])
        header = HEADER.pack(self.wire_size, next_request_id(), request.header.request_id, OP_COMPRESSED)
        return Reply(raw=header + prefix + self._data)


class ForeignCompressor(Behaviour):
    """A sane reply, well-formed, compressed with ``compressor`` whatever the handshake negotiated."""

    def __init__(self, compressor: str) -> None:
        self.compressor = compressor
        self._compressor = Compressor(compressor)

    async def answer(self, request: Request) -> HandlerResult:
        message = reply_message(request, encode(sane_document(request)))
        return Reply(raw=bytes(compress_message(message, self._compressor)))


class AllAtOnce(Behaviour):
    """``behaviour``, held back until ``count`` requests wait for it, then given to all of them at once: a
    client with ``count`` operations in flight on as many connections meets it on all of them together."""

    def __init__(self, behaviour: Behaviour, count: int) -> None:
        self.behaviour = behaviour
        self.count = count
        self._barrier = asyncio.Barrier(count)

    async def answer(self, request: Request) -> HandlerResult:
        await self._barrier.wait()
        return await self.behaviour.answer(request)


class Stall(Behaviour):
    """Never answer (the connection stays open and the server keeps reading)."""

    async def answer(self, request: Request) -> HandlerResult:
        return NO_REPLY


# -- the server -----------------------------------------------------------------------------------------------


class HostileServer(AsyncioServer):
    """A server on 127.0.0.1 (a free port) that answers hello from ``handshake`` and each other command with
    the :class:`Behaviour` scripted for its name (compared case-insensitively), :class:`Sane` by default."""

    def __init__(
        self, handshake: Handshake | None = None, script: Mapping[str, Behaviour] | None = None
    ) -> None:
        self.handshake = handshake or Handshake()
        self._script: dict[str, Behaviour] = {}
        for command, behaviour in (script or {}).items():
            self.misbehave(command, behaviour)
        self._peer = LoopbackPeer(self._handle, compressors=self.handshake.compressors)

    @property
    def uri(self) -> str:
        """``mongodb://127.0.0.1:<port>/``."""
        return self._peer.uri

    @property
    def address(self) -> tuple[str, int | None]:
        return self._peer.address

    def misbehave(self, command: str, behaviour: Behaviour) -> None:
        """Answer every later ``command`` with ``behaviour``."""
        self._script[command.lower()] = behaviour

    def behave(self, command: str | None = None) -> None:
        """Answer ``command`` (every command, if None) sanely again."""
        if command is None:
            self._script.clear()
        else:
            self._script.pop(command.lower(), None)

    def commands(self, name: str) -> list[Request]:
        """The requests of command ``name`` received so far, in order."""
        return self._peer.commands(name)

    @served
    async def wait_for_commands(self, name: str, count: int) -> None:
        """Wait until ``count`` requests of ``name`` were received (bound it with ``anyio.fail_after``)."""
        while len(self.commands(name)) < count:
            await self._peer.wait_for_requests(len(self._peer.requests) + 1)

    async def _handle(self, request: Request) -> HandlerResult:
        name = request.command_name.lower()
        if name in ("hello", "ismaster"):
            return self.handshake.reply(request, self._peer)
        behaviour = self._script.get(name)
        if behaviour is None:
            return sane_document(request)
        return await behaviour.answer(request)

    async def start(self) -> HostileServer:
        await self._peer.start()
        return self

    async def stop(self) -> None:
        """Close every connection and the listener, and wait for every task the server started."""
        await self._peer.stop()

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        await super().__aexit__(exc_type, *rest)
        errors = self._peer.errors
        if exc_type is None and errors:
            raise AssertionError(f"the hostile server failed: {errors!r}") from errors[0]
