"""The benchmarks' floor client: the messages it sends, the checks of the replies, its place in the harness."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from benchmarks import driver_bench
from benchmarks.driver_bench import above_floor
from benchmarks.driver_workload import DRIVERS, Workloads
from benchmarks.floor_client import FloorClient, FloorConnection, FloorError, marker_offset, op_msg

from mongio.bson import Int64, ObjectId, decode, encode

SMALL = {"_id": "ignored", "name": "small", "values": [1, 2, 3]}
_INT32 = struct.Struct("<i")
# A request as the recording server reads it: the body and the documents of its document sequence.
Request = tuple[dict[str, Any], list[dict[str, Any]]]
# A floor client connected to the recording server, and the requests the server has read so far.
Recorded = tuple[FloorClient, list[Request]]


def parse_request(message: bytes) -> Request:
    """An OP_MSG's body and the documents of its one document sequence (if any), read by hand."""
    length, _, _, op_code = struct.unpack_from("<iiii", message)
    assert (length, op_code, message[20]) == (len(message), 2013, 0)
    body_size = _INT32.unpack_from(message, 21)[0]
    body = decode(message[21 : 21 + body_size])
    documents: list[dict[str, Any]] = []
    position = 21 + body_size
    if position < length:
        assert message[position] == 1
        end = position + 1 + _INT32.unpack_from(message, position + 1)[0]
        position = message.index(b"\x00", position + 5) + 1  # past the identifier
        while position < end:
            size = _INT32.unpack_from(message, position)[0]
            documents.append(decode(message[position : position + size]))
            position += size
    return body, documents


def test_op_msg_frames_a_body_and_a_document_sequence() -> None:
    message = op_msg({"insert": "c", "$db": "d"}, ("documents", [{"a": 1}, {"b": 2}]))
    body, documents = parse_request(bytes(message))
    assert body == {"insert": "c", "$db": "d"}
    assert documents == [{"a": 1}, {"b": 2}]
    assert parse_request(bytes(op_msg({"hello": True}))) == ({"hello": True}, [])


def test_a_marker_must_be_in_the_message_exactly_once() -> None:
    message = bytes(op_msg({"x": 0x5A5A5A5A}))
    assert message[marker_offset(message, _INT32.pack(0x5A5A5A5A)) :][:4] == _INT32.pack(0x5A5A5A5A)
    with pytest.raises(ValueError, match="exactly once"):
        marker_offset(message, b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="exactly once"):
        marker_offset(bytes(op_msg({"x": 0x5A5A5A5A, "y": 0x5A5A5A5A})), _INT32.pack(0x5A5A5A5A))


Answer = Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, Any]]


