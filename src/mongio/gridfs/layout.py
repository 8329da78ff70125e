"""The GridFS data model as pure functions: how a file is cut into chunks, what a files document holds,
what a well-formed chunk looks like, and how revisions and index keys are read. No I/O here."""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from mongio.bson import Int64
from mongio.gridfs.errors import CorruptGridFile

__all__ = [
    "CHUNKS_INDEX",
    "DEFAULT_CHUNK_SIZE",
    "FILES_INDEX",
    "check_chunk",
    "chunk_count",
    "chunks_per_batch",
    "expected_chunk_length",
    "file_chunk_size",
    "file_length",
    "files_document",
    "index_keys_match",
    "revision_order",
    "upload_date",
    "validate_chunk_size",
]

DEFAULT_CHUNK_SIZE = 255 * 1024
"""The spec's default chunk size: 255 KiB, so a chunk document stays under 256 KiB."""

FILES_INDEX: tuple[tuple[str, int], ...] = (("filename", 1), ("uploadDate", 1))
CHUNKS_INDEX: tuple[tuple[str, int], ...] = (("files_id", 1), ("n", 1))


def validate_chunk_size(value: Any) -> int:
    """A chunk size given by the application: a positive int32."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"chunk_size_bytes must be an int, not {type(value).__name__}")
    if not 0 < value < 2**31:
        raise ValueError(f"chunk_size_bytes must be a positive 32-bit integer, not {value}")
    return value


def _whole_number(document: Mapping[str, Any], field: str) -> int:
    # Files written by other tools may hold these as doubles or int64 (the spec asks drivers to accept any
    # numeric type); a fractional or non-numeric value is a corrupt file document.
    value = document.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CorruptGridFile(f"the files document's {field} is not a number: {value!r}")
    if value != int(value) or value < 0:
        raise CorruptGridFile(f"the files document's {field} is not a non-negative whole number: {value!r}")
    return int(value)


def file_length(document: Mapping[str, Any]) -> int:
    """The ``length`` of a files document as an int; 0 when the document has none (some old drivers wrote empty
    files without it, and PyMongo reads those as empty too)."""
    if "length" not in document:
        return 0
    return _whole_number(document, "length")


def file_chunk_size(document: Mapping[str, Any]) -> int:
    """The ``chunkSize`` of a files document as an int (zero only makes sense for an empty file)."""
    size = _whole_number(document, "chunkSize")
    if size == 0 and file_length(document) > 0:
        raise CorruptGridFile("the files document has a chunkSize of 0 for a non-empty file")
    return size


def chunk_count(length: int, chunk_size: int) -> int:
    """How many chunks a file of ``length`` bytes has (none for an empty file)."""
    if length == 0:
        return 0
    return -(-length // chunk_size)


def expected_chunk_length(n: int, length: int, chunk_size: int) -> int:
    """The size chunk ``n`` must have: ``chunk_size`` for all but the last, which holds the rest."""
    last = chunk_count(length, chunk_size) - 1
    if n < last:
        return chunk_size
    return length - last * chunk_size


def check_chunk(chunk: Mapping[str, Any] | None, n: int, length: int, chunk_size: int) -> Any:
    """The data of ``chunk`` if it is chunk ``n`` of the file and of the right size; else ``CorruptGridFile``.

    ``chunk`` is ``None`` when the chunks ran out before chunk ``n``."""
    if chunk is None:
        raise CorruptGridFile(f"chunk {n} of the file is missing")
    found = chunk.get("n")
    if found != n:
        raise CorruptGridFile(f"chunk {n} of the file is missing: found chunk {found!r} in its place")
    data = chunk.get("data")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CorruptGridFile(f"chunk {n} has no binary data field")
    wanted = expected_chunk_length(n, length, chunk_size)
    if len(data) != wanted:
        raise CorruptGridFile(f"chunk {n} holds {len(data)} bytes; {wanted} were expected")
    return data


def chunks_per_batch(batch_bytes: int, chunk_size: int) -> int:
    """How many chunks of ``chunk_size`` make one batch of about ``batch_bytes`` (at least one)."""
    return max(1, batch_bytes // max(1, chunk_size))


def upload_date() -> datetime.datetime:
    """Now, in UTC, at the millisecond precision a BSON datetime keeps."""
    now = datetime.datetime.now(datetime.UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def files_document(
    file_id: Any,
    length: int,
    chunk_size: int,
    uploaded: datetime.datetime,
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """The files collection document of a finished upload: ``_id``, ``length`` (Int64), ``chunkSize``,
    ``uploadDate`` and the upload's own fields (``filename``, ``metadata``, ...), in that order."""
    document: dict[str, Any] = {
        "_id": file_id,
        "length": Int64(length),
        "chunkSize": chunk_size,
        "uploadDate": uploaded,
    }
    for key, value in fields.items():
        if key not in document:
            document[key] = value
    return document


def revision_order(revision: int) -> tuple[int, int]:
    """``(uploadDate sort direction, documents to skip)`` selecting ``revision`` of a filename: 0 is the
    oldest, 1 the next, ...; -1 the newest, -2 the one before it, ..."""
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise TypeError(f"revision must be an int, not {type(revision).__name__}")
    if revision < 0:
        return -1, -revision - 1
    return 1, revision


def index_keys_match(keys: Mapping[str, Any], wanted: tuple[tuple[str, int], ...]) -> bool:
    """Whether an index's key document is ``wanted``, comparing numbers by value (an index made by the shell
    has ``1.0`` where ours has ``1``)."""
    items = list(keys.items())
    if len(items) != len(wanted):
        return False
    for (name, value), (wanted_name, wanted_value) in zip(items, wanted, strict=True):
        if name != wanted_name or isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if value != wanted_value:
            return False
    return True
