"""A small MongoDB-wire peer of the tests' own, listening on 127.0.0.1 (or ::1, or a Unix socket).

It decodes each request with mongio's codec (OP_MSG, OP_QUERY, OP_COMPRESSED), records exactly what the client
sent, and answers through a handler callback, which can also inject faults. Use it to show what the test
server cannot: compression, exhaust streams, malformed or slow replies, dropped connections, fake topologies.

    async def handler(request: Request) -> HandlerResult:
        if request.command_name == "find":
            return Reply({"ok": 1, "cursor": {...}}, delay=0.2)
        if request.command_name == "insert":
            return CLOSE              # drop the connection without answering
        return None                   # default: answer hello/isMaster like a standalone, the rest {ok: 1}

    async with LoopbackPeer(handler, compressors=["zstd"]) as peer:
        conn = await connect(peer.address)
        ...
        assert peer.requests[-1].compressor_id == ZSTD_ID

Handler results:

- ``None``: the default answer (``default_reply``).
- a mapping: that reply document.
- ``Reply(document, delay=..., cut_after=..., raw=..., checksum=..., compress=...)``: one reply, with faults.
- a list of ``Reply``/mappings: an exhaust stream; every reply but the last carries ``moreToCome``.
- ``CLOSE``: close the connection instead of answering. ``NO_REPLY``: send nothing and keep reading.

A request with ``moreToCome`` never gets a reply (the handler is still called; only ``CLOSE`` has an effect).
Replies are compressed with the request's compressor when the request came compressed. Handler exceptions are
recorded in ``errors``, close that connection, and are raised again when the ``async with`` block exits.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import decode, encode
from mongio.wire import (
    COMPRESSOR_IDS,
    HEADER_SIZE,
    OP_MSG,
    OP_QUERY,
    Compressor,
    MessageHeader,
    OpMsg,
    OpMsgFlags,
    OpQuery,
    compress_message,
    encode_op_msg,
    encode_op_reply,
    negotiate_compressor,
    next_request_id,
    parse_message,
)
from tests.support.backends import AsyncioServer, served, served_sync

__all__ = [
    "CLOSE",
    "NO_REPLY",
    "HandlerResult",
    "LoopbackPeer",
    "PeerConnection",
    "Reply",
    "Request",
    "default_reply",
]

_COMPRESSOR_NAMES = {number: name for name, number in COMPRESSOR_IDS.items()}


class _Action:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


CLOSE = _Action("CLOSE")
NO_REPLY = _Action("NO_REPLY")


@dataclass
class Request:
    """One message exactly as the client sent it, and what it decodes to."""

    connection: PeerConnection
    raw: bytes
    """The whole message as it came off the wire, header included."""
    header: MessageHeader
    """The header as received (its opcode is OP_COMPRESSED for a compressed message)."""
    opcode: int
    """The opcode carried: OP_MSG or OP_QUERY, also when it came wrapped in OP_COMPRESSED."""
    compressor_id: int | None
    """The OP_COMPRESSED compressor id, or None when the message came uncompressed."""
    flags: int
    document: dict[str, Any]
    """The OP_MSG body (kind-0 section) or the OP_QUERY query."""
    sequences: dict[str, list[dict[str, Any]]]
    """OP_MSG document sequences (kind-1 sections) by identifier."""
    collection: str | None = None
    """The OP_QUERY full collection name; None for OP_MSG."""

    @property
    def command_name(self) -> str:
        return next(iter(self.document), "")

    @property
    def db(self) -> str | None:
        if self.collection is not None:
            return self.collection.split(".", 1)[0]
        db = self.document.get("$db")
        return str(db) if db is not None else None

    @property
    def more_to_come(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & OpMsgFlags.MORE_TO_COME)

    @property
    def exhaust_allowed(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & OpMsgFlags.EXHAUST_ALLOWED)

    @property
    def compressor_name(self) -> str | None:
        return None if self.compressor_id is None else _COMPRESSOR_NAMES.get(self.compressor_id)


@dataclass
class Reply:
    """One reply and the faults to inject when sending it."""

    document: Mapping[str, Any] = field(default_factory=lambda: {"ok": 1})
    delay: float = 0.0
    """Seconds to wait before sending."""
    cut_after: int | None = None
    """Send only this many bytes of the encoded reply, then close the connection."""
    raw: bytes | None = None
    """Send these bytes instead of an encoded reply (for malformed messages)."""
    checksum: bool = False
    """Append a CRC-32C checksum and set checksumPresent."""
    compress: bool | str | None = None
    """None: compress when the request was compressed, with its compressor; False: never; True: with the
    compressor the connection's hello negotiated; a name ("snappy", "zlib", "zstd"): with that one."""
    more_to_come: bool = False


