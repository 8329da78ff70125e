"""Connection against the test server (SecantusDB, or MONGODB_URI) over TCP."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from mongio.connection import Connection, connect
from mongio.errors import AutoReconnect, DocumentTooLarge, NetworkTimeout, OperationFailure
from mongio.wire.op_msg import COMMAND_OVERHEAD
from tests.support.backends import gather_outcomes

pytestmark = pytest.mark.server

_names = itertools.count()


@pytest.fixture
async def conn(server_address: tuple[str, int]) -> AsyncIterator[Connection]:
    connection = await connect(server_address, connect_timeout=10)
    hello = await connection.command("admin", {"hello": 1})
    connection.configure_from_hello(hello)
    yield connection
    connection.close()


def collection_name() -> str:
    return f"conn_test_{next(_names)}"


async def test_hello_and_ping(server_address: tuple[str, int]) -> None:
    connection = await connect(server_address, connect_timeout=10)
    try:
        hello = await connection.command("admin", {"hello": 1})
        assert hello["ok"] == 1
        assert hello["isWritablePrimary"] is True
        connection.configure_from_hello(hello)
        assert connection.max_wire_version == hello["maxWireVersion"] >= 6
        assert connection.max_bson_size == hello["maxBsonObjectSize"]
        assert connection.max_message_size == hello["maxMessageSizeBytes"]
        assert connection.server_connection_id == hello["connectionId"]
        before = connection.last_used
        ping = await connection.command("admin", {"ping": 1})
        assert ping["ok"] == 1
        assert connection.last_used >= before
        assert not connection.closed
    finally:
        connection.close()
    assert connection.closed


async def test_legacy_hello_over_op_query(server_address: tuple[str, int]) -> None:
    connection = await connect(server_address, connect_timeout=10)
    try:
        reply = await connection.legacy_command("admin", {"isMaster": 1, "helloOk": True})
        assert reply["ok"] == 1
        assert reply["ismaster"] is True
        assert (await connection.command("admin", {"ping": 1}))["ok"] == 1
    finally:
        connection.close()


async def test_command_error_keeps_the_connection(conn: Connection) -> None:
    with pytest.raises(OperationFailure) as info:
        await conn.command("admin", {"noSuchCommandHere": 1})
    assert info.value.code == 59
    assert not conn.closed
    assert (await conn.command("admin", {"ping": 1}))["ok"] == 1


async def test_insert_by_document_sequence_and_read_back_large_documents(conn: Connection) -> None:
    name = collection_name()
    documents = [{"_id": i, "blob": chr(ord("a") + i) * 1_000_000} for i in range(6)]
    reply = await conn.command(
        "test", {"insert": name, "ordered": True}, document_sequences={"documents": documents}
    )
    assert reply["ok"] == 1 and reply["n"] == 6
    found = await conn.command("test", {"find": name, "filter": {}, "sort": {"_id": 1}})
    assert found["cursor"]["firstBatch"] == documents  # a reply of ~6 MB: far beyond the initial buffer
    await conn.command("test", {"drop": name})


async def test_oversized_document_is_refused_before_anything_is_sent(conn: Connection) -> None:
    name = collection_name()
    huge = {"_id": 1, "blob": "x" * (conn.max_bson_size + COMMAND_OVERHEAD)}  # past the command overhead's allowance
    with pytest.raises(DocumentTooLarge, match="maxBsonObjectSize"):
        await conn.command("test", {"insert": name}, document_sequences={"documents": [huge]})
    assert not conn.closed
    assert (await conn.command("admin", {"ping": 1}))["ok"] == 1


async def _block_next(conn: Connection, command: str, block_ms: int) -> None:
    await conn.command(
        "admin",
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {"failCommands": [command], "blockConnection": True, "blockTimeMS": block_ms},
        },
    )


async def _fail_point_off(server_address: tuple[str, int]) -> None:
    connection = await connect(server_address, connect_timeout=10)
    try:
        await connection.command("admin", {"configureFailPoint": "failCommand", "mode": "off"})
    finally:
        connection.close()


async def test_socket_timeout_expiry_closes_the_connection(
    server_address: tuple[str, int], conn: Connection
) -> None:
    await _block_next(conn, "count", 1500)
    try:
        conn.socket_timeout = 0.25
        started = anyio.current_time()
        with pytest.raises(NetworkTimeout):
            await conn.command("test", {"count": collection_name()})
        assert 0.2 <= anyio.current_time() - started < 1.4  # well before the 1.5 s block ends
        assert conn.closed
        with pytest.raises(AutoReconnect, match="is closed"):
            await conn.command("admin", {"ping": 1})
    finally:
        await _fail_point_off(server_address)
    # The server itself is fine; only that connection is gone.
    fresh = await connect(server_address, connect_timeout=10)
    try:
        assert (await fresh.command("admin", {"ping": 1}))["ok"] == 1
    finally:
        fresh.close()


async def test_cancelled_command_closes_the_connection(
    server_address: tuple[str, int], conn: Connection
) -> None:
    await _block_next(conn, "count", 1000)
    try:
        with anyio.move_on_after(0.2) as scope:
            await conn.command("test", {"count": collection_name()})
        assert scope.cancelled_caught  # cut while the server still blocked the command
        assert conn.closed
        with pytest.raises(AutoReconnect, match="cancelled"):
            await conn.command("admin", {"ping": 1})
    finally:
        await _fail_point_off(server_address)


async def test_many_connections_in_parallel(server_address: tuple[str, int]) -> None:
    async def one(index: int) -> Any:
        connection = await connect(server_address, id=index, connect_timeout=10)
        try:
            return (await connection.command("admin", {"ping": 1}))["ok"]
        finally:
            connection.close()

    assert await gather_outcomes(*(one(i) for i in range(50))) == [1] * 50


def test_connection_under_uvloop(server_address: tuple[str, int]) -> None:
    # uvloop's transports implement asyncio.Transport's methods without deriving from it.
    uvloop = pytest.importorskip("uvloop")

    async def exchange() -> dict[str, Any]:
        connection = await connect(server_address, connect_timeout=10)
        try:
            connection.configure_from_hello(await connection.command("admin", {"hello": 1}))
            name = collection_name()
            await connection.command(
                "test", {"insert": name}, document_sequences={"documents": [{"_id": 1, "x": "y" * 100_000}]}
            )
            return await connection.command("test", {"find": name, "filter": {"_id": 1}})
        finally:
            connection.close()
            await connection.wait_closed()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        reply = runner.run(exchange())
    assert reply["cursor"]["firstBatch"] == [{"_id": 1, "x": "y" * 100_000}]
