"""Child processes on trio: :class:`TrioChild`, the backend seam's :class:`~mongio.backend.ChildProcess` over
``trio.Process`` (imported only from inside a trio run, as :mod:`mongio.backend.trio_loop` is)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import trio

__all__ = ["TrioChild", "open_process"]


async def open_process(args: Sequence[str]) -> TrioChild:
    """Start ``args`` with no input, its output and errors piped together (see :func:`mongio.backend.open_process`)."""
    process = await trio.lowlevel.open_process(
        list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return TrioChild(process)


class TrioChild:
    """A ``trio.Process`` with its output pipe, as mongio uses a child process."""

    __slots__ = ("_output", "_process")

    def __init__(self, process: trio.Process) -> None:
        output = process.stdout
        assert isinstance(output, trio.lowlevel.FdStream)  # piped by open_process
        self._process = process
        self._output = output

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def read_output(self, max_bytes: int) -> bytes:
        return await self._output.receive_some(max_bytes)

    async def wait(self) -> int:
        return await self._process.wait()

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()

    def close_output(self) -> None:
        self._output.close()
