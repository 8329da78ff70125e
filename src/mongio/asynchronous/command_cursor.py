"""``pymongo.asynchronous.command_cursor``: :class:`AsyncCommandCursor` is :class:`mongio.CommandCursor`."""

from mongio.cursor import CommandCursor, RawBatchCommandCursor

AsyncCommandCursor = CommandCursor
AsyncRawBatchCommandCursor = RawBatchCommandCursor

__all__ = ["AsyncCommandCursor", "AsyncRawBatchCommandCursor"]
