"""A BSON array of documents decoded one document at a time, as each is taken.

A cursor hands its documents out one by one, and a program usually lets each go before it takes the next.
Decoding a whole batch at once keeps every document of it alive together: the cyclic collector then walks them
all (the documents, their lists and sub-documents) before the first is handed out, and they leave the CPU's
caches before they are used. Decoded as taken, a document is made, used and freed while it is still in the
caches, and the collector seldom has a young generation large enough to start.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final

from mongio.bson import _decoder
from mongio.bson.errors import InvalidBSON

__all__ = ["DocumentBatch"]

_UNPACK_INT32: Final = struct.Struct("<i").unpack_from
_DOCUMENT: Final = 0x03


class DocumentBatch:
    """The documents of one BSON array (its bytes, length and trailing NUL included), each decoded with the
    decoding context ``ctx`` when taken. Only :meth:`of` makes one: it checks the array's framing first.

    It answers the part of ``collections.deque``'s interface a cursor's buffer uses: truth and ``len`` (the
    documents not yet taken), :meth:`popleft`, iteration (the documents not yet taken, decoded, without
    taking them) and :meth:`clear`. A document whose own bytes are malformed raises
    :class:`~mongio.bson.errors.InvalidBSON` when it is taken.
    """

    __slots__ = ("_ctx", "_data", "_next", "_starts")

    def __init__(self, data: bytes, starts: list[int], ctx: Any) -> None:
        self._data = data
        self._starts = starts  # where each document's length field is
        self._next = 0
        self._ctx = ctx

    @classmethod
    def of(cls, data: bytes, ctx: Any) -> DocumentBatch | None:
        """The batch of the array ``data``, or ``None`` when its framing is not that of an array of documents
        (an element of another type, a length that does not fit): the caller then decodes it whole, which
        says what is wrong or gives the values as they are."""
        end = len(data) - 1
        if end < 4 or _UNPACK_INT32(data, 0)[0] != end + 1 or data[end]:
            return None
        starts: list[int] = []
        position = 4
        find = data.find
        while position < end:
            if data[position] != _DOCUMENT:
                return None
            name_end = find(b"\x00", position + 1, end)
            if name_end < 0:
                return None
            start = name_end + 1
            if start + 5 > end:
                return None
            size = _UNPACK_INT32(data, start)[0]
            if size < 5 or start + size > end or data[start + size - 1]:
                return None
            starts.append(start)
            position = start + size
        if position != end:
            return None
        return cls(data, starts, ctx)

    def __len__(self) -> int:
        return len(self._starts) - self._next

    def __bool__(self) -> bool:
        return self._next < len(self._starts)

    def popleft(self) -> Any:
        """Take the next document, decoded; ``IndexError`` when none is left (as ``deque.popleft``)."""
        index = self._next
        starts = self._starts
        start = starts[index]
        self._next = index + 1
        data = self._data
        if index + 1 == len(starts):
            # The last one: the batch's bytes need not outlive it (a cursor fetches the next batch while it
            # still holds this object).
            self._data = b""
        return _decode_at(data, start, self._ctx)

    def __iter__(self) -> Iterator[Any]:
        data, ctx = self._data, self._ctx
        for start in self._starts[self._next :]:
            yield _decode_at(data, start, ctx)

    def clear(self) -> None:
        """Drop the documents not yet taken."""
        self._next = len(self._starts)
        self._data = b""

    def __repr__(self) -> str:
        return f"<DocumentBatch: {len(self)} of {len(self._starts)} documents left>"


def _decode_at(data: bytes, start: int, ctx: Any) -> Any:
    try:
        return _decoder._read_document(data, start + 4, start + _UNPACK_INT32(data, start)[0] - 1, ctx)
    except InvalidBSON:
        raise
    except _decoder._MALFORMED as exc:
        raise InvalidBSON(_decoder._describe(exc)) from exc