def answers_as_a_server_would(body: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
    if "find" in body:
        return {"cursor": {"firstBatch": [{"_id": body["filter"]["_id"]}], "id": 0}, "ok": 1.0}
    if "insert" in body:
        return {"n": len(documents), "ok": 1.0}
    return {"isWritablePrimary": True, "ok": 1.0}


class _Server:
    """A server on loopback whose connection handlers are awaited when it stops (the client closes first)."""

    def __init__(self, handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]) -> None:
        self._handle = handle
        self._handlers: list[asyncio.Task[Any]] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> _Server:
        async def track(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._handlers.append(task)
            await self._handle(reader, writer)

        self._server = await asyncio.start_server(track, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.wait_for(asyncio.gather(*self._handlers), 5)


async def _serve(answer: Answer, requests: list[Request]) -> _Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readexactly(16)
                message = header + await reader.readexactly(_INT32.unpack_from(header)[0] - 16)
                request = parse_request(message)
                requests.append(request)
                reply = b"\x00\x00\x00\x00\x00" + encode(answer(*request))
                writer.write(struct.pack("<iiii", 16 + len(reply), 2, 1, 2013) + reply)
        except (asyncio.IncompleteReadError, ConnectionResetError):  # the client closed, or aborted
            writer.close()

    return await _Server(handle).start()


@contextlib.asynccontextmanager
async def floor_of(server: _Server, database: str = "db") -> AsyncIterator[FloorClient]:
    """A floor client connected to ``server``; on leaving, the client is closed, then the server stopped."""
    client = await FloorClient.connect("127.0.0.1", server.port, database, "corpus", SMALL)
    try:
        yield client
    finally:
        client.close()
        await server.stop()


@pytest.fixture
async def recorded() -> AsyncIterator[Recorded]:
    requests: list[Request] = []
    async with floor_of(await _serve(answers_as_a_server_would, requests), "perftest") as client:
        yield client, requests


async def test_the_tasks_send_the_drivers_commands_with_fresh_ids_and_txn_numbers(
    recorded: Recorded,
) -> None:
    client, requests = recorded
    await client.run_command(2)
    await client.find_one_by_id(3)
    await client.small_insert_one(3)
    hellos, finds, inserts = requests[:2], requests[2:5], requests[5:]
    lsid = hellos[0][0]["lsid"]
    assert all(body == {"hello": True, "lsid": lsid, "$db": "perftest"} for body, _ in hellos)
    assert [body["filter"] for body, _ in finds] == [{"_id": 1}, {"_id": 2}, {"_id": 3}]
    assert all(
        body["limit"] == 1 and body["singleBatch"] is True and body["lsid"] == lsid for body, _ in finds
    )
    assert [body["txnNumber"] for body, _ in inserts] == [Int64(1), Int64(2), Int64(3)]
    inserted = [documents for _, documents in inserts]
    assert all(len(documents) == 1 for documents in inserted)
    ids = [documents[0]["_id"] for documents in inserted]
    assert len(set(ids)) == 3 and all(isinstance(value, ObjectId) for value in ids)
    assert {key: value for key, value in inserted[0][0].items() if key != "_id"} == {
        "name": "small",
        "values": [1, 2, 3],
    }
    await client.small_insert_one(1)  # numbers go on across calls: the collection is not always emptied
    assert requests[-1][0]["txnNumber"] == Int64(4) and requests[-1][1][0]["_id"] not in ids


@pytest.mark.parametrize(
    ("task", "answer", "message"),
    [
        ("run_command", lambda body, documents: {"ok": 0.0, "errmsg": "no"}, "the server answered"),
        (
            "find_one_by_id",
            lambda body, documents: {"cursor": {"firstBatch": [{"_id": 1}]}, "ok": 1.0},
            "find of",
        ),
        ("small_insert_one", lambda body, documents: {"n": 0, "ok": 1.0}, "an insert's reply"),
    ],
)
async def test_a_wrong_last_reply_fails_the_task(task: str, answer: Answer, message: str) -> None:
    async with floor_of(await _serve(answer, [])) as client:
        with pytest.raises(FloorError, match=message):
            await getattr(client, task)(2)


async def test_a_closed_connection_fails_the_round_trip_instead_of_hanging() -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(16)
        writer.close()

    async with floor_of(await _Server(close_at_once).start()) as client:
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(client.run_command(1), 5)
        with pytest.raises(ConnectionError):
            await client.run_command(1)  # and every later one at once


async def test_a_reply_too_large_for_the_buffer_fails_the_round_trip_and_ends_the_connection() -> None:
    server = await _serve(answers_as_a_server_would, [])
    loop = asyncio.get_running_loop()
    # A buffer of 24 bytes: the hello reply's header fits, the reply does not.
    transport, connection = await loop.create_connection(
        lambda: FloorConnection(24), "127.0.0.1", server.port
    )
    hello = op_msg({"hello": True, "$db": "perftest"})
    try:
        with pytest.raises(FloorError, match="does not fit"):
            await asyncio.wait_for(connection.round_trip(hello), 5)
        for _ in range(100):  # the abort's connection_lost comes on a later turn of the loop
            if transport.is_closing():
                break
            await asyncio.sleep(0.01)
        assert transport.is_closing()
        with pytest.raises(FloorError, match="does not fit"):  # the first error stays the reason
            await connection.round_trip(hello)
    finally:
        connection.close()
        await server.stop()


async def test_the_workloads_hand_the_timed_work_to_the_floor_and_refuse_other_tasks(
    recorded: Recorded,
) -> None:
    floor, requests = recorded
    workloads = Workloads({"perftest": {"corpus": None}}, {}, quick=True, floor=floor)
    await workloads.work("find_one_by_id", 2)()
    assert [body["filter"] for body, _ in requests] == [{"_id": 1}, {"_id": 2}]
    with pytest.raises(ValueError, match="floor client runs only"):
        workloads.work("find_many", 7)


def test_above_floor_subtracts_the_floor_of_the_same_round() -> None:
    per_round = {
        "run_command": {
            "pymongo": [(1.0, 500e-6), (1.0, 900e-6), (1.0, 600e-6)],
            "mongio": [(1.0, 150e-6), (1.0, 150e-6)],
            "floor": [(1.0, 100e-6), (1.0, 400e-6), (1.0, 100e-6)],
        },
        "find_many": {"mongio": [(1.0, 1e-6)]},
    }
    numbers = {"run_command": {"pymongo": [0, 1, 2], "mongio": [0, 2], "floor": [0, 1, 2]}}
    lines = above_floor(per_round, numbers)
    # PyMongo: 400, 500, 500 above the floor; mongio (no round 1) 50, 50: 50 / 500. Paired by position,
    # mongio's second value would meet the floor of round 1 (400) instead.
    assert lines == [
        "run_command pymongo: 500.0 µs (400.0 to 500.0), 1.00x",
        "run_command mongio: 50.0 µs (50.0 to 50.0), 0.10x",
    ]
    assert above_floor({"run_command": {"mongio": [(1.0, 1e-4)]}}, {"run_command": {"mongio": [0]}}) == []


def test_the_floor_is_run_only_when_named_and_only_for_its_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def execute(run: driver_bench.Run, data_dir: Any, log: Any = None) -> None:
        ran.append(run.drivers)

    monkeypatch.setattr(driver_bench, "execute", execute)
    monkeypatch.setattr(driver_bench, "extract_data", lambda target: None)
    driver_bench.main(["--rounds", "1", "--tasks", "run_command"])
    driver_bench.main(["--rounds", "1", "--tasks", "run_command", "--drivers", "mongio,floor"])
    assert ran == [list(DRIVERS), ["mongio", "floor"]]
    with pytest.raises(SystemExit, match="floor client runs only"):
        driver_bench.main(["--rounds", "1", "--tasks", "run_command,find_many", "--drivers", "floor"])
