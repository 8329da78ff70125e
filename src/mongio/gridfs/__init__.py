"""GridFS for mongio: files of any size stored as chunks in two collections, streamed in and out.

Names follow PyMongo's ``gridfs`` package (``AsyncGridFSBucket`` is :class:`GridFSBucket`, ``AsyncGridFS``
is :class:`GridFS`)::

    from mongio.gridfs import GridFSBucket, NoFile

    bucket = GridFSBucket(client.media)
    file_id = await bucket.upload_from_stream("notes.txt", b"hello")
    download = await bucket.open_download_stream(file_id)
    assert await download.read() == b"hello"
"""

from mongio.gridfs.bucket import AsyncGridFSBucket, GridFSBucket
from mongio.gridfs.errors import CorruptGridFile, FileExists, GridFSError, NoFile
from mongio.gridfs.grid_in import UPLOAD_BATCH_BYTES, GridIn
from mongio.gridfs.grid_out import DOWNLOAD_BATCH_BYTES, GridOut, GridOutCursor
from mongio.gridfs.layout import DEFAULT_CHUNK_SIZE
from mongio.gridfs.legacy import AsyncGridFS, GridFS

AsyncGridIn = GridIn
AsyncGridOut = GridOut
AsyncGridOutCursor = GridOutCursor

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DOWNLOAD_BATCH_BYTES",
    "UPLOAD_BATCH_BYTES",
    "AsyncGridFS",
    "AsyncGridFSBucket",
    "AsyncGridIn",
    "AsyncGridOut",
    "AsyncGridOutCursor",
    "CorruptGridFile",
    "FileExists",
    "GridFS",
    "GridFSBucket",
    "GridFSError",
    "GridIn",
    "GridOut",
    "GridOutCursor",
    "NoFile",
]
