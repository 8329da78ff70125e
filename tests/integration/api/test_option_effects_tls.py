"""The tls* options of a client decide whom it trusts and what it presents: shown against TLS loopback peers.

Each client is built from a connection string as an application builds it; a refused handshake shows as a
server selection timeout naming the certificate problem.
"""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from mongio import MongoClient
from mongio.errors import ServerSelectionTimeoutError
from tests.support.loopback_peer import LoopbackPeer

KEY_PASSWORD = "s3cret"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pki(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("option-tls")
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    client = ca.issue_cert("client@example.com")
    client_file = directory / "client.pem"
    client.private_key_and_cert_chain_pem.write_to_path(str(client_file))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    )
    encrypted_file = directory / "client-encrypted.pem"
    encrypted_file.write_bytes(encrypted + b"".join(blob.bytes() for blob in client.cert_chain_pems))
    return {"ca": str(ca_file), "client": str(client_file), "encrypted": str(encrypted_file)}


def peer_context(cert: trustme.LeafCert, ca: trustme.CA | None = None) -> ssl.SSLContext:
    """A server context presenting ``cert``; with ``ca``, it requires a client certificate issued by it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)
    if ca is not None:
        ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def ping(peer: LoopbackPeer, query: str, **kwargs: Any) -> None:
    """Ping ``peer`` with a client made from ``peer.uri`` plus ``query``; selection gives up after 2 s."""
    client = MongoClient(f"{peer.uri}?serverSelectionTimeoutMS=2000&{query}", **kwargs)
    try:
        await client.admin.command("ping")
    finally:
        await client.close()


def crl_revoking(ca: trustme.CA, cert: trustme.LeafCert, path: Path) -> str:
    """A PEM certificate revocation list of ``ca`` that revokes ``cert``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    serial = x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).serial_number
    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    now = datetime.datetime.now(datetime.UTC)
    revoked = x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build()
    crl = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(now - datetime.timedelta(minutes=1))
        .next_update(now + datetime.timedelta(days=1))
        .add_revoked_certificate(revoked)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    return str(path)


async def test_tls_and_its_alias_ssl_turn_encryption_on(ca: trustme.CA, pki: dict[str, str]) -> None:
    async with LoopbackPeer(ssl=peer_context(ca.issue_cert("127.0.0.1"))) as peer:
        with pytest.raises(ServerSelectionTimeoutError):
            await ping(peer, "tls=false")  # plain bytes to a TLS server: no handshake completes
        await ping(peer, f"tls=true&tlsCAFile={quote(pki['ca'])}")
        await ping(peer, f"ssl=true&tlsCAFile={quote(pki['ca'])}")
    assert len(peer.commands("ping")) == 2


async def test_ca_file_decides_which_servers_are_trusted(ca: trustme.CA, pki: dict[str, str]) -> None:
    async with LoopbackPeer(ssl=peer_context(ca.issue_cert("127.0.0.1"))) as peer:
        with pytest.raises(ServerSelectionTimeoutError, match="certificate"):
            await ping(peer, "tls=true")  # the system's CAs do not know the test CA
        await ping(peer, f"tlsCAFile={quote(pki['ca'])}")
    assert len(peer.commands("ping")) == 1


async def test_allow_invalid_hostnames_accepts_a_trusted_certificate_for_another_name(
    ca: trustme.CA, pki: dict[str, str]
) -> None:
    async with LoopbackPeer(ssl=peer_context(ca.issue_cert("db.example.com"))) as peer:
        with pytest.raises(ServerSelectionTimeoutError, match=r"mismatch|match"):
            await ping(peer, f"tlsCAFile={quote(pki['ca'])}")
        await ping(peer, f"tlsCAFile={quote(pki['ca'])}&tlsAllowInvalidHostnames=true")
    async with LoopbackPeer(ssl=peer_context(trustme.CA().issue_cert("127.0.0.1"))) as untrusted:
        with pytest.raises(ServerSelectionTimeoutError, match="certificate"):
            await ping(untrusted, f"tlsCAFile={quote(pki['ca'])}&tlsAllowInvalidHostnames=true")


@pytest.mark.parametrize("relaxation", ["tlsAllowInvalidCertificates=true", "tlsInsecure=true"])
async def test_allow_invalid_certificates_and_insecure_accept_an_untrusted_server(
    relaxation: str, pki: dict[str, str]
) -> None:
    async with LoopbackPeer(ssl=peer_context(trustme.CA().issue_cert("db.example.com"))) as peer:
        with pytest.raises(ServerSelectionTimeoutError, match="certificate"):
            await ping(peer, f"tlsCAFile={quote(pki['ca'])}")
        await ping(peer, f"tlsCAFile={quote(pki['ca'])}&{relaxation}")
    assert len(peer.commands("ping")) == 1


async def test_certificate_key_file_and_its_password_present_the_client_certificate(
    ca: trustme.CA, pki: dict[str, str]
) -> None:
    async with LoopbackPeer(ssl=peer_context(ca.issue_cert("127.0.0.1"), ca)) as peer:
        with pytest.raises(ServerSelectionTimeoutError):
            await ping(peer, f"tlsCAFile={quote(pki['ca'])}")  # no certificate: the peer refuses
        await ping(peer, f"tlsCAFile={quote(pki['ca'])}&tlsCertificateKeyFile={quote(pki['client'])}")
        await ping(
            peer,
            f"tlsCAFile={quote(pki['ca'])}&tlsCertificateKeyFile={quote(pki['encrypted'])}",
            tlsCertificateKeyFilePassword=KEY_PASSWORD,
        )
    assert len(peer.commands("ping")) == 2  # the peer requires a certificate of its CA: both were presented


async def test_crl_file_refuses_a_revoked_server_certificate(
    ca: trustme.CA, pki: dict[str, str], tmp_path: Path
) -> None:
    revoked = ca.issue_cert("127.0.0.1")
    crl_file = crl_revoking(ca, revoked, tmp_path / "crl.pem")
    async with LoopbackPeer(ssl=peer_context(revoked)) as peer:
        await ping(peer, f"tlsCAFile={quote(pki['ca'])}")  # without the list the certificate is fine
        with pytest.raises(ServerSelectionTimeoutError, match="revoked"):
            await ping(peer, f"tlsCAFile={quote(pki['ca'])}&tlsCRLFile={quote(crl_file)}")
    assert len(peer.commands("ping")) == 1
