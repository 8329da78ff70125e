"""A minimal asynchronous HTTP/1.1 client for OCSP requests: one POST per connection, over asyncio streams.

OCSP responders are plain HTTP servers (RFC 6960, appendix A.1); mongio depends on no HTTP library, and an
OCSP exchange needs only this: send one request with ``Connection: close``, read one response. The response
is treated as hostile: its size is bounded by what arrives, never by what a header claims, and anything
malformed raises :class:`OCSPHTTPError`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["MAX_RESPONSE_BYTES", "OCSPHTTPError", "ResponderURL", "post"]

MAX_RESPONSE_BYTES = 256 * 1024
"""The most an OCSP answer may hold, headers included; real ones are a few kilobytes."""

_MAX_HEADER_BYTES = 16 * 1024
_READ_SIZE = 16 * 1024


class OCSPHTTPError(Exception):
    """The responder could not be reached or its answer is not a well-formed HTTP response."""


@dataclass(frozen=True)
class ResponderURL:
    """An ``http://`` responder address taken from a certificate."""

    host: str
    port: int
    path: str
    text: str

    @classmethod
    def parse(cls, url: str) -> ResponderURL:
        """Raises ``OCSPHTTPError`` for anything but an ``http://`` URL with a host."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise OCSPHTTPError(f"invalid OCSP responder URL {url!r}: {exc}") from None
        if parts.scheme.lower() != "http" or not parts.hostname:
            raise OCSPHTTPError(f"OCSP responder URL {url!r} is not an http:// URL with a host")
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        return cls(parts.hostname, port if port is not None else 80, path, url)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == 80 else f"{host}:{self.port}"


async def post(url: ResponderURL, body: bytes, content_type: str) -> bytes:
    """POST ``body`` to ``url`` and return the body of a ``200`` answer.

    No time limit of its own: the caller bounds the exchange (``asyncio.timeout``), and cancelling it closes
    the connection. Raises ``OCSPHTTPError`` for a connection failure, another status, or a malformed answer.
    """
    try:
        reader, writer = await asyncio.open_connection(url.host, url.port)
    except OSError as exc:
        raise OCSPHTTPError(f"cannot connect to the OCSP responder {url.text}: {exc}") from exc
    try:
        head = (
            f"POST {url.path} HTTP/1.1\r\n"
            f"Host: {url.host_header}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(head.encode("ascii") + body)
        await writer.drain()
        raw = await _read_bounded(reader)
    except OSError as exc:
        raise OCSPHTTPError(f"the OCSP responder {url.text} failed: {exc}") from exc
    finally:
        writer.close()
    return parse_response(raw, url.text)


async def _read_bounded(reader: asyncio.StreamReader) -> bytes:
    """The responder's answer: until its Content-Length is complete, else until it closes; refused past
    ``MAX_RESPONSE_BYTES`` (a responder keeping the connection open despite ``Connection: close`` is not
    waited for once its declared body has arrived)."""
    received = bytearray()
    while chunk := await reader.read(_READ_SIZE):
        received += chunk
        if len(received) > MAX_RESPONSE_BYTES:
            raise OCSPHTTPError(f"the OCSP responder sent more than {MAX_RESPONSE_BYTES} bytes")
        if _declared_body_complete(received):
            break
    return bytes(received)


def _declared_body_complete(received: bytearray) -> bool:
    end = received.find(b"\r\n\r\n")
    if end < 0:
        return False
    for line in bytes(received[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(received) - end - 4 >= int(value.strip())
    return False


def parse_response(raw: bytes, origin: str) -> bytes:
    """The body of a complete HTTP/1.x response ``raw`` (connection closed by the server after it)."""
    head, separator, rest = raw.partition(b"\r\n\r\n")
    if not separator or len(head) > _MAX_HEADER_BYTES:
        raise OCSPHTTPError(f"{origin} sent no complete HTTP header")
    status_line, *header_lines = head.split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise OCSPHTTPError(f"{origin} sent no HTTP status line: {status_line[:80]!r}")
    if parts[1] != b"200":
        raise OCSPHTTPError(f"{origin} answered HTTP {parts[1].decode()}")
    headers: dict[bytes, bytes] = {}
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if not colon:
            raise OCSPHTTPError(f"{origin} sent a malformed HTTP header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        return _dechunk(rest, origin)
    length = headers.get(b"content-length")
    if length is None:
        return rest  # delimited by the end of the connection
    if not length.isdigit() or int(length) != len(rest):
        raise OCSPHTTPError(f"{origin} sent {len(rest)} body bytes, its Content-Length says {length!r}")
    return rest


def _dechunk(data: bytes, origin: str) -> bytes:
    body = bytearray()
    position = 0
    while True:
        end = data.find(b"\r\n", position)
        if end < 0:
            raise OCSPHTTPError(f"{origin} sent a truncated chunked body")
        size_text = data[position:end].split(b";", 1)[0].strip()
        if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
            raise OCSPHTTPError(f"{origin} sent an invalid chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        if size == 0:
            return bytes(body)
        start = end + 2
        if start + size + 2 > len(data) or data[start + size : start + size + 2] != b"\r\n":
            raise OCSPHTTPError(f"{origin} sent a truncated chunked body")
        body += data[start : start + size]
        position = start + size + 2
