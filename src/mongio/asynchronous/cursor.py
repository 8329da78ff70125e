"""``pymongo.asynchronous.cursor``: :class:`AsyncCursor` is :class:`mongio.Cursor`."""

from mongio.cursor import Cursor, RawBatchCursor
from mongio.operations.crud import CursorType

AsyncCursor = Cursor
AsyncRawBatchCursor = RawBatchCursor

__all__ = ["AsyncCursor", "AsyncRawBatchCursor", "CursorType"]
