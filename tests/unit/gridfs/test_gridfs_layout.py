"""GridFS without a server: chunk arithmetic and checks, files documents, revisions, index key comparison,
and the adapters over the application's sources and destinations."""

from __future__ import annotations

import datetime
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mongio.bson import Int64
from mongio.gridfs.errors import CorruptGridFile
from mongio.gridfs.layout import (
    CHUNKS_INDEX,
    FILES_INDEX,
    check_chunk,
    chunk_count,
    chunks_per_batch,
    expected_chunk_length,
    file_chunk_size,
    file_length,
    files_document,
    index_keys_match,
    revision_order,
    upload_date,
    validate_chunk_size,
)
from mongio.gridfs.streams import Destination, read_blocks


@pytest.mark.parametrize(
    ("length", "chunk_size", "count", "last"),
    [(0, 4, 0, None), (1, 4, 1, 1), (4, 4, 1, 4), (5, 4, 2, 1), (8, 4, 2, 4), (10, 4, 3, 2)],
)
def test_chunk_count_and_sizes(length: int, chunk_size: int, count: int, last: int | None) -> None:
    assert chunk_count(length, chunk_size) == count
    if last is not None:
        assert expected_chunk_length(count - 1, length, chunk_size) == last
        if count > 1:
            assert expected_chunk_length(0, length, chunk_size) == chunk_size


def test_check_chunk() -> None:
    assert check_chunk({"n": 2, "data": b"\x99\xaa"}, 2, 10, 4) == b"\x99\xaa"
    assert check_chunk({"n": 0, "data": b"abcd"}, 0, 10, 4) == b"abcd"
    with pytest.raises(CorruptGridFile, match="missing"):
        check_chunk(None, 1, 10, 4)
    with pytest.raises(CorruptGridFile, match="found chunk 2"):
        check_chunk({"n": 2, "data": b"abcd"}, 1, 10, 4)
    with pytest.raises(CorruptGridFile, match="3 bytes; 4"):
        check_chunk({"n": 1, "data": b"abc"}, 1, 10, 4)
    with pytest.raises(CorruptGridFile, match="3 bytes; 2"):
        check_chunk({"n": 2, "data": b"abc"}, 2, 10, 4)
    with pytest.raises(CorruptGridFile, match="binary"):
        check_chunk({"n": 0, "data": "text"}, 0, 4, 4)


def test_numeric_fields_of_other_types() -> None:
    assert file_length({"length": 10.0}) == 10
    assert file_length({"length": Int64(3)}) == 3
    assert file_chunk_size({"length": 1, "chunkSize": 4.0}) == 4
    assert file_chunk_size({"length": 0, "chunkSize": 0}) == 0
    for bad in ({"length": 1.5}, {"length": -1}, {"length": "10"}, {"length": True}, {"length": None}):
        with pytest.raises(CorruptGridFile):
            file_length(bad)
    with pytest.raises(CorruptGridFile):
        file_chunk_size({"length": 5, "chunkSize": 0})


def test_a_files_document_without_length_is_an_empty_file() -> None:
    # Some old drivers stored empty files without a length; PyMongo reads them as empty, so does mongio.
    assert file_length({"_id": 1, "chunkSize": 4}) == 0
    assert chunk_count(file_length({"chunkSize": 4}), 4) == 0


def test_validate_chunk_size() -> None:
    assert validate_chunk_size(255 * 1024) == 255 * 1024
    for bad in (0, -1, 2**31):
        with pytest.raises(ValueError):
            validate_chunk_size(bad)
    for wrong in (1.5, "4", True, None):
        with pytest.raises(TypeError):
            validate_chunk_size(wrong)


def test_chunks_per_batch() -> None:
    assert chunks_per_batch(4 * 1024 * 1024, 255 * 1024) == 16
    assert chunks_per_batch(1024, 4096) == 1


