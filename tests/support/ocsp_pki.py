"""A certificate authority and an OCSP responder of our own, on loopback, built with ``cryptography``.

:class:`Authority` is a CA (RSA or ECDSA) issuing server certificates whose Authority Information Access
extension points at a responder URL (optionally with the Must-Staple extension), an intermediate CA, and
delegated responder certificates. :class:`Responder` is an asyncio HTTP server answering OCSP requests as
told: good, revoked, unknown, a malformed body, no answer at all, signed by the CA, by a delegate, or by a
stranger (entered from trio, it runs on an asyncio loop in a thread: ``tests.support.backends.AsyncioServer``). :func:`tls_test_server` starts the test server (SecantusDB) with TLS and a given certificate.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import ipaddress
import ssl
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, NameOID
from spec_runner.raw_wire import decode_op_msg, encode_op_msg
from spec_runner.server import find_server_program, free_port

from tests.support.backends import AsyncioServer

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

STARTUP_TIMEOUT = 60.0


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def new_key(kind: str) -> PrivateKey:
    """A fresh private key: ``"rsa"`` (2048 bits) or ``"ecdsa"`` (P-256)."""
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if kind == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"unknown key kind {kind!r}")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


class Authority:
    """A certificate authority (a root, or an intermediate when ``parent`` is given)."""

    issued: Issued
    parent: Authority | None

    def __init__(
        self, kind: str = "ecdsa", *, name: str = "mongio OCSP test CA", parent: Authority | None = None
    ) -> None:
        self.kind = kind
        key = new_key(kind)
        now = _utc_now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(parent.issued.cert.subject if parent else _name(name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        )
        signer = parent.issued.key if parent else key
        self.issued = Issued(builder.sign(signer, hashes.SHA256()), key)
        self.parent = parent

    @property
    def cert(self) -> x509.Certificate:
        return self.issued.cert

    def _leaf_builder(self, common_name: str, key: PrivateKey) -> x509.CertificateBuilder:
        now = _utc_now()
        return (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.issued.key.public_key()),
                critical=False,
            )
        )

    def issue_server(self, responder_urls: list[str], *, must_staple: bool = False) -> Issued:
        """A server certificate for localhost and 127.0.0.1 whose AIA names ``responder_urls`` (none: no AIA)."""
        key = new_key(self.kind)
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]
        builder = self._leaf_builder("localhost", key).add_extension(
            x509.SubjectAlternativeName(names), critical=False
        )
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        if responder_urls:
            builder = builder.add_extension(
                x509.AuthorityInformationAccess(
                    [
                        x509.AccessDescription(
                            AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(url)
                        )
                        for url in responder_urls
                    ]
                ),
                critical=False,
            )
        if must_staple:
            builder = builder.add_extension(
                x509.TLSFeature([x509.TLSFeatureType.status_request]), critical=False
            )
        return Issued(builder.sign(self.issued.key, hashes.SHA256()), key)

    def issue_delegate(self, *, ocsp_signing: bool = True) -> Issued:
        """A responder certificate for delegated OCSP signing (without the usage when ``ocsp_signing`` is false)."""
        key = new_key(self.kind)
        usage = ExtendedKeyUsageOID.OCSP_SIGNING if ocsp_signing else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = self._leaf_builder("mongio OCSP test responder", key).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        return Issued(builder.sign(self.issued.key, hashes.SHA256()), key)


class Answer(enum.Enum):
    """What the responder answers."""

    GOOD = "good"
    REVOKED = "revoked"
    UNKNOWN = "unknown"
    MALFORMED = "malformed"  # a 200 whose body is not an OCSP response
    SILENT = "silent"  # reads the request and never answers
    TRY_LATER = "try-later"  # an OCSP error status


@dataclass
class Responder(AsyncioServer):
    """An OCSP responder on 127.0.0.1 for the certificates ``authority`` issued; use ``async with``.

    ``signer`` signs the answers (the authority by default; a delegate, or a stranger's certificate, to test
    what the client accepts). ``next_update`` is how long an answer stays valid (None: no nextUpdate).
    ``requests`` counts the OCSP requests received.
    """

    authority: Authority
    answer: Answer = Answer.GOOD
    signer: Issued | None = None
    next_update: datetime.timedelta | None = datetime.timedelta(hours=1)
    requests: int = 0
    _server: asyncio.Server | None = field(default=None, repr=False)
    _hanging: set[asyncio.StreamWriter] = field(default_factory=set, repr=False)

    @property
    def url(self) -> str:
        assert self._server is not None, "the responder is not started"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/ocsp"

    async def start(self) -> Responder:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._hanging:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = await reader.readexactly(length)
            self.requests += 1
            if self.answer is Answer.SILENT:
                self._hanging.add(writer)
                return
            payload = self.respond_to(body)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/ocsp-response\r\n"
                + f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        writer.close()

    def respond_to(self, request_der: bytes) -> bytes:
        """The DER answer to ``request_der`` according to ``answer`` and ``signer``."""
        if self.answer is Answer.MALFORMED:
            return b"\x30\x03this is not an OCSP response"
        if self.answer is Answer.TRY_LATER:
            return ocsp.OCSPResponseBuilder.build_unsuccessful(
                ocsp.OCSPResponseStatus.TRY_LATER
            ).public_bytes(serialization.Encoding.DER)
        request = ocsp.load_der_ocsp_request(request_der)
        now = _utc_now()
        status = {
            Answer.GOOD: ocsp.OCSPCertStatus.GOOD,
            Answer.REVOKED: ocsp.OCSPCertStatus.REVOKED,
            Answer.UNKNOWN: ocsp.OCSPCertStatus.UNKNOWN,
        }[self.answer]
        revoked = status is ocsp.OCSPCertStatus.REVOKED
        signer = self.signer or self.authority.issued
        builder = (
            ocsp.OCSPResponseBuilder()
            .add_response_by_hash(
                issuer_name_hash=request.issuer_name_hash,
                issuer_key_hash=request.issuer_key_hash,
                serial_number=request.serial_number,
                algorithm=request.hash_algorithm,
                cert_status=status,
                this_update=now - datetime.timedelta(minutes=1),
                next_update=now + self.next_update if self.next_update is not None else None,
                revocation_time=now - datetime.timedelta(hours=1) if revoked else None,
                revocation_reason=x509.ReasonFlags.key_compromise if revoked else None,
            )
            .responder_id(ocsp.OCSPResponderEncoding.HASH, signer.cert)
        )
        if signer is not self.authority.issued:
            builder = builder.certificates([signer.cert])
        return builder.sign(signer.key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def unreachable_url() -> str:
    """An http:// URL on a loopback port nothing listens on (connections are refused)."""
    return f"http://127.0.0.1:{free_port()}/ocsp"


