"""The test server (SecantusDB) speaking TLS only, on a free loopback port, for the TLS integration tests."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator

from spec_runner.raw_wire import run_command
from spec_runner.server import find_server_program, free_port

__all__ = ["tls_test_server"]

STARTUP_TIMEOUT = 60.0


def _answers(port: int, ca_file: str, hostname: str) -> bool:
    context = ssl.create_default_context(cafile=ca_file)
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname=hostname) as sock,
        ):
            return run_command(sock, {"ping": 1, "$db": "admin"}).get("ok") == 1
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def tls_test_server(cert_file: str, key_file: str, ca_file: str, *, hostname: str = "localhost") -> Iterator[int]:
    """Start SecantusDB with the certificate ``cert_file`` (signed by ``ca_file``) and yield its port once it
    answers a TLS ``ping`` checked against ``hostname``; stop it afterwards."""
    port = free_port()
    argv = [
        find_server_program(),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--storage-path", ":memory:",
        "--tls-cert-file", cert_file,
        "--tls-key-file", key_file,
        "--tls-ca-file", ca_file,
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not _answers(port, ca_file, hostname):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(
                        f"TLS test server did not start: {log.read()[-2000:].decode(errors='replace')}"
                    )
                time.sleep(0.1)  # called from synchronous fixtures, before any event loop runs
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
