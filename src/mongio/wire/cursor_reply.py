"""Decoding a cursor command's reply with its batch left for the cursor to decode document by document.

A ``find`` or ``getMore`` reply is ``{cursor: {firstBatch | nextBatch: [...], id, ns, ...}, ok, ...}``, and the
servers put the cursor first and the batch first in it. In that layout the batch becomes a
:class:`~mongio.bson.lazy_batch.DocumentBatch` (its bytes copied out of the receive buffer, its documents
decoded as the cursor hands them out) and everything else is decoded as usual. Any other layout, a document
class other than ``dict``, or malformed framing is decoded whole, as :func:`mongio.bson.decode` does (which
says what is wrong). Sans-I/O.
"""

from __future__ import annotations

from typing import Any, Final

from mongio.bson import decode
from mongio.bson._decoder import _UNPACK_INT32, _context, compiled_in_use, read_span
from mongio.bson.codec_options import CodecOptions
from mongio.bson.errors import InvalidBSON
from mongio.bson.lazy_batch import DocumentBatch

__all__ = ["decode_cursor_reply"]

_CURSOR_ELEMENT: Final = b"\x03cursor\x00"
_BATCH_NAMES: Final = {b"\x04firstBatch\x00": "firstBatch", b"\x04nextBatch\x00": "nextBatch"}
_CURSOR_START: Final = 4 + len(_CURSOR_ELEMENT)  # the cursor document's length field


def decode_cursor_reply(data: bytes | bytearray | memoryview, codec_options: CodecOptions) -> dict[str, Any]:
    """The reply ``data`` decoded with ``codec_options``, its cursor's batch as a ``DocumentBatch`` when the
    layout allows (see the module's docstring)."""
    ctx = _context(codec_options)
    if ctx[2] and not ctx[3]:
        # The compiled loops read a view where it lies; the Python ones read bytes.
        try:
            reply = _with_lazy_batch(data if compiled_in_use() else bytes(data), ctx)
        except InvalidBSON:
            reply = None
        if reply is not None:
            return reply
    document: dict[str, Any] = decode(data, codec_options)  # which says what is wrong, if anything is
    return document


def _with_lazy_batch(buffer: Any, ctx: Any) -> dict[str, Any] | None:
    """The reply in ``buffer`` with its batch lazy, or ``None`` when its layout or framing is not the one
    expected."""
    size = len(buffer)
    if size < _CURSOR_START + 5 or _UNPACK_INT32(buffer, 0)[0] != size or buffer[size - 1]:
        return None
    cursor_end = _CURSOR_START + _UNPACK_INT32(buffer, _CURSOR_START)[0] - 1  # its trailing NUL
    if buffer[4:_CURSOR_START] != _CURSOR_ELEMENT or not _CURSOR_START + 4 <= cursor_end < size - 1:
        return None
    element = _CURSOR_START + 4
    kind_and_name = bytes(buffer[element : element + 12])
    field = _BATCH_NAMES.get(kind_and_name) or _BATCH_NAMES.get(kind_and_name[:11])
    if field is None or buffer[cursor_end]:
        return None
    array_start = element + 2 + len(field)  # past the type byte, the name and its NUL
    if array_start + 5 > cursor_end:
        return None
    array_end = array_start + _UNPACK_INT32(buffer, array_start)[0]  # one past the array
    batch = DocumentBatch.of(bytes(buffer[array_start:array_end]), ctx) if array_end <= cursor_end else None
    if batch is None:
        return None
    cursor = {field: batch}
    cursor.update(read_span(buffer, array_end, cursor_end, ctx))
    reply = {"cursor": cursor}
    reply.update(read_span(buffer, cursor_end + 1, size - 1, ctx))
    return reply
