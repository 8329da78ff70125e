"""Connection against the loopback peer: what the test server cannot show (compression on the wire, exhaust
streams, slow, cut or malformed replies, dropped connections), over real sockets."""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
import trustme

from mongio.bson import encode
from mongio.connection import Connection, connect
from mongio.connection.pool import Pool
from mongio.connection.pool_options import PoolOptions
from mongio.errors import (
    AutoReconnect,
    DocumentTooLarge,
    InvalidOperation,
    NetworkTimeout,
    OperationFailure,
    ProtocolError,
)
from mongio.wire import (
    COMPRESSOR_IDS,
    HEADER,
    HEADER_SIZE,
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    SUPPORTED_COMPRESSORS,
    encode_op_msg,
    get_compressor,
    negotiate_compressor,
)
from mongio.wire.op_msg import COMMAND_OVERHEAD
from tests.support.backends import AsyncioServer, on_asyncio, served
from tests.support.loopback_peer import CLOSE, NO_REPLY, LoopbackPeer, Reply, Request, default_reply


async def handshake(conn: Connection, compressors: list[str]) -> dict[str, Any]:
    """The least a test needs of a handshake: hello with the compressors, then apply the reply."""
    conn.offer_compressors(compressors)
    hello = await conn.command("admin", {"hello": 1, "compression": compressors})
    chosen = negotiate_compressor(compressors, hello.get("compression"))
    conn.configure_from_hello(hello, get_compressor(chosen) if chosen else None)
    return hello