@dataclass(frozen=True)
class ServerFiles:
    """PEM files for a TLS test server and its clients."""

    cert_chain: Path
    key: Path
    ca: Path


def write_server_files(
    directory: Path, server: Issued, authority: Authority, *, ca_file_holds: list[Authority] | None = None
) -> ServerFiles:
    """The server's certificate (followed by ``authority``'s own when it is an intermediate), its key, and a
    CA file holding ``ca_file_holds`` (the root of ``authority`` by default)."""
    chain = server.cert_pem
    if authority.parent is not None:
        chain += authority.issued.cert_pem
    root = authority
    while root.parent is not None:
        root = root.parent
    files = ServerFiles(directory / "server.pem", directory / "server.key", directory / "ca.pem")
    files.cert_chain.write_bytes(chain)
    files.key.write_bytes(server.key_pem)
    files.ca.write_bytes(b"".join(held.issued.cert_pem for held in (ca_file_holds or [root])))
    return files


async def _answers_over_tls(port: int, ca_file: Path) -> bool:
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost"
        )
    except (OSError, ssl.SSLError):
        return False
    try:
        writer.write(encode_op_msg({"ping": 1, "$db": "admin"}, 1))
        header = await reader.readexactly(4)
        message = header + await reader.readexactly(int.from_bytes(header, "little") - 4)
        return decode_op_msg(message)[1].get("ok") == 1
    except (OSError, ValueError, asyncio.IncompleteReadError):
        return False
    finally:
        writer.close()


@asynccontextmanager
async def tls_test_server(files: ServerFiles) -> AsyncIterator[int]:
    """SecantusDB speaking TLS only with ``files``' certificate, on a free port (yielded) until the block ends."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = await asyncio.create_subprocess_exec(
            find_server_program(),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--storage-path", ":memory:",
            "--tls-cert-file", str(files.cert_chain),
            "--tls-key-file", str(files.key),
            "--tls-ca-file", str(files.ca),
            stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT):
                while not await _answers_over_tls(port, files.ca):
                    if process.returncode is not None:
                        log.seek(0)
                        raise RuntimeError(
                            f"TLS test server exited: {log.read()[-2000:].decode(errors='replace')}"
                        )
                    await asyncio.sleep(0.1)
            yield port
        finally:
            if process.returncode is None:
                process.terminate()
                with suppress(TimeoutError):
                    async with asyncio.timeout(15):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
