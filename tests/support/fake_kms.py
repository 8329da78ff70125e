"""A fake AWS KMS on 127.0.0.1 over TLS (a ``trustme`` certificate authority), for the encryption tests.

It answers ``TrentService.Encrypt`` and ``TrentService.Decrypt`` as AWS KMS does, with JSON bodies: the
"ciphertext" of a data key is the plaintext XORed with a fixed pad and prefixed with the key's ARN, so a
decryption with the wrong key ARN fails like a real one. Knobs make it drop connections
(``drop_connections``: that many connections are closed before an answer) or answer HTTP 500
(``server_errors``), for libmongocrypt's retries; ``requests`` counts the requests answered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from dataclasses import dataclass, field
from typing import Any

import trustme

__all__ = ["FakeAwsKms", "KmsCertificates"]

_PAD = bytes(range(256)) * 2
_MAX_BODY = 1 << 16


def _scramble(data: bytes) -> bytes:
    return bytes(byte ^ _PAD[index % len(_PAD)] for index, byte in enumerate(data))


@dataclass
class KmsCertificates:
    """A certificate authority and the KMS's certificate for ``127.0.0.1`` and ``localhost``, as files."""

    ca_file: str
    server_context: ssl.SSLContext

    @classmethod
    def make(cls, directory: str, *, names: tuple[str, ...] = ("127.0.0.1", "localhost")) -> KmsCertificates:
        authority = trustme.CA()
        ca_file = f"{directory}/kms-ca.pem"
        authority.cert_pem.write_to_path(ca_file)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert(*names).configure_cert(context)
        return cls(ca_file, context)


@dataclass
class FakeAwsKms:
    """The fake KMS; ``async with`` serves it, :attr:`endpoint` is its ``host:port``."""

    certificates: KmsCertificates
    drop_connections: int = 0
    server_errors: int = 0
    requests: int = 0
    bodies: list[bytes] = field(default_factory=list, repr=False)
    headers: list[bytes] = field(default_factory=list, repr=False)
    _server: asyncio.Server | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    async def __aenter__(self) -> FakeAwsKms:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self.certificates.server_context
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.drop_connections > 0:
                self.drop_connections -= 1
                return
            head = await reader.readuntil(b"\r\n\r\n")
            self.headers.append(head)
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (
                    line.partition(":") for line in head.decode("latin-1").split("\r\n")[1:]
                )
            }
            length = min(int(headers.get("content-length", "0")), _MAX_BODY)
            body = await reader.readexactly(length)
            self.requests += 1
            self.bodies.append(body)
            if self.server_errors > 0:
                self.server_errors -= 1
                writer.write(_response(500, {"__type": "InternalFailure"}))
            else:
                writer.write(_answer(headers.get("x-amz-target", ""), json.loads(body)))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError, ValueError):
            pass  # a client that went away, or a request this fake cannot read: the connection closes
        finally:
            writer.close()


def _response(status: int, document: dict[str, Any]) -> bytes:
    body = json.dumps(document).encode()
    reason = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _answer(target: str, request: dict[str, Any]) -> bytes:
    if target.endswith(".Encrypt"):
        key_id = request["KeyId"].encode()
        blob = len(key_id).to_bytes(2, "big") + key_id + _scramble(base64.b64decode(request["Plaintext"]))
        return _response(200, {"CiphertextBlob": base64.b64encode(blob).decode(), "KeyId": request["KeyId"]})
    if target.endswith(".Decrypt"):
        blob = base64.b64decode(request["CiphertextBlob"])
        size = int.from_bytes(blob[:2], "big")
        key_id, scrambled = blob[2 : 2 + size].decode(), blob[2 + size :]
        return _response(200, {"Plaintext": base64.b64encode(_scramble(scrambled)).decode(), "KeyId": key_id})
    return _response(400, {"__type": "UnknownOperationException"})
