"""The benchmarks' loopback responder answers what the workloads send, as the drivers expect."""

from __future__ import annotations

import asyncio
import socket
import struct

from benchmarks.loopback_responder import OP_QUERY, OP_REPLY, serve
from spec_runner.server import free_port

from mongio import MongoClient
from mongio.bson import decode, encode

TWEET = {"text": "hello", "user": {"name": "x", "followers": 3}, "tags": ["a", "b"]}


async def _start() -> tuple[asyncio.Task[None], int]:
    port = free_port()
    task = asyncio.ensure_future(serve("127.0.0.1", port, {**TWEET, "_id": 1}))
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        break
    return task, port


async def test_a_client_runs_the_workloads_commands_against_it() -> None:
    task, port = await _start()
    try:
        async with MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=5000) as client:
            assert (await client.perftest.command("hello"))["isWritablePrimary"] is True
            found = await client.perftest.corpus.find_one({"_id": 7})
            assert found == {**TWEET, "_id": 7}  # a find by _id is answered with that _id
            inserted = await client.perftest.corpus.insert_one({"x": 1})
            assert inserted.acknowledged
            assert await client.perftest.list_collection_names() == []
            results = await asyncio.gather(*(client.perftest.corpus.find_one({"_id": n}) for n in range(300)))
            assert all(result == {**TWEET, "_id": n} for n, result in enumerate(results))
    finally:
        task.cancel()


async def test_a_legacy_handshake_gets_an_op_reply() -> None:
    task, port = await _start()
    try:
        query = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1) + encode({"isMaster": 1})
        message = struct.pack("<iiii", 16 + len(query), 42, 0, OP_QUERY) + query

        def exchange() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(message)
                header = sock.recv(16, socket.MSG_WAITALL)
                length = struct.unpack_from("<i", header)[0]
                return header + sock.recv(length - 16, socket.MSG_WAITALL)

        reply = await asyncio.to_thread(exchange)
        _, _, response_to, op_code = struct.unpack_from("<iiii", reply)
        assert (response_to, op_code) == (42, OP_REPLY)
        assert decode(reply[16 + 20 :])["ismaster"] is True
    finally:
        task.cancel()
