"""GridFS against the test server: round trips (a 50 MB file with bounded memory), the indexes made before
the first write, aborted and failed uploads leaving no chunks, reading with seek/readline/readchunk,
corrupt files, revisions, and the bucket's file management."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from mongio.bson import Int64, ObjectId
from mongio.client import MongoClient
from mongio.database import Database
from mongio.errors import ConfigurationError, InvalidOperation, OperationFailure, OperationTimeoutError
from mongio.gridfs import (
    DOWNLOAD_BATCH_BYTES,
    UPLOAD_BATCH_BYTES,
    CorruptGridFile,
    FileExists,
    GridFS,
    GridFSBucket,
    GridIn,
    GridOut,
    NoFile,
)
from mongio.options.write_concern import WriteConcern


@pytest.fixture
async def client(server_uri: str) -> AsyncIterator[MongoClient]:
    """A client without the shared command recorder, which would keep every chunk sent (the memory test)."""
    async with MongoClient(server_uri) as client:
        yield client


@pytest.fixture
def bucket(db: Database[Any]) -> GridFSBucket:
    return GridFSBucket(db)


def pattern(size: int, seed: int = 0) -> bytes:
    """Bytes where every 8-byte word says where it is, so a misplaced chunk cannot go unnoticed."""
    words = (size + 7) // 8
    return b"".join((seed * 2**40 + i).to_bytes(8, "little") for i in range(words))[:size]


class GeneratedSource:
    """A file of ``size`` bytes made as it is read (an asyncio-style reader), hashed on the way."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = 0
        self.digest = hashlib.sha256()

    async def read(self, size: int) -> bytes:
        take = min(size, self.left)
        if take <= 0:
            return b""
        data = (self.block.to_bytes(8, "little") * (take // 8 + 1))[:take]
        self.block += 1
        self.left -= take
        self.digest.update(data)
        return data


class HashingSink:
    """A destination with an async ``write`` that keeps only a hash and a byte count."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.size = 0

    async def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.size += len(data)


async def test_50mb_round_trip_holds_only_a_few_batches_in_memory(
    bucket: GridFSBucket, db: Database[Any]
) -> None:
    size = 50 * 1024 * 1024
    await bucket.upload_from_stream("warm-up", b"x")  # indexes and connections, outside the measurement
    source = GeneratedSource(size)
    tracemalloc.start()
    try:
        file_id = await bucket.upload_from_stream("large.bin", source)
        upload_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        sink = HashingSink()
        await bucket.download_to_stream(file_id, sink)
        download_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(
        f"\n50 MiB GridFS round trip: upload peak {upload_peak / 2**20:.1f} MiB, "
        f"download peak {download_peak / 2**20:.1f} MiB (batches of {UPLOAD_BATCH_BYTES / 2**20:.1f} and "
        f"{DOWNLOAD_BATCH_BYTES / 2**20:.1f} MiB)"
    )
    assert sink.size == size
    assert sink.digest.digest() == source.digest.digest()
    assert await db["fs.chunks"].count_documents({"files_id": file_id}) == -(-size // (255 * 1024))
    # A small multiple of one batch, nowhere near the file's size.
    assert upload_peak < 6 * UPLOAD_BATCH_BYTES < size / 2
    assert download_peak < 6 * DOWNLOAD_BATCH_BYTES < size / 2


async def test_bytes_round_trip_and_files_document(bucket: GridFSBucket, db: Database[Any]) -> None:
    data = pattern(10_000)
    file_id = await bucket.upload_from_stream("a.bin", data, chunk_size_bytes=1024, metadata={"k": "v"})
    assert isinstance(file_id, ObjectId)
    document = await db["fs.files"].find_one({"_id": file_id})
    assert document is not None
    assert document["length"] == 10_000 and isinstance(document["length"], Int64)
    assert document["chunkSize"] == 1024
    assert document["filename"] == "a.bin" and document["metadata"] == {"k": "v"}
    assert "md5" not in document and "contentType" not in document and "aliases" not in document
    chunks = await db["fs.chunks"].find({"files_id": file_id}, sort=[("n", 1)]).to_list()
    assert [chunk["n"] for chunk in chunks] == list(range(10))
    assert [len(chunk["data"]) for chunk in chunks] == [1024] * 9 + [784]
    destination = io.BytesIO()
    await bucket.download_to_stream(file_id, destination)
    assert destination.getvalue() == data


async def test_deprecated_upload_options_are_stored_and_warn(bucket: GridFSBucket, db: Database[Any]) -> None:
    """GridFS, File Upload (GridFSUploadOptions) and the files collection document: the deprecated
    contentType and aliases options are still accepted, warn, and are stored under those names; GridOut
    reads them back."""
    uploads: list[Callable[[], Awaitable[Any]]] = [
        lambda: bucket.upload_from_stream("a", b"x", content_type="text/plain", aliases=["b", "c"]),
        lambda: bucket.upload_from_stream_with_id(
            7, "a", b"x", content_type="text/plain", aliases=("b", "c")
        ),
    ]
    ids = []
    for upload in uploads:
        with pytest.warns(DeprecationWarning) as caught:
            ids.append(await upload())
        assert {str(warning.message).split(" ")[0] for warning in caught} == {"content_type", "aliases"}
        assert all(warning.filename == __file__ for warning in caught)  # points at the caller
    file_ids = [ids[0], 7]
    for file_id in file_ids:
        document = await db["fs.files"].find_one({"_id": file_id})
        assert document is not None
        assert document["contentType"] == "text/plain" and document["aliases"] == ["b", "c"]
        download = await bucket.open_download_stream(file_id)
        assert download.content_type == "text/plain" and download.aliases == ["b", "c"]
    with pytest.warns(DeprecationWarning, match="content_type"):
        stream = bucket.open_upload_stream("s", content_type="image/png")
    async with stream:
        await stream.write(b"png")
    with pytest.warns(DeprecationWarning, match="aliases"):
        stream_with_id = bucket.open_upload_stream_with_id(8, "s", aliases=["t"])
    async with stream_with_id:
        await stream_with_id.write(b"t")
    assert (await db["fs.files"].find_one({"_id": stream._id}) or {}).get("contentType") == "image/png"
    stored = await db["fs.files"].find_one({"_id": 8}) or {}
    assert stored.get("aliases") == ["t"] and "contentType" not in stored


async def test_deprecated_upload_options_are_checked(bucket: GridFSBucket, db: Database[Any]) -> None:
    """GridFS, GridFSUploadOptions: contentType is a string and aliases an array of strings; a wrong type is
    refused before anything is stored."""
    with pytest.raises(TypeError, match="content_type"):
        await bucket.upload_from_stream("a", b"x", content_type=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aliases"):
        await bucket.upload_from_stream("a", b"x", aliases="b")
    with pytest.raises(TypeError, match="aliases"):
        bucket.open_upload_stream("a", aliases=["b", 3])  # type: ignore[list-item]
    assert await db["fs.files"].count_documents({}) == 0


async def test_disable_md5_is_accepted_and_md5_never_stored(db: Database[Any]) -> None:
    """GridFS, GridFSBucketOptions disableMD5 and File Upload: the transitional option is accepted (a no-op,
    since MD5 is never computed) and files never get an md5 field either way."""
    for disable in (True, False):
        bucket = GridFSBucket(db, disable_md5=disable)
        file_id = await bucket.upload_from_stream("f", pattern(3000), chunk_size_bytes=1000)
        document = await db["fs.files"].find_one({"_id": file_id})
        assert document is not None and "md5" not in document
        assert (await bucket.open_download_stream(file_id)).md5 is None
    with pytest.raises(TypeError, match="disable_md5"):
        GridFSBucket(db, disable_md5="yes")  # type: ignore[arg-type]


async def test_empty_file_has_no_chunks(bucket: GridFSBucket, db: Database[Any]) -> None:
    file_id = await bucket.upload_from_stream("empty", b"")
    assert await db["fs.chunks"].count_documents({}) == 0
    download = await bucket.open_download_stream(file_id)
    assert download.length == 0
    assert await download.read() == b""


async def test_indexes_are_made_before_the_first_write(bucket: GridFSBucket, db: Database[Any]) -> None:
    await bucket.upload_from_stream("f", b"abc")
    files = {index["name"]: index async for index in db["fs.files"].list_indexes()}
    chunks = {index["name"]: index async for index in db["fs.chunks"].list_indexes()}
    assert dict(files["filename_1_uploadDate_1"]["key"]) == {"filename": 1, "uploadDate": 1}
    assert dict(chunks["files_id_1_n_1"]["key"]) == {"files_id": 1, "n": 1}
    assert chunks["files_id_1_n_1"].get("unique") is True


async def test_existing_indexes_with_other_numbers_are_reused(db: Database[Any]) -> None:
    await db["fs.files"].create_index([("filename", 1.0), ("uploadDate", 1.0)], name="by_name")
    await db["fs.chunks"].create_index([("files_id", 1.0), ("n", 1.0)], unique=True, name="by_file")
    await GridFSBucket(db).upload_from_stream("f", b"abc")
    assert sorted(await db["fs.files"].index_information()) == ["_id_", "by_name"]
    assert sorted(await db["fs.chunks"].index_information()) == ["_id_", "by_file"]


async def test_no_indexes_are_made_when_files_already_exist(db: Database[Any]) -> None:
    await db["fs.files"].insert_one({"_id": 1, "length": 0, "chunkSize": 4, "filename": "old"})
    await GridFSBucket(db).upload_from_stream("new", b"abc")
    assert list(await db["fs.files"].index_information()) == ["_id_"]
    assert list(await db["fs.chunks"].index_information()) == ["_id_"]


async def test_abort_deletes_the_chunks_and_closes_the_stream(
    bucket: GridFSBucket, db: Database[Any]
) -> None:
    upload = bucket.open_upload_stream("aborted", chunk_size_bytes=65_536)
    await upload.write(pattern(UPLOAD_BATCH_BYTES + 5000))  # at least one batch is sent
    assert await db["fs.chunks"].count_documents({"files_id": upload._id}) > 0
    await upload.abort()
    assert await db["fs.chunks"].count_documents({}) == 0
    assert await db["fs.files"].count_documents({}) == 0
    assert upload.closed
    with pytest.raises(ValueError):
        await upload.write(b"more")


class FailingSource:
    """Gives ``good`` bytes, then raises."""

    def __init__(self, good: int) -> None:
        self.data = io.BytesIO(pattern(good))

    async def read(self, size: int) -> bytes:
        block = self.data.read(size)
        if not block:
            raise OSError("the source broke")
        return block


async def test_a_failing_source_leaves_no_chunks(bucket: GridFSBucket, db: Database[Any]) -> None:
    with pytest.raises(OSError, match="the source broke"):
        await bucket.upload_from_stream("broken", FailingSource(UPLOAD_BATCH_BYTES + 1000))
    assert await db["fs.chunks"].count_documents({}) == 0
    assert await db["fs.files"].count_documents({}) == 0


async def test_a_cancelled_upload_leaves_no_chunks(bucket: GridFSBucket, db: Database[Any]) -> None:
    sent = asyncio.Event()
    never = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield pattern(2 * UPLOAD_BATCH_BYTES)
        sent.set()
        await never.wait()
        yield b"unreachable"

    task = asyncio.create_task(bucket.upload_from_stream("cancelled", body()))
    await sent.wait()
    assert await db["fs.chunks"].count_documents({}) > 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await db["fs.chunks"].count_documents({}) == 0
    assert await db["fs.files"].count_documents({}) == 0


async def _upload_cut_by_a_cancel_scope(uri: str) -> tuple[int, int, int]:
    """Chunks stored when the upload was cut, then chunks and files left once the cut upload ended."""
    async with MongoClient(uri) as client:
        db = client[f"gridfs_cut_{uuid.uuid4().hex[:12]}"]
        sent = anyio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield pattern(2 * UPLOAD_BATCH_BYTES)
            sent.set()
            await anyio.sleep_forever()
            yield b"unreachable"

        try:
            async with anyio.create_task_group() as uploading:
                uploading.start_soon(GridFSBucket(db).upload_from_stream, "cut", body())
                await sent.wait()
                stored = await db["fs.chunks"].count_documents({})
                uploading.cancel_scope.cancel()
            assert uploading.cancel_scope.cancelled_caught
            return stored, await db["fs.chunks"].count_documents({}), await db["fs.files"].count_documents({})
        finally:
            await client.drop_database(db.name)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_upload_cut_by_a_cancel_scope_leaves_no_chunks(server_uri: str, backend: str) -> None:
    """As ``test_a_cancelled_upload_leaves_no_chunks``, cut by anyio's cancel scope (level-triggered: every
    await inside the scope is cancelled again) on asyncio and on trio."""
    stored, chunks_left, files_left = anyio.run(_upload_cut_by_a_cancel_scope, server_uri, backend=backend)
    assert stored > 0
    assert (chunks_left, files_left) == (0, 0)


async def test_an_id_in_use_raises_file_exists_and_spares_the_other_file(bucket: GridFSBucket) -> None:
    await bucket.upload_from_stream_with_id("same", "first", b"original data", chunk_size_bytes=4)
    with pytest.raises(FileExists):
        await bucket.upload_from_stream_with_id("same", "second", b"other bytes!", chunk_size_bytes=4)
    destination = io.BytesIO()
    await bucket.download_to_stream("same", destination)
    assert destination.getvalue() == b"original data"


async def test_an_empty_file_id_in_use_raises_file_exists(bucket: GridFSBucket, db: Database[Any]) -> None:
    """GridFS, File Upload / Operation Failure: the files document's insert fails (the id is taken), so the
    upload raises at once and leaves the chunks it stored; the other, empty file still reads as empty."""
    await bucket.upload_from_stream_with_id(7, "empty", b"")
    with pytest.raises(FileExists):
        await bucket.upload_from_stream_with_id(7, "again", b"some bytes")
    assert await db["fs.chunks"].count_documents({"files_id": 7}) == 1
    assert await db["fs.files"].count_documents({}) == 1
    assert await (await bucket.open_download_stream(7)).read() == b""


@contextlib.asynccontextmanager
async def failing_inserts(client: MongoClient, mode: Any, app_name: str) -> AsyncIterator[None]:
    """The server fails the ``insert`` commands of clients named ``app_name`` (``mode`` of failCommand)."""
    data = {"failCommands": ["insert"], "errorCode": 8000, "appName": app_name}
    await client.admin.command({"configureFailPoint": "failCommand", "mode": mode, "data": data})
    try:
        yield
    finally:
        await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


async def test_a_chunk_the_server_refuses_leaves_the_stored_chunks(
    server_uri: str, client: MongoClient, db: Database[Any]
) -> None:
    """GridFS, File Upload / Operation Failure: when a chunk insert fails on the server the error is raised
    and the chunks inserted before are not cleaned up; the failed stream takes no more writes, and an
    explicit abort still deletes its chunks (Aborting an upload)."""
    async with MongoClient(server_uri, appname="gridfs-chunk-failure") as own:
        bucket = GridFSBucket(own[db.name])
        upload = bucket.open_upload_stream("f", chunk_size_bytes=65_536)
        await upload.write(pattern(UPLOAD_BATCH_BYTES))  # one batch stored
        stored = await db["fs.chunks"].count_documents({"files_id": upload._id})
        assert stored > 0
        async with failing_inserts(client, {"times": 1}, "gridfs-chunk-failure"):
            with pytest.raises(OperationFailure) as raised:
                await upload.write(pattern(UPLOAD_BATCH_BYTES))
        assert raised.value.code == 8000
        assert await db["fs.chunks"].count_documents({"files_id": upload._id}) == stored
        with pytest.raises(ValueError, match="failed"):
            await upload.write(b"more")
        await upload.close()  # nothing left to do: the upload is over
        assert await db["fs.files"].count_documents({}) == 0
        await upload.abort()
        assert await db["fs.chunks"].count_documents({}) == 0


async def test_a_files_document_the_server_refuses_leaves_the_chunks(
    server_uri: str, client: MongoClient, db: Database[Any]
) -> None:
    """GridFS, File Upload / Operation Failure: upload_from_stream whose files document insert fails raises
    that error and does not delete the chunks it stored (a failing source, by contrast, aborts: see
    test_a_failing_source_leaves_no_chunks)."""
    async with MongoClient(server_uri, appname="gridfs-files-failure") as own:
        bucket = GridFSBucket(own[db.name])
        await bucket.upload_from_stream("warm-up", b"")  # the indexes exist before the fail point
        async with failing_inserts(client, {"skip": 1}, "gridfs-files-failure"):
            with pytest.raises(OperationFailure):
                await bucket.upload_from_stream("f", pattern(3000), chunk_size_bytes=1000)
        assert await db["fs.chunks"].count_documents({}) == 3
        assert await db["fs.files"].count_documents({"filename": "f"}) == 0


async def test_upload_stream_context_manager(bucket: GridFSBucket) -> None:
    async with bucket.open_upload_stream("pieces.txt", chunk_size_bytes=5) as upload:
        await upload.write(b"abc")
        await upload.write(bytearray(b"defghij"))
        await upload.write(memoryview(b"klm"))
        await upload.writelines([b"n", b"op"])
    assert upload.closed and upload.length == 16 and upload.upload_date is not None
    download = await bucket.open_download_stream(upload._id)
    assert await download.read() == b"abcdefghijklmnop"
    with pytest.raises(ValueError):
        await upload.write(b"late")


async def test_str_needs_an_encoding(db: Database[Any]) -> None:
    upload = GridIn(db.fs, filename="text.txt", encoding="utf-8", chunk_size=3)
    await upload.write("héllo")
    await upload.close()
    download = await GridFSBucket(db).open_download_stream(upload._id)
    assert (await download.read()).decode("utf-8") == "héllo"
    assert download.encoding == "utf-8"  # an extra field of the files document, read as an attribute
    with pytest.raises(TypeError):
        await GridIn(db.fs, filename="x").write("no encoding")


async def test_sources_and_destinations(bucket: GridFSBucket, tmp_path: Path) -> None:
    data = pattern(300_000)
    path = tmp_path / "source.bin"
    path.write_bytes(data)

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), 70_001):
            yield data[start : start + 70_001]

    with path.open("rb") as file:
        from_file = await bucket.upload_from_stream("from-file", file, chunk_size_bytes=65_536)
    from_memory = await bucket.upload_from_stream("from-memory", io.BytesIO(data))
    from_iterable = await bucket.upload_from_stream("from-iterable", pieces(), chunk_size_bytes=10_000)
    for file_id in (from_file, from_memory, from_iterable):
        target = tmp_path / f"{file_id}.bin"
        with target.open("wb") as out:
            await bucket.download_to_stream(file_id, out)
        assert target.read_bytes() == data
    with pytest.raises(TypeError):
        await bucket.upload_from_stream("number", 12345)


async def test_reading_with_seek_readline_and_readchunk(bucket: GridFSBucket) -> None:
    text = b"".join(b"line %03d\n" % i for i in range(100))  # 9 bytes a line, chunks of 16
    file_id = await bucket.upload_from_stream("lines.txt", text, chunk_size_bytes=16)
    download = await bucket.open_download_stream(file_id)
    assert (download.filename, download.length, download.chunk_size) == ("lines.txt", len(text), 16)
    assert await download.readline() == b"line 000\n"
    assert await download.read(3) == b"lin"
    assert download.tell() == 12
    assert await download.readchunk() == text[12:16]
    assert await download.readchunk() == text[16:32]
    assert await download.seek(-9, io.SEEK_END) == len(text) - 9
    assert await download.read() == b"line 099\n"
    assert await download.read() == b""
    assert await download.seek(450) == 450
    assert await download.readline() == b"line 050\n"
    assert await download.seek(-18, io.SEEK_CUR) == 441
    assert await download.read(9) == b"line 049\n"
    await download.seek(0)
    lines = [line async for line in download]
    assert lines == text.splitlines(keepends=True)
    await download.seek(97 * 9)
    assert await download.readlines() == [b"line 097\n", b"line 098\n", b"line 099\n"]
    with pytest.raises(OSError):
        await download.seek(-1)
    await download.close()
    with pytest.raises(ValueError):
        await download.read()


async def test_missing_and_wrong_size_chunks_are_corrupt(bucket: GridFSBucket, db: Database[Any]) -> None:
    file_id = await bucket.upload_from_stream("f", pattern(100), chunk_size_bytes=10)
    await db["fs.chunks"].delete_one({"files_id": file_id, "n": 4})
    download = await bucket.open_download_stream(file_id)
    assert await download.read(40) == pattern(100)[:40]
    with pytest.raises(CorruptGridFile):
        await download.read(10)
    await download.close()
    other = await bucket.upload_from_stream("g", pattern(100), chunk_size_bytes=10)
    await db["fs.chunks"].update_one({"files_id": other, "n": 9}, {"$set": {"data": b"short"}})
    with pytest.raises(CorruptGridFile):
        await bucket.download_to_stream(other, io.BytesIO())


async def test_revisions_by_name(bucket: GridFSBucket) -> None:
    for version in range(3):
        await bucket.upload_from_stream("doc", b"v%d" % version)
        await anyio.sleep(0.002)  # distinct uploadDate milliseconds
    for revision, expected in ((0, b"v0"), (1, b"v1"), (2, b"v2"), (-1, b"v2"), (-3, b"v0")):
        download = await bucket.open_download_stream_by_name("doc", revision)
        assert await download.read() == expected
    destination = io.BytesIO()
    await bucket.download_to_stream_by_name("doc", destination)
    assert destination.getvalue() == b"v2"
    with pytest.raises(NoFile, match="no revision 3"):
        await bucket.open_download_stream_by_name("doc", 3)
    with pytest.raises(NoFile, match="no file named"):
        await bucket.open_download_stream_by_name("missing")


async def test_find_delete_and_rename(bucket: GridFSBucket, db: Database[Any]) -> None:
    a = await bucket.upload_from_stream("a", b"aaaa", metadata={"kind": "x"})
    b = await bucket.upload_from_stream("b", b"bbbbbbbb", chunk_size_bytes=4)
    await bucket.upload_from_stream("b", b"b2")
    found = await bucket.find({"metadata.kind": "x"}).to_list()
    assert [type(item) for item in found] == [GridOut] and found[0]._id == a
    assert await found[0].read() == b"aaaa"
    names = [grid_out.filename async for grid_out in bucket.find({}, sort=[("filename", 1)], limit=2)]
    assert names == ["a", "b"]
    await bucket.rename(a, "renamed")
    assert (await bucket.open_download_stream(a)).filename == "renamed"
    await bucket.rename_by_name("b", "bee")
    assert await db["fs.files"].count_documents({"filename": "bee"}) == 2
    await bucket.delete(b)
    assert await db["fs.chunks"].count_documents({"files_id": b}) == 0
    with pytest.raises(NoFile):
        await bucket.delete(b)
    await bucket.delete_by_name("bee")
    assert await db["fs.files"].count_documents({"filename": "bee"}) == 0
    for call in (
        bucket.delete_by_name("bee"),
        bucket.rename(b, "x"),
        bucket.rename_by_name("bee", "x"),
        bucket.open_download_stream(b),
    ):
        with pytest.raises(NoFile):
            await call
    await bucket.drop()
    assert "fs.files" not in await db.list_collection_names()
    await bucket.upload_from_stream("after-drop", b"z")  # the indexes are made again
    assert "filename_1_uploadDate_1" in await db["fs.files"].index_information()


async def test_found_files_read_as_their_documents(bucket: GridFSBucket, db: Database[Any]) -> None:
    """Motor's GridOutCursor.to_list() gives files documents: code reading f["filename"] works on a GridOut."""
    file_id = await bucket.upload_from_stream("doc.txt", b"12345", metadata={"by": "me"})
    (found,) = await bucket.find({"_id": file_id}).to_list()
    assert found["filename"] == "doc.txt" and found["length"] == 5 and found["_id"] == file_id
    assert found["metadata"] == {"by": "me"} and found["uploadDate"] == found.upload_date
    with pytest.raises(KeyError):
        found["contentType"]
    unopened = GridOut(db["fs"], file_id)
    with pytest.raises(InvalidOperation):
        unopened["filename"]


async def test_transactions_and_unacknowledged_writes_are_refused(
    client: MongoClient, db: Database[Any]
) -> None:
    with pytest.raises(ConfigurationError):
        GridFSBucket(db, write_concern=WriteConcern(w=0))
    bucket = GridFSBucket(db)
    await db.create_collection("fs.files")
    async with client.start_session() as session, session.start_transaction():
        with pytest.raises(InvalidOperation):
            await bucket.upload_from_stream("t", b"x", session=session)
        with pytest.raises(InvalidOperation):
            bucket.find({}, session=session)


async def test_timeout_ms_bounds_a_stream_s_whole_life(server_uri: str, db: Database[Any]) -> None:
    async with MongoClient(server_uri, timeoutMS=100) as client:
        bucket = GridFSBucket(client[db.name])
        file_id = await bucket.upload_from_stream("f", b"data")
        upload = bucket.open_upload_stream("late")
        download = await bucket.open_download_stream(file_id)
        await anyio.sleep(0.15)  # longer than timeoutMS: both streams' deadlines have passed
        await upload.write(b"buffered, nothing sent yet")
        with pytest.raises(OperationTimeoutError):
            await upload.close()
        with pytest.raises(OperationTimeoutError):
            await download.read()
        # A new operation gets a deadline of its own.
        assert await (await bucket.open_download_stream(file_id)).read() == b"data"


async def test_the_older_gridfs_interface(db: Database[Any]) -> None:
    fs = GridFS(db)
    first = await fs.put(b"one", filename="doc.txt", metadata={"v": 1})
    await anyio.sleep(0.002)  # distinct uploadDate milliseconds
    second = await fs.put("twö", filename="doc.txt", encoding="utf-8", chunk_size=2)
    await fs.put(b"other", _id="custom", filename="other.txt")
    assert await (await fs.get(first)).read() == b"one"
    latest = await fs.get_last_version("doc.txt")
    assert latest._id == second and (await latest.read()).decode("utf-8") == "twö"
    assert (await fs.get_version("doc.txt", 0))._id == first
    assert (await fs.get_version(metadata={"v": 1}))._id == first
    assert sorted(await fs.list()) == ["doc.txt", "other.txt"]
    assert await fs.exists(first) and await fs.exists(filename="other.txt")
    assert not await fs.exists("missing") and not await fs.exists({"filename": "missing"})
    found = await fs.find_one("custom")
    assert found is not None and found.filename == "other.txt"
    assert [g._id async for g in fs.find({"filename": "doc.txt"}, sort=[("uploadDate", 1)])] == [
        first,
        second,
    ]
    assert "filename_1_uploadDate_1" in await db["fs.files"].index_information()
    await fs.delete(second)
    await fs.delete(second)  # a missing file is not an error here
    assert await db["fs.chunks"].count_documents({"files_id": second}) == 0
    with pytest.raises(NoFile):
        await fs.get(second)
    with pytest.raises(NoFile):
        await fs.get_version("doc.txt", 1)
