"""A peer that lies about sizes, over real sockets: a hello announcing limits no server has, and reply headers
claiming more than ever arrives. The connection believes the limits only up to their ceilings, refuses a
header over its limit before reading on, and holds no more memory than the bytes that actually came."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.connection import Connection, connect
from mongio.errors import AutoReconnect, ProtocolError
from mongio.wire import HEADER, OP_MSG
from mongio.wire.header import (
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_WRITE_BATCH_SIZE,
    MAX_BSON_SIZE_CEILING,
    MAX_MESSAGE_SIZE_CEILING,
)
from tests.support.loopback_peer import LoopbackPeer, Reply, Request, default_reply

TWO_GIB = 2**31 - 1  # the longest length a header can state
TRICKLE = 1024 * 1024


def forging_peer(
    hello_fields: dict[str, Any], declared: int | None = None, then_close: bool = False
) -> LoopbackPeer:
    """A peer whose hello carries ``hello_fields``; with ``declared``, every other reply is a header declaring
    that many bytes followed by 1 MiB of data (and, with ``then_close``, the peer hanging up)."""

    def handler(request: Request) -> Any:
        if request.command_name.lower() in ("hello", "ismaster"):
            return {**default_reply(request, peer), **hello_fields}
        if declared is None:
            return None
        forged = HEADER.pack(declared, 1, request.header.request_id, OP_MSG) + bytes(TRICKLE)
        return Reply(raw=forged, cut_after=len(forged) if then_close else None)

    peer = LoopbackPeer(handler)
    return peer


async def handshake(conn: Connection) -> None:
    conn.configure_from_hello(await conn.command("admin", {"hello": 1}))


async def test_a_hello_claiming_a_terabyte_is_believed_up_to_the_ceiling_and_a_2_gib_header_refused() -> None:
    terabyte = {"maxBsonObjectSize": 10**12, "maxMessageSizeBytes": 10**12, "maxWriteBatchSize": 10**12}
    async with forging_peer(terabyte, TWO_GIB) as peer:
        conn = await connect(peer.address)
        await handshake(conn)
        assert (conn.max_bson_size, conn.max_message_size) == (
            MAX_BSON_SIZE_CEILING,
            MAX_MESSAGE_SIZE_CEILING,
        )
        message = f"sent a message of length {TWO_GIB}; the limits are 16 to {MAX_MESSAGE_SIZE_CEILING} bytes"
        with pytest.raises(ProtocolError, match=message):
            await conn.command("admin", {"ping": 1})
        assert conn.closed


async def test_a_header_within_the_limit_costs_the_bytes_that_came_not_the_bytes_it_claimed() -> None:
    async with forging_peer({}, 48_000_000, then_close=True) as peer:
        conn = await connect(peer.address)
        await handshake(conn)
        with pytest.raises(AutoReconnect, match="closed the connection"):
            await conn.command("admin", {"ping": 1})
        assert conn._protocol._capacity <= 2 * TRICKLE  # 1 MiB came: not 48 MB


@pytest.mark.parametrize("nonsense", [-1, 0, "16MB", 1.5])
async def test_a_hello_announcing_nonsense_sizes_leaves_the_defaults(nonsense: Any) -> None:
    sizes = {"maxBsonObjectSize": nonsense, "maxMessageSizeBytes": nonsense, "maxWriteBatchSize": nonsense}
    async with forging_peer(sizes) as peer:
        conn = await connect(peer.address)
        try:
            await handshake(conn)
            assert conn.max_bson_size == DEFAULT_MAX_BSON_SIZE
            assert conn.max_write_batch_size == DEFAULT_MAX_WRITE_BATCH_SIZE
            documents = [{"_id": i, "s": "x" * 1000} for i in range(3)]
            await conn.command("db", {"insert": "c"}, document_sequences={"documents": documents})
        finally:
            conn.close()
