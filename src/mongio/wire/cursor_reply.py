"""Decoding a cursor command's reply with its batch left for the cursor to decode document by document.

A ``find`` or ``getMore`` reply is ``{cursor: {firstBatch | nextBatch: [...], id, ns, ...}, ok, ...}``, and the
servers put the cursor first and the batch first in it. In that layout the batch becomes a
:class:`~mongio.bson.lazy_batch.DocumentBatch` (its bytes copied out of the receive buffer, its documents
decoded as the cursor hands them out) and everything else is decoded as usual. Any other layout, a document
class other than ``dict``, or malformed framing is decoded whole, as :func:`mongio.bson.decode` does (which
says what is wrong). Sans-I/O.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from mongio.bson import _decoder, decode
from mongio.bson.codec_options import CodecOptions
from mongio.bson.errors import InvalidBSON
from mongio.bson.lazy_batch import DocumentBatch

__all__ = ["decode_cursor_reply"]

_UNPACK_INT32: Final = struct.Struct("<i").unpack_from
_CURSOR_ELEMENT: Final = b"\x03cursor\x00"
_BATCH_NAMES: Final = {b"\x04firstBatch\x00": "firstBatch", b"\x04nextBatch\x00": "nextBatch"}
_CURSOR_START: Final = 4 + len(_CURSOR_ELEMENT)  # the cursor document's length field


def decode_cursor_reply(data: bytes | bytearray | memoryview, codec_options: CodecOptions) -> dict[str, Any]:
    """The reply ``data`` decoded with ``codec_options``, its cursor's batch as a ``DocumentBatch`` when the
    layout allows (see the module's docstring)."""
    ctx = codec_options._cache.get("decode") or _decoder._context(codec_options)
    if not ctx[2] or ctx[3]:
        return decode(data, codec_options)  # type: ignore[no-any-return]
    # The compiled loops read a view where it lies; the Python ones read bytes.
    buffer: Any = data if _decoder._read_document is not _decoder._python_read_document else bytes(data)
    size = len(buffer)
    if size < _CURSOR_START + 5 or _UNPACK_INT32(buffer, 0)[0] != size or buffer[size - 1]:
        return decode(data, codec_options)  # type: ignore[no-any-return]
    cursor_end = _CURSOR_START + _UNPACK_INT32(buffer, _CURSOR_START)[0] - 1  # its trailing NUL
    if buffer[4:_CURSOR_START] != _CURSOR_ELEMENT or not _CURSOR_START + 4 <= cursor_end < size - 1:
        return decode(data, codec_options)  # type: ignore[no-any-return]
    element = _CURSOR_START + 4
    kind_and_name = bytes(buffer[element : element + 12])
    field = _BATCH_NAMES.get(kind_and_name[:12]) or _BATCH_NAMES.get(kind_and_name[:11])
    if field is None or buffer[cursor_end]:
        return decode(data, codec_options)  # type: ignore[no-any-return]
    array_start = element + len(field) + 2
    if array_start + 5 > cursor_end:
        return decode(data, codec_options)  # type: ignore[no-any-return]
    array_end = array_start + _UNPACK_INT32(buffer, array_start)[0]  # one past the array
    batch = DocumentBatch.of(bytes(buffer[array_start:array_end]), ctx) if array_end <= cursor_end else None
    if batch is None:
        return decode(data, codec_options)  # type: ignore[no-any-return]
    try:
        cursor = {field: batch}
        cursor.update(_decoder._read_document(buffer, array_end, cursor_end, ctx))
        reply = {"cursor": cursor}
        reply.update(_decoder._read_document(buffer, cursor_end + 1, size - 1, ctx))
    except (InvalidBSON, *_decoder._MALFORMED):
        return decode(data, codec_options)  # type: ignore[no-any-return]  # raises, saying what is wrong
    return reply
