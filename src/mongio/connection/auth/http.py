"""A small asynchronous HTTP/1.1 client for the credential and metadata endpoints authentication talks to
(AWS STS, ECS and EC2 instance metadata; cloud metadata services for other mechanisms).

One request per connection (``Connection: close``), on asyncio streams, within one timeout. The answer is
treated as hostile: the status line and each header are bounded, so are the number of headers and the
body; a ``Content-Length`` larger than the limit is refused before anything is read, and a body without one
is read only up to the limit, so memory follows what arrived, never what a header claims. ``https`` URLs
verify the server's certificate (the system's trust store unless a context is given).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["HttpError", "HttpResponse", "http_request"]

DEFAULT_TIMEOUT = 10.0
"""Seconds a whole request may take (the authentication specification's read timeout for ECS and EC2)."""
MAX_BODY = 1 << 20
"""Bytes of body accepted by default: credential documents are a few kilobytes."""
_MAX_LINE = 8 << 10
_MAX_HEADERS = 100
_USER_AGENT = "mongio"

_default_context: ssl.SSLContext | None = None


class HttpError(Exception):
    """A request that could not be made or whose answer could not be read (never carries the body sent)."""


@dataclass(frozen=True)
class HttpResponse:
    """A complete answer: ``headers`` are keyed by lower-case name."""

    status: int
    headers: Mapping[str, str] = field(repr=False)
    body: bytes = field(repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


async def _verifying_context() -> ssl.SSLContext:
    """The default verifying context, made once: loading the trust store reads files, so in a worker thread."""
    global _default_context
    if _default_context is None:
        _default_context = await asyncio.to_thread(ssl.create_default_context)
    return _default_context


def _request_bytes(
    method: str, target: str, host_header: str, headers: Mapping[str, str], body: bytes
) -> bytes:
    fields = [(f"{method} {target} HTTP/1.1",), ("Host", host_header), ("User-Agent", _USER_AGENT)]
    fields += [(name, value) for name, value in headers.items()]
    if any(ch in part for field in fields for part in field for ch in "\r\n\0"):
        raise HttpError("a request header holds a line break or NUL")
    lines = [": ".join(field) for field in fields]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise HttpError(f"the server sent a header line longer than {_MAX_LINE} bytes") from None
    except asyncio.IncompleteReadError:
        raise HttpError("the server closed the connection before the end of its headers") from None
    return line.rstrip(b"\r\n")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await _read_line(reader)
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise HttpError(f"the server's status line is not HTTP/1.x: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        line = await _read_line(reader)
        if not line:
            return int(parts[1]), headers
        name, colon, value = line.partition(b":")
        if not colon:
            raise HttpError("the server sent a header line without a colon")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    raise HttpError(f"the server sent more than {_MAX_HEADERS} headers")


async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    body = bytearray()
    while True:
        size_line = (await _read_line(reader)).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise HttpError("the server sent a malformed chunk size") from None
        if size < 0 or len(body) + size > max_body:
            raise HttpError(f"the server's answer is larger than {max_body} bytes")
        if size == 0:
            while await _read_line(reader):  # trailers
                pass
            return bytes(body)
        try:
            body += await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise HttpError("the server closed the connection in the middle of a chunk") from None
        await _read_line(reader)


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str], max_body: int) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return await _read_chunked(reader, max_body)
    length_text = headers.get("content-length")
    if length_text is None:
        # The body ends with the connection: read what arrives, never more than the limit.
        body = bytearray()
        while more := await reader.read(max_body + 1 - len(body)):
            body += more
            if len(body) > max_body:
                raise HttpError(f"the server's answer is larger than {max_body} bytes")
        return bytes(body)
    if not length_text.isdigit():
        raise HttpError(f"the server sent an invalid Content-Length {length_text[:20]!r}")
    length = int(length_text)
    if length > max_body:
        raise HttpError(f"the server announced {length} bytes, more than the {max_body} accepted")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise HttpError(
            f"the server closed the connection after {len(exc.partial)} of {length} bytes"
        ) from None


async def _exchange(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    max_body: int,
    ssl_context: ssl.SSLContext | None,
) -> HttpResponse:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpError(f"cannot request {parts.scheme}://{parts.hostname or ''}: only http and https URLs")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    context = (ssl_context or await _verifying_context()) if secure else None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rpartition("@")[2]
    request = _request_bytes(method, target, host_header, headers, body)
    try:
        reader, writer = await asyncio.open_connection(
            parts.hostname,
            port,
            ssl=context,
            server_hostname=parts.hostname if secure else None,
            limit=_MAX_LINE,
        )
    except (OSError, ssl.SSLError) as exc:
        raise HttpError(
            f"cannot connect to {parts.hostname}:{port}: {exc.__class__.__name__}: {exc}"
        ) from None
    try:
        writer.write(request)
        await writer.drain()
        status, response_headers = await _read_head(reader)
        response_body = await _read_body(reader, response_headers, max_body)
    except (OSError, ssl.SSLError) as exc:
        raise HttpError(
            f"{method} {parts.hostname}:{port}{parts.path} failed: {exc.__class__.__name__}"
        ) from None
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, ssl.SSLError):
            pass  # the answer is complete or the error is already on its way
    return HttpResponse(status, response_headers, response_body)


async def http_request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    time_limit: float = DEFAULT_TIMEOUT,
    max_body: int = MAX_BODY,
    ssl_context: ssl.SSLContext | None = None,
) -> HttpResponse:
    """Send one request and return the whole answer, within ``time_limit`` seconds.

    Raises ``HttpError`` naming what went wrong (connection refused, timeout, malformed or oversized
    answer); the request's headers and body never appear in it, as they may carry tokens.
    """
    try:
        async with asyncio.timeout(time_limit):
            return await _exchange(method, url, headers or {}, body, max_body, ssl_context)
    except TimeoutError:
        host = urlsplit(url).hostname
        raise HttpError(f"{method} to {host} got no complete answer within {time_limit:g} s") from None