# -- compression ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SUPPORTED_COMPRESSORS)
async def test_negotiated_compressor_is_used_on_the_wire(name: str) -> None:
    def handler(request: Request) -> Any:
        if request.command_name == "find":
            # A reply big enough that compressing it matters; sent compressed because the request was.
            return {
                "ok": 1,
                "cursor": {
                    "id": 0,
                    "ns": "db.c",
                    "firstBatch": [{"i": i, "s": "v" * 100} for i in range(50)],
                },
            }
        return None

    async with LoopbackPeer(handler, compressors=list(SUPPORTED_COMPRESSORS)) as peer:
        conn = await connect(peer.address)
        try:
            others = [n for n in SUPPORTED_COMPRESSORS if n != name]
            hello = await handshake(conn, [name, *others])
            assert conn.compressor is not None and conn.compressor.name == name
            assert hello["compression"][0] == name

            ping = await conn.command("admin", {"ping": 1})
            found = await conn.command("db", {"find": "c", "filter": {"text": "abc" * 100}})
            documents = [{"_id": i, "payload": "p" * 200} for i in range(10)]
            await conn.command("db", {"insert": "c"}, document_sequences={"documents": documents})
            await conn.command("admin", {"hello": 1})
            await conn.command("admin", {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": "eA=="})
            await conn.command("admin", {"isMaster": 1})
        finally:
            conn.close()

    assert ping == {"ok": 1}
    assert [d["i"] for d in found["cursor"]["firstBatch"]] == list(range(50))
    hello_request, ping_request, find_request, insert_request, hello2, sasl, legacy = peer.requests
    compressor_id = COMPRESSOR_IDS[name]
    for request in (ping_request, find_request, insert_request):
        assert request.header.opcode == OP_COMPRESSED
        assert request.compressor_id == compressor_id
        assert request.opcode == OP_MSG
        assert len(request.raw) == request.header.length
    assert ping_request.document == {"ping": 1, "$db": "admin"}
    assert find_request.document == {"find": "c", "filter": {"text": "abc" * 100}, "$db": "db"}
    assert insert_request.sequences == {"documents": documents}
    assert len(find_request.raw) < 300  # 300 bytes of filter text went over the wire compressed
    for request in (hello_request, hello2, sasl, legacy):
        assert request.header.opcode == OP_MSG
        assert request.compressor_id is None


async def test_no_common_compressor_means_no_compression() -> None:
    async with LoopbackPeer(compressors=["zlib"]) as peer:
        conn = await connect(peer.address)
        try:
            hello = await handshake(conn, ["snappy", "zstd"])
            assert "compression" not in hello
            assert conn.compressor is None
            await conn.command("admin", {"ping": 1})
        finally:
            conn.close()
    assert peer.requests[-1].header.opcode == OP_MSG
    assert peer.requests[-1].compressor_id is None


async def test_compress_false_sends_one_message_uncompressed() -> None:
    async with LoopbackPeer(compressors=["zstd"]) as peer:
        conn = await connect(peer.address)
        try:
            await handshake(conn, ["zstd"])
            await conn.command("admin", {"ping": 1}, compress=False)
            await conn.command("admin", {"ping": 2})
        finally:
            conn.close()
    assert [r.compressor_id for r in peer.requests[1:]] == [None, COMPRESSOR_IDS["zstd"]]


async def test_compressed_replies_are_decompressed_with_any_compressor_both_sides_agreed_to() -> None:
    # The server may compress any reply, the handshake's included, with any compressor both sides named: the
    # client goes by the id in each reply's header, whatever it sent its request with.
    peer: LoopbackPeer

    def handler(request: Request) -> Any:
        if request.command_name == "hello":
            return Reply(default_reply(request, peer), compress="zlib")
        return Reply({"ok": 1, "echo": request.document.get("n")}, compress=request.document.get("use"))

    async with LoopbackPeer(handler, compressors=["snappy", "zlib", "zstd"]) as peer:
        conn = await connect(peer.address)
        try:
            hello = await handshake(conn, ["snappy", "zlib", "zstd"])
            assert hello["compression"] == ["snappy", "zlib", "zstd"]
            assert conn.compressor is not None and conn.compressor.name == "snappy"
            for n, use in enumerate(["zstd", "zlib", "snappy", False]):
                assert await conn.command("admin", {"ping": 1, "n": n, "use": use}) == {"ok": 1, "echo": n}
        finally:
            conn.close()
    assert [request.compressor_name for request in peer.requests[1:]] == ["snappy"] * 4


@pytest.mark.parametrize(
    ("offered", "served", "reply_with", "negotiated"),
    [
        (
            ["zlib"],
            ["zlib", "zstd", "snappy"],
            "zstd",
            "zlib",
        ),  # the server has it, the client did not offer it
        (["zlib", "snappy"], ["zlib"], "snappy", "zlib"),  # the client offered it, the server did not list it
        ([], ["zlib", "zstd", "snappy"], "snappy", "none"),  # no compression at all
        (["zstd"], ["zstd"], "noop", "zstd"),  # nobody can offer noop
    ],
)
async def test_a_reply_compressed_with_a_compressor_not_agreed_to_closes_the_connection(
    offered: list[str], served: list[str], reply_with: str, negotiated: str
) -> None:
    inner = encode_op_msg(1, encode({"ok": 1}))

    def handler(request: Request) -> Any:
        if request.command_name != "ping":
            return None
        if reply_with == "noop":  # the peer sends noop uncompressed: the message is made here
            body = struct.pack("<iiB", OP_MSG, len(inner) - HEADER_SIZE, 0) + bytes(inner[HEADER_SIZE:])
            return Reply(
                raw=HEADER.pack(HEADER_SIZE + len(body), 9, request.header.request_id, OP_COMPRESSED) + body
            )
        return Reply({"ok": 1}, compress=reply_with)

    async with LoopbackPeer(handler, compressors=served) as peer:
        conn = await connect(peer.address)
        try:
            await handshake(conn, offered)
            expected = (
                rf"compressor {reply_with} \(id {COMPRESSOR_IDS[reply_with]}\), which the handshake did not"
            )
            with pytest.raises(ProtocolError, match=rf"{expected} negotiate \(negotiated: {negotiated}\)"):
                await conn.command("admin", {"ping": 1})
            assert conn.closed
            with pytest.raises(AutoReconnect):
                await conn.command("admin", {"ping": 1})
        finally:
            conn.close()


async def test_a_hello_reply_compressed_with_a_compressor_not_offered_is_refused() -> None:
    peer: LoopbackPeer

    def handler(request: Request) -> Any:
        return Reply(default_reply(request, peer), compress="zstd")

    async with LoopbackPeer(handler, compressors=["zlib", "zstd"]) as peer:
        conn = await connect(peer.address)
        try:
            with pytest.raises(ProtocolError, match=r"compressor zstd .* \(negotiated: zlib\)"):
                await handshake(conn, ["zlib"])
            assert conn.closed
        finally:
            conn.close()


# -- exhaust and unacknowledged ----------------------------------------------------------------------------


async def test_exhaust_stream_is_read_reply_by_reply() -> None:
    def handler(request: Request) -> Any:
        if request.command_name == "getMore":
            assert request.exhaust_allowed
            return [{"ok": 1, "batch": n} for n in range(4)]
        return None

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address)
        try:
            first = await conn.command("db", {"getMore": 1, "collection": "c"}, exhaust_allowed=True)
            assert first["batch"] == 0
            announced = conn.more_to_come  # a local, so the loop below reads the property afresh
            assert announced
            with pytest.raises(InvalidOperation, match="exhaust"):
                await conn.command("admin", {"ping": 1})
            batches = [first["batch"]]
            while conn.more_to_come:
                batches.append((await conn.receive())["batch"])
            assert batches == [0, 1, 2, 3]
            with pytest.raises(InvalidOperation, match="no reply to receive"):
                await conn.receive()
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        finally:
            conn.close()
    assert not conn.more_to_come


async def test_cancelled_exhaust_stream_closes_the_connection() -> None:
    def handler(request: Request) -> Any:
        if request.command_name == "hello" and request.exhaust_allowed:
            return [Reply({"ok": 1, "n": 0}), Reply({"ok": 1, "n": 1}, delay=5), Reply({"ok": 1, "n": 2})]
        return None

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address)
        await conn.command("admin", {"hello": 1}, exhaust_allowed=True)
        async with anyio.create_task_group() as waiting:
            waiting.start_soon(conn.receive)
            await anyio.sleep(0.05)
            waiting.cancel_scope.cancel()
        assert conn.closed
        with pytest.raises(AutoReconnect, match="cancelled"):
            await conn.command("admin", {"ping": 1})


