"""A fake cloud KMS on 127.0.0.1 over TLS (a ``trustme`` certificate authority), for the encryption tests: one
HTTPS server answering what libmongocrypt asks of AWS KMS, Azure Key Vault and Google Cloud KMS, with the
identity endpoints of the last two.

- AWS (``X-Amz-Target: TrentService.Encrypt`` / ``.Decrypt``, JSON bodies);
- Azure: the Microsoft identity platform's token endpoint (``POST /{tenant}/oauth2/v2.0/token``, client
  credentials) and Key Vault's ``wrapkey`` / ``unwrapkey`` (``POST /keys/{name}[/{version}]/...``, with the
  bearer token the identity endpoint handed out);
- GCP: Google's OAuth token endpoint (``POST /token``, a signed JWT assertion) and Cloud KMS's ``:encrypt`` /
  ``:decrypt`` (``POST /v1/projects/.../cryptoKeys/{name}:encrypt``, with the bearer token).

Configure a provider's endpoints (``identityPlatformEndpoint``, ``keyVaultEndpoint``, GCP's ``endpoint`` on
both the provider and the master key, AWS's master key ``endpoint``) as :attr:`FakeCloudKms.endpoint`.

The "ciphertext" of a data key is the plaintext XORed with a fixed pad, prefixed with the identity of the
master key that wrapped it (AWS's key ARN, Azure's key name, GCP's key path), so an unwrap with another master
key, or of a blob naming a key this KMS never wrapped with, fails as a real KMS would. Knobs make it drop
connections (``drop_connections``: that many connections are closed before an answer; ``reset_connections``:
that many are reset, TCP RST, once their request is read, as a KMS refusing a TLS 1.3 client late may do),
answer HTTP 500 (``server_errors``), refuse every credential (``refuse_credentials``: HTTP 401/400 as each
cloud answers) or stall (``hang``). ``requests`` counts the requests answered and ``seen`` keeps each one
(method, target, headers, body).

It is an :class:`~tests.support.backends.AsyncioServer`: a test on trio serves it from an asyncio loop in a
thread.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import functools
import json
import re
import socket
import ssl
import struct
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import trustme

from tests.support.backends import AsyncioServer

__all__ = [
    "AZURE_TOKEN",
    "GCP_TOKEN",
    "FakeCloudKms",
    "KmsCertificates",
    "SeenRequest",
    "gcp_private_key",
    "kms_credentials",
    "kms_master_key",
]

_PAD = bytes(range(256)) * 2
_MAX_HEAD = 1 << 14
_MAX_BODY = 1 << 16
AZURE_TOKEN = "fake-azure-bearer-token"
GCP_TOKEN = "fake-gcp-bearer-token"
_AZURE_TOKEN_PATH = re.compile(r"^/[^/]+/oauth2/v2\.0/token$")
_AZURE_KEY_PATH = re.compile(r"^/keys/(?P<key>[^/]+)(?:/[^/]*)?/(?P<verb>wrapkey|unwrapkey)$")
_GCP_KEY_PATH = re.compile(
    r"^/v1/(?P<key>projects/[^:]+/cryptoKeys/[^:/]+)(?:/cryptoKeyVersions/[^:]+)?:(?P<verb>encrypt|decrypt)$"
)


def _scramble(data: bytes) -> bytes:
    return bytes(byte ^ _PAD[index % len(_PAD)] for index, byte in enumerate(data))


def _wrap(identity: str, plaintext: bytes) -> bytes:
    name = identity.encode()
    return len(name).to_bytes(2, "big") + name + _scramble(plaintext)


def _unwrap(identity: str, blob: bytes) -> bytes | None:
    """The plaintext ``blob`` wraps, or None when another master key (or nothing valid) wrapped it."""
    size = int.from_bytes(blob[:2], "big")
    if len(blob) < 2 + size or blob[2 : 2 + size] != identity.encode():
        return None
    return _scramble(blob[2 + size :])


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def gcp_private_key() -> str:
    """A new RSA private key as GCP's ``privateKey`` option takes it (base64 of its PKCS#8 DER form):
    libmongocrypt signs the token request's JWT with it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    der = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return base64.b64encode(der).decode()


@functools.cache
def _test_gcp_private_key() -> str:
    return gcp_private_key()


