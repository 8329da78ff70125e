"""A client against a server that answers the handshake honestly and then misbehaves: every hostile reply ends
the operation with an error that names the problem, the memory it costs is bounded by what arrived rather than
by what was claimed, and the client goes on working once the server behaves again (the pool replaced the
connection the hostile reply came on). ``close()`` neither raises because of what the server sent nor leaves
operations running.

Each wait is bounded by ``anyio.fail_after`` (``SAFETY``, through ``safely``): a safety net so that a regression fails instead of
hanging, never a timed assertion. Memory is the peak of Python allocations (``tracemalloc``, which sees every
buffer the driver and the compression libraries allocate through Python) over the failing operation, against
a generous bound far below what the hostile input asks for.
"""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

import anyio
import pytest
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio import MongoClient
from mongio.bson import InvalidBSON, decode
from mongio.connection import connect
from mongio.errors import (
    AutoReconnect,
    MongioError,
    NetworkTimeout,
    ProtocolError,
)
from tests.support.backends import gather_outcomes
from tests.support.hostile_server import (
    MIB,
    AllAtOnce,
    BadLength,
    Behaviour,
    Bomb,
    DeepNesting,
    ForeignCompressor,
    ForgedLength,
    Handshake,
    HostileServer,
    InvalidUtf8,
    Stall,
    Trickle,
    Truncated,
    WrongResponseTo,
    bomb_payload,
    nested_document,
)

SAFETY = 10.0
T = TypeVar("T")


async def safely(awaitable: Awaitable[T]) -> T:
    """``awaitable``'s result, failing the test after ``SAFETY`` seconds instead of hanging."""
    with anyio.fail_after(SAFETY):
        return await awaitable


MEMORY_BOUND = 64 * MIB
# Bombs and forged sizes that cost several times MEMORY_BOUND when trusted, yet stay affordable on a shared
# test machine while the fixes are pending.
BOMB_SIZE = 128 * MIB
FORGED_SIZE = 200_000_000

COMPRESSORS = ["zlib", "snappy", "zstd"]


class AllocationPeak:
    """The peak of Python allocations (``tracemalloc``) while the ``with`` block runs, over what was
    allocated when it began."""

    def __init__(self) -> None:
        self.growth = 0
        self._started_here = False
        self._before = 0

    def __enter__(self) -> AllocationPeak:
        self._started_here = not tracemalloc.is_tracing()
        if self._started_here:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self._before = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.growth = tracemalloc.get_traced_memory()[1] - self._before
        if self._started_here:
            tracemalloc.stop()


@asynccontextmanager
async def hostile(
    handshake: Handshake | None = None, **options: Any
) -> AsyncIterator[tuple[HostileServer, MongoClient]]:
    """A hostile server (sane until told otherwise) and a client connected to it directly, with reads not
    retried (so that one hostile reply makes one error); ``options`` go to the client."""
    async with HostileServer(handshake) as server:
        options.setdefault("retryReads", False)
        async with MongoClient(server.uri, directConnection=True, **options) as client:
            await safely(client.admin.command("ping"))
            yield server, client


async def find_meeting(server: HostileServer, client: MongoClient, behaviour: Behaviour) -> BaseException:
    """The error a ``find`` meets when the server answers it with ``behaviour``."""
    server.misbehave("find", behaviour)
    with pytest.raises(Exception) as caught:
        await safely(client.db.coll.find_one({}))
    return caught.value


async def assert_still_usable(server: HostileServer, client: MongoClient) -> None:
    """Once the server behaves, a ``find`` works, over a new connection: the hostile one was dropped."""
    server.behave()
    assert await safely(client.db.coll.find_one({})) is None
    *hostile_finds, sane_find = server.commands("find")
    assert all(sane_find.connection is not hostile_find.connection for hostile_find in hostile_finds)


def assert_error(error: BaseException, kind: type[BaseException], text: str) -> None:
    assert isinstance(error, kind), f"{type(error).__name__}: {error}"
    assert text.lower() in str(error).lower()


# -- the hostile server's own parts --------------------------------------------------------------------------


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_each_bomb_inflates_to_its_size(compressor: str) -> None:
    size = MIB + 3  # not a multiple of a chunk or of a snappy copy
    data = bomb_payload(compressor, size)
    if compressor == "zlib":
        inflated = zlib.decompress(data)
    elif compressor == "snappy":
        import snappy

        inflated = bytes(snappy.uncompress(data))
    else:
        import zstandard

        assert zstandard.frame_content_size(data) == size
        inflated = zstandard.ZstdDecompressor().decompress(data)
    assert inflated == bytes(size)
    assert len(data) < size // 20


