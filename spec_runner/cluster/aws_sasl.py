"""The server side of MONGODB-AWS, for the cluster harness's members and the tests' fake servers.

A server configured for MONGODB-AWS answers ``saslStart`` on ``$external`` with its own nonce (the client's
32 bytes followed by 32 of its own) and the STS host, then sends the client's signed ``GetCallerIdentity``
request to STS, which recomputes the signature. :class:`AwsSaslServer` plays both: it checks the client's
first message (a 32-byte nonce, gs2-cb-flag ``n``), and on ``saslContinue`` recomputes the AWS Signature
Version 4 of the request with the secret a :class:`KeyStore` holds for the access key, checking the signed
headers, the credential scope (date, the region the host implies, ``sts``), the session token of temporary
credentials and their expiry. The signature is recomputed here, written apart from mongio's signer, so that
the two check each other (PyMongo's, made by botocore, passes too).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import decode, encode

__all__ = [
    "AwsConversation",
    "AwsSaslServer",
    "IssuedKey",
    "KeyStore",
    "ServerFirst",
    "recompute_signature",
    "verify_get_caller_identity",
]

MECHANISM = "MONGODB-AWS"


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
class AwsConversation:
    """One connection's conversation between ``saslStart`` and ``saslContinue``."""

    server_nonce: bytes
    host: str


def _refusal() -> dict[str, Any]:
    return {"ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "Authentication failed."}


@dataclass
class AwsSaslServer:
    """Answers MONGODB-AWS's two SASL steps, remembering which access keys it accepted and why it refused."""

    keys: KeyStore
    server_first: ServerFirst = field(default_factory=ServerFirst)
    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def _refuse(self, reason: str) -> dict[str, Any]:
        self.refused.append(reason)
        return _refusal()

    def start(self, command: Mapping[str, Any]) -> tuple[dict[str, Any], AwsConversation | None]:
        """The reply to ``saslStart`` and the conversation it opens (None when refused)."""
        if command.get("mechanism") != MECHANISM:
            return self._refuse(f"saslStart with {command.get('mechanism')}"), None
        payload = command.get("payload")
        client = decode(bytes(payload)) if isinstance(payload, bytes | bytearray | memoryview) else {}
        client_nonce = client.get("r")
        if not isinstance(client_nonce, bytes) or len(client_nonce) != 32 or client.get("p") != 110:
            return self._refuse("bad client first message"), None
        shape = self.server_first
        head = client_nonce if shape.keep_client_nonce else os.urandom(32)
        server_nonce = (head + os.urandom(64))[: shape.nonce_size]
        reply = {
            "conversationId": 1,
            "done": False,
            "payload": encode({"s": server_nonce, "h": shape.host}),
            "ok": 1,
        }
        return reply, AwsConversation(server_nonce, shape.host)

    def finish(self, conversation: AwsConversation | None, command: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to ``saslContinue``: done when STS would accept the signed request."""
        if conversation is None:
            return self._refuse("saslContinue without saslStart")
        payload = command.get("payload")
        if not isinstance(payload, bytes | bytearray | memoryview):
            return self._refuse("saslContinue without a payload")
        message = decode(bytes(payload))
        reason = verify_get_caller_identity(
            self.keys,
            message.get("a"),
            message.get("d"),
            message.get("t"),
            conversation.host,
            conversation.server_nonce,
        )
        if reason is not None:
            return self._refuse(reason)
        self.accepted.append(str(message["a"]).split("Credential=", 1)[1].split("/", 1)[0])
        return {"conversationId": 1, "done": True, "payload": b"", "ok": 1}
