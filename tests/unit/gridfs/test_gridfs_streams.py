"""GridIn and GridOut over an in-memory stand-in for the two collections: how writes of any sizes become
chunks and batches, what an upload deletes when it fails or is aborted (and what it must not delete), and
how reads walk and check the chunks."""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from mongio.cursor import CursorType
from mongio.errors import BulkWriteError, DuplicateKeyError, OperationFailure
from mongio.gridfs import grid_in as grid_in_module
from mongio.gridfs.errors import CorruptGridFile, FileExists
from mongio.gridfs.grid_in import GridIn
from mongio.gridfs.grid_out import GridOut


class FakeCursor:
    def __init__(self, documents: list[dict[str, Any]]) -> None:
        self._documents = list(documents)
        self.closed = False

    def __aiter__(self) -> FakeCursor:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if not self._documents:
            raise StopAsyncIteration
        return self._documents.pop(0)

    @property
    def alive(self) -> bool:
        return bool(self._documents) and not self.closed

    async def try_next(self) -> dict[str, Any] | None:
        return self._documents.pop(0) if self._documents else None

    async def close(self) -> None:
        self.closed = True

    async def __aenter__(self) -> FakeCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class FakeCollection:
    """The few collection methods GridFS uses, over a list of documents."""

    def __init__(self, store: FakeStore, name: str) -> None:
        self.store = store
        self.name = name
        self.full_name = f"db.{name}"
        self.documents: list[dict[str, Any]] = []
        self.insert_calls: list[int] = []
        self.fail_insert: BaseException | None = None
        self.deleted_filters: list[Mapping[str, Any]] = []
        self.indexes: list[dict[str, Any]] = []
        self.cursors: list[FakeCursor] = []

    @property
    def database(self) -> Any:
        return self.store.database

    def with_options(self, **options: Any) -> FakeCollection:
        return self

    def _check_unique(self, document: Mapping[str, Any]) -> None:
        for other in self.documents:
            if self.name.endswith("files") and other["_id"] == document["_id"]:
                raise DuplicateKeyError("duplicate _id", 11000)
            if self.name.endswith("chunks") and (other["files_id"], other["n"]) == (
                document["files_id"],
                document["n"],
            ):
                raise DuplicateKeyError("duplicate chunk", 11000)

    async def insert_many(self, documents: list[dict[str, Any]], session: Any = None) -> None:
        self.insert_calls.append(len(documents))
        if self.fail_insert is not None:
            raise self.fail_insert
        for index, document in enumerate(documents):
            try:
                self._check_unique(document)
            except DuplicateKeyError:
                raise BulkWriteError(
                    {"writeErrors": [{"index": index, "code": 11000}], "nInserted": index}
                ) from None
            self.documents.append(dict(document))

    async def insert_one(self, document: dict[str, Any], session: Any = None) -> None:
        if self.fail_insert is not None:
            raise self.fail_insert
        self._check_unique(document)
        self.documents.append(dict(document))

    async def delete_many(self, filter: Mapping[str, Any], session: Any = None) -> None:
        self.deleted_filters.append(filter)
        self.documents = [d for d in self.documents if d.get("files_id") != filter["files_id"]]

    async def find_one(self, filter: Mapping[str, Any], *args: Any, session: Any = None) -> Any:
        for document in self.documents:
            if all(document.get(key) == value for key, value in filter.items()):
                return document
        return None

    def find(self, filter: Mapping[str, Any], **options: Any) -> FakeCursor:
        first, end = filter["n"]["$gte"], filter["n"].get("$lt", float("inf"))
        chunks = sorted(
            (d for d in self.documents if d["files_id"] == filter["files_id"] and first <= d["n"] < end),
            key=lambda d: d["n"],
        )
        self.store.find_options.append({"filter": filter, **options})
        cursor = FakeCursor(chunks[: options.get("limit") or None])
        self.cursors.append(cursor)
        return cursor

    def list_indexes(self, session: Any = None) -> FakeCursor:
        return FakeCursor(self.indexes)

    async def create_index(self, keys: list[tuple[str, int]], session: Any = None, **options: Any) -> str:
        self.indexes.append({"key": dict(keys), **options})
        return "made"


