"""``Connection``: one established stream to one server, running one command at a time.

The rule this module exists to keep: a connection whose exchange was interrupted for any reason (the task was
cancelled, a timeout passed, the peer closed mid-reply, a reply was malformed) is closed on the spot, because
the bytes still in flight would be taken for the next command's reply. A closed connection refuses every
further use with ``AutoReconnect``; the pool simply drops it.
"""

from __future__ import annotations

import asyncio
import math
import ssl
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mongio.backend import is_cancellation, running_loop, timeout_at
from mongio.bson import InvalidBSON, RawBSONDocument, _decoder, _encoder, decode, encode
from mongio.bson._compiled import load_speedups
from mongio.bson._decoder import _MALFORMED, _describe, decode_framed
from mongio.bson._encoder import _invalid_document, _Refused
from mongio.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.connection.protocol import MessageProtocol
from mongio.connection.transport import Address, format_address, open_transport
from mongio.error_classification import command_error_class
from mongio.errors import AutoReconnect, ConfigurationError, InvalidOperation, ProtocolError
from mongio.wire.compression import COMPRESSOR_IDS, Compressor, agreed_compressors
from mongio.wire.cursor_reply import decode_cursor_reply
from mongio.wire.header import (
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_WRITE_BATCH_SIZE,
    OP_MSG,
    announced_limits,
    next_request_id,
)
from mongio.wire.legacy import OpReply, encode_op_query
from mongio.wire.message import parse_message
from mongio.wire.op_msg import (
    COMMAND_OVERHEAD,
    EXHAUST_ALLOWED,
    LARGE_PACKED_SIZE,
    MORE_TO_COME,
    REQUIRED_BITS_MASK,
    OpMsg,
    PackedDocuments,
    encode_command_parts,
)

if TYPE_CHECKING:
    from mongio.connection.auth import Authenticator as Reauthenticator
    from mongio.connection.ocsp import RevocationChecker
    from mongio.connection.socks import SocksProxy

__all__ = ["Connection", "check_command_reply", "connect"]

_HEADER_AND_FLAGS = struct.Struct("<iiiiI")
_INT32 = struct.Struct("<i")
_BODY_KIND_OFFSET = 20
_BODY_OFFSET = 21

# The compiled parse of the usual reply and encoding of the usual request (_speedups.c), when both extensions
# are there; else None, and _parse_any_reply parses every reply, encode_command_parts encodes every request.
_usual_reply: Callable[[memoryview, int, int, CodecOptions], dict[str, Any] | None] | None = None
_encode_request: Callable[..., list[bytearray] | None] | None = None
_compiled = load_speedups("mongio.connection._speedups")
if _compiled is not None and _decoder._SPEEDUPS is not None:
    _compiled.configure_reply(_decoder._SPEEDUPS.read_document, _decoder)
    _usual_reply = _compiled.usual_reply
    _compiled.configure_request(
        _decoder._SPEEDUPS.write_document, _encoder, PackedDocuments, COMMAND_OVERHEAD, LARGE_PACKED_SIZE
    )
    _encode_request = _compiled.encode_request


def _compressor_ids(names: Sequence[str]) -> frozenset[int]:
    return frozenset(COMPRESSOR_IDS[name] for name in names if name in COMPRESSOR_IDS)


def check_command_reply(reply: Mapping[str, Any], max_wire_version: int | None = None) -> None:
    """Raise ``OperationFailure`` (or a subclass) for a reply whose ``ok`` is not 1.

    Only ``ok`` is looked at: write errors and write concern errors inside an ``ok: 1`` reply are for the
    operation that knows its reply's shape.
    """
    if reply.get("ok") == 1:
        return
    if isinstance(reply, RawBSONDocument):
        # A reply left undecoded (a raw batch cursor's): the error carries it decoded, as a dict.
        reply = decode(reply.raw)
    code = reply.get("code")
    error_class = command_error_class(code)
    raise error_class(str(reply.get("errmsg", "command failed")), code, reply, max_wire_version)