def kms_credentials(provider: str, endpoint: str) -> dict[str, Any]:
    """The provider's credentials, its identity endpoint (Azure, GCP) at ``endpoint``."""
    kind = provider.partition(":")[0]
    if kind == "aws":
        return {"accessKeyId": "AKIAFAKE", "secretAccessKey": "fake-secret"}
    if kind == "azure":
        return {
            "tenantId": "tenant",
            "clientId": "client",
            "clientSecret": "fake-client-secret",
            "identityPlatformEndpoint": endpoint,
        }
    if kind == "gcp":
        return {
            "email": "fake@example.iam.gserviceaccount.com",
            "privateKey": _test_gcp_private_key(),
            "endpoint": endpoint,
        }
    return {"key": bytes(range(96))}


def kms_master_key(provider: str, endpoint: str) -> dict[str, Any] | None:
    """A master key of the provider, its KMS at ``endpoint``."""
    kind = provider.partition(":")[0]
    if kind == "aws":
        return {
            "region": "us-east-1",
            "key": "arn:aws:kms:us-east-1:579766882180:key/fake",
            "endpoint": endpoint,
        }
    if kind == "azure":
        return {"keyVaultEndpoint": endpoint, "keyName": "key-name-csfle"}
    if kind == "gcp":
        return {
            "projectId": "devprod-drivers",
            "location": "global",
            "keyRing": "key-ring-csfle",
            "keyName": "key-name-csfle",
            "endpoint": endpoint,
        }
    return None


@dataclass
class KmsCertificates:
    """A certificate authority (``ca_file``; a new one unless ``authority`` is given), a client certificate
    and key it issued (``client_file``), and the KMS's TLS context: a certificate for ``names``, expired if
    asked, and a demand for a client certificate if asked."""

    ca_file: str
    client_file: str
    server_context: ssl.SSLContext

    @classmethod
    def make(
        cls,
        directory: str,
        *,
        authority: trustme.CA | None = None,
        names: tuple[str, ...] = ("127.0.0.1", "localhost"),
        expired: bool = False,
        require_client_certificate: bool = False,
    ) -> KmsCertificates:
        authority = authority or trustme.CA()
        ca_file = f"{directory}/kms-ca.pem"
        client_file = f"{directory}/kms-client.pem"
        authority.cert_pem.write_to_path(ca_file)
        client = authority.issue_cert("kms-client", common_name="kms-client")
        with open(client_file, "wb") as handle:
            handle.write(client.private_key_pem.bytes() + client.cert_chain_pems[0].bytes())
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if expired:
            past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=2)
            server = authority.issue_cert(
                *names, not_before=past - datetime.timedelta(days=30), not_after=past
            )
        else:
            server = authority.issue_cert(*names)
        server.configure_cert(context)
        if require_client_certificate:
            authority.configure_trust(context)
            context.verify_mode = ssl.CERT_REQUIRED
        return cls(ca_file, client_file, context)


