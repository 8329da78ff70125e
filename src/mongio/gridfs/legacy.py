"""``GridFS``: PyMongo's older GridFS interface (``AsyncGridFS``), over the same streams as the bucket.

It stores files exactly as :class:`~mongio.gridfs.GridFSBucket` does; what differs is the calling style:
``put()`` takes the files document's fields as keyword arguments, ``get_version()`` selects revisions by any
fields, and ``delete()`` of a missing file is not an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson import TypeRegistry
from mongio.database import Database
from mongio.gridfs.deadlines import operation_deadline, within
from mongio.gridfs.errors import NoFile
from mongio.gridfs.grid_in import GridIn, disallow_transactions
from mongio.gridfs.grid_out import GridOut, GridOutCursor
from mongio.gridfs.indexes import IndexGuard
from mongio.gridfs.layout import revision_order

if TYPE_CHECKING:
    from mongio.sessions.client_session import ClientSession

__all__ = ["AsyncGridFS", "GridFS"]


class GridFS:
    """GridFS on ``database`` under the prefix ``collection`` (``fs``), as PyMongo's ``AsyncGridFS``::

        fs = GridFS(client.media)
        file_id = await fs.put(b"hello", filename="hello.txt", metadata={"lang": "en"})
        grid_out = await fs.get_last_version("hello.txt")
        assert await grid_out.read() == b"hello"
    """

    def __init__(self, database: Database[Any], collection: str = "fs") -> None:
        if not isinstance(database, Database):
            raise TypeError(f"database must be a mongio Database, not {type(database).__name__}")
        codec_options = database.codec_options.with_options(document_class=dict, type_registry=TypeRegistry())
        self._database = database
        self._root = database.get_collection(collection, codec_options=codec_options)
        self._files = self._root["files"]
        self._chunks = self._root["chunks"]
        self._indexes = IndexGuard(self._files, self._chunks)

    def _timeout(self, session: ClientSession | None) -> Any:
        return within(operation_deadline(self._database, session))

    def new_file(self, **kwargs: Any) -> GridIn:
        """A :class:`GridIn` for a new file, with the files document's fields as keywords (``filename``,
        ``chunk_size``, ``metadata``, ``encoding``, ``_id``, ``session``...)."""
        upload = GridIn(self._root, **kwargs)
        upload.share_index_check(self._indexes)
        return upload

    async def put(self, data: Any, **kwargs: Any) -> Any:
        """Store ``data`` (bytes, a ``str`` with ``encoding=``, or any source ``GridIn.write`` takes) as a new
        file; returns its ``_id``. A failing source (or cancellation) deletes the chunks already stored; a
        command the server fails leaves them, as for :meth:`GridFSBucket.upload_from_stream`."""
        with self._timeout(kwargs.get("session")):
            upload = self.new_file(**kwargs)
            async with upload:
                await upload.write(data)
        return upload._id

    async def get(self, file_id: Any, session: ClientSession | None = None) -> GridOut:
        """The file ``file_id`` opened for reading; :class:`NoFile` when there is none."""
        download = GridOut(self._root, file_id, session=session)
        await download.open()
        return download

    async def get_version(
        self, filename: str | None = None, version: int = -1, session: ClientSession | None = None, **kwargs: Any
    ) -> GridOut:
        """A version of the files matching ``filename`` and the other fields given: 0 the first stored, -1 (the
        default) the latest, as for :meth:`GridFSBucket.open_download_stream_by_name`."""
        disallow_transactions(session)
        query = dict(kwargs)
        if filename is not None:
            query["filename"] = filename
        direction, skip = revision_order(version)
        with self._timeout(session):
            document = await self._files.find_one(
                query, sort=[("uploadDate", direction)], skip=skip, session=session
            )
        if document is None:
            raise NoFile(f"no version {version} for filename {filename!r}")
        return GridOut(self._root, file_document=document, session=session)

    async def get_last_version(
        self, filename: str | None = None, session: ClientSession | None = None, **kwargs: Any
    ) -> GridOut:
        """The latest version of the files matching ``filename`` and the other fields given."""
        return await self.get_version(filename, -1, session=session, **kwargs)

    async def delete(self, file_id: Any, session: ClientSession | None = None) -> None:
        """Delete file ``file_id`` (its files document, then its chunks); a missing file is not an error."""
        disallow_transactions(session)
        with self._timeout(session):
            await self._files.delete_one({"_id": file_id}, session=session)
            await self._chunks.delete_many({"files_id": file_id}, session=session)

    async def list(self, session: ClientSession | None = None) -> list[str]:
        """The distinct filenames of the stored files."""
        disallow_transactions(session)
        with self._timeout(session):
            names = await self._files.distinct("filename", session=session)
        return [name for name in names if name is not None]

    def find(self, *args: Any, **kwargs: Any) -> GridOutCursor:
        """A cursor of :class:`GridOut` over the files matching a filter (as :meth:`GridFSBucket.find`)."""
        return GridOutCursor(self._root, *args, **kwargs)

    async def find_one(
        self, filter: Any = None, session: ClientSession | None = None, *args: Any, **kwargs: Any
    ) -> GridOut | None:
        """The first file matching ``filter`` (anything but a mapping is taken as an ``_id``), or None."""
        if filter is not None and not isinstance(filter, Mapping):
            filter = {"_id": filter}
        cursor = self.find(filter, *args, session=session, limit=-1, **kwargs)
        async with cursor:
            async for grid_out in cursor:
                return grid_out
        return None

    async def exists(
        self, document_or_id: Any = None, session: ClientSession | None = None, **kwargs: Any
    ) -> bool:
        """Whether a file with this ``_id`` exists (or, given keywords, one whose files document has those
        fields): ``await fs.exists(file_id)``, ``await fs.exists(filename="a.txt")``."""
        disallow_transactions(session)
        if kwargs:
            query: Any = kwargs
        elif isinstance(document_or_id, Mapping):
            query = document_or_id
        else:
            query = {"_id": document_or_id}
        with self._timeout(session):
            return await self._files.find_one(query, {"_id": 1}, session=session) is not None


AsyncGridFS = GridFS
"""PyMongo's name for the asyncio class."""
