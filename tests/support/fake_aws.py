"""Fakes of everything MONGODB-AWS talks to, on 127.0.0.1: the credential endpoints and a server.

:class:`FakeAwsEndpoints` is one HTTP server playing the EC2 instance metadata service (IMDSv2: token
``PUT``, role name, credentials), the ECS container credentials endpoint and STS
(``AssumeRoleWithWebIdentity`` and ``GetCallerIdentity``); each credential it hands out is new temporary
credentials registered with a :class:`KeyStore`. Knobs make it slow (``delay``), failing (``fail_status``),
hostile (``body``) or hand out credentials that expire soon (``expires_in``); ``hits`` counts requests by
route. It is an :class:`~tests.support.backends.AsyncioServer`: a test on trio serves it from an asyncio loop
in a thread.

:class:`FakeAwsMember` is a handler for :class:`~tests.support.loopback_peer.LoopbackPeer`: a standalone
server answering ``saslStart`` / ``saslContinue`` on ``$external`` for MONGODB-AWS through the cluster
harness's :class:`~spec_runner.cluster.aws_sasl.AwsSaslServer`, which recomputes the SigV4 signature with the
secret the key store holds (the harness's members answer the same way in front of the test server).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import secrets
import ssl
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from spec_runner.cluster.aws_sasl import (
    AwsConversation,
    AwsSaslServer,
    IssuedKey,
    KeyStore,
    ServerFirst,
    verify_get_caller_identity,
)

from tests.support.backends import AsyncioServer
from tests.support.loopback_peer import HandlerResult, Reply, Request

__all__ = [
    "FakeAwsEndpoints",
    "FakeAwsMember",
    "IssuedKey",
    "KeyStore",
    "ServerFirst",
    "verify_get_caller_identity",
]

# Every environment variable the AWS credential chain reads (mongio.connection.auth.aws_credentials): a test
# clears them all, so the machine's own AWS settings never reach it.
AWS_CHAIN_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)
ROLE_NAME = "fake-instance-role"
WEB_IDENTITY_TOKEN = "fake-oidc-id-token-Zm9vYmFy"
ECS_RELATIVE_URI = "/v2/credentials/fake-task-id"


@dataclass
class FakeAwsMember:
    """A ``LoopbackPeer`` handler: a standalone server that answers MONGODB-AWS conversations (through
    :class:`AwsSaslServer`) and ``find`` with an empty cursor."""

    keys: KeyStore
    delay: float = 0.0
    """Seconds before answering saslContinue (as a server waiting for STS would)."""
    sasl: AwsSaslServer = field(init=False)
    _conversations: dict[int, AwsConversation | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sasl = AwsSaslServer(self.keys)

    @property
    def accepted(self) -> list[str]:
        return self.sasl.accepted

    @property
    def refused(self) -> list[str]:
        return self.sasl.refused

    @property
    def server_first(self) -> ServerFirst:
        return self.sasl.server_first

    @server_first.setter
    def server_first(self, shape: ServerFirst) -> None:
        self.sasl.server_first = shape

    def __call__(self, request: Request) -> HandlerResult:
        name = request.command_name
        if name == "saslStart":
            if request.db != "$external":
                self.sasl.refused.append(f"saslStart on {request.db}")
                return {
                    "ok": 0,
                    "code": 18,
                    "codeName": "AuthenticationFailed",
                    "errmsg": "Authentication failed.",
                }
            reply, conversation = self.sasl.start(request.document)
            self._conversations[request.connection.index] = conversation
            return reply
        if name == "saslContinue":
            document = self.sasl.finish(
                self._conversations.pop(request.connection.index, None), request.document
            )
            return Reply(document, delay=self.delay) if self.delay else document
        if name == "find":
            return {"cursor": {"firstBatch": [], "id": 0, "ns": f"{request.db}.x"}, "ok": 1}
        return None


# -- the credential endpoints over HTTP -------------------------------------------------------------------------


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeAwsEndpoints(AsyncioServer):
    """IMDS, ECS and STS on one loopback HTTP(S) server; ``base`` is its ``http://127.0.0.1:port``."""

    def __init__(self, keys: KeyStore, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.keys = keys
        self.ssl_context = ssl_context
        self.delay = 0.0
        self.fail_status: int | None = None
        self.body: bytes | None = None
        """Answer every request with these bytes as the body (hostile or malformed answers)."""
        self.raw: bytes | None = None
        """Send these bytes as the whole answer (status line and headers included)."""
        self.expires_in = datetime.timedelta(hours=1)
        self.hits: Counter[str] = Counter()
        self.requests: list[HttpRequest] = []
        self.issued: list[IssuedKey] = []
        self._imds_token = "imds-token-" + secrets.token_hex(8)
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def base(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{port}"

    async def start(self) -> FakeAwsEndpoints:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            request = await self._read(reader)
            if request is not None:
                self.requests.append(request)
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(self._answer(request))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.CancelledError):
            pass  # the client hung up, or the endpoints are stopping
        finally:
            self._handlers.discard(task)
            writer.close()

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> HttpRequest | None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return HttpRequest(method, path, headers, body)

    def _answer(self, request: HttpRequest) -> bytes:
        if self.raw is not None:
            return self.raw
        status, body = self._route(request)
        if self.fail_status is not None:
            status, body = self.fail_status, b"failing on purpose"
        if self.body is not None:
            body = self.body
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
        return (
            f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\nContent-Length: {len(body)}\r\n"
            "Content-Type: application/json\r\nConnection: close\r\n\r\n"
        ).encode() + body

    def _credentials_json(self, token_field: str, **extra: Any) -> bytes:
        key = self.keys.issue(self.expires_in)
        self.issued.append(key)
        assert key.expiration is not None
        expiration = key.expiration.strftime("%Y-%m-%dT%H:%M:%SZ")
        document = {
            "AccessKeyId": key.access_key,
            "SecretAccessKey": key.secret_key,
            token_field: key.token,
            "Expiration": expiration,
            **extra,
        }
        return json.dumps(document).encode()

    def _route(self, request: HttpRequest) -> tuple[int, bytes]:
        path, method = request.path, request.method
        security = "/latest/meta-data/iam/security-credentials/"
        if method == "PUT" and path == "/latest/api/token":
            self.hits["imds-token"] += 1
            if "x-aws-ec2-metadata-token-ttl-seconds" not in request.headers:
                return 400, b"missing ttl"
            return 200, self._imds_token.encode()
        if method == "GET" and path.startswith(security):
            if request.headers.get("x-aws-ec2-metadata-token") != self._imds_token:
                self.hits["imds-unauthorized"] += 1
                return 401, b""
            role = path[len(security) :]
            if not role:
                self.hits["imds-role"] += 1
                return 200, ROLE_NAME.encode()
            self.hits["imds-credentials"] += 1
            if role != ROLE_NAME:
                return 404, b""
            return 200, self._credentials_json("Token", Code="Success", Type="AWS-HMAC")
        if method == "GET" and path == ECS_RELATIVE_URI:
            self.hits["ecs"] += 1
            return 200, self._credentials_json("Token", RoleArn="arn:aws:iam::123456789012:role/task")
        if method == "POST" and path == "/":
            return self._sts(request)
        self.hits["unknown"] += 1
        return 404, b""

    def _sts(self, request: HttpRequest) -> tuple[int, bytes]:
        form = {name: values[0] for name, values in parse_qs(request.body.decode()).items()}
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
            self.hits["sts-unknown"] += 1
            return 400, b"{}"
        self.hits["sts-web-identity"] += 1
        if form.get("WebIdentityToken") != WEB_IDENTITY_TOKEN or not form.get("RoleArn"):
            return 403, b'{"Error": {"Code": "AccessDenied"}}'
        if request.headers.get("accept") != "application/json":
            return 400, b"JSON only"
        credentials = json.loads(self._credentials_json("SessionToken"))
        key = self.issued[-1]
        assert key.expiration is not None
        credentials["Expiration"] = key.expiration.timestamp()
        result = {
            "AssumeRoleWithWebIdentityResponse": {
                "AssumeRoleWithWebIdentityResult": {
                    "Credentials": credentials,
                    "SubjectFromWebIdentityToken": "system:serviceaccount:default:app",
                    "AssumedRoleUser": {"Arn": form["RoleArn"] + "/" + form.get("RoleSessionName", "")},
                }
            }
        }
        return 200, json.dumps(result).encode()
