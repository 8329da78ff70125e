"""Fakes of everything MONGODB-AWS talks to, on 127.0.0.1: the credential endpoints and a server.

:class:`FakeAwsEndpoints` is one HTTP server playing the EC2 instance metadata service (IMDSv2: token
``PUT``, role name, credentials), the ECS container credentials endpoint and STS
(``AssumeRoleWithWebIdentity`` and ``GetCallerIdentity``); each credential it hands out is new temporary
credentials registered with a :class:`KeyStore`. Knobs make it slow (``delay``), failing (``fail_status``),
hostile (``body``) or hand out credentials that expire soon (``expires_in``); ``hits`` counts requests by
route.

:class:`FakeAwsMember` is a handler for :class:`~tests.support.loopback_peer.LoopbackPeer`: it answers
``saslStart`` / ``saslContinue`` on ``$external`` for MONGODB-AWS as a server would, checking the client nonce
and gs2-cb-flag, sending its own nonce and STS host, then recomputing the SigV4 signature of the client's
``GetCallerIdentity`` request with the secret the key store holds for the access key, and checking the
signed headers, date scope, region and session token. The signature is recomputed here, written apart from
mongio's signer so that the two check each other.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import json
import os
import secrets
import ssl
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from mongio.bson import decode, encode
from tests.support.loopback_peer import HandlerResult, Reply, Request

__all__ = ["FakeAwsEndpoints", "FakeAwsMember", "IssuedKey", "KeyStore", "ServerFirst"]

ROLE_NAME = "fake-instance-role"
WEB_IDENTITY_TOKEN = "fake-oidc-id-token-Zm9vYmFy"
ECS_RELATIVE_URI = "/v2/credentials/fake-task-id"


@dataclass(frozen=True)
class IssuedKey:
    access_key: str
    secret_key: str
    token: str | None
    expiration: datetime.datetime | None


class KeyStore:
    """The keys the fake STS knows: permanent ones added by the test, temporary ones the endpoints issue."""

    def __init__(self) -> None:
        self.keys: dict[str, IssuedKey] = {}

    def add(self, access_key: str, secret_key: str, token: str | None = None) -> IssuedKey:
        key = IssuedKey(access_key, secret_key, token, None)
        self.keys[access_key] = key
        return key

    def issue(self, expires_in: datetime.timedelta) -> IssuedKey:
        key = IssuedKey(
            "ASIA" + secrets.token_hex(8).upper(),
            "tmp-secret-" + secrets.token_urlsafe(24),
            "tmp-token-" + secrets.token_urlsafe(32),
            datetime.datetime.now(datetime.UTC) + expires_in,
        )
        self.keys[key.access_key] = key
        return key


# -- an independent SigV4 check of GetCallerIdentity ------------------------------------------------------------


def _hmac_sha256(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _expected_region(host: str) -> str:
    labels = host.split(".")
    if host == "sts.amazonaws.com" or len(labels) == 1:
        return "us-east-1"
    return labels[1]


def recompute_signature(
    secret_key: str, date: str, region: str, headers: Mapping[str, str], signed: str
) -> str:
    """The signature of ``POST /`` with the GetCallerIdentity body and ``headers`` (lower-case names)."""
    body = b"Action=GetCallerIdentity&Version=2011-06-15"
    canonical = "POST\n/\n\n"
    for name in signed.split(";"):
        canonical += name + ":" + headers[name] + "\n"
    canonical += "\n" + signed + "\n" + hashlib.sha256(body).hexdigest()
    scope = date[:8] + "/" + region + "/sts/aws4_request"
    to_sign = (
        "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hashlib.sha256(canonical.encode()).hexdigest()
    )
    key = ("AWS4" + secret_key).encode()
    for part in (date[:8], region, "sts", "aws4_request"):
        key = _hmac_sha256(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def verify_get_caller_identity(
    keys: KeyStore, authorization: Any, date: Any, token: Any, host: str, server_nonce: bytes
) -> str | None:
    """Why STS would refuse the signed request, or None when it would accept it."""
    if not isinstance(authorization, str) or not isinstance(date, str):
        return "missing Authorization or X-Amz-Date"
    algorithm, _, rest = authorization.partition(" ")
    fields = dict(part.strip().split("=", 1) for part in rest.split(",") if "=" in part)
    if algorithm != "AWS4-HMAC-SHA256" or set(fields) != {"Credential", "SignedHeaders", "Signature"}:
        return "malformed Authorization"
    access_key, _, scope = fields["Credential"].partition("/")
    key = keys.keys.get(access_key)
    if key is None:
        return "unknown access key"
    region = _expected_region(host)
    if scope != f"{date[:8]}/{region}/sts/aws4_request":
        return f"wrong credential scope {scope!r}"
    headers = {
        "content-length": "43",
        "content-type": "application/x-www-form-urlencoded",
        "host": host,
        "x-amz-date": date,
        "x-mongodb-gs2-cb-flag": "n",
        "x-mongodb-server-nonce": base64.b64encode(server_nonce).decode(),
    }
    if key.token is not None:
        if token != key.token:
            return "wrong or missing session token"
        headers["x-amz-security-token"] = key.token
    elif token is not None:
        return "a session token for permanent credentials"
    expected_signed = ";".join(sorted(headers))
    if fields["SignedHeaders"] != expected_signed:
        return f"wrong SignedHeaders {fields['SignedHeaders']!r}"
    if key.expiration is not None and key.expiration <= datetime.datetime.now(datetime.UTC):
        return "expired credentials"
    expected = recompute_signature(key.secret_key, date, region, headers, expected_signed)
    if not hmac.compare_digest(expected, fields["Signature"]):
        return "signature mismatch"
    return None


# -- the server side of the SASL conversation ------------------------------------------------------------------


@dataclass
class ServerFirst:
    """What the member sends in its first message; the defaults are what a real server sends."""

    host: str = "sts.amazonaws.com"
    nonce_size: int = 64
    keep_client_nonce: bool = True


@dataclass
class FakeAwsMember:
    """Answers MONGODB-AWS conversations (as a ``LoopbackPeer`` handler) and a few plain commands."""

    keys: KeyStore
    server_first: ServerFirst = field(default_factory=ServerFirst)
    delay: float = 0.0
    """Seconds before answering saslContinue (as a server waiting for STS would)."""
    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    _nonces: dict[int, tuple[bytes, str]] = field(default_factory=dict)

    def __call__(self, request: Request) -> HandlerResult:
        name = request.command_name
        if name == "saslStart":
            return self._start(request)
        if name == "saslContinue":
            return self._continue(request)
        if name == "find":
            return {"cursor": {"firstBatch": [], "id": 0, "ns": f"{request.db}.x"}, "ok": 1}
        return None

    def _refuse(self, reason: str) -> dict[str, Any]:
        self.refused.append(reason)
        return {"ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "Authentication failed."}

    def _start(self, request: Request) -> HandlerResult:
        document = request.document
        if request.db != "$external" or document.get("mechanism") != "MONGODB-AWS":
            return self._refuse(f"saslStart on {request.db} with {document.get('mechanism')}")
        client = decode(document["payload"])
        client_nonce = client.get("r")
        if not isinstance(client_nonce, bytes) or len(client_nonce) != 32 or client.get("p") != 110:
            return self._refuse("bad client first message")
        shape = self.server_first
        head = client_nonce if shape.keep_client_nonce else os.urandom(32)
        server_nonce = (head + os.urandom(64))[: shape.nonce_size]
        self._nonces[request.connection.index] = (server_nonce, shape.host)
        payload = encode({"s": server_nonce, "h": shape.host})
        return {"conversationId": 1, "done": False, "payload": payload, "ok": 1}

    def _continue(self, request: Request) -> HandlerResult:
        started = self._nonces.pop(request.connection.index, None)
        if started is None:
            return self._refuse("saslContinue without saslStart")
        server_nonce, host = started
        message = decode(request.document["payload"])
        reason = verify_get_caller_identity(
            self.keys, message.get("a"), message.get("d"), message.get("t"), host, server_nonce
        )
        document = (
            self._refuse(reason)
            if reason is not None
            else {"conversationId": 1, "done": True, "payload": b"", "ok": 1}
        )
        if reason is None:
            self.accepted.append(str(message["a"]).split("Credential=", 1)[1].split("/", 1)[0])
        return Reply(document, delay=self.delay) if self.delay else document


# -- the credential endpoints over HTTP -------------------------------------------------------------------------


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeAwsEndpoints:
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

    async def __aenter__(self) -> FakeAwsEndpoints:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def __aexit__(self, *exc: object) -> None:
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
