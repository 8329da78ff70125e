"""``GridIn``: the writable stream of one upload.

Written bytes are cut into chunks as they arrive; full chunks wait in a batch of about
:data:`UPLOAD_BATCH_BYTES` that one ``insert`` command sends, so an upload holds at most one batch (plus a
partial chunk) in memory whatever the file's size. ``close()`` sends the last chunks and then the files
document, which is what makes the file visible: until then readers cannot find it.

An upload that is aborted (``abort()``, an exception in its ``async with`` block such as a failing source,
or cancellation) deletes the chunks it inserted. One whose own command fails on the server (a chunk or the
files document not stored, a timeout) raises that error at once and deletes nothing: the GridFS
specification forbids cleaning up then, since whatever broke the upload would most likely break the cleanup
too and only delay the error. Such an upload is finished: it takes no more writes, and an explicit
``abort()`` still deletes its chunks. One whose id turns out to belong to another file raises
:class:`~mongio.gridfs.errors.FileExists`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mongio.backend import finish_shielded
from mongio.error_classification import is_duplicate_key
from mongio.errors import (
    BulkWriteError,
    ConnectionFailure,
    InvalidOperation,
    OperationFailure,
    OperationTimeoutError,
)
from mongio.gridfs.deadlines import operation_deadline, within
from mongio.gridfs.errors import FileExists
from mongio.gridfs.indexes import IndexGuard
from mongio.gridfs.layout import (
    DEFAULT_CHUNK_SIZE,
    chunks_per_batch,
    files_document,
    upload_date,
    validate_chunk_size,
)
from mongio.gridfs.streams import read_blocks

if TYPE_CHECKING:
    from mongio.collection import Collection
    from mongio.sessions.client_session import ClientSession

__all__ = ["SERVER_FAILURES", "UPLOAD_BATCH_BYTES", "GridIn"]

UPLOAD_BATCH_BYTES = 4 * 1024 * 1024
"""About how many bytes of chunks one ``insert`` command carries (at least one chunk)."""

SERVER_FAILURES = (OperationFailure, ConnectionFailure, OperationTimeoutError)

# How long deleting the chunks of an upload that failed or was cut may take, at most (a timeoutMS of the
# upload bounds it too).
_CLEANUP_LIMIT = 10.0
"""The errors of a command that failed against the server (refused, unreachable, out of time): an upload
that meets one stops without cleaning up after itself."""

# PyMongo's keyword names for the files document fields that have a server-side spelling.
_FIELD_NAMES = {"content_type": "contentType", "chunk_size": "chunkSize"}


def disallow_transactions(session: ClientSession | None) -> None:
    """GridFS spans two collections and many commands, so it refuses to run inside a transaction."""
    if session is not None and session.in_transaction:
        raise InvalidOperation("GridFS does not support multi-document transactions")


class GridIn:
    """A file being uploaded: ``await write(data)`` as many times as needed, then ``await close()``.

    Made by :meth:`GridFSBucket.open_upload_stream` (or directly, as PyMongo allows, with the bucket's root
    collection and the files document's fields: ``GridIn(db.fs, filename="a.txt", chunk_size=1024)``).
    Use it as an async context manager: leaving the block closes the file, or aborts it when the block
    raised (cancellation included) for any reason but the upload's own failure on the server::

        async with bucket.open_upload_stream("report.pdf", metadata={"owner": "ana"}) as upload:
            async for block in request.stream():
                await upload.write(block)
        file_id = upload._id

    One task writes to a given stream at a time.
    """

    def __init__(
        self, root_collection: Collection[Any], session: ClientSession | None = None, **kwargs: Any
    ) -> None:
        disallow_transactions(session)
        fields = {_FIELD_NAMES.get(key, key): value for key, value in kwargs.items()}
        file_id = fields.pop("_id") if "_id" in fields else root_collection.codec_options.new_object_id()
        chunk_size = validate_chunk_size(fields.pop("chunkSize", DEFAULT_CHUNK_SIZE))
        self._chunks = root_collection["chunks"]
        self._files = root_collection["files"]
        self._session = session
        # timeoutMS bounds the stream's whole life: every write, then close() or abort().
        self._deadline = operation_deadline(root_collection.database, session)
        self._indexes = IndexGuard(self._files, self._chunks)
        self._file: dict[str, Any] = {"_id": file_id, "chunkSize": chunk_size, **fields}
        self._chunk_size = chunk_size
        self._batch_chunks = chunks_per_batch(UPLOAD_BATCH_BYTES, chunk_size)
        self._partial = bytearray()
        self._pending: list[dict[str, Any]] = []
        self._next_n = 0
        self._length = 0
        # Whether chunks of this upload may be on the server (what abort must clean up).
        self._maybe_inserted = False
        self._closed = False
        self._aborted = False
        # The files document is stored: the file exists and abort() has nothing to do.
        self._finished = False
        # A command of the upload failed on the server: the upload is over, its chunks stay (see the module).
        self._failed = False

    def share_index_check(self, guard: IndexGuard) -> None:
        """Internal, not part of the API: check the indexes through the bucket's ``guard`` (once per bucket)
        rather than through this upload's own (once per upload)."""
        self._indexes = guard

    # -- the file's fields ------------------------------------------------------------------------------------

    @property
    def _id(self) -> Any:
        """The file's id (given, or a new ObjectId)."""
        return self._file["_id"]

    @property
    def filename(self) -> str | None:
        """The file's name, or ``None`` when none was given."""
        return self._file.get("filename")

    @property
    def name(self) -> str | None:
        """The filename (``name`` as on a Python file object)."""
        return self._file.get("filename")

    @property
    def content_type(self) -> str | None:
        """DEPRECATED: the ``contentType`` field; keep it in ``metadata`` instead."""
        return self._file.get("contentType")

    @property
    def chunk_size(self) -> int:
        """The size in bytes of each chunk the file is stored in."""
        return self._chunk_size

    @property
    def length(self) -> int:
        """Bytes written so far (the file's length once closed)."""
        return self._length

    @property
    def upload_date(self) -> datetime.datetime | None:
        """When the file was completed (None until ``close()``)."""
        return self._file.get("uploadDate")

    @property
    def md5(self) -> str | None:
        """Always None: MD5 checksums are deprecated and not computed."""
        return self._file.get("md5")

    @property
    def closed(self) -> bool:
        """Whether the file was closed (its files document is written at close)."""
        return self._closed

    def __getattr__(self, name: str) -> Any:
        # Other fields given when opening the stream (metadata, aliases, custom ones) read as attributes.
        file = self.__dict__.get("_file")
        if file is not None and name in file:
            return file[name]
        raise AttributeError(f"GridIn object has no attribute {name!r}")

    def readable(self) -> bool:
        """False: an upload stream is written, not read."""
        return False

    def seekable(self) -> bool:
        """False: an upload stream only appends."""
        return False

    def writable(self) -> bool:
        """True: an upload stream is written to."""
        return True

    writeable = writable  # PyMongo's spelling

    # -- writing ----------------------------------------------------------------------------------------------

    async def write(self, data: Any) -> None:
        """Append ``data``: bytes-like, a ``str`` (when the stream was opened with an ``encoding``), or a
        source to read to its end (a binary file, an object with an async ``read()``, an async iterable of
        bytes). Full batches of chunks are sent as they fill up."""
        with within(self._deadline):
            await self._write(data)

    async def _write(self, data: Any) -> None:
        if self._failed:
            raise ValueError("cannot write to an upload that failed")
        if self._closed:
            raise ValueError("cannot write to a closed file")
        if isinstance(data, str):
            encoding = self._file.get("encoding")
            if encoding is None:
                raise TypeError("must specify an encoding for the file in order to write str")
            data = data.encode(encoding)
        if isinstance(data, bytes | bytearray | memoryview):
            await self._take(data)
            return
        async for block in read_blocks(data, self._batch_chunks * self._chunk_size):
            await self._take(block)

    async def writelines(self, sequence: Iterable[Any]) -> None:
        """Write each item of ``sequence`` in turn."""
        for item in sequence:
            await self.write(item)

    async def _take(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
        size = self._chunk_size
        if self._partial:
            missing = size - len(self._partial)
            self._partial += view[:missing]
            view = view[missing:]
            if len(self._partial) < size:
                return
            self._add_chunk(bytes(self._partial))
            self._partial.clear()
            if len(self._pending) >= self._batch_chunks:
                await self._flush()
        start, end = 0, len(view)
        while end - start >= size:
            self._add_chunk(view[start : start + size].tobytes())
            start += size
            if len(self._pending) >= self._batch_chunks:
                await self._flush()
        if start < end:
            self._partial += view[start:]

    def _add_chunk(self, data: bytes) -> None:
        self._pending.append({"files_id": self._file["_id"], "n": self._next_n, "data": data})
        self._next_n += 1
        self._length += len(data)

    async def _flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        await self._indexes.ensure(self._session)
        self._maybe_inserted = True
        try:
            await self._chunks.insert_many(batch, session=self._session)
        except SERVER_FAILURES as error:
            details = error.details if isinstance(error, BulkWriteError) else None
            inserted = details.get("nInserted") if isinstance(details, Mapping) else None
            if is_duplicate_key(error) and batch[0]["n"] == 0 and not inserted:
                # The first chunk clashed: these chunk numbers belong to a file that has this id already.
                self._maybe_inserted = False
            self._fail()
            raise

    def _fail(self) -> None:
        self._failed = True
        self._closed = True
        self._pending.clear()
        self._partial.clear()

    # -- finishing --------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Send the last chunks and the files document. The file exists from then on; closing again does
        nothing. When the server refuses either, the error is raised and the chunks already stored stay;
        when close() is cancelled, the upload is aborted (its chunks are deleted)."""
        with within(self._deadline):
            await self._close()

    async def _close(self) -> None:
        if self._closed:
            return
        try:
            if self._partial:
                self._add_chunk(bytes(self._partial))
                self._partial.clear()
            await self._flush()
            await self._indexes.ensure(self._session)
            document = files_document(
                self._file["_id"],
                self._length,
                self._chunk_size,
                upload_date(),
                {key: value for key, value in self._file.items() if key not in ("_id", "chunkSize")},
            )
            await self._files.insert_one(document, session=self._session)
        except SERVER_FAILURES as error:
            self._fail()
            if is_duplicate_key(error):
                raise FileExists(f"file with _id {self._file['_id']!r} already exists") from error
            raise
        except BaseException as error:  # cancelled, or a document the driver could not send: give up
            await self._abort_after(error)
            raise
        self._file = document
        self._closed = True
        self._finished = True

    async def abort(self) -> None:
        """Give up the upload: nothing more can be written and the chunks sent so far are deleted (those of
        an upload that failed too). Aborting a finished file (closed with its files document stored) does
        nothing."""
        with within(self._deadline):
            await self._abort()

    async def _abort(self) -> None:
        if self._finished:
            return
        self._closed = True
        self._aborted = True
        self._pending.clear()
        self._partial.clear()
        if self._maybe_inserted:
            await self._chunks.delete_many({"files_id": self._file["_id"]}, session=self._session)
            self._maybe_inserted = False

    async def _abort_after(self, error: BaseException) -> None:
        # Cleaning up must not hide the error that made the upload fail. Shielded: an upload cut by a cancel
        # scope (anyio's, trio's) is still inside it, and every await there would be cancelled in turn.
        try:
            await finish_shielded(self.abort, _CLEANUP_LIMIT)
        except Exception as cleanup_error:
            error.add_note(f"deleting the upload's chunks failed too: {cleanup_error!r}")

    async def __aenter__(self) -> GridIn:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            await self.close()
        elif not self._failed:
            await self._abort_after(exc)

    def __repr__(self) -> str:
        return f"GridIn(_id={self._file['_id']!r}, filename={self._file.get('filename')!r})"