class Connection:
    """A connection to one server: send a command, await its reply, one exchange at a time.

    Made by ``connect()``; the handshake code then fills in what the server's hello said (the size limits,
    ``max_wire_version``, the negotiated ``compressor``, ``service_id``) and sets ``ready``. The pool reads
    ``id``, ``address``, ``generation``, ``closed``, ``ready`` and ``last_used`` (``time.monotonic()``).
    """

    __slots__ = (
        "__weakref__",
        "_accepted_compressors",
        "_auth_fields",
        "_authenticator",
        "_awaiting_reply",
        "_close_reason",
        "_closed",
        "_codec_options",
        "_expected_response_to",
        "_lazy_batch",
        "_max_message_size",
        "_more_to_come",
        "_offered_compressors",
        "_protocol",
        "_receiving",
        "_request_id",
        "_transport",
        "address",
        "compressor",
        "created",
        "generation",
        "hello",
        "hello_round_trip",
        "id",
        "last_used",
        "max_bson_size",
        "max_wire_version",
        "max_write_batch_size",
        "min_wire_version",
        "name",
        "ready",
        "server_connection_id",
        "service_id",
        "socket_timeout",
    )

    def __init__(
        self,
        transport: asyncio.Transport,
        protocol: MessageProtocol,
        address: Address,
        *,
        id: int = 0,
        generation: int = 0,
        socket_timeout: float | None = None,
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self.address = address
        self.name = format_address(address)
        self.id = id
        self.generation = generation
        self.socket_timeout = socket_timeout
        """``socketTimeoutMS`` in seconds: the longest wait for a reply (None or 0: no limit)."""
        self.max_bson_size = DEFAULT_MAX_BSON_SIZE
        self._max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.max_write_batch_size = DEFAULT_MAX_WRITE_BATCH_SIZE
        self.max_wire_version = 0
        self.min_wire_version = 0
        self.compressor: Compressor | None = None
        """The compressor negotiated in the handshake; None sends everything uncompressed."""
        self._offered_compressors: tuple[str, ...] = ()
        # The ids of the compressors a compressed reply may use: none until the handshake says otherwise.
        self._accepted_compressors: frozenset[int] = frozenset()
        self.service_id: Any = None
        """The ``serviceId`` of the hello reply (load-balanced mode)."""
        self.server_connection_id: int | None = None
        self.hello: Mapping[str, Any] | None = None
        """The handshake's hello reply."""
        self.hello_round_trip: float | None = None
        """How long the handshake's hello took (seconds), the connection's set-up excluded; None until known."""
        self.ready = False
        """True once the handshake (and authentication) completed; False again once closed."""
        now = time.monotonic()
        self.created = now
        self.last_used = now
        self._closed = False
        self._close_reason: str | None = None
        self._awaiting_reply = False
        self._receiving = False
        self._more_to_come = False
        self._expected_response_to = 0
        self._request_id = 0  # the request that opened the current exchange
        self._codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS
        self._lazy_batch = False  # the reply being received may leave its cursor's batch undecoded
        self._authenticator: Reauthenticator | None = None
        self._auth_fields: Mapping[str, Any] = {}

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("ready" if self.ready else "pending")
        return f"<Connection {self.id} to {self.name} generation={self.generation} {state}>"

    # -- state ------------------------------------------------------------------------------------------

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    @max_message_size.setter
    def max_message_size(self, value: int) -> None:
        self._max_message_size = value
        self._protocol.max_message_size = value

    @property
    def closed(self) -> bool:
        """True once closed by ``close()``, by an interrupted exchange, or because the peer went away."""
        return self._closed or self._protocol.lost

    def hung_up_while_idle(self) -> bool:
        """Whether the server is found to have ended this idle connection (``closed`` is then true): the pool
        asks before handing an idle connection out, as a pull-based (trio) stream learns of a hang-up only
        when it looks; on asyncio the answer is ``closed``, known already."""
        return self._closed or self._protocol.hung_up_while_idle(self.last_used)

    @property
    def close_reason(self) -> str | None:
        if self._close_reason is not None:
            return self._close_reason
        return self._protocol.lost_reason

    @property
    def more_to_come(self) -> bool:
        """True while the server is streaming replies (exhaust) that ``receive()`` must read."""
        return self._more_to_come

    @property
    def request_id(self) -> int:
        """The id of the request that opened the current (or last) exchange: every reply of an exhaust stream
        belongs to it."""
        return self._request_id

    @property
    def in_exchange(self) -> bool:
        """True from sending a request until its last reply was read."""
        return self._awaiting_reply

    def offer_compressors(self, names: Sequence[str]) -> None:
        """Name the compressors the handshake's hello offers the server (``compression``).

        Until ``configure_from_hello`` applies the hello's reply, a reply compressed with any of them is
        accepted: the server may compress even that reply, with the one it picked.
        """
        self._offered_compressors = tuple(names)
        self._accepted_compressors = _compressor_ids(self._offered_compressors)

    def configure_from_hello(
        self, hello: Mapping[str, Any], compressor: Compressor | None = None, round_trip: float | None = None
    ) -> None:
        """Take the limits and versions a handshake hello reply announces (defaults where it is silent; the
        size limits made sane by ``announced_limits``); ``round_trip`` is how long that hello took.

        ``compressor`` is what this connection compresses its requests with. From now on a compressed reply
        is accepted only with that compressor or another one both the hello offered (``offer_compressors``)
        and its reply lists; any other is a ``ProtocolError`` that closes the connection.
        """
        self.hello = hello
        self.hello_round_trip = round_trip
        limits = announced_limits(hello)  # within ceilings: they bound what a reply's header may claim
        self.max_bson_size = limits.max_bson_size
        self.max_message_size = limits.max_message_size
        self.max_write_batch_size = limits.max_write_batch_size
        self.max_wire_version = int(hello.get("maxWireVersion", 0))
        self.min_wire_version = int(hello.get("minWireVersion", 0))
        self.service_id = hello.get("serviceId")
        connection_id = hello.get("connectionId")
        self.server_connection_id = int(connection_id) if connection_id is not None else None
        self.compressor = compressor
        # The server may answer with any compressor both sides named (the compression specification), not
        # only with the one we send with.
        listed = hello.get("compression")
        server = [name for name in listed if isinstance(name, str)] if isinstance(listed, list) else []
        accepted = _compressor_ids(agreed_compressors(self._offered_compressors, server))
        self._accepted_compressors = accepted if compressor is None else accepted | {compressor.id}

    # -- reauthentication -----------------------------------------------------------------------------------

    def keep_authenticator(self, authenticator: Reauthenticator, auth_fields: Mapping[str, Any]) -> None:
        """Keep the handshake's ``authenticator`` (whose mechanism can reauthenticate) for ``reauthenticate()``;
        ``auth_fields`` go on each of its commands (a declared stable API version)."""
        self._authenticator = authenticator
        self._auth_fields = dict(auth_fields)

    @property
    def can_reauthenticate(self) -> bool:
        """True when the server's ReauthenticationRequired (391) can be answered on this connection."""
        return self._authenticator is not None

    async def reauthenticate(self, deadline: float | None = None) -> None:
        """Run the authentication conversation again, without a hello (auth.md, "Reauthentication").

        ``deadline`` (``loop.time()`` terms, an operation's) bounds the callback and each command; without one
        each command has ``socket_timeout``. Raises ``AuthenticationFailed`` when the server refuses."""
        authenticator = self._authenticator
        if authenticator is None:
            raise ConfigurationError(f"connection {self.id} to {self.name} cannot reauthenticate")

        async def run_command(db: str, command: dict[str, Any]) -> Mapping[str, Any]:
            return await self.command(db, {**command, **self._auth_fields}, compress=False, deadline=deadline)

        await authenticator.reauthenticate(run_command, deadline=deadline)

    def close(self, reason: str = "closed by the driver") -> None:
        """Close now. A task awaiting a reply on this connection, or waiting for its writes to drain, gets
        ``AutoReconnect`` naming ``reason``."""
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        self.ready = False
        protocol = self._protocol
        # With a write waiting to drain, a graceful close would wait for a peer that may never read.
        if self._awaiting_reply or protocol.lost or protocol.writing_paused:
            self._protocol.abort(AutoReconnect(f"{self.name}: connection {self.id} closed: {reason}"))
        else:
            self._protocol.close()

    async def wait_closed(self) -> None:
        """After ``close()``: wait until the socket is really closed (e.g. before stopping the event loop)."""
        await self._protocol.wait_closed()

    def _interrupted(self, exc: BaseException) -> None:
        self._awaiting_reply = self._more_to_come = False
        if self._closed:
            return  # closed on purpose while the task waited: keep that reason
        if is_cancellation(exc):
            reason = "an operation on it was cancelled"
        else:
            reason = f"an operation on it failed: {type(exc).__name__}: {exc}"
        self._closed = True
        self._close_reason = reason
        self.ready = False
        self._protocol.abort(AutoReconnect(f"{self.name}: connection {self.id} closed: {reason}"))

    def _check_can_send(self) -> None:
        if self.closed:
            raise AutoReconnect(
                f"{self.name}: connection {self.id} is closed ({self.close_reason}) and cannot be used again"
            )
        if self._awaiting_reply:
            raise InvalidOperation(
                f"connection {self.id} to {self.name} is still waiting for a reply"
                + (" (an exhaust stream: receive() it to the end or close it)" if self._more_to_come else "")
            )

    # -- exchanges ----------------------------------------------------------------------------------------

    async def command(
        self,
        db: str,
        command: Mapping[str, Any],
        *,
        document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]] | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        compress: bool = True,
        more_to_come: bool = False,
        exhaust_allowed: bool = False,
        check: bool = True,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Run ``command`` on database ``db`` and return the server's reply document.

        ``document_sequences`` sends the named arrays as OP_MSG document sequences (e.g. an insert's
        ``documents``). ``compress=False`` sends this message uncompressed even if a compressor was negotiated
        (hello and authentication commands are never compressed anyway). ``more_to_come=True`` is an
        unacknowledged request: nothing is read back and ``{}`` is returned. ``exhaust_allowed=True`` lets the
        server stream more replies; while ``more_to_come`` is then true, read them with ``receive()``.
        ``check`` raises ``OperationFailure`` when the reply's ``ok`` is not 1. ``deadline`` (``loop.time()``
        terms) bounds the wait together with ``socket_timeout``.

        Any interruption (cancellation, a timeout, a network or protocol error) closes the connection before
        the error propagates.
        """
        await self.send(
            db,
            command,
            document_sequences=document_sequences,
            codec_options=codec_options,
            compress=compress,
            more_to_come=more_to_come,
            exhaust_allowed=exhaust_allowed,
            deadline=deadline,
        )
        if more_to_come:
            return {}
        return await self.receive(codec_options=codec_options, check=check, deadline=deadline)

    async def send(
        self,
        db: str,
        command: Mapping[str, Any],
        *,
        document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]] | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        compress: bool = True,
        more_to_come: bool = False,
        exhaust_allowed: bool = False,
        deadline: float | None = None,
    ) -> int:
        """Write one request and return its request id; read the reply with ``receive()`` unless
        ``more_to_come`` was set (then no reply will come)."""
        request_id = self._send(
            db, command, document_sequences, codec_options, compress, more_to_come, exhaust_allowed
        )
        if more_to_come:
            await self._drain(deadline)
        return request_id

    def send_nowait(
        self,
        db: str,
        command: Mapping[str, Any],
        *,
        document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]] | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        compress: bool = True,
    ) -> int:
        """:meth:`send` for a request that expects its reply (read it with ``receive()``): it never suspends,
        since only an unacknowledged request waits for the write buffer to drain."""
        return self._send(db, command, document_sequences, codec_options, compress, False, False)

    def _send(
        self,
        db: str,
        command: Mapping[str, Any],
        document_sequences: Mapping[str, Sequence[Mapping[str, Any] | bytes | PackedDocuments]] | None,
        codec_options: CodecOptions,
        compress: bool,
        more_to_come: bool,
        exhaust_allowed: bool,
    ) -> int:
        if self._closed or self._protocol.lost or self._awaiting_reply:
            self._check_can_send()
        flags = 0
        if more_to_come:
            flags |= MORE_TO_COME
        if exhaust_allowed:
            flags |= EXHAUST_ALLOWED
        request_id = next_request_id()
        # Encoding errors (DocumentTooLarge, InvalidDocument) happen before anything is written: the connection
        # stays usable.
        if _encode_request is not None and (self.compressor is None or not compress):
            # The usual message, compiled; None for anything else, which encode_command_parts encodes.
            try:
                usual = _encode_request(
                    request_id,
                    command,
                    document_sequences,
                    flags,
                    codec_options,
                    self.max_bson_size,
                    self._max_message_size,
                )
            except (_Refused, RecursionError) as refused:  # as _encoder._append_document reports a refusal
                raise _invalid_document(refused) from None
            if usual is not None:
                self._write(usual, request_id, expect_reply=not more_to_come)
                return request_id
        message = encode_command_parts(
            request_id,
            db,
            command,
            document_sequences=document_sequences,
            flags=flags,
            codec_options=codec_options,
            max_bson_size=self.max_bson_size,
            max_message_size=self._max_message_size,
            compressor=self.compressor if compress else None,
        )
        self._write(message, request_id, expect_reply=not more_to_come)
        return request_id

    async def legacy_command(
        self,
        db: str,
        command: Mapping[str, Any],
        *,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        check: bool = True,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """Run ``command`` as an OP_QUERY on ``<db>.$cmd`` and read its OP_REPLY: only for a legacy hello to
        servers too old to take OP_MSG before the handshake. Never compressed."""

        self._check_can_send()
        request_id = next_request_id()
        message = encode_op_query(
            request_id, f"{db}.$cmd", encode(command, codec_options=codec_options, max_size=None)
        )
        self._write((message,), request_id, expect_reply=True)
        return await self.receive(codec_options=codec_options, check=check, deadline=deadline)

    def _write(
        self, message: Sequence[bytes | bytearray | memoryview], request_id: int, *, expect_reply: bool
    ) -> None:
        """Hand the message's parts (one, or a large insert's documents apart from the rest: see
        ``encode_command_parts``) to the transport, which keeps their order."""
        self._expected_response_to = self._request_id = request_id
        self._awaiting_reply = expect_reply
        self._more_to_come = False
        for part in message:
            self._transport.write(part)
        if not expect_reply:
            self.last_used = time.monotonic()

    async def _drain(self, deadline: float | None) -> None:
        try:
            async with timeout_at(self._effective_deadline(deadline)):
                await self._protocol.drain()
        except BaseException as exc:
            self._interrupted(exc)
            raise

    async def receive(
        self,
        *,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        check: bool = True,
        deadline: float | None = None,
        lazy_batch: bool = False,
    ) -> dict[str, Any]:
        """Read the next reply to the request last sent (or the next reply of an exhaust stream).

        ``lazy_batch``: a cursor command's reply may keep its batch as a
        :class:`~mongio.bson.lazy_batch.DocumentBatch`, decoded document by document as the cursor hands the
        documents out (see :func:`~mongio.wire.cursor_reply.decode_cursor_reply`).
        """
        if self._closed or self._protocol.lost or not self._awaiting_reply or self._receiving:
            self._refuse_receive()
        self._receiving = True
        self._codec_options = codec_options
        self._lazy_batch = lazy_batch
        if deadline is None and not self.socket_timeout:
            effective_deadline = None
        else:
            effective_deadline = self._effective_deadline(deadline)
        try:
            reply: dict[str, Any] = await self._protocol.wait_message(self._parse_reply, effective_deadline)
        except BaseException as exc:
            self._interrupted(exc)
            raise
        finally:
            self._receiving = False
        self.last_used = time.monotonic()
        if check:
            check_command_reply(reply, self.max_wire_version)
        return reply

    def _refuse_receive(self) -> None:
        if self.closed:
            raise AutoReconnect(
                f"{self.name}: connection {self.id} is closed ({self.close_reason}) and cannot be used again"
            )
        if not self._awaiting_reply:
            raise InvalidOperation(f"connection {self.id} to {self.name} has no reply to receive")
        raise InvalidOperation(f"another task is already receiving on connection {self.id} to {self.name}")

    def _effective_deadline(self, deadline: float | None) -> float | None:
        if deadline is not None:
            # An operation's deadline (client-side operation timeout; infinite for timeoutMS=0) replaces
            # socketTimeoutMS.
            return None if math.isinf(deadline) else deadline
        if self.socket_timeout:
            socket_deadline = self._protocol.loop.time() + self.socket_timeout
            return socket_deadline if deadline is None else min(deadline, socket_deadline)
        return deadline

    def _parse_reply(self, message: memoryview) -> dict[str, Any]:
        # Runs inside the protocol's buffer_updated, on a view of its buffer: decode before returning.
        if _usual_reply is not None and not self._lazy_batch:
            # The usual reply, compiled; None for anything else, which the Python parser below decides.
            try:
                reply = _usual_reply(message, self._expected_response_to, self._request_id, self._codec_options)
            # decode_framed's conversion of the loop's errors, inline as there: this runs once per reply.
            except InvalidBSON:
                raise
            except _MALFORMED as exc:
                raise InvalidBSON(_describe(exc)) from exc
            if reply is not None:
                self._more_to_come = self._awaiting_reply = False
                return reply
        return self._parse_any_reply(message)

    def _parse_any_reply(self, message: memoryview) -> dict[str, Any]:
        """The reply parser in Python: the reference for the compiled usual case, and every other case."""
        size = len(message)
        if size < _BODY_OFFSET + 5:
            body = self._parse_other_reply(message)  # too short to be valid: let the full parser say why
        elif (
            (fields := _HEADER_AND_FLAGS.unpack_from(message))[3] == OP_MSG
            and not fields[4] & REQUIRED_BITS_MASK
            and message[_BODY_KIND_OFFSET] == 0
            and _INT32.unpack_from(message, _BODY_OFFSET)[0] == size - _BODY_OFFSET
        ):
            # The usual reply: uncompressed, no checksum, no moreToCome, one body section and nothing else.
            if fields[2] != self._expected_response_to and fields[2] != self._request_id:
                raise self._wrong_response_to(fields[2])
            self._more_to_come = self._awaiting_reply = False
            codec_options = self._codec_options
            if codec_options.document_class is dict and not self._lazy_batch:
                # Its length field was checked above.
                return decode_framed(message[_BODY_OFFSET:], codec_options)  # type: ignore[no-any-return]
            body = message[_BODY_OFFSET:]
        else:
            body = self._parse_other_reply(message)
        return self._decode_body(body)

    def _decode_body(self, body: memoryview) -> dict[str, Any]:
        codec_options = self._codec_options
        # A document class other than dict may keep a reference to the bytes it was made from (a raw
        # document): give it its own copy, since this buffer is about to be reused.
        if codec_options.document_class is not dict:
            return decode(bytes(body), codec_options)  # type: ignore[no-any-return]
        if self._lazy_batch:
            return decode_cursor_reply(body, codec_options)
        document: dict[str, Any] = decode(body, codec_options)
        return document

    def _parse_other_reply(self, message: memoryview) -> memoryview:
        parsed = parse_message(message, self._max_message_size, self._accepted_compressors)
        # A follow-up reply of an exhaust stream answers the previous reply (OP_MSG spec); some servers put
        # the request that opened the stream there instead. Both identify this exchange on this connection.
        if parsed.response_to != self._expected_response_to and parsed.response_to != self._request_id:
            raise self._wrong_response_to(parsed.response_to)
        content = parsed.content
        if isinstance(content, OpMsg):
            if content.flags & MORE_TO_COME:
                self._more_to_come = True
                self._expected_response_to = parsed.request_id
            else:
                self._more_to_come = self._awaiting_reply = False
            return content.body
        if isinstance(content, OpReply):
            if len(content.documents) != 1:
                raise ProtocolError(
                    f"{self.name} sent an OP_REPLY with {len(content.documents)} documents, expected 1"
                )
            self._more_to_come = self._awaiting_reply = False
            return content.documents[0]
        raise ProtocolError(f"{self.name} sent a message with opcode {parsed.opcode}, which is not a reply")

    def _wrong_response_to(self, response_to: int) -> ProtocolError:
        return ProtocolError(
            f"{self.name} sent a reply to request {response_to}, expected one to {self._expected_response_to}"
        )


async def connect(
    address: Address,
    *,
    id: int = 0,
    generation: int = 0,
    connect_timeout: float | None = 20.0,
    socket_timeout: float | None = None,
    ssl_context: ssl.SSLContext | None = None,
    proxy: SocksProxy | None = None,
    revocation: RevocationChecker | None = None,
) -> Connection:
    """Open a TCP, TLS or Unix-socket stream to ``address`` (through ``proxy``, a SOCKS5 proxy, when given)
    and wrap it in a ``Connection`` (no handshake yet).

    With ``revocation`` (and TLS), the server certificate's revocation is checked after the TLS handshake,
    within what is left of ``connect_timeout``. Errors raise ``AutoReconnect`` (``NetworkTimeout`` after
    ``connect_timeout`` seconds) naming the address.
    """
    loop = running_loop()
    deadline = loop.time() + connect_timeout if connect_timeout else None
    transport, protocol = await open_transport(
        address, connect_timeout=connect_timeout, ssl_context=ssl_context, proxy=proxy
    )
    if revocation is not None and ssl_context is not None:
        await _check_revocation(transport, address, revocation, deadline)
    return Connection(
        transport, protocol, address, id=id, generation=generation, socket_timeout=socket_timeout
    )


async def _check_revocation(
    transport: asyncio.Transport, address: Address, revocation: RevocationChecker, deadline: float | None
) -> None:
    """Run the OCSP check on a fresh TLS stream; the stream is closed if it fails (or is cancelled)."""
    from mongio.connection.ocsp import CertificateRejected  # loaded already: ``revocation`` comes from there

    try:
        await revocation.check(transport.get_extra_info("ssl_object"), deadline)
    except CertificateRejected as exc:
        transport.abort()
        raise AutoReconnect(f"TLS certificate of {format_address(address)} rejected: {exc}") from exc
    except BaseException:
        transport.abort()
        raise
