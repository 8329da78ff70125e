"""Client certificates against the test server started with ``--tls-require-client-cert``.

What SecantusDB does with a client that brings no certificate, or one from a CA it does not trust, depends on
the TLS version: under TLS 1.2 it refuses the TLS handshake itself (an alert), under TLS 1.3 the client's side
of the handshake is already over when the server rejects the certificate, so the refusal (an alert, or a bare
reset when the server drops the socket before the alert is read) arrives while the driver reads the reply to
its ``hello``. Both must end in ``AutoReconnect`` naming the address, with the connection closed.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from spec_runner.raw_wire import run_command
from spec_runner.server import external_uri, find_server_program, free_port

import mongio.connection.establish as establish_module
from mongio.bson import ObjectId
from mongio.connection import Connection, TLSOptions, connect, create_ssl_context
from mongio.connection.establish import ConnectionSettings, establish
from mongio.error_classification import OVERLOAD_LABELS
from mongio.errors import AutoReconnect, ConfigurationError

pytestmark = pytest.mark.server

STARTUP_TIMEOUT = 60.0
KEY_PASSWORD = "k3y-Pa55phrase"
TLS_VERSIONS = [
    pytest.param(None, id="tls-default"),
    pytest.param(ssl.TLSVersion.TLSv1_2, id="tls1.2"),
]


def write_encrypted_key_and_chain(cert: trustme.LeafCert, password: str, path: Path) -> None:
    """A PEM file holding ``cert``'s private key encrypted with ``password``, then its certificate chain."""
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    )
    path.write_bytes(encrypted + b"".join(blob.bytes() for blob in cert.cert_chain_pems))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA, a server certificate for localhost and 127.0.0.1, client certificates from that CA (one with an
    encrypted key) and one from another CA."""
    directory = tmp_path_factory.mktemp("client-cert-pki")
    ca = trustme.CA()
    other_ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client@example.com")
    paths = {
        "ca": directory / "ca.pem",
        "server_cert": directory / "server.crt",
        "server_key": directory / "server.key",
        "client": directory / "client.pem",
        "encrypted_client": directory / "encrypted-client.pem",
        "foreign_client": directory / "foreign-client.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["server_cert"]))
    server.private_key_pem.write_to_path(str(paths["server_key"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    write_encrypted_key_and_chain(client, KEY_PASSWORD, paths["encrypted_client"])
    foreign = other_ca.issue_cert("client@example.com")
    foreign.private_key_and_cert_chain_pem.write_to_path(str(paths["foreign_client"]))
    return {name: str(path) for name, path in paths.items()}


def _answers(port: int, pki: dict[str, str]) -> bool:
    context = ssl.create_default_context(cafile=pki["ca"])
    context.load_cert_chain(pki["client"])
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
        ):
            return run_command(sock, {"ping": 1, "$db": "admin"}).get("ok") == 1
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="module")
def server_port(pki: dict[str, str]) -> Iterator[int]:
    """A SecantusDB speaking TLS only and requiring a client certificate signed by the test CA."""
    if external_uri() is not None:
        pytest.skip("MONGODB_URI names an external deployment; its TLS setup is not ours to know")
    port = free_port()
    argv = [
        find_server_program(),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--storage-path", ":memory:",
        "--tls-cert-file", pki["server_cert"],
        "--tls-key-file", pki["server_key"],
        "--tls-ca-file", pki["ca"],
        "--tls-require-client-cert",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not _answers(port, pki):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(
                        f"TLS test server did not start: {log.read()[-2000:].decode(errors='replace')}"
                    )
                time.sleep(0.1)  # synchronous fixture, before any event loop runs
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    """Every connection ``establish()`` opens during the test (those whose TLS handshake succeeded)."""
    made: list[Connection] = []

    async def recording_connect(*args: Any, **kwargs: Any) -> Connection:
        conn = await connect(*args, **kwargs)
        made.append(conn)
        return conn

    monkeypatch.setattr(establish_module, "connect", recording_connect)
    return made


def settings(options: TLSOptions, max_version: ssl.TLSVersion | None = None) -> ConnectionSettings:
    context = create_ssl_context(options)
    if max_version is not None:
        context.maximum_version = max_version
    return ConnectionSettings(ssl_context=context, connect_timeout=10)


async def test_a_client_certificate_from_the_trusted_ca_is_accepted(
    server_port: int, pki: dict[str, str]
) -> None:
    options = TLSOptions(ca_file=pki["ca"], certificate_key_file=pki["client"])
    conn = await establish(("127.0.0.1", server_port), settings(options))
    try:
        assert conn.ready and conn.max_wire_version > 0
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
        marker = ObjectId()
        inserted = await conn.command("tls_client_cert", {"insert": "docs", "documents": [{"_id": marker}]})
        assert inserted["n"] == 1
        found = await conn.command("tls_client_cert", {"find": "docs", "filter": {"_id": marker}})
        assert found["cursor"]["firstBatch"] == [{"_id": marker}]
        ssl_object = conn._transport.get_extra_info("ssl_object")
        assert ssl_object is not None and ssl_object.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        conn.close()


@pytest.mark.parametrize("max_version", TLS_VERSIONS)
async def test_a_client_without_a_certificate_is_refused(
    server_port: int, pki: dict[str, str], opened: list[Connection], max_version: ssl.TLSVersion | None
) -> None:
    address = f"127.0.0.1:{server_port}"
    with pytest.raises(AutoReconnect) as caught:
        await establish(("127.0.0.1", server_port), settings(TLSOptions(ca_file=pki["ca"]), max_version))
    message = str(caught.value)
    assert address in message
    if max_version == ssl.TLSVersion.TLSv1_2:
        # Refused in the TLS handshake: no connection was ever made.
        assert "TLS handshake" in message and "HANDSHAKE_FAILURE" in message, message
        assert opened == []
    else:
        # Refused once the hello was sent: with an alert, or with a reset that lost it.
        assert "CERTIFICATE_REQUIRED" in message or "reset by peer" in message, message
        assert len(opened) == 1
    assert all(conn.closed for conn in opened)


@pytest.mark.parametrize("max_version", TLS_VERSIONS)
async def test_a_client_certificate_from_another_ca_is_refused(
    server_port: int, pki: dict[str, str], opened: list[Connection], max_version: ssl.TLSVersion | None
) -> None:
    options = TLSOptions(ca_file=pki["ca"], certificate_key_file=pki["foreign_client"])
    with pytest.raises(AutoReconnect) as caught:
        await establish(("127.0.0.1", server_port), settings(options, max_version))
    message = str(caught.value)
    assert f"127.0.0.1:{server_port}" in message
    if max_version == ssl.TLSVersion.TLSv1_2:
        assert "TLS handshake" in message and "UNKNOWN_CA" in message, message
        assert opened == []
    else:
        assert "UNKNOWN_CA" in message or "reset by peer" in message, message
        assert len(opened) == 1
    assert all(conn.closed for conn in opened)


async def test_a_refused_certificate_under_tls_1_2_is_not_taken_for_overload(
    server_port: int, pki: dict[str, str]
) -> None:
    # An alert is not an I/O error: CMAP's backpressure rule forbids the overload labels.
    options = TLSOptions(ca_file=pki["ca"], certificate_key_file=pki["foreign_client"])
    with pytest.raises(AutoReconnect) as caught:
        await establish(("127.0.0.1", server_port), settings(options, ssl.TLSVersion.TLSv1_2))
    assert not any(caught.value.has_error_label(label) for label in OVERLOAD_LABELS)


async def test_a_refused_certificate_under_tls_1_3_is_not_taken_for_overload(
    server_port: int, pki: dict[str, str]
) -> None:
    options = TLSOptions(ca_file=pki["ca"], certificate_key_file=pki["foreign_client"])
    # The server sometimes resets the socket before its alert is read (a reset may well be overload): try
    # until the alert itself comes through.
    for _attempt in range(20):
        with pytest.raises(AutoReconnect) as caught:
            await establish(("127.0.0.1", server_port), settings(options, ssl.TLSVersion.TLSv1_3))
        if "UNKNOWN_CA" in str(caught.value):
            break
    else:
        pytest.fail(f"20 refusals, none with the server's alert; the last: {caught.value}")
    assert not any(caught.value.has_error_label(label) for label in OVERLOAD_LABELS)


async def test_an_encrypted_client_key_with_its_password(server_port: int, pki: dict[str, str]) -> None:
    options = TLSOptions(
        ca_file=pki["ca"],
        certificate_key_file=pki["encrypted_client"],
        certificate_key_file_password=KEY_PASSWORD,
    )
    assert KEY_PASSWORD not in repr(options)
    conn = await establish(("127.0.0.1", server_port), settings(options))
    try:
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
    finally:
        conn.close()


def test_an_encrypted_client_key_with_a_wrong_password_is_a_configuration_error(
    pki: dict[str, str],
) -> None:
    wrong = "not-" + KEY_PASSWORD
    options = TLSOptions(
        ca_file=pki["ca"], certificate_key_file=pki["encrypted_client"], certificate_key_file_password=wrong
    )
    with pytest.raises(ConfigurationError) as caught:
        create_ssl_context(options)
    message = str(caught.value)
    assert "tlsCertificateKeyFilePassword" in message and pki["encrypted_client"] in message
    for text in (message, repr(caught.value), str(caught.value.__cause__)):
        assert wrong not in text and KEY_PASSWORD not in text


_LOAD_WITHOUT_PASSWORD = """
import sys
from mongio.connection import TLSOptions, create_ssl_context
from mongio.errors import ConfigurationError
try:
    create_ssl_context(TLSOptions(certificate_key_file=sys.argv[1]))
except ConfigurationError as exc:
    print("ConfigurationError:", exc)
"""


def test_an_encrypted_client_key_without_a_password_fails_without_prompting(pki: dict[str, str]) -> None:
    # In a child process with no terminal and an empty stdin, so a prompt cannot hang the test run.
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_PASSWORD, pki["encrypted_client"]],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert "ConfigurationError: tlsCertificateKeyFile" in result.stdout, result.stdout + result.stderr
    assert "pass phrase" not in result.stdout + result.stderr
