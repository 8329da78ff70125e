"""A fake cloud metadata service on 127.0.0.1 (plain HTTP), standing in for the Azure instance metadata
service (IMDS) and the GCE metadata server, as drivers-evergreen-tools' ``fake_azure`` does.

``case`` picks the answer, like ``fake_azure``'s ``X-MongoDB-HTTP-TestParams``: ``success`` (the token
``magic-cookie``, expiring in ``expires_in`` seconds), ``empty-json``, ``bad-json``, ``404``, ``500`` or
``slow`` (no answer until the server stops). ``requests`` keeps each request's target and headers. It is an
:class:`~tests.support.backends.AsyncioServer`: a test on trio serves it from an asyncio loop in a thread.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from tests.support.backends import AsyncioServer

__all__ = ["FakeMetadataServer"]

TOKEN = "magic-cookie"


@dataclass
class FakeMetadataServer(AsyncioServer):
    case: str = "success"
    expires_in: int = 70
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    _server: asyncio.Server | None = field(default=None, repr=False)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> FakeMetadataServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._stopping.set()
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            target = head[0].split(" ")[1]
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in head[1:] if line)
            }
            self.requests.append((target, headers))
            if self.case == "slow":
                await self._stopping.wait()
                return
            status, body = self._answer()
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            writer.close()

    def _answer(self) -> tuple[int, bytes]:
        if self.case == "success":
            document = {
                "access_token": TOKEN,
                "expires_in": str(self.expires_in),
                "resource": "https://vault.azure.net",
            }
            return 200, json.dumps(document).encode()
        if self.case == "empty-json":
            return 200, b"{}"
        if self.case == "bad-json":
            return 200, b'{"access_token": "magic-cookie",'
        return int(self.case), b"the metadata service failed"
