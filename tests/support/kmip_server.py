"""A KMIP server on 127.0.0.1 for the encryption tests: PyKMIP's server, in a process of its own, with a
``trustme`` certificate authority.

    python -m tests.support.kmip_server DIRECTORY PORT

writes ``ca.pem`` (to trust the server), ``client.pem`` (a client certificate and key; PyKMIP names the
client by its certificate's common name) and the server's files into DIRECTORY, prints ``ready`` once it
listens on 127.0.0.1:PORT, and serves until it is terminated. :class:`KmipServerProcess` runs it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["KmipServerProcess"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class KmipServerProcess:
    """Start with :meth:`start`, stop with :meth:`stop`; :attr:`endpoint` is its ``host:port``."""

    directory: Path
    port: int = field(default_factory=_free_port)
    _process: subprocess.Popen[str] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> str:
        return str(self.directory / "ca.pem")

    @property
    def client_file(self) -> str:
        return str(self.directory / "client.pem")

    def start(self) -> KmipServerProcess:
        command = [sys.executable, "-m", "tests.support.kmip_server", str(self.directory), str(self.port)]
        # A session of its own: PyKMIP's server runs its connections in child processes, stopped with it.
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()  # blocks until the server listens, or the process ends
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError("the KMIP server did not start")
        return self

    def stop(self) -> None:
        if self._process is not None:
            # Its whole process group: PyKMIP's server only stops between connections, and keeps no state
            # worth saving.
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)
            self._process = None


def _serve(directory: Path, port: int) -> None:
    import logging

    import trustme
    from kmip.services.server import KmipServer

    logging.disable(logging.CRITICAL)
    authority = trustme.CA()
    server_certificate = authority.issue_cert("127.0.0.1", "localhost")
    client_certificate = authority.issue_cert("client", common_name="mongio-test-client")
    authority.cert_pem.write_to_path(str(directory / "ca.pem"))
    server_certificate.private_key_pem.write_to_path(str(directory / "server.key"))
    server_certificate.cert_chain_pems[0].write_to_path(str(directory / "server.pem"))
    (directory / "client.pem").write_bytes(
        client_certificate.private_key_pem.bytes() + client_certificate.cert_chain_pems[0].bytes()
    )
    server = KmipServer(
        hostname="127.0.0.1",
        port=port,
        certificate_path=str(directory / "server.pem"),
        key_path=str(directory / "server.key"),
        ca_path=str(directory / "ca.pem"),
        auth_suite="TLS1.2",
        config_path=None,
        policy_path=None,
        enable_tls_client_auth=False,
        database_path=str(directory / "kmip.sqlite"),
        logging_level="ERROR",
    )
    server.start()
    # PyKMIP's start() only binds; its serve() listens. Listening here first makes "ready" true: a client
    # that connects at once is queued instead of refused (serve() listening again only sets the backlog).
    server._socket.listen(5)
    print("ready", flush=True)
    server.serve()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), int(sys.argv[2]))