def test_files_document_order_and_types() -> None:
    uploaded = datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)
    document = files_document("id", 10, 4, uploaded, {"filename": "f", "metadata": {"a": 1}, "length": 99})
    assert list(document) == ["_id", "length", "chunkSize", "uploadDate", "filename", "metadata"]
    assert document["length"] == 10 and isinstance(document["length"], Int64)
    assert document["uploadDate"] is uploaded


def test_upload_date_has_millisecond_precision() -> None:
    now = upload_date()
    assert now.tzinfo is datetime.UTC and now.microsecond % 1000 == 0


@pytest.mark.parametrize(("revision", "order"), [(0, (1, 0)), (2, (1, 2)), (-1, (-1, 0)), (-3, (-1, 2))])
def test_revision_order(revision: int, order: tuple[int, int]) -> None:
    assert revision_order(revision) == order


def test_index_keys_compare_numbers_by_value() -> None:
    assert index_keys_match({"filename": 1, "uploadDate": 1}, FILES_INDEX)
    assert index_keys_match({"filename": 1.0, "uploadDate": Int64(1)}, FILES_INDEX)
    assert index_keys_match({"files_id": 1.0, "n": 1.0}, CHUNKS_INDEX)
    assert not index_keys_match({"uploadDate": 1, "filename": 1}, FILES_INDEX)
    assert not index_keys_match({"filename": 1}, FILES_INDEX)
    assert not index_keys_match({"filename": 1, "uploadDate": -1}, FILES_INDEX)
    assert not index_keys_match({"filename": "text", "uploadDate": 1}, FILES_INDEX)
    assert not index_keys_match({"filename": True, "uploadDate": 1}, FILES_INDEX)


# -- streams --------------------------------------------------------------------------------------------------


async def _collect(source: Any, block_size: int) -> list[bytes]:
    return [bytes(block) async for block in read_blocks(source, block_size)]


class AsyncReader:
    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.sizes: list[int] = []

    async def read(self, size: int) -> bytes:
        self.sizes.append(size)
        return self._data.read(size)


class RecordingFile(io.RawIOBase):
    """A file-like object that is not in memory: its reads run in a worker thread."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.threads: set[int] = set()

    def read(self, size: int = -1) -> bytes:
        import threading

        self.threads.add(threading.get_ident())
        return self._data.read(size)


async def test_read_blocks_from_each_kind_of_source(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    assert await _collect(data, 1000) == [data]
    assert await _collect(b"", 1000) == []
    assert b"".join(await _collect(io.BytesIO(data), 1000)) == data
    reader = AsyncReader(data)
    blocks = await _collect(reader, 3000)
    assert b"".join(blocks) == data and set(reader.sizes) == {3000}

    async def pieces() -> AsyncIterator[bytes]:
        yield data[:10]
        yield b""
        yield data[10:]

    assert await _collect(pieces(), 5) == [data[:10], data[10:]]
    import threading

    blocking = RecordingFile(data)
    assert b"".join(await _collect(blocking, 4096)) == data
    assert threading.get_ident() not in blocking.threads
    with pytest.raises(TypeError, match="binary mode"):
        await _collect(io.StringIO("text"), 10)
    with pytest.raises(TypeError):
        await _collect(42, 10)


class AsyncSink:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.parts.append(data)


class StreamWriterLike:
    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.drained = 0

    def write(self, data: bytes) -> None:
        self.parts.append(data)

    async def drain(self) -> None:
        self.drained += 1


async def test_destinations(tmp_path: Path) -> None:
    sink = AsyncSink()
    await Destination(sink).write(b"ab")
    assert sink.parts == [b"ab"]
    writer = StreamWriterLike()
    await Destination(writer).write(b"cd")
    assert writer.parts == [b"cd"] and writer.drained == 1
    memory = io.BytesIO()
    await Destination(memory).write(b"ef")
    assert memory.getvalue() == b"ef"
    path = tmp_path / "out.bin"
    with path.open("wb") as file:
        await Destination(file).write(b"gh")
    assert path.read_bytes() == b"gh"
    with pytest.raises(TypeError):
        Destination(object())
