"""``GridOut``: the readable stream of one stored file, and ``GridOutCursor`` over files.

Chunks come from one cursor on the chunks collection, sorted by ``n``, in batches of about
:data:`DOWNLOAD_BATCH_BYTES`, so reading a file of any size holds one batch and one chunk at a time. Every
chunk is checked as it arrives (its ``n`` and its size, from the files document); a missing, misplaced or
wrongly sized chunk raises :class:`~mongio.gridfs.errors.CorruptGridFile` when the read reaches it.

The cursor is an exhaust cursor (``CursorType.EXHAUST``): after the first batch the server streams the
following ones unasked, reading the next batch from storage while the client takes in the current one (a
download is bound by the server's reads, which this overlaps with the client's work). The connection's
protocol holds at most one batch that was not asked for yet, so memory stays as flat as with ``getMore``. A
download closed before its end closes that connection (it has batches on their way); one read to the end
gives it back to the pool. Where the server cannot stream, the cursor sends ordinary ``getMore`` commands.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mongio.cursor import Cursor, CursorType
from mongio.errors import InvalidOperation
from mongio.gridfs.deadlines import operation_deadline, within
from mongio.gridfs.errors import NoFile
from mongio.gridfs.grid_in import disallow_transactions
from mongio.gridfs.layout import (
    check_chunk,
    chunk_count,
    chunks_per_batch,
    file_chunk_size,
    file_length,
)

if TYPE_CHECKING:
    from mongio.collection import Collection
    from mongio.sessions.client_session import ClientSession

__all__ = ["DOWNLOAD_BATCH_BYTES", "GridOut", "GridOutCursor"]

DOWNLOAD_BATCH_BYTES = 1020 * 1024
"""About how many bytes of chunks one reply of the chunks cursor carries (at least one chunk): four chunks of
the default size. Replies under 1 MiB are received into the connection's one kept buffer, while each larger
one costs fresh memory (measured on a 50 MiB download: 20 ms of client CPU with these batches, over 60 ms
with 4 MiB ones, for as many bytes)."""


class _ChunkReader:
    """The chunks of one file from chunk ``first`` on, each checked, through one cursor."""

    __slots__ = ("_chunk_size", "_chunks", "_count", "_cursor", "_file_id", "_length", "_n", "_session")

    def __init__(
        self,
        chunks: Collection[Any],
        file_id: Any,
        length: int,
        chunk_size: int,
        first: int,
        session: ClientSession | None,
    ) -> None:
        self._chunks = chunks
        self._file_id = file_id
        self._length = length
        self._chunk_size = chunk_size
        self._count = chunk_count(length, chunk_size)
        self._n = first
        self._session = session
        self._cursor: Cursor[Any] | None = None

    async def next(self) -> bytes | None:
        """The next chunk's data, or None after the last one (extra chunks beyond it are not read)."""
        if self._n >= self._count:
            await self.close()
            return None
        if self._cursor is None:
            # The chunks after the last one are left out by the filter rather than a limit, which an exhaust
            # cursor does not take.
            self._cursor = self._chunks.find(
                {"files_id": self._file_id, "n": {"$gte": self._n, "$lt": self._count}},
                sort=[("n", 1)],
                batch_size=chunks_per_batch(DOWNLOAD_BATCH_BYTES, self._chunk_size),
                cursor_type=CursorType.EXHAUST,
                session=self._session,
            )
        try:
            chunk = await self._cursor.__anext__()
        except StopAsyncIteration:
            chunk = None
        data = check_chunk(chunk, self._n, self._length, self._chunk_size)
        self._n += 1
        if self._n >= self._count:
            await self._finish()
        return data if isinstance(data, bytes) else bytes(data)

    async def _finish(self) -> None:
        """After the last chunk: the server may still send the cursor's closing reply (an empty batch, since
        the filter leaves nothing after the last chunk). It is read, so that the connection goes back to the
        pool instead of being closed with that reply on its way."""
        cursor = self._cursor
        if cursor is not None and cursor.alive:
            await cursor.try_next()
        await self.close()

    async def close(self) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            await cursor.close()