class FakeStore:
    def __init__(self) -> None:
        self.database = SimpleNamespace(client=SimpleNamespace(options=SimpleNamespace(timeout_ms=None)))
        self.collections = {name: FakeCollection(self, name) for name in ("fs.files", "fs.chunks")}
        self.find_options: list[dict[str, Any]] = []

    def __getitem__(self, name: str) -> FakeCollection:
        return self.collections[f"fs.{name}"]

    @property
    def files(self) -> FakeCollection:
        return self.collections["fs.files"]

    @property
    def chunks(self) -> FakeCollection:
        return self.collections["fs.chunks"]


def make_in(store: FakeStore, **fields: Any) -> GridIn:
    return GridIn(store, **fields)  # type: ignore[arg-type]


def make_out(store: FakeStore, file_id: Any) -> GridOut:
    return GridOut(store, file_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(5))
async def test_writes_of_any_sizes_become_exact_chunks_in_bounded_batches(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grid_in_module, "UPLOAD_BATCH_BYTES", 40)
    rng = random.Random(seed)
    data = rng.randbytes(rng.randrange(0, 400))
    store = FakeStore()
    upload = make_in(store, _id="f", filename="x", chunk_size=7)
    position = 0
    while position < len(data):
        size = rng.choice([0, 1, 3, 7, 8, 20, 100])
        piece = data[position : position + size]
        await upload.write(rng.choice([bytes, bytearray, memoryview])(piece))
        position += len(piece)
    await upload.close()
    chunks = sorted(store.chunks.documents, key=lambda d: d["n"])
    assert [c["n"] for c in chunks] == list(range(len(chunks)))
    assert all(len(c["data"]) == 7 for c in chunks[:-1])
    assert b"".join(c["data"] for c in chunks) == data
    assert all(count <= 40 // 7 for count in store.chunks.insert_calls)
    (document,) = store.files.documents
    assert (document["_id"], document["length"], document["chunkSize"]) == ("f", len(data), 7)
    assert upload.closed and upload.length == len(data)
    # The indexes were checked and made once, before the first write.
    assert [index["key"] for index in store.files.indexes] == [{"filename": 1, "uploadDate": 1}]
    assert store.chunks.indexes == [{"key": {"files_id": 1, "n": 1}, "unique": True}]


class RecordingGuard:
    """An index check that records the sessions it was asked to check in, and checks nothing."""

    def __init__(self) -> None:
        self.sessions: list[Any] = []

    async def ensure(self, session: Any = None) -> None:
        self.sessions.append(session)


async def test_an_upload_given_a_shared_index_check_uses_it_instead_of_its_own() -> None:
    store = FakeStore()
    shared = RecordingGuard()
    upload = make_in(store, _id="f", filename="x", chunk_size=4)
    upload.share_index_check(shared)  # type: ignore[arg-type]
    await upload.write(b"0123456789")
    await upload.close()
    assert shared.sessions and set(shared.sessions) == {None}
    # The upload's own check would have made the indexes of the empty bucket.
    assert store.files.indexes == [] and store.chunks.indexes == []
    assert len(store.chunks.documents) == 3


async def test_a_failed_batch_leaves_what_was_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """GridFS, File Upload / Operation Failure: a chunk insert the server fails is raised without deleting
    the chunks sent before, even when it happens inside the upload's ``async with`` block."""
    monkeypatch.setattr(grid_in_module, "UPLOAD_BATCH_BYTES", 16)
    store = FakeStore()
    upload = make_in(store, _id="f", chunk_size=4)
    await upload.write(b"x" * 16)  # a batch goes out
    assert store.chunks.insert_calls == [4]
    store.chunks.fail_insert = OperationFailure("disk full", 14031)
    with pytest.raises(OperationFailure):
        async with upload:
            await upload.write(b"y" * 16)
    assert len(store.chunks.documents) == 4 and store.files.documents == []
    assert store.chunks.deleted_filters == []
    assert upload.closed


async def test_an_application_error_in_the_block_still_aborts(monkeypatch: pytest.MonkeyPatch) -> None:
    """GridFS, Aborting an upload: an error that is not the server's (here raised by the application's
    block) aborts the upload, deleting what was sent."""
    monkeypatch.setattr(grid_in_module, "UPLOAD_BATCH_BYTES", 16)
    store = FakeStore()
    upload = make_in(store, _id="f", chunk_size=4)
    with pytest.raises(RuntimeError):
        async with upload:
            await upload.write(b"x" * 16)
            raise RuntimeError("the application gave up")
    assert store.chunks.documents == [] and store.chunks.deleted_filters == [{"files_id": "f"}]


async def test_abort_before_anything_was_sent_deletes_nothing() -> None:
    store = FakeStore()
    store.chunks.documents.append({"files_id": "shared", "n": 0, "data": b"other"})
    upload = make_in(store, _id="shared", chunk_size=4)
    await upload.write(b"abc")
    await upload.abort()
    assert store.chunks.deleted_filters == []
    assert len(store.chunks.documents) == 1
    with pytest.raises(ValueError):
        await upload.write(b"more")


async def test_an_id_whose_chunks_exist_raises_file_exists_without_deleting_them() -> None:
    store = FakeStore()
    store.files.documents.append({"_id": "taken", "length": 5, "chunkSize": 4})
    store.chunks.documents += [
        {"files_id": "taken", "n": 0, "data": b"orig"},
        {"files_id": "taken", "n": 1, "data": b"!"},
    ]
    upload = make_in(store, _id="taken", chunk_size=4)
    with pytest.raises(FileExists):
        async with upload:
            await upload.write(b"new data")
    assert store.chunks.deleted_filters == []
    assert [c["data"] for c in store.chunks.documents] == [b"orig", b"!"]


async def test_an_empty_file_with_the_id_makes_close_raise_file_exists_and_keep_its_chunks() -> None:
    """GridFS, File Upload / Operation Failure: the files document's insert failing (its id is taken)
    raises FileExists without cleaning up; an explicit abort afterwards deletes the upload's chunks."""
    store = FakeStore()
    store.files.documents.append({"_id": "taken", "length": 0, "chunkSize": 4})
    upload = make_in(store, _id="taken", chunk_size=4)
    await upload.write(b"new data")
    with pytest.raises(FileExists):
        await upload.close()
    assert len(store.chunks.documents) == 2 and store.chunks.deleted_filters == []
    await upload.abort()
    assert store.chunks.documents == [] and store.chunks.deleted_filters == [{"files_id": "taken"}]


async def test_abort_after_close_keeps_the_file() -> None:
    store = FakeStore()
    upload = make_in(store, _id="f", chunk_size=4)
    await upload.write(b"abcdefgh")
    await upload.close()
    await upload.abort()
    assert len(store.chunks.documents) == 2 and store.chunks.deleted_filters == []


def stored(store: FakeStore, file_id: str, data: bytes, chunk_size: int) -> None:
    store.files.documents.append({"_id": file_id, "length": len(data), "chunkSize": chunk_size})
    for n, start in enumerate(range(0, len(data), chunk_size)):
        store.chunks.documents.append({"files_id": file_id, "n": n, "data": data[start : start + chunk_size]})


async def test_reads_ask_for_only_the_chunks_needed_and_check_each() -> None:
    store = FakeStore()
    data = bytes(range(100))
    stored(store, "f", data, 10)
    store.chunks.documents.append({"files_id": "f", "n": 10, "data": b"extra chunk, ignored"})
    download = make_out(store, "f")
    await download.seek(35)
    assert await download.read(10) == data[35:45]
    # Chunks 3..9, not the extra one, through an exhaust cursor.
    assert store.find_options[-1]["filter"] == {"files_id": "f", "n": {"$gte": 3, "$lt": 10}}
    assert store.find_options[-1]["cursor_type"] == CursorType.EXHAUST
    assert await download.read() == data[45:]
    assert store.chunks.cursors[-1].closed
    store.chunks.documents = [c for c in store.chunks.documents if c["n"] != 6]
    await download.seek(0)
    with pytest.raises(CorruptGridFile, match="chunk 6"):
        await download.read()


async def test_an_empty_file_reads_no_chunks() -> None:
    store = FakeStore()
    store.files.documents.append({"_id": "e", "length": 0, "chunkSize": 4})
    store.chunks.documents.append({"files_id": "e", "n": 0, "data": b""})
    download = make_out(store, "e")
    assert await download.read() == b"" and await download.readchunk() == b""
    assert store.find_options == []