async def test_unacknowledged_request_gets_no_reply_and_the_next_command_works() -> None:
    async with LoopbackPeer() as peer:
        conn = await connect(peer.address)
        try:
            assert (
                await conn.command("db", {"insert": "c", "writeConcern": {"w": 0}}, more_to_come=True) == {}
            )
            assert not conn.in_exchange
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        finally:
            conn.close()
    insert, ping = peer.requests
    assert insert.more_to_come and not ping.more_to_come


# -- faults -----------------------------------------------------------------------------------------------


async def test_socket_timeout_closes_the_connection() -> None:
    def handler(request: Request) -> Any:
        return Reply({"ok": 1}, delay=1.0) if request.command_name == "slow" else None

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address, socket_timeout=0.1)
        assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        started = time.monotonic()
        host, port = peer.address
        with pytest.raises(NetworkTimeout, match=rf"^{host}:{port}: timed out"):
            await conn.command("admin", {"slow": 1})
        assert 0.09 <= time.monotonic() - started < 0.9  # well before the 1 s delay ends
        assert conn.closed
        with pytest.raises(AutoReconnect, match=r"closed .*NetworkTimeout"):
            await conn.command("admin", {"ping": 1})
        await anyio.sleep(0.05)
        assert peer.connections[0].client_gone


async def test_deadline_shorter_than_socket_timeout_wins() -> None:
    def handler(request: Request) -> Any:
        return Reply({"ok": 1}, delay=1.0)

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address, socket_timeout=10)
        with pytest.raises(NetworkTimeout):  # deadlines are on time.monotonic(), the loop's clock
            await conn.command("admin", {"ping": 1}, deadline=time.monotonic() + 0.05)
        assert conn.closed


