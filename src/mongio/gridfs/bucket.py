"""``GridFSBucket``: store and read files larger than a document can hold, as PyMongo's
``AsyncGridFSBucket`` does.

A bucket named ``fs`` keeps each file's bytes in ``fs.chunks`` (one document per chunk) and its description
in ``fs.files``. Uploads and downloads stream: a file of any size goes through a bounded buffer.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mongio.bson import ObjectId, TypeRegistry
from mongio.database import Database
from mongio.errors import ConfigurationError
from mongio.gridfs.deadlines import operation_deadline, within
from mongio.gridfs.errors import NoFile
from mongio.gridfs.grid_in import GridIn, disallow_transactions
from mongio.gridfs.grid_out import GridOut, GridOutCursor
from mongio.gridfs.indexes import IndexGuard
from mongio.gridfs.layout import DEFAULT_CHUNK_SIZE, revision_order, validate_chunk_size
from mongio.gridfs.streams import Destination
from mongio.options.write_concern import as_write_concern

if TYPE_CHECKING:
    from mongio.options.protocols import ReadConcernLike, ReadPreferenceLike, WriteConcernLike
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import ReadPreferenceMode
    from mongio.options.write_concern import WriteConcern
    from mongio.sessions.client_session import ClientSession

__all__ = ["AsyncGridFSBucket", "GridFSBucket"]

_DELETE_BATCH = 1000  # file ids per delete command when deleting every revision of a name


class GridFSBucket:
    """A GridFS bucket of a database::

        bucket = GridFSBucket(client.media)
        file_id = await bucket.upload_from_stream("cat.jpg", open("cat.jpg", "rb"), metadata={"kind": "photo"})
        with open("copy.jpg", "wb") as out:
            await bucket.download_to_stream(file_id, out)

    ``bucket_name`` prefixes the two collections (``fs.files``, ``fs.chunks``); ``chunk_size_bytes`` is the
    chunk size of new files; ``write_concern`` (acknowledged), ``read_preference`` and ``read_concern``
    default to the database's. Making a bucket does no I/O; the indexes GridFS needs are made before its
    first write, when the files collection is empty.

    ``disable_md5`` is the specification's transitional option and does nothing: mongio never computes the
    deprecated ``md5`` field, so files it stores never have one.

    Sources may be bytes, binary files, objects with an async ``read()`` or async iterables of bytes;
    destinations binary files or objects with an async ``write()``. Blocking files are read and written in
    a worker thread, in-memory ones (``io.BytesIO``) directly. GridFS refuses sessions in a transaction.
    """

    def __init__(
        self,
        db: Database[Any],
        bucket_name: str = "fs",
        chunk_size_bytes: int = DEFAULT_CHUNK_SIZE,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        *,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        disable_md5: bool = False,
    ) -> None:
        if not isinstance(db, Database):
            raise TypeError(f"db must be a mongio Database, not {type(db).__name__}")
        concern = as_write_concern(write_concern) if write_concern is not None else db.write_concern
        if not concern.acknowledged:
            raise ConfigurationError("GridFS needs an acknowledged write concern")
        if not isinstance(disable_md5, bool):
            raise TypeError(f"disable_md5 must be True or False, not {disable_md5!r}")
        self._bucket_name = bucket_name
        self._chunk_size_bytes = validate_chunk_size(chunk_size_bytes)
        # Files and chunks are plain documents whatever the application's codecs turn documents into.
        codec_options = db.codec_options.with_options(document_class=dict, type_registry=TypeRegistry())
        self._root = db.get_collection(
            bucket_name,
            codec_options=codec_options,
            read_preference=read_preference,
            write_concern=write_concern,
            read_concern=read_concern,
        )
        self._files = self._root["files"]
        self._chunks = self._root["chunks"]
        self._indexes = IndexGuard(self._files, self._chunks)
        self._database = db

    @property
    def bucket_name(self) -> str:
        """The bucket's name, the prefix of its ``.files`` and ``.chunks`` collections."""
        return self._bucket_name

    @property
    def chunk_size_bytes(self) -> int:
        """The chunk size of files uploaded through this bucket (unless an upload says otherwise)."""
        return self._chunk_size_bytes

    def _timeout(self, session: ClientSession | None) -> Any:
        # timeoutMS bounds a whole GridFS operation, all of its commands together.
        return within(operation_deadline(self._database, session))

    def __repr__(self) -> str:
        return f"GridFSBucket({self._database!r}, {self._bucket_name!r})"

    # -- uploads ----------------------------------------------------------------------------------------------

    def open_upload_stream(
        self,
        filename: str,
        chunk_size_bytes: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        *,
        content_type: str | None = None,
        aliases: Sequence[str] | None = None,
    ) -> GridIn:
        """A stream to write a new file to, with a new ObjectId (``upload._id``). Nothing is sent until the
        first chunk fills up; the file becomes visible when the stream is closed::

            async with bucket.open_upload_stream("log.txt") as upload:
                await upload.write(b"first line\\n")

        ``metadata`` becomes the files document's ``metadata`` field. ``content_type`` and ``aliases`` are
        deprecated (they warn): they are stored as the ``contentType`` and ``aliases`` fields for
        applications that still read those, and GridFS itself never uses them; keep such values in
        ``metadata`` instead.
        """
        extra = _deprecated_fields(content_type, aliases)
        file_id = self._files.codec_options.new_object_id()
        return self._open_upload(file_id, filename, chunk_size_bytes, metadata, session, extra)

    def open_upload_stream_with_id(
        self,
        file_id: Any,
        filename: str,
        chunk_size_bytes: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        *,
        content_type: str | None = None,
        aliases: Sequence[str] | None = None,
    ) -> GridIn:
        """As :meth:`open_upload_stream`, with the file id the application chooses (any BSON value)."""
        extra = _deprecated_fields(content_type, aliases)
        return self._open_upload(file_id, filename, chunk_size_bytes, metadata, session, extra)

    def _open_upload(
        self,
        file_id: Any,
        filename: str,
        chunk_size_bytes: int | None,
        metadata: Mapping[str, Any] | None,
        session: ClientSession | None,
        extra: Mapping[str, Any],
    ) -> GridIn:
        if not isinstance(filename, str):
            raise TypeError(f"filename must be a str, not {type(filename).__name__}")
        disallow_transactions(session)
        fields: dict[str, Any] = {
            "_id": file_id,
            "filename": filename,
            "chunk_size": self._chunk_size_bytes if chunk_size_bytes is None else chunk_size_bytes,
        }
        if metadata is not None:
            fields["metadata"] = metadata
        fields.update(extra)
        upload = GridIn(self._root, session=session, **fields)
        upload.share_index_check(self._indexes)
        return upload

    async def upload_from_stream(
        self,
        filename: str,
        source: Any,
        chunk_size_bytes: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        *,
        content_type: str | None = None,
        aliases: Sequence[str] | None = None,
    ) -> ObjectId:
        """Store everything ``source`` holds as a new file; returns its id. ``source`` is read to its end and
        not closed. If reading it fails (or the call is cancelled), the chunks already stored are deleted
        and the error raised. If the server fails a command of the upload, its error is raised at once and
        the chunks already stored are left, as the GridFS specification requires. ``metadata``,
        ``content_type`` and ``aliases`` as for :meth:`open_upload_stream`."""
        extra = _deprecated_fields(content_type, aliases)
        file_id: ObjectId = self._files.codec_options.new_object_id()  # PyMongo's in the PyMongo-typed mode
        await self._upload(file_id, filename, source, chunk_size_bytes, metadata, session, extra)
        return file_id

    async def upload_from_stream_with_id(
        self,
        file_id: Any,
        filename: str,
        source: Any,
        chunk_size_bytes: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        *,
        content_type: str | None = None,
        aliases: Sequence[str] | None = None,
    ) -> None:
        """As :meth:`upload_from_stream`, with the file id the application chooses."""
        extra = _deprecated_fields(content_type, aliases)
        await self._upload(file_id, filename, source, chunk_size_bytes, metadata, session, extra)

    async def _upload(
        self,
        file_id: Any,
        filename: str,
        source: Any,
        chunk_size_bytes: int | None,
        metadata: Mapping[str, Any] | None,
        session: ClientSession | None,
        extra: Mapping[str, Any],
    ) -> None:
        with self._timeout(session):
            upload = self._open_upload(file_id, filename, chunk_size_bytes, metadata, session, extra)
            async with upload:
                await upload.write(source)

    # -- downloads --------------------------------------------------------------------------------------------

    async def open_download_stream(self, file_id: Any, session: ClientSession | None = None) -> GridOut:
        """The file ``file_id`` opened for reading (its files document already read); :class:`NoFile` when
        there is no such file."""
        disallow_transactions(session)
        download = GridOut(self._root, file_id, session=session)
        with self._timeout(session):
            await download.open()
        return download

    async def download_to_stream(
        self, file_id: Any, destination: Any, session: ClientSession | None = None
    ) -> None:
        """Write the contents of file ``file_id`` to ``destination``, chunk by chunk (it is not closed)."""
        with self._timeout(session):
            download = await self.open_download_stream(file_id, session=session)
            await _copy(download, destination)

    async def open_download_stream_by_name(
        self, filename: str, revision: int = -1, session: ClientSession | None = None
    ) -> GridOut:
        """A revision of the files named ``filename``, opened for reading: 0 is the first stored, 1 the next,
        ...; -1 (the default) the latest, -2 the one before it, ... :class:`NoFile` when there is no such
        file or revision."""
        disallow_transactions(session)
        direction, skip = revision_order(revision)
        with self._timeout(session):
            document = await self._files.find_one(
                {"filename": filename}, sort=[("uploadDate", direction)], skip=skip, session=session
            )
            if document is None:
                if skip and await self._files.find_one({"filename": filename}, {"_id": 1}, session=session):
                    raise NoFile(f"no revision {revision} of the file {filename!r}")
                raise NoFile(f"no file named {filename!r}")
        return GridOut(self._root, file_document=document, session=session)

    async def download_to_stream_by_name(
        self, filename: str, destination: Any, revision: int = -1, session: ClientSession | None = None
    ) -> None:
        """Write revision ``revision`` of the file ``filename`` to ``destination`` (see
        :meth:`open_download_stream_by_name` for revisions)."""
        with self._timeout(session):
            download = await self.open_download_stream_by_name(filename, revision, session=session)
            await _copy(download, destination)

    # -- the files collection ---------------------------------------------------------------------------------

    def find(self, *args: Any, **kwargs: Any) -> GridOutCursor:
        """A cursor over the files matching a filter on their files documents, as :class:`GridOut` objects;
        takes ``find``'s options (``sort``, ``skip``, ``limit``, ``batch_size``, ``no_cursor_timeout``,
        ``allow_disk_use``, ``max_time_ms``, ``session``). Query metadata with dotted names::

            async for grid_out in bucket.find({"metadata.kind": "photo"}, sort=[("uploadDate", -1)]):
                print(grid_out._id, grid_out.filename)
        """
        return GridOutCursor(self._root, *args, **kwargs)

    async def delete(self, file_id: Any, session: ClientSession | None = None) -> None:
        """Delete file ``file_id``: its files document first, then its chunks. :class:`NoFile` when there
        was no files document (chunks left without one are deleted all the same)."""
        disallow_transactions(session)
        with self._timeout(session):
            result = await self._files.delete_one({"_id": file_id}, session=session)
            await self._chunks.delete_many({"files_id": file_id}, session=session)
        if not result.deleted_count:
            raise NoFile(f"no file could be deleted because none matched _id {file_id!r}")

    async def delete_by_name(self, filename: str, session: ClientSession | None = None) -> None:
        """Delete every revision of the file ``filename``; :class:`NoFile` when there is none."""
        disallow_transactions(session)
        deleted = 0
        with self._timeout(session):
            cursor = self._files.find({"filename": filename}, {"_id": 1}, session=session)
            async with cursor:
                while batch := await cursor.to_list(_DELETE_BATCH):
                    ids = [document["_id"] for document in batch]
                    result = await self._files.delete_many({"_id": {"$in": ids}}, session=session)
                    deleted += result.deleted_count
                    await self._chunks.delete_many({"files_id": {"$in": ids}}, session=session)
        if not deleted:
            raise NoFile(f"no file could be deleted because none matched filename {filename!r}")

    async def rename(self, file_id: Any, new_filename: str, session: ClientSession | None = None) -> None:
        """Give file ``file_id`` a new name; :class:`NoFile` when there is no such file."""
        disallow_transactions(session)
        with self._timeout(session):
            result = await self._files.update_one(
                {"_id": file_id}, {"$set": {"filename": new_filename}}, session=session
            )
        if not result.matched_count:
            raise NoFile(f"no file could be renamed {new_filename!r} because none matched _id {file_id!r}")

    async def rename_by_name(
        self, filename: str, new_filename: str, session: ClientSession | None = None
    ) -> None:
        """Rename every revision of the file ``filename``; :class:`NoFile` when there is none."""
        disallow_transactions(session)
        with self._timeout(session):
            result = await self._files.update_many(
                {"filename": filename}, {"$set": {"filename": new_filename}}, session=session
            )
        if not result.matched_count:
            raise NoFile(
                f"no file could be renamed {new_filename!r} because none matched filename {filename!r}"
            )

    async def drop(self, session: ClientSession | None = None) -> None:
        """Drop the bucket: its files collection, then its chunks collection (and their indexes)."""
        disallow_transactions(session)
        with self._timeout(session):
            await self._files.drop(session=session)
            await self._chunks.drop(session=session)
        self._indexes.reset()


def _deprecated_fields(content_type: str | None, aliases: Sequence[str] | None) -> dict[str, Any]:
    """The deprecated ``contentType`` and ``aliases`` fields of a new files document, each only when given
    (with a :class:`DeprecationWarning` pointing at the caller's upload)."""
    fields: dict[str, Any] = {}
    if content_type is not None:
        if not isinstance(content_type, str):
            raise TypeError(f"content_type must be a str, not {type(content_type).__name__}")
        warnings.warn(
            "content_type is deprecated: store the content type in metadata", DeprecationWarning, stacklevel=3
        )
        fields["content_type"] = content_type
    if aliases is not None:
        if isinstance(aliases, str | bytes) or not all(isinstance(alias, str) for alias in aliases):
            raise TypeError(f"aliases must be a sequence of str, not {aliases!r}")
        warnings.warn("aliases is deprecated: store aliases in metadata", DeprecationWarning, stacklevel=3)
        fields["aliases"] = list(aliases)
    return fields


async def _copy(download: GridOut, destination: Any) -> None:
    writer = Destination(destination)
    async with download:
        while chunk := await download.readchunk():
            await writer.write(chunk)


AsyncGridFSBucket = GridFSBucket
"""PyMongo's name for the asyncio bucket."""
