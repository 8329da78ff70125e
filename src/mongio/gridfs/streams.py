"""Adapters between GridFS and the application's streams: reading an upload's source and writing a
download's destination, whatever kind of object the application gives.

Sources: bytes-like objects, in-memory files (``io.BytesIO``), asyncio-style readers whose ``read`` is a
coroutine function (``asyncio.StreamReader``, aiofiles), async iterables of bytes (a web framework's request
body), and any other object with a blocking ``read`` (an open file), which is read in a worker thread so the
event loop never waits on the disk. Destinations follow the same rules for ``write`` (plus ``drain`` for
``asyncio.StreamWriter``).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

from mongio.backend import is_async_callable, to_thread

__all__ = ["Destination", "read_blocks"]


async def read_blocks(source: Any, block_size: int) -> AsyncIterator[Any]:
    """The bytes of ``source`` as successive blocks of at most ``block_size`` bytes (bytes-like sources and
    async iterables give their own pieces); a ``str`` is refused, the caller encodes it."""
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source):
            yield source
        return
    read = getattr(source, "read", None)
    if read is not None:
        if is_async_callable(read):
            while True:
                block = await read(block_size)
                if not block:
                    return
                yield _bytes_like(block)
        in_memory = isinstance(source, io.BytesIO)
        while True:
            # An open file (or anything unknown) may block on the disk: read it in a worker thread.
            block = read(block_size) if in_memory else await to_thread(read, block_size)
            if not block:
                return
            yield _bytes_like(block)
    if hasattr(source, "__aiter__"):
        async for block in source:
            if block:
                yield _bytes_like(block)
        return
    raise TypeError(
        "the source must be bytes, a file opened in binary mode, an object with an async read(), or an async "
        f"iterable of bytes; not {type(source).__name__}"
    )


def _bytes_like(block: Any) -> Any:
    if isinstance(block, bytes | bytearray | memoryview):
        return block
    if isinstance(block, str):
        raise TypeError("the source gave str, not bytes: open files in binary mode")
    raise TypeError(f"the source gave {type(block).__name__}, not bytes")


class Destination:
    """Writes to an application's stream: in-memory files directly, asyncio writers with ``await`` (and
    ``drain()`` when the writer has one), other files from a worker thread."""

    __slots__ = ("_drain", "_kind", "_write")

    def __init__(self, destination: Any) -> None:
        write = getattr(destination, "write", None)
        if write is None:
            raise TypeError(f"the destination must have a write() method; {type(destination).__name__} has none")
        self._write = write
        drain = getattr(destination, "drain", None)
        self._drain = drain if is_async_callable(drain) else None
        if is_async_callable(write):
            self._kind = "async"
        elif self._drain is not None or isinstance(destination, io.BytesIO):
            self._kind = "direct"
        else:
            self._kind = "thread"

    async def write(self, data: bytes) -> None:
        if self._kind == "async":
            await self._write(data)
        elif self._kind == "direct":
            self._write(data)
            if self._drain is not None:
                await self._drain()
        else:
            await to_thread(self._write, data)
