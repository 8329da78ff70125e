"""One plain-HTTP GET to a cloud metadata endpoint (Azure IMDS, GCP metadata server), asynchronous and bounded.

Metadata endpoints are link-local ``http://`` services answering small bodies, so HTTP/1.1 with
``Connection: close`` over ``asyncio.open_connection`` is all it takes. The body is read up to
``MAX_BODY`` bytes whatever ``Content-Length`` claims; chunked replies are decoded.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MAX_BODY", "MetadataResponse", "get_metadata"]

MAX_BODY = 1 << 20
"""The most body bytes read from a metadata endpoint (a token reply is a few kilobytes)."""
_MAX_HEAD = 16 << 10


@dataclass(frozen=True)
class MetadataResponse:
    status: int
    body: bytes

    def __repr__(self) -> str:  # the body is a token
        return f"MetadataResponse(status={self.status}, body=<{len(self.body)} bytes>)"


class MetadataError(OSError):
    """The endpoint could not be reached or answered something that is not HTTP."""


async def get_metadata(url: str, headers: Mapping[str, str]) -> MetadataResponse:
    """``GET url`` with ``headers`` (bound it with ``asyncio.timeout``: metadata endpoints can hang)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise MetadataError(
            f"a metadata endpoint must be an http:// URL with a host, not a {parts.scheme or 'schemeless'} one"
        )
    host = parts.hostname
    port = parts.port or 80
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    reader, writer = await asyncio.open_connection(host, port)
    try:
        lines = [f"GET {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        return await _read_response(reader)
    finally:
        writer.close()


async def _read_response(reader: asyncio.StreamReader) -> MetadataResponse:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise MetadataError("the metadata endpoint's reply headers are too long") from None
    except asyncio.IncompleteReadError:
        raise MetadataError("the metadata endpoint closed the connection before answering") from None
    if len(head) > _MAX_HEAD:
        raise MetadataError("the metadata endpoint's reply headers are too long")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = status_line.split(" ", 2)
    if len(fields) < 2 or not fields[0].startswith("HTTP/") or not fields[1].isdigit():
        raise MetadataError("the metadata endpoint did not answer HTTP")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.read(MAX_BODY + 1)
        while body and len(body) <= MAX_BODY:
            more = await reader.read(MAX_BODY + 1 - len(body))
            if not more:
                break
            body += more
        if len(body) > MAX_BODY:
            raise MetadataError(f"the metadata endpoint's reply is larger than {MAX_BODY} bytes")
    return MetadataResponse(int(fields[1]), body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = b""
    while True:
        size_field = (await reader.readline()).split(b";", 1)[0].strip()
        if not size_field or size_field.strip(b"0123456789abcdefABCDEF") or len(size_field) > 8:
            raise MetadataError("the metadata endpoint sent a malformed chunk")
        size = int(size_field, 16)
        if size == 0:
            return body
        if len(body) + size > MAX_BODY:
            raise MetadataError(f"the metadata endpoint's reply is larger than {MAX_BODY} bytes")
        body += await reader.readexactly(size)
        await reader.readexactly(2)