async def test_cancelled_command_closes_the_connection_for_good() -> None:
    def handler(request: Request) -> Any:
        return Reply({"ok": 1}, delay=0.3)

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address)
        async with anyio.create_task_group() as commands:
            commands.start_soon(conn.command, "admin", {"ping": 1})
            with anyio.fail_after(5):
                await peer.wait_for_requests(1)
            commands.cancel_scope.cancel()
        assert conn.closed and not conn.ready
        for attempt in (conn.command("admin", {"ping": 1}), conn.send("admin", {"ping": 1})):
            with pytest.raises(
                AutoReconnect,
                match=r"^127\.0\.0\.1:\d+: connection 0 is closed \(an operation on it was cancelled\)",
            ):
                await attempt
        await anyio.sleep(0.4)  # the late reply must not resurrect anything
        assert conn.closed
        assert len(peer.requests) == 1


async def test_a_timeout_scope_around_a_command_closes_it() -> None:
    async with LoopbackPeer(lambda request: Reply({"ok": 1}, delay=1)) as peer:
        conn = await connect(peer.address)
        with pytest.raises(TimeoutError):
            with anyio.fail_after(0.05):
                await conn.command("admin", {"ping": 1})
        assert conn.closed


@pytest.mark.parametrize("cut_after", [0, 4, 16, 30])
async def test_peer_closing_mid_reply(cut_after: int) -> None:
    async with LoopbackPeer(lambda request: Reply({"ok": 1, "pad": "x" * 100}, cut_after=cut_after)) as peer:
        conn = await connect(peer.address)
        host, port = peer.address
        with pytest.raises(AutoReconnect, match=rf"^{host}:{port}: "):  # PyMongo's network errors start so
            await conn.command("admin", {"ping": 1})
        assert conn.closed


async def test_peer_hanging_up_instead_of_answering() -> None:
    async with LoopbackPeer(lambda request: CLOSE) as peer:
        conn = await connect(peer.address)
        host, port = peer.address
        with pytest.raises(AutoReconnect, match=rf"^{host}:{port}: connection closed: the server closed the connection"):
            await conn.command("admin", {"ping": 1})
        assert conn.closed


async def test_wait_closed_returns_once_the_socket_is_closed() -> None:
    async with LoopbackPeer() as peer:
        conn = await connect(peer.address)
        await conn.command("admin", {"ping": 1})
        conn.close()
        with anyio.fail_after(5):
            await conn.wait_closed()
        assert conn._transport.get_extra_info("socket").fileno() == -1
        await conn.wait_closed()  # again: returns at once


@pytest.fixture(scope="module")
def loopback_ca() -> trustme.CA:
    return trustme.CA()


def tls_peer_contexts(ca: trustme.CA) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for 127.0.0.1 signed by ``ca``, and a client context trusting it."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


FD_SETSIZE = 1024  # select() refuses descriptors from here on


