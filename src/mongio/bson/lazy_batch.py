"""A BSON array of documents decoded one document at a time, as each is taken, while the program lets each go.

A cursor hands its documents out one by one. When a program lets each go before it takes the next, decoding
the whole batch at once would keep every document of it alive together: the cyclic collector would walk them
all (the documents, their lists and sub-documents) before the first is handed out, and they would leave the
CPU's caches before they are used. Decoded as taken, a document is made, used and freed while it is still in
the caches, and the collector seldom has a young generation large enough to start.

When the program keeps the documents it takes (``[d async for d in cursor]``, ``to_list``), the reverse holds:
decoded one at a time between the program's own allocations, they set the collector off every few dozen
documents, and the survivors are walked again by the older generations' collections. Decoded in one call,
during which the decoder holds automatic collection back, they are walked once. So a batch watches the
document it handed out last: when the program still holds it as it takes the next one, the rest of the batch
is decoded in one call.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Iterator
from typing import Any, Final

from mongio.bson._compiled import load_speedups
from mongio.bson._decoder import _UNPACK_INT32, compiled_in_use, read_span

__all__ = ["DocumentBatch"]

_DOCUMENT: Final = 0x03
_refcount: Final = sys.getrefcount


class _Probe:
    __slots__ = ("_last",)
    _last: object


def _references_when_unheld() -> int:
    """What ``_refcount(self._last)`` gives for a document nothing else refers to: the attribute's reference
    and however this interpreter counts the argument."""
    probe = _Probe()
    probe._last = object()
    return _refcount(probe._last)


# The references to the last document handed out that do not mean the program kept it: those counted for
# an unheld one, and the loop variable that still names it while the next one is asked for.
_NOT_KEPT: Final = _references_when_unheld() + 1


def _python_document_array_offsets(data: bytes) -> tuple[list[int], list[int]] | None:
    """Where each element of the BSON array ``data`` (its type byte) is and where its document (its length
    field) starts; ``None`` when the framing is not that of an array of documents. The reference for the
    compiled ``document_array_offsets``, which a batch of many documents is scanned with (this loop costs
    about a microsecond per document)."""
    end = len(data) - 1
    if end < 4 or _UNPACK_INT32(data, 0)[0] != end + 1 or data[end]:
        return None
    elements: list[int] = []
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
        elements.append(position)
        starts.append(start)
        position = start + size  # at most ``end``: the loop ends exactly there
    return elements, starts


_SPEEDUPS: Final = load_speedups()
_compiled_offsets: Final = None if _SPEEDUPS is None else _SPEEDUPS.document_array_offsets


class DocumentBatch:
    """The documents of one BSON array (its bytes, length and trailing NUL included), decoded with the
    decoding context ``ctx``: one at a time as taken, or the rest at once once the program is seen keeping
    them (see the module's docstring). Only :meth:`of` makes one: it checks the array's framing first.

    It answers the part of ``collections.deque``'s interface a cursor's buffer uses: truth and ``len`` (the
    documents not yet taken), :meth:`popleft`, iteration (the documents not yet taken, decoded, without
    taking them) and :meth:`clear`. ``kept`` tells whether the program was seen keeping a document it took
    (the rest was then decoded at once). A document whose own bytes are malformed raises
    :class:`~mongio.bson.errors.InvalidBSON` when it is decoded: when taken, or with the rest.
    """

    __slots__ = ("_ctx", "_data", "_elements", "_last", "_next", "_rest", "_starts", "kept")

    def __init__(self, data: bytes, elements: list[int], starts: list[int], ctx: Any) -> None:
        self._data = data
        self._elements = elements  # where each element (its type byte) is
        self._starts = starts  # where each element's document (its length field) is
        self._next = 0
        self._ctx = ctx
        self._last: Any = None  # the document handed out last, while the batch decodes one at a time
        self._rest: collections.deque[Any] | None = None  # the rest, once decoded at once
        self.kept = False  # whether the program was seen keeping a document it took

    @classmethod
    def of(cls, data: bytes, ctx: Any) -> DocumentBatch | None:
        """The batch of the array ``data``, or ``None`` when its framing is not that of an array of documents
        (an element of another type, a length that does not fit): the caller then decodes it whole, which
        says what is wrong or gives the values as they are."""
        # The compiled scan follows the decoder's loops (``_decoder.use_speedups``), so that the tests of
        # either path run both.
        if _compiled_offsets is not None and compiled_in_use():
            offsets = _compiled_offsets(data)
        else:
            offsets = _python_document_array_offsets(data)
        if offsets is None:
            return None
        return cls(data, offsets[0], offsets[1], ctx)

    def __len__(self) -> int:
        rest = self._rest
        return len(self._starts) - self._next if rest is None else len(rest)

    def __bool__(self) -> bool:
        rest = self._rest
        return self._next < len(self._starts) if rest is None else bool(rest)

    def popleft(self) -> Any:
        """Take the next document; ``IndexError`` when none is left (as ``deque.popleft``)."""
        if self._rest is not None:
            return self._rest.popleft()
        # No local name for the last document: it would count as a reference.
        if self._last is not None and _refcount(self._last) > _NOT_KEPT:
            # The program kept the previous document: decode what is left in one call.
            self.kept = True
            self._last = None
            self._rest = collections.deque(self._decode_rest())
            self._next = len(self._starts)
            self._data = b""
            return self._rest.popleft()
        index = self._next
        starts = self._starts
        start = starts[index]
        self._next = index + 1
        data = self._data
        document = read_span(data, start + 4, start + _UNPACK_INT32(data, start)[0] - 1, self._ctx)
        if index + 1 < len(starts):
            self._last = document
        else:
            # The last one: the batch's bytes need not outlive it (a cursor fetches the next batch while it
            # still holds this object).
            self._data = b""
            self._last = None
        return document

    def __iter__(self) -> Iterator[Any]:
        rest = self._rest
        return iter(list(rest) if rest is not None else self._decode_rest())

    def clear(self) -> None:
        """Drop the documents not yet taken."""
        self._next = len(self._starts)
        self._data = b""
        self._last = self._rest = None

    def _decode_rest(self) -> list[Any]:
        """The documents not yet taken, decoded in one call (nothing is taken)."""
        if self._next == len(self._starts):
            return []
        data = self._data
        rest: list[Any] = read_span(data, self._elements[self._next], len(data) - 1, self._ctx, array=True)
        return rest

    def __repr__(self) -> str:
        return f"<DocumentBatch: {len(self)} of {len(self._starts)} documents left>"
