"""Exhaust cursors and GridFS downloads against the test server, which honours ``exhaustAllowed`` on getMore.

A streamed batch publishes the events of the getMore that opened the stream, with that getMore's request id:
so the number of request ids among the getMore events is the number of getMore commands sent, and the number
of events the number of batches received."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.connection.pool import Pool
from mongio.cursor import CursorType
from mongio.database import Database
from mongio.errors import ClientClosedError, CursorNotFound
from mongio.events.command import CommandStartedEvent
from mongio.gridfs import GridFSBucket
from tests.support.recorders import CommandRecorder

pytestmark = pytest.mark.server

DOCUMENTS = 95


def get_mores(recorder: CommandRecorder) -> tuple[int, int]:
    """(getMore commands sent, getMore batches received), from the started events."""
    started = recorder.of(CommandStartedEvent, "getMore")
    return len({event.request_id for event in started}), len(started)


def checked_out(client: MongoClient) -> int:
    topology = client._topology
    assert topology is not None
    pools = [server.pool for server in topology.servers.values() if isinstance(server.pool, Pool)]
    return sum(pool.in_use_connection_count for pool in pools)


@pytest.fixture
async def filled(coll: Collection[Any]) -> Collection[Any]:
    await coll.insert_many([{"_id": index} for index in range(DOCUMENTS)])
    return coll


async def test_exhaust_find_streams_every_batch_after_one_getmore(
    client: MongoClient, filled: Collection[Any], recorder: CommandRecorder
) -> None:
    recorder.clear()
    documents = await filled.find({}, batch_size=10, sort=[("_id", 1)], cursor_type=CursorType.EXHAUST).to_list()
    assert [document["_id"] for document in documents] == list(range(DOCUMENTS))
    sent, received = get_mores(recorder)
    assert sent == 1
    assert received >= (DOCUMENTS - 10) // 10  # 8 full batches and the rest (and maybe an empty last one)
    assert checked_out(client) == 0  # the stream ended: its connection went back to the pool
    assert "killCursors" not in recorder.names()


async def test_an_ordinary_cursor_sends_a_getmore_per_batch(
    filled: Collection[Any], recorder: CommandRecorder
) -> None:
    recorder.clear()
    assert len(await filled.find({}, batch_size=10).to_list()) == DOCUMENTS
    sent, received = get_mores(recorder)
    assert sent == received >= 8


async def test_closing_mid_stream_kills_the_server_cursor_and_keeps_no_connection(
    client: MongoClient, filled: Collection[Any], recorder: CommandRecorder, db: Database[Any]
) -> None:
    cursor = filled.find({}, batch_size=10, cursor_type=CursorType.EXHAUST)
    taken = [await cursor.next() for _ in range(25)]  # well into the stream
    cursor_id = cursor.cursor_id
    assert cursor_id
    await cursor.close()
    assert len(taken) == 25
    assert checked_out(client) == 0
    assert recorder.last("killCursors")["cursors"] == [cursor_id]
    with pytest.raises(CursorNotFound):
        await db.command({"getMore": cursor_id, "collection": filled.name})
    # The pool serves on (the stream's connection was closed, not given back half-read).
    assert await filled.count_documents({}) == DOCUMENTS


async def test_in_a_transaction_an_exhaust_cursor_sends_ordinary_getmores(
    client: MongoClient, filled: Collection[Any], recorder: CommandRecorder
) -> None:
    recorder.clear()
    async with client.start_session() as session, session.start_transaction():
        cursor = filled.find({}, batch_size=10, cursor_type=CursorType.EXHAUST, session=session)
        assert len(await cursor.to_list()) == DOCUMENTS
    sent, received = get_mores(recorder)
    assert sent == received >= 8


# -- GridFS downloads ------------------------------------------------------------------------------------------


@pytest.fixture
async def gridfs_client(server_uri: str, recorder: CommandRecorder) -> AsyncIterator[MongoClient]:
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        yield client


async def test_a_multi_batch_download_reads_its_chunks_through_one_stream(
    gridfs_client: MongoClient, db: Database[Any], recorder: CommandRecorder
) -> None:
    bucket = GridFSBucket(gridfs_client[db.name])
    data = os.urandom(6 * 1024 * 1024 + 12345)  # 25 chunks: about 7 batches of 4 chunks
    file_id = await bucket.upload_from_stream("streamed.bin", data)
    recorder.clear()
    download = await bucket.open_download_stream(file_id)
    assert await download.read() == data
    await download.close()
    sent, received = get_mores(recorder)
    assert sent == 1
    assert received >= 5
    assert "killCursors" not in recorder.names()  # read to its end: nothing left to kill, nothing cut
    assert checked_out(gridfs_client) == 0


async def test_a_download_closed_midway_kills_its_cursor_and_the_next_one_reads_whole(
    gridfs_client: MongoClient, db: Database[Any], recorder: CommandRecorder
) -> None:
    bucket = GridFSBucket(gridfs_client[db.name])
    data = os.urandom(6 * 1024 * 1024)
    file_id = await bucket.upload_from_stream("partial.bin", data)
    download = await bucket.open_download_stream(file_id)
    assert await download.read(3 * 1024 * 1024) == data[: 3 * 1024 * 1024]
    recorder.clear()
    await download.close()
    assert recorder.names() == ["killCursors"]
    assert checked_out(gridfs_client) == 0
    again = await bucket.open_download_stream(file_id)
    assert await again.read() == data


async def test_a_stream_stops_when_its_client_is_closed(server_uri: str, db: Database[Any]) -> None:
    client = MongoClient(server_uri)
    collection = client[db.name]["closing"]
    await collection.insert_many([{"_id": index} for index in range(DOCUMENTS)])
    cursor = collection.find({}, batch_size=10, cursor_type=CursorType.EXHAUST)
    taken = [await cursor.next() for _ in range(25)]  # into the stream
    await client.close()
    with pytest.raises(ClientClosedError):
        async for document in cursor:
            taken.append(document)
    assert len(taken) == 30  # what was buffered, nothing read from the stream after the close
    assert not cursor.alive