@contextmanager
def descriptors_taken_below(number: int) -> Iterator[None]:
    """Hold every free descriptor below ``number`` open meanwhile, so the next socket gets one past it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = number + 256
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"the process may open only {hard} descriptors")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < number - 1:
            held.append(os.open(os.devnull, os.O_RDONLY))
        yield
    finally:
        for descriptor in held:
            os.close(descriptor)


@pytest.mark.parametrize(
    ("tls", "past_fd_setsize"), [(False, False), (True, False), (False, True)], ids=["plain", "tls", "high-fd"]
)
async def test_idle_connection_notices_the_peer_left(
    tls: bool, past_fd_setsize: bool, loopback_ca: trustme.CA
) -> None:
    server_context, client_context = tls_peer_contexts(loopback_ca) if tls else (None, None)
    async with LoopbackPeer(ssl=server_context) as peer:
        with descriptors_taken_below(FD_SETSIZE) if past_fd_setsize else nullcontext():
            conn = await connect(peer.address, ssl_context=client_context)
        if past_fd_setsize:
            assert conn._transport.get_extra_info("socket").fileno() >= FD_SETSIZE
        await conn.command("admin", {"ping": 1})
        await anyio.sleep(0.05)  # idle long enough to be looked at on trio (IDLE_PROBE_AFTER, 10 ms)
        assert not conn.hung_up_while_idle()  # nothing unread, a TLS session ticket included
        peer.drop_connections()
        await anyio.sleep(0.05)
        # asyncio's transport reports the hang-up as it arrives; a trio stream is read only by an exchange, so
        # the hang-up waits in the socket until the pool asks before handing the connection out.
        noticed_unasked = conn.closed
        assert noticed_unasked is on_asyncio()
        assert conn.hung_up_while_idle() and conn.closed
        with pytest.raises(AutoReconnect, match="closed"):
            await conn.command("admin", {"ping": 1})


async def test_pool_hands_out_a_fresh_connection_once_the_peer_left_an_idle_one() -> None:
    async with LoopbackPeer() as peer:

        async def connect_to_peer(connection_id: int, generation: int) -> Connection:
            return await connect(peer.address, id=connection_id, generation=generation)

        pool: Pool[Connection] = Pool(peer.address, connect_to_peer, PoolOptions())
        pool.ready()
        try:
            async with pool.checkout() as first:
                await first.command("admin", {"ping": 1})
            peer.drop_connections()
            await anyio.sleep(0.05)  # the hang-up arrives; on trio, idle past IDLE_PROBE_AFTER (10 ms) too
            async with pool.checkout() as second:
                assert second is not first and first.closed
                assert (await second.command("admin", {"ping": 1}))["ok"] == 1
            assert pool.total_connection_count == 1
        finally:
            await pool.close()


def _bad_length_message() -> bytes:
    return HEADER.pack(10, 1, 0, OP_MSG)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (_bad_length_message(), "length 10"),
        (encode_op_msg(5, encode({"ok": 1}), response_to=123456), "reply to request 123456"),
        (HEADER.pack(26, 5, 0, OP_QUERY) + b"\x00" * 10, "not a reply|too short"),
        (bytes(encode_op_msg(5, encode({"ok": 1}), flags=1 << 3)), "required"),
    ],
)
async def test_malformed_reply_is_a_protocol_error_and_closes(raw: bytes, error: str) -> None:
    async with LoopbackPeer(lambda request: Reply(raw=raw)) as peer:
        conn = await connect(peer.address)
        with pytest.raises(ProtocolError, match=error):
            await conn.command("admin", {"ping": 1})
        assert conn.closed


async def test_checksummed_reply_is_verified() -> None:
    def handler(request: Request) -> Any:
        reply = Reply({"ok": 1, "value": "abc"}, checksum=True)
        if request.document.get("corrupt"):
            data = bytearray(
                encode_op_msg(
                    77, encode(reply.document), response_to=request.header.request_id, checksum=True
                )
            )
            data[-8] ^= 0x02  # a letter of "abc": still valid BSON
            return Reply(raw=bytes(data))
        return reply

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address)
        assert await conn.command("admin", {"ping": 1}) == {"ok": 1, "value": "abc"}
        with pytest.raises(ProtocolError, match="checksum mismatch"):
            await conn.command("admin", {"ping": 1, "corrupt": True})
        assert conn.closed


async def test_command_failure_leaves_the_connection_usable() -> None:
    def handler(request: Request) -> Any:
        if request.command_name == "bad":
            return {"ok": 0, "errmsg": "no such command: 'bad'", "code": 59, "codeName": "CommandNotFound"}
        return None

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address)
        try:
            with pytest.raises(OperationFailure, match="no such command") as info:
                await conn.command("admin", {"bad": 1})
            assert info.value.code == 59
            assert (await conn.command("admin", {"bad": 1}, check=False))["code"] == 59
            assert not conn.closed
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        finally:
            conn.close()


async def test_too_large_command_is_refused_before_sending() -> None:
    async with LoopbackPeer() as peer:
        conn = await connect(peer.address)
        try:
            conn.max_bson_size = 1000
            with pytest.raises(DocumentTooLarge):
                await conn.command(
                    "db", {"insert": "c"}, document_sequences={"documents": [{"x": "y" * (1000 + COMMAND_OVERHEAD)}]}
                )
            assert not conn.closed
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        finally:
            conn.close()
    assert [r.command_name for r in peer.requests] == ["ping"]


async def test_close_while_a_task_waits_fails_that_task() -> None:
    async with LoopbackPeer(lambda request: NO_REPLY) as peer:
        conn = await connect(peer.address)
        failures: list[BaseException] = []

        async def command() -> None:
            try:
                await conn.command("admin", {"ping": 1})
            except AutoReconnect as error:
                failures.append(error)

        async with anyio.create_task_group() as commands:
            commands.start_soon(command)
            with anyio.fail_after(5):
                await peer.wait_for_requests(1)
            conn.close("pool cleared")
        assert len(failures) == 1 and "pool cleared" in str(failures[0])
        assert conn.closed
        assert conn.close_reason == "pool cleared"
        with pytest.raises(AutoReconnect, match=r"is closed \(pool cleared\)"):
            await conn.command("admin", {"ping": 1})


async def test_concurrent_use_is_refused() -> None:
    async with LoopbackPeer(lambda request: Reply({"ok": 1}, delay=0.1)) as peer:
        conn = await connect(peer.address)
        try:
            replies: list[Any] = []

            async def first() -> None:
                replies.append(await conn.command("admin", {"ping": 1}))

            async with anyio.create_task_group() as commands:
                commands.start_soon(first)
                with anyio.fail_after(5):  # the first command was sent and waits for its reply
                    await peer.wait_for_requests(1)
                with pytest.raises(InvalidOperation, match="still waiting for a reply"):
                    await conn.command("admin", {"ping": 2})
            assert replies == [{"ok": 1}]
            assert not conn.closed
        finally:
            conn.close()


async def test_legacy_op_query_handshake() -> None:
    async with LoopbackPeer() as peer:
        conn = await connect(peer.address)
        try:
            reply = await conn.legacy_command("admin", {"isMaster": 1, "helloOk": True})
            assert reply["ismaster"] is True and reply["helloOk"] is True
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        finally:
            conn.close()
    legacy = peer.requests[0]
    assert legacy.opcode == OP_QUERY
    assert legacy.collection == "admin.$cmd"
    assert legacy.document == {"isMaster": 1, "helloOk": True}


async def test_large_replies_and_requests_cross_the_buffer_size() -> None:
    big = "b" * (3 * 1024 * 1024)

    def handler(request: Request) -> Any:
        return {
            "ok": 1,
            "echo": request.document.get("payload", ""),
            "n": len(request.sequences.get("documents", [])),
        }

    async with LoopbackPeer(handler) as peer:
        conn = await connect(peer.address)
        try:
            for size in (10, 70_000, len(big), 100):
                reply = await conn.command("db", {"echo": 1, "payload": big[:size]})
                assert reply["echo"] == big[:size]
            documents = [{"i": i, "blob": "d" * 500_000} for i in range(20)]
            reply = await conn.command("db", {"insert": "c"}, document_sequences={"documents": documents})
            assert reply["n"] == 20
        finally:
            conn.close()


# -- addresses ----------------------------------------------------------------------------------------


def _ipv6_available() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_available(), reason="no IPv6 loopback on this host")
async def test_ipv6_loopback() -> None:
    async with LoopbackPeer(host="::1") as peer:
        conn = await connect(peer.address)
        try:
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
            assert conn.name.startswith("[::1]:")
        finally:
            conn.close()


async def test_each_resolved_address_is_tried() -> None:
    # "localhost" may resolve to ::1 and 127.0.0.1; the peer listens on 127.0.0.1 only, so whichever comes
    # first, the connection must end up there.
    async with LoopbackPeer() as peer:
        _, port = peer.address
        conn = await connect(("localhost", port))
        try:
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
            assert conn.name == f"localhost:{port}"
        finally:
            conn.close()


async def test_unix_domain_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "mongodb-test.sock")
    async with LoopbackPeer(unix_socket=path) as peer:
        conn = await connect(peer.address)
        try:
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
            assert conn.name == path
        finally:
            conn.close()


async def test_refused_connection_names_the_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(AutoReconnect, match=rf"127\.0\.0\.1:{port}.*refused"):
            await connect(("127.0.0.1", port), connect_timeout=5)


async def test_unresolvable_host_names_the_address() -> None:
    with pytest.raises(AutoReconnect, match=r"no-such-host\.invalid:27017"):
        await connect(("no-such-host.invalid", 27017), connect_timeout=10)


async def test_connect_timeout() -> None:
    # A listener whose backlog completes the TCP handshake but which never answers the TLS handshake.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        context = ssl.create_default_context()
        started = time.monotonic()
        with pytest.raises(NetworkTimeout, match=rf"127\.0\.0\.1:{port} timed out after 0\.2s"):
            await connect(("127.0.0.1", port), connect_timeout=0.2, ssl_context=context)
        assert time.monotonic() - started < 3.0


class StreamServer(AsyncioServer):
    """A server answering any request with a three-reply exhaust stream whose follow-ups name, as their
    responseTo, either the previous reply (the OP_MSG spec), the opening request, or an unrelated id."""

    def __init__(self, follow_up_response_to: str) -> None:
        self.follow_up_response_to = follow_up_response_to
        self.port = 0
        self._server: asyncio.Server | None = None
        self._finished = asyncio.Event()

    async def start(self) -> StreamServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @served
    async def wait_finished(self) -> None:
        """Wait until the stream was sent and the client went away."""
        await self._finished.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._answer_with_a_stream(reader, writer)
        finally:
            writer.close()
            self._finished.set()

    async def _answer_with_a_stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from mongio.bson import encode as encode_document
        from mongio.wire.op_msg import MORE_TO_COME, encode_op_msg

        header = await reader.readexactly(16)
        length = int.from_bytes(header[:4], "little")
        request_id = int.from_bytes(header[4:8], "little")
        await reader.readexactly(length - 16)
        previous = request_id
        for n in range(3):
            reply_id = 1000 + n
            if n == 0 or self.follow_up_response_to == "previous":
                response_to = previous
            elif self.follow_up_response_to == "request":
                response_to = request_id
            else:
                response_to = 987654
            flags = MORE_TO_COME if n < 2 else 0
            body = encode_document({"ok": 1, "n": n})
            writer.write(encode_op_msg(reply_id, body, flags=flags, response_to=response_to))
            previous = reply_id
        await writer.drain()
        await reader.read()  # until the client goes away


@pytest.mark.parametrize("follow_up_response_to", ["previous", "request"])
async def test_exhaust_follow_ups_may_answer_the_previous_reply_or_the_request(
    follow_up_response_to: str,
) -> None:
    async with StreamServer(follow_up_response_to) as server:
        conn = await connect(("127.0.0.1", server.port))
        try:
            replies = [await conn.command("admin", {"hello": 1}, exhaust_allowed=True)]
            while conn.more_to_come:
                replies.append(await conn.receive())
            assert [reply["n"] for reply in replies] == [0, 1, 2]
        finally:
            conn.close()
        with anyio.fail_after(5):
            await server.wait_finished()


async def test_exhaust_follow_up_answering_something_else_is_a_protocol_error() -> None:
    async with StreamServer("unrelated") as server:
        conn = await connect(("127.0.0.1", server.port))
        try:
            await conn.command("admin", {"hello": 1}, exhaust_allowed=True)
            with pytest.raises(ProtocolError, match="987654"):
                await conn.receive()
            assert conn.closed
        finally:
            conn.close()
        with anyio.fail_after(5):
            await server.wait_finished()