async def test_the_handshake_says_what_it_is_told() -> None:
    lies = Handshake(
        max_message_size=10**12, max_bson_size=-1, compressors=["zstd"], set_name="rs", fields={"x": 1}
    )
    async with HostileServer(lies) as server:
        host, port = server.address
        connection = await connect((host, port))
        try:
            hello = await safely(connection.command("admin", {"hello": 1, "compression": ["zlib", "zstd"]}))
        finally:
            connection.close()
    assert hello["maxMessageSizeBytes"] == 10**12
    assert hello["maxBsonObjectSize"] == -1
    assert hello["compression"] == ["zstd"]
    assert hello["setName"] == "rs"
    assert hello["hosts"] == [f"{host}:{port}"]
    assert hello["x"] == 1


def test_the_nested_document_is_as_deep_as_asked() -> None:
    document = decode(nested_document(50))
    depth = 0
    while "a" in document:
        document = document["a"]
        depth += 1
    assert depth == 50


# -- what already holds ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 5, 15, -1, -(2**31)])
async def test_a_length_shorter_than_a_header_is_refused(length: int) -> None:
    async with hostile() as (server, client):
        error = await find_meeting(server, client, BadLength(length))
        assert_error(error, ProtocolError, f"length {length}")
        await assert_still_usable(server, client)


async def test_a_length_longer_than_what_is_sent_is_refused_over_the_limit() -> None:
    async with hostile() as (server, client):
        with AllocationPeak() as peak:
            error = await find_meeting(server, client, BadLength(2**31 - 1))
        assert_error(error, ProtocolError, f"length {2**31 - 1}")
        assert peak.growth < MEMORY_BOUND
        await assert_still_usable(server, client)


async def test_a_forged_2gb_header_is_refused_at_the_header() -> None:
    async with hostile() as (server, client):
        with AllocationPeak() as peak:
            error = await find_meeting(server, client, ForgedLength(2**31 - 1, send=4 * MIB))
        assert_error(error, ProtocolError, f"length {2**31 - 1}")
        assert peak.growth < MEMORY_BOUND
        await assert_still_usable(server, client)


async def test_a_forged_2gb_header_on_a_pool_of_10_connections_is_refused_on_each() -> None:
    async with hostile() as (server, client):
        server.misbehave("find", AllAtOnce(ForgedLength(2**31 - 1, send=MIB), 10))
        with AllocationPeak() as peak:
            results = await safely(gather_outcomes(*(client.db.coll.find_one({}) for _ in range(10))))
        for error in results:
            assert isinstance(error, BaseException)
            assert_error(error, ProtocolError, f"length {2**31 - 1}")
        assert len({request.connection for request in server.commands("find")}) == 10
        assert peak.growth < MEMORY_BOUND
        await assert_still_usable(server, client)


async def test_a_reply_to_another_request_is_refused() -> None:
    async with hostile() as (server, client):
        error = await find_meeting(server, client, WrongResponseTo())
        assert_error(error, ProtocolError, "sent a reply to request")
        await assert_still_usable(server, client)


async def test_a_reply_nested_10000_levels_deep_is_refused() -> None:
    async with hostile() as (server, client):
        error = await find_meeting(server, client, DeepNesting(10_000))
        assert_error(error, InvalidBSON, "nested")
        await assert_still_usable(server, client)


async def test_a_reply_with_invalid_utf8_is_refused() -> None:
    async with hostile() as (server, client):
        error = await find_meeting(server, client, InvalidUtf8())
        assert_error(error, InvalidBSON, "UTF-8")
        await assert_still_usable(server, client)


async def test_a_reply_cut_short_by_a_hang_up_fails_the_operation() -> None:
    async with hostile() as (server, client):
        error = await find_meeting(server, client, Truncated(keep=20))
        assert_error(error, AutoReconnect, "closed the connection")
        await assert_still_usable(server, client)


async def test_a_reply_trickling_in_ends_at_the_operation_timeout() -> None:
    # About 100 bytes, one every 50 ms: seconds for the whole reply, against a timeout of 300 ms.
    async with hostile(timeoutMS=300) as (server, client):
        error = await find_meeting(server, client, Trickle(chunk=1, interval=0.05))
        assert_error(error, NetworkTimeout, "timed out")
        await assert_still_usable(server, client)


