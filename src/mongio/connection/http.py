"""mongio's one HTTP client: asynchronous HTTP/1.1 for the few HTTP services the driver talks to besides
MongoDB (AWS STS, ECS and EC2 instance metadata for MONGODB-AWS; the Azure and GCP metadata endpoints for
MONGODB-OIDC; OCSP responders, RFC 6960 appendix A.1). mongio depends on no HTTP library.

One request per connection (``Connection: close``), on asyncio streams (on trio, the seam's byte stream), within
one timeout (or the caller's).
The answer is treated as hostile: the status line and each header are bounded, so are the number of headers
and the body; a ``Content-Length`` larger than the limit is refused before anything is read, and a body without
one is read only up to the limit, so memory follows what arrived, never what a header claims. An answer ends
at its ``Content-Length`` even when the server keeps the connection open. ``https`` URLs verify the server's
certificate (the system's trust store unless a context is given). Errors name the problem, never the request's
headers or body nor the bytes of the answer, which may carry credentials.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mongio.backend import ByteReader, ByteWriter, ForeignLoop, running_loop, timeout, to_thread

__all__ = ["DEFAULT_TIMEOUT", "MAX_BODY", "HttpError", "HttpResponse", "http_request"]

DEFAULT_TIMEOUT = 10.0
"""Seconds a whole request may take (the authentication specification's read timeout for ECS and EC2)."""
MAX_BODY = 1 << 20
"""Bytes of body accepted by default: credential documents and metadata tokens are a few kilobytes."""
_MAX_LINE = 8 << 10
_MAX_HEADERS = 100
_USER_AGENT = "mongio"

_default_context: ssl.SSLContext | None = None


class HttpError(Exception):
    """A request that could not be made or whose answer could not be read (never carries the body sent)."""


@dataclass(frozen=True)
class HttpResponse:
    """A complete answer: ``headers`` are keyed by lower-case name (neither is in the ``repr``: they may hold
    a token)."""

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
        _default_context = await to_thread(ssl.create_default_context)
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


async def _read_line(reader: ByteReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise HttpError(f"the server sent a header line longer than {_MAX_LINE} bytes") from None
    except asyncio.IncompleteReadError:
        raise HttpError("the server closed the connection before the end of its headers") from None
    return line.rstrip(b"\r\n")


async def _read_head(reader: ByteReader) -> tuple[int, dict[str, str]]:
    status_line = await _read_line(reader)
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise HttpError(f"the server's status line is not HTTP/1.x ({len(status_line)} bytes)")
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


async def _read_chunked(reader: ByteReader, max_body: int) -> bytes:
    body = bytearray()
    while True:
        size_line = (await _read_line(reader)).split(b";", 1)[0].strip()
        if not size_line or size_line.strip(b"0123456789abcdefABCDEF"):
            raise HttpError("the server sent a malformed chunk size")
        size = int(size_line, 16)
        if len(body) + size > max_body:
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


async def _read_body(reader: ByteReader, headers: Mapping[str, str], max_body: int) -> bytes:
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
        raise HttpError("the server sent a Content-Length that is not a number of bytes")
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
    try:
        parts = urlsplit(url)
        given_port = parts.port
    except ValueError as exc:
        raise HttpError(f"cannot request a malformed URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpError(f"cannot request {parts.scheme}://{parts.hostname or ''}: only http and https URLs")
    secure = parts.scheme == "https"
    port = given_port or (443 if secure else 80)
    context = (ssl_context or await _verifying_context()) if secure else None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rpartition("@")[2]
    request = _request_bytes(method, target, host_header, headers, body)
    try:
        reader, writer = await _open(parts.hostname, port, context, parts.hostname if secure else None)
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


async def _open(
    host: str, port: int, context: ssl.SSLContext | None, server_hostname: str | None
) -> tuple[ByteReader, ByteWriter]:
    loop = running_loop()
    if isinstance(loop, ForeignLoop):
        return await loop.open_byte_stream(host, port, context, server_hostname, _MAX_LINE)
    return await asyncio.open_connection(host, port, ssl=context, server_hostname=server_hostname, limit=_MAX_LINE)


async def http_request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    time_limit: float | None = DEFAULT_TIMEOUT,
    max_body: int = MAX_BODY,
    ssl_context: ssl.SSLContext | None = None,
) -> HttpResponse:
    """Send one request and return the whole answer (whatever its status), within ``time_limit`` seconds;
    ``None`` when the caller bounds the request itself (``asyncio.timeout``; cancelling closes the connection).
    At most ``max_body`` bytes of body are accepted.

    Raises ``HttpError`` naming what went wrong (connection refused, timeout, malformed or oversized
    answer); the request's headers and body never appear in it, as they may carry tokens.
    """
    try:
        async with timeout(time_limit):
            return await _exchange(method, url, headers or {}, body, max_body, ssl_context)
    except TimeoutError:
        if time_limit is None:
            raise  # the caller's own bound ran out: theirs to report
        raise HttpError(f"{method} to {urlsplit(url).hostname} got no complete answer within {time_limit:g} s") from None
