"""An embedded test server for examples and local experiments: SecantusDB started as a child process.

SecantusDB is an optional extra (``pip install 'mongio[server]'``), never a runtime dependency. Usage::

    async with EmbeddedServer() as server:
        print(server.uri)  # mongodb://127.0.0.1:PORT/

The server keeps its data in memory and is gone when the ``async with`` block ends.
"""

from __future__ import annotations

import asyncio
import collections
import shutil
import socket
import sys
from pathlib import Path
from types import TracebackType

from mongio.errors import ConfigurationError

SERVER_PROGRAM = "secantusd-py"
_READY_MARKER = b"listening on"


def _find_program() -> str:
    beside_python = Path(sys.executable).parent / SERVER_PROGRAM
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which(SERVER_PROGRAM)
    if found is None:
        raise ConfigurationError(
            f"the embedded server needs {SERVER_PROGRAM}: install it with pip install 'mongio[server]'"
        )
    return found


def _free_loopback_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedServer:
    """A SecantusDB server on a free loopback port, started and stopped with ``async with``.

    ``extra_args`` go to ``secantusd-py`` unchanged (e.g. ``"--standalone"``). ``startup_timeout`` bounds
    the wait for the server to listen; a server that exits or stays silent raises ``RuntimeError`` with the
    tail of its output.
    """

    def __init__(self, *extra_args: str, host: str = "127.0.0.1", startup_timeout: float = 60.0) -> None:
        self.host = host
        self.port = 0
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self._process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._output: collections.deque[str] = collections.deque(maxlen=30)

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/"

    async def start(self) -> EmbeddedServer:
        self.port = _free_loopback_port(self.host)
        self._process = await asyncio.create_subprocess_exec(
            _find_program(),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", ":memory:",
            *self.extra_args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        # The server logs to its output for its whole life; reading it all keeps the pipe from filling.
        self._drain = asyncio.create_task(self._read_output(), name=f"embedded-server-output-{self.port}")
        try:
            async with asyncio.timeout(self.startup_timeout):
                exited = asyncio.ensure_future(self._process.wait())
                listening = asyncio.ensure_future(self._listening.wait())
                try:
                    await asyncio.wait({exited, listening}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    exited.cancel()
                    listening.cancel()
            if not self._listening.is_set():
                raise RuntimeError(f"the embedded server exited with {self._process.returncode}: {self.output_tail()}")
        except TimeoutError:
            await self.stop()
            raise RuntimeError(
                f"the embedded server did not listen within {self.startup_timeout}s: {self.output_tail()}"
            ) from None
        except BaseException:
            await self.stop()
            raise
        return self

    async def _read_output(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        async for line in self._process.stdout:
            self._output.append(line.decode(errors="replace").rstrip())
            if not self._listening.is_set() and _READY_MARKER in line:
                self._listening.set()

    def output_tail(self) -> str:
        return "\n".join(self._output)

    async def stop(self) -> None:
        """Stop the server and wait for it to exit (killed if it takes longer than 15 seconds)."""
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(15):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        drain, self._drain = self._drain, None
        if drain is not None:
            drain.cancel()
            try:
                await drain
            except asyncio.CancelledError:
                pass

    async def __aenter__(self) -> EmbeddedServer:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
