"""A fake cloud metadata endpoint (Azure IMDS, GCP metadata server) on 127.0.0.1, speaking just enough HTTP/1.1.

Each request is recorded (path with query, headers) and answered by the current ``Answer``: a status, a body,
an optional delay (a slow endpoint), chunked or not; ``hang_up`` closes without answering.

    async with MetadataEndpoint() as endpoint:
        endpoint.answer = Answer(200, json.dumps({"access_token": token}).encode())
        monkeypatch.setenv("MONGIO_OIDC_AZURE_ENDPOINT", endpoint.base_url)
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    chunked: bool = False
    hang_up: bool = False


@dataclass
class Seen:
    target: str
    headers: dict[str, str]


@dataclass
class MetadataEndpoint:
    answer: Answer = field(default_factory=Answer)
    requests: list[Seen] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> MetadataEndpoint:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = head.strip().split("\r\n")
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines)
            }
            self.requests.append(Seen(request_line.split(" ")[1], headers))
            answer = self.answer
            if answer.delay:
                await asyncio.sleep(answer.delay)
            if answer.hang_up:
                return
            if answer.chunked:
                half = len(answer.body) // 2
                parts = [answer.body[:half], answer.body[half:]]
                body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"
                framing = b"Transfer-Encoding: chunked\r\n"
            else:
                body = answer.body
                framing = b"Content-Length: %d\r\n" % len(body)
            writer.write(b"HTTP/1.1 %d X\r\n%sConnection: close\r\n\r\n%s" % (answer.status, framing, body))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._tasks.discard(task)
