"""A SecantusDB test server whose storage survives restarts (for tests of users, persisted state, restarts)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spec_runner.server import TestServer, find_server_program


class PersistentServer(TestServer):
    """A test server on a storage path that survives restarts (``TestServer`` always uses ``:memory:``)."""

    def __init__(self, storage: Path, *extra_args: str, port: int | None = None) -> None:
        super().__init__(*extra_args, port=port)
        self.storage = storage

    def start(self) -> PersistentServer:
        argv = [
            find_server_program(),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", str(self.storage),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_until_answering()
        return self
