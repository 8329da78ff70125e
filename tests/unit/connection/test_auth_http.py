"""The authentication HTTP client against loopback servers that answer well, slowly, hugely or wrongly."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trustme

from mongio.connection.auth.http import HttpError, http_request

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def serving(serve: Serve, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """A loopback server running ``serve`` per connection; yields its base URL."""
    tasks: set[asyncio.Task[None]] = set()

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await serve(reader, writer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client hung up, or the test is over and stopped this connection
        finally:
            writer.close()

    server = await asyncio.start_server(run, "127.0.0.1", 0, ssl=ssl_context)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def answering(raw: bytes, *, then_stall: bool = False, seen: list[bytes] | None = None) -> Serve:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        request = head + await reader.readexactly(length)
        if seen is not None:
            seen.append(request)
        writer.write(raw)
        await writer.drain()
        if then_stall:
            await asyncio.Event().wait()

    return serve


def response(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


@pytest.mark.parametrize("method", ["GET", "PUT", "POST"])
async def test_a_request_and_its_answer(method: str) -> None:
    seen: list[bytes] = []
    async with serving(answering(response(b'{"a": 1}', extra="X-Thing: yes\r\n"), seen=seen)) as base:
        answer = await http_request(method, base + "/path?q=1", headers={"X-Test": "v"}, body=b"form=1")
    assert (answer.status, answer.body, answer.headers["x-thing"], answer.ok) == (
        200,
        b'{"a": 1}',
        "yes",
        True,
    )
    request = seen[0]
    assert request.startswith(f"{method} /path?q=1 HTTP/1.1\r\n".encode())
    assert b"\r\nX-Test: v\r\n" in request and b"\r\nContent-Length: 6\r\n" in request
    assert request.endswith(b"\r\n\r\nform=1") and b"\r\nHost: 127.0.0.1:" in request


async def test_a_failing_status_is_returned_not_raised() -> None:
    async with serving(answering(response(b"nope", "404 Not Found"))) as base:
        answer = await http_request("GET", base + "/")
    assert (answer.status, answer.ok) == (404, False)


async def test_an_announced_body_over_the_limit_is_refused_before_it_is_read() -> None:
    # The server claims 10 GB and then sends nothing: the refusal cannot have waited for the bytes.
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n"
    async with serving(answering(head, then_stall=True)) as base:
        with pytest.raises(HttpError, match="announced 10000000000 bytes"):
            await http_request("GET", base + "/", max_body=1024, time_limit=60)


async def test_a_body_without_length_is_read_only_up_to_the_limit() -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        while True:  # an endless body: the client must stop reading on its own
            writer.write(b"x" * 4096)
            await writer.drain()

    async with serving(endless) as base:
        with pytest.raises(HttpError, match="larger than 10000 bytes"):
            await http_request("GET", base + "/", max_body=10_000, time_limit=60)


async def test_a_body_without_length_ends_with_the_connection() -> None:
    async with serving(answering(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")) as base:
        assert (await http_request("GET", base + "/")).body == b"all of it"


async def test_chunked_bodies_are_joined_and_bounded() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\n"
    )
    async with serving(answering(chunked)) as base:
        assert (await http_request("GET", base + "/")).body == b"Wikipedia"
    big = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n"
    async with serving(answering(big, then_stall=True)) as base:
        with pytest.raises(HttpError, match="larger than 1024 bytes"):
            await http_request("GET", base + "/", max_body=1024, time_limit=60)


async def test_a_silent_server_runs_into_the_time_limit() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with serving(silent) as base:
        with pytest.raises(HttpError, match=r"no complete answer within 0\.2 s"):
            await http_request("GET", base + "/", time_limit=0.2)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"SMTP ready\r\n\r\n", "status line is not HTTP"),
        (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n", "longer than"),
        (b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", "more than 100 headers"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "without a colon"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", "invalid Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "after 5 of 10 bytes"),
        (b"HTTP/1.1 200 OK\r\n", "before the end of its headers"),
    ],
)
async def test_malformed_answers_are_refused_naming_the_problem(raw: bytes, problem: str) -> None:
    async with serving(answering(raw)) as base:
        with pytest.raises(HttpError, match=problem):
            await http_request("GET", base + "/", time_limit=60)


async def test_a_refused_connection_names_the_address() -> None:
    async with serving(answering(b"")) as base:
        pass  # closed: nothing listens on that port any more
    with pytest.raises(HttpError, match=r"cannot connect to 127\.0\.0\.1"):
        await http_request("GET", base + "/")


async def test_header_injection_is_refused() -> None:
    with pytest.raises(HttpError, match="line break"):
        await http_request("GET", "http://127.0.0.1:9/", headers={"X": "a\r\nEvil: 1"})


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "http:///nohost"])
async def test_only_http_urls_with_a_host(url: str) -> None:
    with pytest.raises(HttpError, match="only http and https"):
        await http_request("GET", url)


async def test_https_verifies_the_certificate() -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with serving(answering(response(b"secure")), server_context) as base:
        assert (await http_request("GET", base + "/", ssl_context=trusting)).body == b"secure"
        # The system's trust store does not know the test's authority: the handshake must fail.
        with pytest.raises(HttpError, match=r"CERTIFICATE_VERIFY_FAILED|SSLCertVerificationError"):
            await http_request("GET", base + "/")