@pytest.mark.parametrize("compressor", ["zlib", "zstd", "snappy"])
async def test_a_bomb_stops_inflating_at_the_declared_size(compressor: str) -> None:
    async with hostile(Handshake(compressors=[compressor]), compressors=compressor) as (server, client):
        bomb = Bomb(compressor, inflated=BOMB_SIZE, declared=200)
        with AllocationPeak() as peak:
            error = await find_meeting(server, client, bomb)
        assert_error(error, ProtocolError, "compress")
        assert peak.growth < MEMORY_BOUND
        await assert_still_usable(server, client)


# -- compressors, sizes, closing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("negotiated", "sent"),
    [(None, "zlib"), (None, "zstd"), ("zlib", "snappy"), ("zlib", "zstd"), ("zstd", "zlib")],
)
async def test_a_compressor_that_was_not_negotiated_is_refused(negotiated: str | None, sent: str) -> None:
    offered = Handshake(compressors=COMPRESSORS)
    options = {"compressors": negotiated} if negotiated else {}
    async with hostile(offered, **options) as (server, client):
        error = await find_meeting(server, client, ForeignCompressor(sent))
        assert_error(error, ProtocolError, "compress")
        await assert_still_usable(server, client)


async def test_a_forged_header_after_a_hello_claiming_1tb_costs_what_arrived() -> None:
    # Refused at the header (the claimed limit clamped) or read until the hang-up into a buffer that grew
    # with the 4 MiB that arrived: either way not the 200 MB the header claims.
    async with hostile(Handshake(max_message_size=10**12)) as (server, client):
        with AllocationPeak() as peak:
            error = await find_meeting(server, client, ForgedLength(FORGED_SIZE, send=4 * MIB))
        assert isinstance(error, ProtocolError | AutoReconnect), f"{type(error).__name__}: {error}"
        assert str(FORGED_SIZE) in str(error) or "closed the connection" in str(error)
        assert peak.growth < MEMORY_BOUND
        await assert_still_usable(server, client)


async def test_forged_headers_within_the_limit_on_a_pool_of_10_cost_what_arrived() -> None:
    # Headers of 20 MB, under the 48 MB limit, on 10 connections at once; 512 KiB of each arrives (over 80
    # ms, so that all ten are being received together) before the server hangs up.
    forged = ForgedLength(20_000_000, send=512 * 1024, chunk=64 * 1024, interval=0.01)
    async with hostile() as (server, client):
        server.misbehave("find", AllAtOnce(forged, 10))
        with AllocationPeak() as peak:
            results = await safely(gather_outcomes(*(client.db.coll.find_one({}) for _ in range(10))))
        for error in results:
            assert isinstance(error, BaseException)
            assert_error(error, AutoReconnect, "closed the connection")
        assert len({request.connection for request in server.commands("find")}) == 10
        assert peak.growth < MEMORY_BOUND
        await assert_still_usable(server, client)


async def test_close_does_not_raise_for_an_end_sessions_reply_with_invalid_utf8() -> None:
    before = running_tasks()
    async with HostileServer(script={"endSessions": InvalidUtf8()}) as server:
        client = MongoClient(server.uri, directConnection=True)
        await safely(client.db.coll.find_one({}))  # leaves a server session to end
        await safely(client.close())
        assert len(server.commands("endSessions")) == 1
    assert tasks_started_since(before) == []


async def test_close_does_not_raise_after_a_hello_with_a_negative_size() -> None:
    before = running_tasks()
    async with HostileServer(Handshake(max_bson_size=-100_000)) as server:
        client = MongoClient(server.uri, directConnection=True, serverSelectionTimeoutMS=2000)
        # A size that is not a positive integer is taken as absent (the default limit): the find goes out,
        # leaving a server session for close() to end, and close() does not raise.
        assert await safely(client.db.coll.find_one({})) is None  # the server holds nothing
        await safely(client.close())
        assert len(server.commands("endSessions")) == 1
    assert tasks_started_since(before) == []


async def test_close_ends_100_finds_in_flight_on_a_stalled_server() -> None:
    before = running_tasks()
    async with HostileServer(script={"find": Stall()}) as server:
        client = MongoClient(server.uri, directConnection=True)
        errors: list[MongioError] = []

        async def find() -> None:
            try:
                await client.db.coll.find_one({})
            except MongioError as error:
                errors.append(error)

        try:
            # The task group ends once every find ended: close() must end them all within SAFETY.
            with anyio.fail_after(SAFETY):
                async with anyio.create_task_group() as finds:
                    for _ in range(100):
                        finds.start_soon(find)
                    await server.wait_for_commands("find", 100)
                    await client.close()
            assert len(errors) == 100
            for error in errors:
                assert "closed" in str(error), repr(error)
        finally:
            await client.close()
    assert tasks_started_since(before) == []