class GridOut:
    """A stored file opened for reading: its files document's fields as attributes (``_id``, ``filename``,
    ``length``, ``chunk_size``, ``upload_date``, ``metadata``, ...) and file-like async reads::

        async with await bucket.open_download_stream(file_id) as download:
            while chunk := await download.readchunk():
                await response.write(chunk)

    ``read()`` without a size reads the rest of the file into memory; ``readchunk()`` (one chunk at a
    time) keeps memory flat. ``async for line in download`` iterates over lines, as PyMongo does.
    """

    def __init__(
        self,
        root_collection: Collection[Any],
        file_id: Any = None,
        file_document: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
    ) -> None:
        disallow_transactions(session)
        self._files = root_collection["files"]
        self._chunks = root_collection["chunks"]
        self._file_id = file_id
        self._session = session
        # timeoutMS bounds the stream's whole life, from here to close().
        self._deadline = operation_deadline(root_collection.database, session)
        self._file: dict[str, Any] | None = None
        self._length = 0
        self._chunk_size = 0
        if file_document is not None:
            self._load(file_document)
        self._position = 0
        # The current chunk and how far into it the position is.
        self._chunk = b""
        self._offset = 0
        self._reader: _ChunkReader | None = None
        self.closed = False

    def _load(self, document: Mapping[str, Any]) -> None:
        self._length = file_length(document)
        self._chunk_size = file_chunk_size(document)
        self._file = dict(document)
        self._file_id = self._file.get("_id")

    async def open(self) -> None:
        """Read the files document, if not read yet; :class:`NoFile` when there is none."""
        with within(self._deadline):
            await self._open()

    async def _open(self) -> None:
        if self._file is not None:
            return
        document = await self._files.find_one({"_id": self._file_id}, session=self._session)
        if document is None:
            raise NoFile(f"no file in gridfs collection {self._files.full_name!r} with _id {self._file_id!r}")
        self._load(document)

    # -- the files document's fields --------------------------------------------------------------------------

    def _field(self, name: str) -> Any:
        if self._file is None:
            raise InvalidOperation("the file is not open yet: await its open() first")
        return self._file.get(name)

    @property
    def _id(self) -> Any:
        return self._file_id

    @property
    def filename(self) -> str | None:
        """The file's name, from its files document."""
        value: str | None = self._field("filename")
        return value

    @property
    def name(self) -> str | None:
        """The filename (``name`` as on a Python file object)."""
        value: str | None = self._field("filename")
        return value

    @property
    def content_type(self) -> str | None:
        """DEPRECATED: the ``contentType`` field, if the file has one."""
        value: str | None = self._field("contentType")
        return value

    @property
    def length(self) -> int:
        """The file's size in bytes."""
        self._field("length")
        return self._length

    @property
    def chunk_size(self) -> int:
        """The size in bytes of each chunk the file is stored in."""
        self._field("chunkSize")
        return self._chunk_size

    @property
    def upload_date(self) -> datetime.datetime:
        """When the upload finished (UTC), from the files document."""
        return self._field("uploadDate")  # type: ignore[no-any-return]

    @property
    def aliases(self) -> list[str] | None:
        """DEPRECATED: the ``aliases`` field, if the file has one."""
        value: list[str] | None = self._field("aliases")
        return value

    @property
    def metadata(self) -> Mapping[str, Any] | None:
        """The ``metadata`` document stored with the file, or ``None``."""
        value: Mapping[str, Any] | None = self._field("metadata")
        return value

    @property
    def md5(self) -> str | None:
        """DEPRECATED: the ``md5`` field of files stored by older drivers."""
        value: str | None = self._field("md5")
        return value

    def __getattr__(self, name: str) -> Any:
        # Extra top-level fields of files written by older tools read as attributes too.
        file = self.__dict__.get("_file")
        if file is not None and name in file:
            return file[name]
        raise AttributeError(f"GridOut object has no attribute {name!r}")

    def __getitem__(self, key: str) -> Any:
        """A field of the files document by its stored name (``grid_out["filename"]``): Motor's
        ``GridOutCursor.to_list()`` gives these documents, so code written for it reads files this way."""
        if self._file is None:
            raise InvalidOperation("the file is not open yet: await its open() first")
        return self._file[key]

    def readable(self) -> bool:
        """True: a download stream is read."""
        return True

    def seekable(self) -> bool:
        """True: a download stream can seek."""
        return True

    def writable(self) -> bool:
        """False: a download stream is not written to."""
        return False

    # -- reading ----------------------------------------------------------------------------------------------

    def _check_readable(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    async def _next_chunk(self) -> bool:
        """Make the chunk holding the position current; False at the end of the file."""
        if self._position >= self._length:
            return False
        if self._reader is None:
            first = self._position // self._chunk_size
            self._reader = _ChunkReader(
                self._chunks, self._file_id, self._length, self._chunk_size, first, self._session
            )
            skip = self._position - first * self._chunk_size
        else:
            skip = 0
        data = await self._reader.next()
        if data is None:  # cannot happen while position < length: the reader raises for a missing chunk
            return False
        self._chunk, self._offset = data, skip
        return True

    async def readchunk(self) -> bytes:
        """The rest of the current chunk (a whole chunk when reading from a chunk boundary); ``b""`` at the
        end of the file."""
        with within(self._deadline):
            return await self._readchunk()

    async def _readchunk(self) -> bytes:
        await self._open()
        self._check_readable()
        if self._offset >= len(self._chunk) and not await self._next_chunk():
            return b""
        data = self._chunk if self._offset == 0 else self._chunk[self._offset :]
        self._chunk, self._offset = b"", 0
        self._position += len(data)
        return data

    async def _read(self, size: int, line: bool) -> bytes:
        with within(self._deadline):
            return await self._read_bounded(size, line)

    async def _read_bounded(self, size: int, line: bool) -> bytes:
        await self._open()
        self._check_readable()
        remaining = self._length - self._position
        if size < 0 or size > remaining:
            size = max(remaining, 0)
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            if self._offset >= len(self._chunk) and not await self._next_chunk():
                break
            end = min(len(self._chunk), self._offset + wanted)
            if line:
                newline = self._chunk.find(b"\n", self._offset, end)
                if newline >= 0:
                    end = newline + 1
            piece = self._chunk if (self._offset == 0 and end == len(self._chunk)) else self._chunk[self._offset : end]
            parts.append(piece)
            taken = end - self._offset
            self._offset = end
            self._position += taken
            wanted -= taken
            if line and piece.endswith(b"\n"):
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes from the position (the rest of the file when ``size`` is negative)."""
        return await self._read(size, line=False)

    async def readline(self, size: int = -1) -> bytes:
        """One line (ending with ``b"\\n"`` unless it is the file's last), or at most ``size`` bytes of it."""
        return await self._read(size, line=True)

    async def readlines(self, size: int = -1) -> list[bytes]:
        """The remaining lines, stopping once more than ``size`` bytes were read when ``size`` is positive."""
        lines: list[bytes] = []
        total = 0
        while line := await self.readline():
            lines.append(line)
            total += len(line)
            if 0 < size < total:
                break
        return lines

    def tell(self) -> int:
        """The current position, in bytes from the start of the file."""
        return self._position

    async def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``pos`` from the start (``SEEK_SET``), the current position (``SEEK_CUR``) or the end
        (``SEEK_END``); returns the new position. Reading then fetches chunks from the new position on."""
        with within(self._deadline):
            return await self._seek(pos, whence)

    async def _seek(self, pos: int, whence: int) -> int:
        await self._open()
        if whence == io.SEEK_SET:
            target = pos
        elif whence == io.SEEK_CUR:
            target = self._position + pos
        elif whence == io.SEEK_END:
            target = self._length + pos
        else:
            raise OSError(22, f"invalid whence ({whence}, should be 0, 1 or 2)")
        if target < 0:
            raise OSError(22, "invalid value for `pos`: a negative position")
        if target == self._position:
            return target
        # Within the chunk in hand, only the offset moves; anywhere else the cursor starts again there.
        chunk_start = self._position - self._offset
        if self._chunk and chunk_start <= target < chunk_start + len(self._chunk):
            self._offset = target - chunk_start
        else:
            self._chunk, self._offset = b"", 0
            await self._close_reader()
        self._position = target
        return target

    async def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.close()

    def __aiter__(self) -> GridOut:
        return self

    async def __anext__(self) -> bytes:
        line = await self.readline()
        if line:
            return line
        raise StopAsyncIteration

    async def to_list(self) -> list[bytes]:
        """The remaining lines."""
        return [line async for line in self]

    async def close(self) -> None:
        """Stop reading: the chunks cursor, if open, is closed on the server."""
        self.closed = True
        self._chunk, self._offset = b"", 0
        with within(self._deadline):
            await self._close_reader()

    async def __aenter__(self) -> GridOut:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"GridOut(_id={self._file_id!r})"


class GridOutCursor(Cursor[Any]):
    """The cursor of :meth:`GridFSBucket.find`: a find on the files collection that gives a
    :class:`GridOut` for each matching file (its document is ``grid_out._file``)::

        async for grid_out in bucket.find({"metadata.owner": "ana"}).sort("uploadDate", -1):
            print(grid_out.filename, grid_out.length)
    """

    def __init__(
        self,
        root_collection: Collection[Any],
        filter: Mapping[str, Any] | None = None,
        skip: int = 0,
        limit: int = 0,
        no_cursor_timeout: bool = False,
        sort: Any = None,
        batch_size: int = 0,
        session: ClientSession | None = None,
        **kwargs: Any,
    ) -> None:
        disallow_transactions(session)
        super().__init__(
            root_collection["files"],
            filter,
            skip=skip,
            limit=limit,
            no_cursor_timeout=no_cursor_timeout,
            sort=sort,
            batch_size=batch_size,
            session=session,
            **kwargs,
        )
        self._root_collection = root_collection

    def _wrap(self, document: Any) -> GridOut:
        return GridOut(self._root_collection, file_document=document, session=self._explicit_session)

    def __aiter__(self) -> GridOutCursor:
        return self

    async def __anext__(self) -> GridOut:
        return self._wrap(await super().__anext__())

    async def next(self) -> GridOut:
        """The next file, as a ``GridOut``; raises ``StopAsyncIteration`` when none is left."""
        return await self.__anext__()

    async def try_next(self) -> GridOut | None:
        """The next file as a ``GridOut``, or ``None`` when no file is available now."""
        document = await super().try_next()
        return None if document is None else self._wrap(document)

    async def to_list(self, length: int | None = None) -> list[Any]:
        """The remaining files (at most ``length`` of them) as ``GridOut`` objects."""
        return [self._wrap(document) for document in await super().to_list(length)]

    def clone(self) -> GridOutCursor:
        """A new, unread cursor with the same query and options."""
        return self._copy(self._spec)

    def _copy(self, spec: Mapping[str, Any]) -> GridOutCursor:
        return self._remade(GridOutCursor, self._root_collection, spec)
