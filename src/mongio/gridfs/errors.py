"""GridFS errors, named as in PyMongo's ``gridfs.errors`` so ``except`` clauses port unchanged."""

from __future__ import annotations

from mongio.errors import MongioError

__all__ = ["CorruptGridFile", "FileExists", "GridFSError", "NoFile"]


class GridFSError(MongioError):
    """Base of the GridFS errors."""


class CorruptGridFile(GridFSError):
    """A stored file's chunks do not match its files document: a chunk is missing, out of order or of the
    wrong size."""


class NoFile(GridFSError):
    """No stored file has the id, the name or the revision asked for."""


class FileExists(GridFSError):
    """An upload used a file id that the files collection already holds."""