HandlerResult = Mapping[str, Any] | Reply | Sequence[Reply | Mapping[str, Any]] | _Action | None
Handler = Callable[[Request], HandlerResult | Awaitable[HandlerResult]]


class PeerConnection:
    """One accepted connection."""

    def __init__(self, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.index = index
        self.reader = reader
        self.writer = writer
        self.requests: list[Request] = []
        self.compressor: str | None = None
        """What the hello on this connection negotiated (by the default answer)."""
        self.closed = False
        self._loop = asyncio.get_running_loop()

    @property
    def client_gone(self) -> bool:
        """True once the client closed its end (the peer saw end-of-file)."""
        return self.reader.at_eof()

    def close(self) -> None:
        """Close this connection now (the client sees the peer hang up); from a test on another backend, the
        close runs in the peer's loop."""
        self.closed = True
        if _running_loop() is self._loop:
            self.writer.close()
        else:
            self._loop.call_soon_threadsafe(self.writer.close)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


MAX_REPLY_SIZE = 16 * 1024 * 1024 + 16 * 1024
"""The largest reply document the peer sends: a server's internal limit (16 MiB and 16 KiB), which lets a
reply carry a whole 16 MiB document with the fields around it, as a query analyser's marked command does."""


def default_reply(request: Request, peer: LoopbackPeer) -> dict[str, Any]:
    """hello/isMaster: a standalone writable server (offering the peer's compressors); anything else: ok."""
    name = request.command_name.lower()
    if name in ("hello", "ismaster"):
        reply: dict[str, Any] = {
            "helloOk": True,
            "isWritablePrimary" if name == "hello" else "ismaster": True,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000,
            "minWireVersion": 0,
            "maxWireVersion": peer.max_wire_version,
            "connectionId": request.connection.index + 1,
            "ok": 1,
        }
        offered = request.document.get("compression")
        if offered is not None:
            chosen = negotiate_compressor(list(offered), peer.compressors)
            request.connection.compressor = chosen
            common = [name for name in offered if name in peer.compressors]
            if common:
                reply["compression"] = common
        return reply
    return {"ok": 1}


class LoopbackPeer(AsyncioServer):
    """A wire-protocol peer on 127.0.0.1 (a free port) answering through ``handler``.

    ``compressors`` is what the peer accepts in a hello's ``compression`` list; ``ssl`` (a server-side
    context) makes it a TLS peer; ``max_wire_version`` goes into the default hello reply. ``host`` picks the
    listening address (``"::1"`` for IPv6); ``unix_socket`` listens on that path instead of TCP. With
    ``record_requests=False`` the peer keeps no request (``requests`` stays empty), for a peer that serves a
    whole run.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        compressors: Sequence[str] = (),
        ssl: ssl.SSLContext | None = None,
        max_wire_version: int = 21,
        host: str = "127.0.0.1",
        unix_socket: str | None = None,
        record_requests: bool = True,
    ) -> None:
        self.handler = handler
        self.record_requests = record_requests
        self.compressors = list(compressors)
        self.ssl = ssl
        self.max_wire_version = max_wire_version
        self.host = host
        self.unix_socket = unix_socket
        self.requests: list[Request] = []
        self.connections: list[PeerConnection] = []
        self.errors: list[BaseException] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._request_event = asyncio.Event()

    @property
    def address(self) -> tuple[str, int | None]:
        """``(host, port)``, or ``(path, None)`` for a Unix socket: what ``mongio.connection.connect`` takes."""
        assert self._server is not None, "start the peer first"
        if self.unix_socket is not None:
            return self.unix_socket, None
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    @property
    def uri(self) -> str:
        host, port = self.address
        if port is None:
            return "mongodb://" + host.replace("/", "%2F") + "/"
        return f"mongodb://[{host}]:{port}/" if ":" in host else f"mongodb://{host}:{port}/"

    def commands(self, name: str) -> list[Request]:
        """The recorded requests of one command (compared case-insensitively)."""
        return [request for request in self.requests if request.command_name.lower() == name.lower()]

    @served
    async def wait_for_requests(self, count: int) -> None:
        """Wait until at least ``count`` requests were recorded (bound it with ``anyio.fail_after``)."""
        while len(self.requests) < count:
            self._request_event.clear()
            await self._request_event.wait()

    @served_sync
    def drop_connections(self) -> None:
        """Close every open connection (the listener stays up)."""
        for connection in self.connections:
            if not connection.closed:
                connection.close()

    async def start(self) -> LoopbackPeer:
        if self.unix_socket is not None:
            self._server = await asyncio.start_unix_server(self._serve, self.unix_socket, ssl=self.ssl)
        else:
            self._server = await asyncio.start_server(self._serve, self.host, 0, ssl=self.ssl)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop_connections()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        await super().__aexit__(exc_type, *rest)
        if exc_type is None and self.errors:
            raise AssertionError(f"the loopback peer's handler failed: {self.errors!r}") from self.errors[0]

    # -- serving ------------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        connection = PeerConnection(len(self.connections), reader, writer)
        self.connections.append(connection)
        try:
            while not connection.closed:
                header = await reader.readexactly(HEADER_SIZE)
                length = int.from_bytes(header[:4], "little", signed=True)
                raw = header + await reader.readexactly(length - HEADER_SIZE)
                request = self._decode(connection, raw)
                if self.record_requests:
                    connection.requests.append(request)
                    self.requests.append(request)
                    self._request_event.set()
                result = self._call_handler(request)
                if inspect.isawaitable(result):
                    result = await result
                if result is CLOSE:
                    break
                if request.more_to_come or result is NO_REPLY:
                    continue
                if not await self._answer(connection, request, result):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # a handler bug or an undecodable request: record it for the test
            self.errors.append(exc)
        finally:
            connection.close()
            self._tasks.discard(task)

    def _call_handler(self, request: Request) -> HandlerResult | Awaitable[HandlerResult]:
        if self.handler is None:
            return None
        return self.handler(request)

    def _decode(self, connection: PeerConnection, raw: bytes) -> Request:
        parsed = parse_message(raw)
        content = parsed.content
        sequences: dict[str, list[dict[str, Any]]] = {}
        collection = None
        if isinstance(content, OpMsg):
            flags = content.flags
            document = decode(content.body)
            sequences = {name: [decode(doc) for doc in docs] for name, docs in content.sequences.items()}
        elif isinstance(content, OpQuery):
            flags = content.flags
            document = decode(content.query)
            collection = content.full_collection_name
        else:
            raise AssertionError(f"the client sent a message with opcode {parsed.opcode}")
        return Request(
            connection=connection,
            raw=raw,
            header=parsed.header,
            opcode=parsed.opcode,
            compressor_id=parsed.compressor_id,
            flags=flags,
            document=document,
            sequences=sequences,
            collection=collection,
        )

    async def _answer(self, connection: PeerConnection, request: Request, result: HandlerResult) -> bool:
        """Send the reply (or stream); False when the connection was closed on purpose."""
        if result is None:
            result = default_reply(request, self)
        replies: list[Reply | Mapping[str, Any]]
        if isinstance(result, Reply | Mapping):
            replies = [result]
        else:
            assert isinstance(result, Sequence), f"unexpected handler result {result!r}"
            replies = list(result)
        response_to = request.header.request_id
        for position, item in enumerate(replies):
            reply = item if isinstance(item, Reply) else Reply(item)
            more_to_come = reply.more_to_come or position < len(replies) - 1
            request_id = next_request_id()
            data = (
                reply.raw
                if reply.raw is not None
                else self._encode_reply(connection, request, reply, request_id, response_to, more_to_come)
            )
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.cut_after is not None:
                connection.writer.write(data[: reply.cut_after])
                await connection.writer.drain()
                return False
            connection.writer.write(data)
            await connection.writer.drain()
            response_to = request_id
        return True

    def _encode_reply(
        self,
        connection: PeerConnection,
        request: Request,
        reply: Reply,
        request_id: int,
        response_to: int,
        more_to_come: bool,
    ) -> bytes:
        body = encode(reply.document, max_size=MAX_REPLY_SIZE)
        if request.opcode == OP_QUERY:
            message = encode_op_reply(request_id, response_to, [body])
        else:
            flags = OpMsgFlags.MORE_TO_COME if more_to_come else 0
            message = encode_op_msg(
                request_id, body, flags=flags, response_to=response_to, checksum=reply.checksum
            )
        compressor_name: str | None = None
        if reply.compress is None and request.compressor_id is not None:
            compressor_name = _COMPRESSOR_NAMES[request.compressor_id]
        elif isinstance(reply.compress, str):
            compressor_name = reply.compress
        elif reply.compress:
            compressor_name = connection.compressor
        if compressor_name is not None and compressor_name != "noop":
            return bytes(compress_message(message, Compressor(compressor_name)))
        return bytes(message)
