"""The byte relay of the tests' proxies (SOCKS5, HTTP CONNECT): once a tunnel is set up, the client's bytes go to
the upstream server and the server's back, until either side ends."""

from __future__ import annotations

import asyncio

_CHUNK = 65536


async def relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Carry ``reader``'s bytes to ``upstream_writer`` in this task and ``upstream_reader``'s back to ``writer`` in
    a child task owned here, until the client's side ends; then stop the child and close the upstream side."""
    back = asyncio.create_task(_pump(upstream_reader, writer))
    try:
        await _pump(reader, upstream_writer)
    finally:
        back.cancel()
        await asyncio.gather(back, return_exceptions=True)
        upstream_writer.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy ``source`` to ``sink`` until ``source`` ends (or the connection fails), a chunk at a time, waiting for
    ``sink`` to drain; then close ``sink``, so the other side sees the end too."""
    try:
        while chunk := await source.read(_CHUNK):
            sink.write(chunk)
            await sink.drain()
    except OSError:
        pass
    finally:
        sink.close()