@dataclass(frozen=True)
class SeenRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeCloudKms(AsyncioServer):
    """The fake KMS; ``async with`` serves it, :attr:`endpoint` is its ``host:port``."""

    certificates: KmsCertificates
    drop_connections: int = 0
    reset_connections: int = 0
    server_errors: int = 0
    refuse_credentials: bool = False
    hang: bool = False
    """Read each request and never answer it (a stalled KMS), until the fake stops."""
    bearer_tokens: tuple[str, ...] = (AZURE_TOKEN, GCP_TOKEN)
    """The tokens Key Vault and Cloud KMS accept: the identity endpoints' (on-demand credentials bring
    others)."""
    requests: int = 0
    seen: list[SeenRequest] = field(default_factory=list, repr=False)
    _server: asyncio.Server | None = field(default=None, repr=False)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _aws_keys: set[str] = field(default_factory=set, repr=False)

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    def targets(self) -> list[str]:
        """The request targets answered, in order."""
        return [request.target for request in self.seen]

    async def start(self) -> FakeCloudKms:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self.certificates.server_context
        )
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._stopping.set()
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.drop_connections > 0:
                self.drop_connections -= 1
                return
            request = await _read_request(reader)
            if self.reset_connections > 0:
                self.reset_connections -= 1
                _reset(writer)
                return
            self.requests += 1
            self.seen.append(request)
            if self.hang:
                await self._stopping.wait()
                return
            if self.server_errors > 0:
                self.server_errors -= 1
                writer.write(_response(500, {"error": "InternalFailure"}))
            else:
                writer.write(self._answer(request))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError, ValueError):
            pass  # a client that went away, or a request this fake cannot read: the connection closes
        finally:
            writer.close()

    def _answer(self, request: SeenRequest) -> bytes:
        path = request.target.partition("?")[0]
        if "x-amz-target" in request.headers:
            return self._aws(request.headers["x-amz-target"], json.loads(request.body))
        if _AZURE_TOKEN_PATH.match(path):
            return self._azure_token(urllib.parse.parse_qs(request.body.decode()))
        if path == "/token":
            return self._gcp_token(urllib.parse.parse_qs(request.body.decode()))
        if (match := _AZURE_KEY_PATH.match(path)) is not None:
            return self._azure_key(request, match["key"], match["verb"])
        if (match := _GCP_KEY_PATH.match(path)) is not None:
            return self._gcp_key(request, match["key"], match["verb"])
        return _response(404, {"error": "no such route"})

    def _aws(self, target: str, body: dict[str, Any]) -> bytes:
        if self.refuse_credentials:
            return _response(
                400, {"__type": "UnrecognizedClientException", "message": "invalid security token"}
            )
        if target.endswith(".Encrypt"):
            self._aws_keys.add(body["KeyId"])
            blob = _wrap(body["KeyId"], base64.b64decode(body["Plaintext"]))
            return _response(200, {"CiphertextBlob": base64.b64encode(blob).decode(), "KeyId": body["KeyId"]})
        if target.endswith(".Decrypt"):
            blob = base64.b64decode(body["CiphertextBlob"])
            identity = blob[2 : 2 + int.from_bytes(blob[:2], "big")].decode(errors="replace")
            plaintext = _unwrap(identity, blob) if identity in self._aws_keys else None
            if plaintext is None:
                return _response(400, {"__type": "InvalidCiphertextException", "message": "bad ciphertext"})
            return _response(200, {"Plaintext": base64.b64encode(plaintext).decode(), "KeyId": identity})
        return _response(400, {"__type": "UnknownOperationException"})

    def _azure_token(self, form: dict[str, list[str]]) -> bytes:
        if self.refuse_credentials or not form.get("client_secret") or not form.get("client_id"):
            return _response(401, {"error": "invalid_client", "error_description": "bad client credentials"})
        return _response(200, {"token_type": "Bearer", "expires_in": 3599, "access_token": AZURE_TOKEN})

    def _gcp_token(self, form: dict[str, list[str]]) -> bytes:
        assertion = form.get("assertion", [""])[0]
        if self.refuse_credentials or assertion.count(".") != 2:
            return _response(400, {"error": "invalid_grant", "error_description": "bad assertion"})
        return _response(200, {"token_type": "Bearer", "expires_in": 3599, "access_token": GCP_TOKEN})

    def _authorized(self, request: SeenRequest) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme == "Bearer" and token in self.bearer_tokens and not self.refuse_credentials

    def _azure_key(self, request: SeenRequest, key: str, verb: str) -> bytes:
        if not self._authorized(request):
            return _response(401, {"error": {"code": "Unauthorized", "message": "no valid bearer token"}})
        body = json.loads(request.body)
        if verb == "wrapkey":
            return _response(
                200, {"kid": key, "value": _b64url_encode(_wrap(key, _b64url_decode(body["value"])))}
            )
        plaintext = _unwrap(key, _b64url_decode(body["value"]))
        if plaintext is None:
            return _response(
                400, {"error": {"code": "BadParameter", "message": "the value was not wrapped by this key"}}
            )
        return _response(200, {"kid": key, "value": _b64url_encode(plaintext)})

    def _gcp_key(self, request: SeenRequest, key: str, verb: str) -> bytes:
        if not self._authorized(request):
            return _response(
                401, {"error": {"code": 401, "message": "no valid bearer token", "status": "UNAUTHENTICATED"}}
            )
        body = json.loads(request.body)
        if verb == "encrypt":
            blob = _wrap(key, base64.b64decode(body["plaintext"]))
            return _response(200, {"name": key, "ciphertext": base64.b64encode(blob).decode()})
        plaintext = _unwrap(key, base64.b64decode(body["ciphertext"]))
        if plaintext is None:
            return _response(
                400, {"error": {"code": 400, "message": "Decryption failed", "status": "INVALID_ARGUMENT"}}
            )
        return _response(200, {"plaintext": base64.b64encode(plaintext).decode()})


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP reset: no linger, so the kernel sends RST instead of FIN."""
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_request(reader: asyncio.StreamReader) -> SeenRequest:
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > _MAX_HEAD:
        raise ValueError("request head too long")
    request_line, *lines = head.decode("latin-1").strip().split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = {
        name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)
    }
    length = min(int(headers.get("content-length", "0")), _MAX_BODY)
    body = await reader.readexactly(length)
    return SeenRequest(method, target, headers, body)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    500: "Internal Server Error",
}


def _response(status: int, document: dict[str, Any]) -> bytes:
    body = json.dumps(document).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body
