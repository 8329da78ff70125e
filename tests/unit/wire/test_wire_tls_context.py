"""TLS contexts built from the tls* options, checked with trustme certificates and in-memory handshakes."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from mongio.connection.tls import TLSOptions, create_ssl_context
from mongio.errors import ConfigurationError


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("tls")
    paths = {name: directory / f"{name}.pem" for name in ("ca", "client", "client_encrypted", "other_ca")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    trustme.CA().cert_pem.write_to_path(str(paths["other_ca"]))
    client = ca.issue_cert("client@example.com")
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    paths["client_encrypted"].write_bytes(
        encrypted + b"".join(blob.bytes() for blob in client.cert_chain_pems)
    )
    return paths


def server_context(ca: trustme.CA, *hostnames: str, require_client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(*hostnames).configure_cert(context)
    if require_client_cert:
        ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def handshake(client_context: ssl.SSLContext, server: ssl.SSLContext, server_hostname: str) -> ssl.SSLObject:
    """Run a TLS handshake between the two contexts in memory; returns the server's end."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(client_in, client_out, server_hostname=server_hostname)
    server_end = server.wrap_bio(server_in, server_out, server_side=True)
    client_done = server_done = False
    for _ in range(20):
        if not client_done:
            try:
                client.do_handshake()
                client_done = True
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        if not server_done:
            try:
                server_end.do_handshake()
                server_done = True
            except ssl.SSLWantReadError:
                pass
        client_in.write(server_out.read())
        if client_done and server_done:
            # TLS 1.3: the server learns the client's certificate verdict only once it reads application data.
            client.write(b"ping")
            server_in.write(client_out.read())
            assert server_end.read(4) == b"ping"
            return server_end
    raise AssertionError("the handshake did not finish")


def test_default_options_verify_certificates_and_hostnames(files: dict[str, Path], ca: trustme.CA) -> None:
    context = create_ssl_context(TLSOptions(ca_file=str(files["ca"])))
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    handshake(context, server_context(ca, "db.example.com"), "db.example.com")
    with pytest.raises(ssl.SSLCertVerificationError, match=r"Hostname mismatch|doesn't match"):
        handshake(context, server_context(ca, "other.example.com"), "db.example.com")


def test_an_untrusted_ca_is_rejected(files: dict[str, Path], ca: trustme.CA) -> None:
    context = create_ssl_context(TLSOptions(ca_file=str(files["other_ca"])))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(context, server_context(ca, "db.example.com"), "db.example.com")


def test_ip_address_identities_are_checked(files: dict[str, Path], ca: trustme.CA) -> None:
    context = create_ssl_context(TLSOptions(ca_file=str(files["ca"])))
    handshake(context, server_context(ca, "127.0.0.1"), "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, server_context(ca, "127.0.0.2"), "127.0.0.1")


def test_allow_invalid_hostnames_still_requires_a_trusted_chain(
    files: dict[str, Path], ca: trustme.CA
) -> None:
    context = create_ssl_context(TLSOptions(ca_file=str(files["ca"]), allow_invalid_hostnames=True))
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, False)
    handshake(context, server_context(ca, "other.example.com"), "db.example.com")
    untrusted = create_ssl_context(TLSOptions(ca_file=str(files["other_ca"]), allow_invalid_hostnames=True))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(untrusted, server_context(ca, "other.example.com"), "db.example.com")


@pytest.mark.parametrize(
    "options",
    [TLSOptions(allow_invalid_certificates=True), TLSOptions(insecure=True)],
    ids=["tlsAllowInvalidCertificates", "tlsInsecure"],
)
def test_invalid_certificates_allowed(options: TLSOptions, files: dict[str, Path], ca: trustme.CA) -> None:
    context = create_ssl_context(options)
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_NONE, False)
    # Neither the CA (not loaded at all) nor the hostname matter any more.
    handshake(context, server_context(ca, "other.example.com"), "db.example.com")


@pytest.mark.parametrize(("key_file", "password"), [("client", None), ("client_encrypted", "s3cret")])
def test_client_certificate_is_presented(
    key_file: str, password: str | None, files: dict[str, Path], ca: trustme.CA
) -> None:
    context = create_ssl_context(
        TLSOptions(
            ca_file=str(files["ca"]),
            certificate_key_file=str(files[key_file]),
            certificate_key_file_password=password,
        )
    )
    server_end = handshake(
        context, server_context(ca, "db.example.com", require_client_cert=True), "db.example.com"
    )
    peer = server_end.getpeercert()
    assert peer is not None
    assert ("email", "client@example.com") in peer["subjectAltName"]


def test_missing_client_certificate_is_refused_by_a_server_that_requires_one(
    files: dict[str, Path], ca: trustme.CA
) -> None:
    context = create_ssl_context(TLSOptions(ca_file=str(files["ca"])))
    with pytest.raises(ssl.SSLError):
        handshake(context, server_context(ca, "db.example.com", require_client_cert=True), "db.example.com")


def test_wrong_key_password_is_a_configuration_error(files: dict[str, Path]) -> None:
    with pytest.raises(ConfigurationError, match="tlsCertificateKeyFile"):
        create_ssl_context(
            TLSOptions(
                certificate_key_file=str(files["client_encrypted"]), certificate_key_file_password="wrong"
            )
        )


def test_missing_ca_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="tlsCAFile"):
        create_ssl_context(TLSOptions(ca_file=str(tmp_path / "nope.pem")))


def test_no_ca_file_uses_the_system_store() -> None:
    context = create_ssl_context(TLSOptions())
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True


def _crl_revoking(ca: trustme.CA, revoked_serials: list[int], path: Path) -> str:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(now - datetime.timedelta(minutes=1))
        .next_update(now + datetime.timedelta(days=1))
    )
    for serial in revoked_serials:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build()
        )
    crl = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    return str(path)


def test_crl_file_refuses_a_revoked_server_certificate(
    files: dict[str, Path], ca: trustme.CA, tmp_path: Path
) -> None:
    from cryptography import x509

    revoked = ca.issue_cert("revoked.example")
    revoked_serial = x509.load_pem_x509_certificate(revoked.cert_chain_pems[0].bytes()).serial_number
    crl_file = _crl_revoking(ca, [revoked_serial], tmp_path / "crl.pem")
    client = create_ssl_context(TLSOptions(ca_file=str(files["ca"]), crl_file=crl_file))

    good_server = server_context(ca, "good.example")
    handshake(client, good_server, "good.example")  # not on the list: accepted

    bad_server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    revoked.configure_cert(bad_server)
    with pytest.raises(ssl.SSLCertVerificationError, match="revoked"):
        handshake(client, bad_server, "revoked.example")


def test_unreadable_crl_file_names_the_option(files: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="tlsCRLFile"):
        create_ssl_context(TLSOptions(ca_file=str(files["ca"]), crl_file=str(tmp_path / "missing.pem")))
