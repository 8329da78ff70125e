"""GridFS operations of the unified test format on ``bucket`` entities, over :mod:`mongio.gridfs`:
``upload``, ``uploadWithId``, ``download``, ``downloadByName``, ``delete``, ``deleteByName``, ``rename``,
``renameByName``, ``drop`` and ``find``.

An upload's ``source`` is written ``{$$hexBytes: "..."}``; a download's result is the file's bytes, which
``$$matchesHexBytes`` checks.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from spec_runner.unified.backend import api_call
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.operations import OperationCall, ResultShape, operation
from spec_runner.unified.ops_crud import as_document, driver_arguments

_UPLOAD_OPTIONS = (
    "chunkSizeBytes",
    "metadata",
    "session",
    "timeoutMS",
    "contentType",
    "aliases",
    "disableMD5",
)


def hex_bytes(source: Any) -> bytes:
    """The bytes of an upload's ``source``: ``{$$hexBytes: "<even number of hex digits>"}``."""
    if not isinstance(source, Mapping) or set(source) != {"$$hexBytes"}:
        raise UnifiedTestError(f"an upload's source must be {{$$hexBytes: ...}}, not {source!r}")
    digits = source["$$hexBytes"]
    if not isinstance(digits, str) or len(digits) % 2 or re.fullmatch(r"[0-9A-Fa-f]*", digits) is None:
        raise UnifiedTestError(f"$$hexBytes takes an even number of hex digits, not {digits!r}")
    return bytes.fromhex(digits)


def _upload_options(arguments: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in arguments.items():
        if key == "chunkSizeBytes":
            options["chunk_size_bytes"] = value
        elif key in ("metadata", "session", "timeoutMS"):
            options[key] = value
        elif key == "contentType":
            options["content_type"] = value
        elif key == "aliases":
            options["aliases"] = value
        elif key == "disableMD5" and not isinstance(value, bool):
            # Otherwise nothing to pass: the driver never computes MD5 (its bucket's disable_md5 is a no-op).
            raise UnifiedTestError(f"disableMD5 must be a boolean, not {value!r}")
    return options


@operation("upload", object="bucket", required=("filename", "source"), optional=_UPLOAD_OPTIONS)
async def upload(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    filename = arguments.pop("filename")
    source = hex_bytes(arguments.pop("source"))
    return await api_call(call.target.upload_from_stream, filename, source, **_upload_options(arguments))


@operation("uploadWithId", object="bucket", required=("id", "filename", "source"), optional=_UPLOAD_OPTIONS)
async def upload_with_id(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    file_id = arguments.pop("id")
    filename = arguments.pop("filename")
    source = hex_bytes(arguments.pop("source"))
    await api_call(
        call.target.upload_from_stream_with_id, file_id, filename, source, **_upload_options(arguments)
    )
    return MISSING


@operation("download", object="bucket", required=("id",), optional=("session", "timeoutMS"))
async def download(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    file_id = arguments.pop("id")
    destination = io.BytesIO()
    await api_call(call.target.download_to_stream, file_id, destination, **arguments)
    return destination.getvalue()


@operation(
    "downloadByName", object="bucket", required=("filename",), optional=("revision", "session", "timeoutMS")
)
async def download_by_name(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    filename = arguments.pop("filename")
    destination = io.BytesIO()
    await api_call(call.target.download_to_stream_by_name, filename, destination, **arguments)
    return destination.getvalue()


@operation("delete", object="bucket", required=("id",), optional=("session", "timeoutMS"))
async def delete(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    await api_call(call.target.delete, arguments.pop("id"), **arguments)
    return MISSING


@operation("deleteByName", object="bucket", required=("filename",), optional=("session", "timeoutMS"))
async def delete_by_name(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    await api_call(call.target.delete_by_name, arguments.pop("filename"), **arguments)
    return MISSING


@operation("rename", object="bucket", required=("id", "newFilename"), optional=("session", "timeoutMS"))
async def rename(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    file_id = arguments.pop("id")
    await api_call(call.target.rename, file_id, arguments.pop("newFilename"), **arguments)
    return MISSING


@operation(
    "renameByName", object="bucket", required=("filename", "newFilename"), optional=("session", "timeoutMS")
)
async def rename_by_name(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    filename = arguments.pop("filename")
    await api_call(call.target.rename_by_name, filename, arguments.pop("newFilename"), **arguments)
    return MISSING


@operation("drop", object="bucket", optional=("session", "timeoutMS"))
async def drop(call: OperationCall) -> Any:
    await api_call(call.target.drop, **dict(call.arguments))
    return MISSING


@operation(
    "find",
    object="bucket",
    required=("filter",),
    optional=(
        "session",
        "timeoutMS",
        "allowDiskUse",
        "batchSize",
        "limit",
        "maxTimeMS",
        "noCursorTimeout",
        "skip",
        "sort",
    ),
    result=ResultShape.DOCUMENTS,
)
async def find(call: OperationCall) -> Any:
    arguments = driver_arguments(call.arguments)
    filter_ = arguments.pop("filter")
    cursor = await api_call(call.target.find, filter_, **arguments)
    try:
        files = await cursor.to_list()
    finally:
        await cursor.close()
    return [as_document(grid_out._file) for grid_out in files]
