"""The floor of the driver benchmarks: the single-operation round trips with no driver at all.

A client of the driver benchmarks (``--drivers floor`` of :mod:`benchmarks.driver_bench`) that does only
what no driver can avoid. It writes a prepared OP_MSG on an asyncio connection and waits on a future for the
whole reply, which it does not decode. The message is the command the drivers send for the task, with an
``lsid``, and for an insert a ``txnNumber`` and the document in a document sequence, but without the
``$clusterTime`` they gossip; the ``_id`` sought or inserted and the ``txnNumber`` are patched into its bytes
in place. Its CPU per operation is what the machine charges a client for one round trip through asyncio:
the system calls, the event loop, and on a virtual machine the waking of a CPU left idle while the server
works, which grows with the time the server takes. A driver's CPU per operation minus the floor's, in the
same round, is what the driver itself spends.

The last reply of each timed loop is decoded after the loop and checked (``ok``, the document found, the
document inserted), so that a floor fed errors fails instead of timing them.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

from mongio.bson import Binary, Int64, ObjectId, decode, encode

_OP_MSG = 2013
_HEADER = struct.Struct("<iiii")
_BODY_OFFSET = 21  # header (16), flagBits (4), the body section's kind byte (1)
_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")
# Marker values the templates carry where the per-operation values go: found once in the bytes, then
# overwritten in place.
_ID_MARKER = 0x5A5A5A5A
_TXN_MARKER = 0x3C3C3C3C3C3C3C3C
_OBJECT_ID_MARKER = bytes.fromhex("a5a5a5a5a5a5a5a5a5a5a5a5")


class FloorError(Exception):
    """The server's reply to the floor client was not the one the task expects."""


def op_msg(body: dict[str, Any], sequence: tuple[str, list[dict[str, Any]]] | None = None) -> bytearray:
    """An OP_MSG (request id 1) with ``body`` as its body section and, given, one document sequence."""
    payload = b"\x00\x00\x00\x00\x00" + encode(body)
    if sequence is not None:
        identifier, documents = sequence
        section = identifier.encode() + b"\x00" + b"".join(encode(document) for document in documents)
        payload += b"\x01" + _INT32.pack(4 + len(section)) + section
    return bytearray(_HEADER.pack(16 + len(payload), 1, 0, _OP_MSG) + payload)


def marker_offset(message: bytes | bytearray, marker: bytes) -> int:
    """Where ``marker`` lies in ``message``; it must be there exactly once."""
    first = message.find(marker)
    if first < 0 or message.find(marker, first + 1) >= 0:
        raise ValueError(f"the marker {marker.hex()} is not in the message exactly once")
    return first


class FloorConnection(asyncio.BufferedProtocol):
    """A connection that sends prepared messages and waits for each whole reply, read into one buffer."""

    def __init__(self, buffer_size: int = 1 << 20) -> None:
        self._buffer = bytearray(buffer_size)
        self._view = memoryview(self._buffer)
        self._filled = 0
        self._reply_size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._filled < 4:
            return
        size = _INT32.unpack_from(self._buffer)[0]
        if size > len(self._buffer):
            # The rest of this reply has nowhere to go: the connection is of no further use.
            self._fail(FloorError(f"a reply of {size} bytes does not fit the floor client's buffer"))
            if self._transport is not None:
                self._transport.abort()
        elif self._filled >= size:
            self._reply_size, self._filled = size, 0
            waiter, self._waiter = self._waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"the server closed the floor client's connection: {exc}"))

    def _fail(self, error: Exception) -> None:
        if self._lost is None:  # the first error says why: the connection's loss may follow from it
            self._lost = error
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    async def round_trip(self, message: bytes | bytearray) -> None:
        """Send ``message`` and wait until the whole reply is in the buffer."""
        if self._lost is not None or self._transport is None:
            raise self._lost or ConnectionError("the floor client is not connected")
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(message)
        await self._waiter

    def last_reply(self) -> dict[str, Any]:
        """The body of the last reply, decoded (its only section must be a body)."""
        reply = bytes(self._buffer[: self._reply_size])
        if len(reply) < _BODY_OFFSET or _HEADER.unpack_from(reply)[3] != _OP_MSG or reply[20] != 0:
            raise FloorError("the reply is not an OP_MSG with a body section")
        document: dict[str, Any] = decode(reply[_BODY_OFFSET:])
        return document

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class FloorClient:
    """The floor client's three tasks over one :class:`FloorConnection` to ``host:port``."""

    def __init__(
        self, connection: FloorConnection, database: str, collection: str, small_doc: dict[str, Any]
    ) -> None:
        self.connection = connection
        lsid = {"id": Binary(uuid.uuid4().bytes, 4)}
        self._hello = op_msg({"hello": True, "lsid": lsid, "$db": database})
        self._find = op_msg(
            {
                "find": collection,
                "filter": {"_id": _ID_MARKER},
                "limit": 1,
                "singleBatch": True,
                "lsid": lsid,
                "$db": database,
            }
        )
        self._find_id = marker_offset(self._find, _INT32.pack(_ID_MARKER))
        document = {"_id": ObjectId(_OBJECT_ID_MARKER), **{k: v for k, v in small_doc.items() if k != "_id"}}
        self._insert = op_msg(
            {
                "insert": collection,
                "ordered": True,
                "lsid": lsid,
                "txnNumber": Int64(_TXN_MARKER),
                "$db": database,
            },
            ("documents", [document]),
        )
        self._insert_id = marker_offset(self._insert, _OBJECT_ID_MARKER)
        self._insert_txn = marker_offset(self._insert, _INT64.pack(_TXN_MARKER))
        self._inserted = 0

    @classmethod
    async def connect(
        cls, host: str, port: int, database: str, collection: str, small_doc: dict[str, Any]
    ) -> FloorClient:
        _, connection = await asyncio.get_running_loop().create_connection(FloorConnection, host, port)
        return cls(connection, database, collection, small_doc)

    async def run_command(self, ops: int) -> None:
        """``ops`` hellos; the last reply must say ok."""
        for _ in range(ops):
            await self.connection.round_trip(self._hello)
        self._check_ok()

    async def find_one_by_id(self, ops: int) -> None:
        """``find`` by ``_id`` 1 to ``ops``; the last reply must hold the document ``ops``."""
        message, offset = self._find, self._find_id
        for number in range(1, ops + 1):
            _INT32.pack_into(message, offset, number)
            await self.connection.round_trip(message)
        batch = self._check_ok()["cursor"]["firstBatch"]
        if [document["_id"] for document in batch] != [ops]:
            raise FloorError(f"find of _id {ops} returned {batch!r}")

    async def small_insert_one(self, ops: int) -> None:
        """``ops`` inserts of the small document, each with a new ``_id`` and ``txnNumber``; each must insert
        one document (checked on the last reply)."""
        message, id_offset, txn_offset = self._insert, self._insert_id, self._insert_txn
        for _ in range(ops):
            self._inserted += 1
            # An ObjectId's last 8 bytes hold the count: unique in this client's collection.
            _INT64.pack_into(message, id_offset + 4, self._inserted)
            _INT64.pack_into(message, txn_offset, self._inserted)
            await self.connection.round_trip(message)
        reply = self._check_ok()
        if reply.get("n") != 1:
            raise FloorError(f"an insert's reply was {reply!r}")

    def _check_ok(self) -> dict[str, Any]:
        reply = self.connection.last_reply()
        if reply.get("ok") != 1:
            raise FloorError(f"the server answered {reply!r}")
        return reply

    def close(self) -> None:
        self.connection.close()
