"""The harness's MONGODB-OIDC identity provider: what makes its members answer as servers configured for OIDC.

The test server has SCRAM only, so the deployment registers this provider as the members' answer to MONGODB-OIDC on
``$external`` (``Deployment.accept_external_auth``, as for any mechanism the members answer themselves): the
proxies ask it for ``saslStart``/``saslContinue`` and a hello's ``speculativeAuthenticate``. A token is accepted
when it is an HS256 JWT signed with this provider's key that has not expired. ``token_file`` holds one such token, for
``ENVIRONMENT:test`` (``OIDC_TOKEN_FILE``); ``uri_options`` are the connection string options of a client that
authenticates with it. Authentication is offered, not required: clients without credentials keep working, as the
other suites need. ``failCommand`` fail points apply to ``saslStart`` as to any command (the proxy checks them
first), and ``errorCode: 391`` asks a client to reauthenticate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mongio.bson import decode, encode

__all__ = ["MECHANISM", "OidcProvider"]

MECHANISM = "MONGODB-OIDC"
_ISSUER = "https://oidc.harness.invalid"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OidcProvider:
    """Issues tokens and verifies them for the members; ``close()`` removes the token file."""

    def __init__(self, lifetime: float = 24 * 3600.0) -> None:
        self._key = secrets.token_bytes(32)
        self._directory = tempfile.mkdtemp(prefix="harness-oidc-")
        self.token_file = str(Path(self._directory) / "test_machine")
        Path(self.token_file).write_text(self.issue("test_machine", lifetime))

    def close(self) -> None:
        Path(self.token_file).unlink(missing_ok=True)
        os.rmdir(self._directory)

    @property
    def uri_options(self) -> dict[str, str]:
        return {"authMechanism": MECHANISM, "authMechanismProperties": "ENVIRONMENT:test"}

    def issue(self, subject: str, lifetime: float) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        claims = _b64(json.dumps({"sub": subject, "iss": _ISSUER, "exp": time.time() + lifetime}).encode())
        signature = hmac.new(self._key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
        return f"{header}.{claims}.{_b64(signature)}"

    def valid(self, token: Any) -> bool:
        if not isinstance(token, str) or token.count(".") != 2:
            return False
        header, claims, signature = token.split(".")
        expected = hmac.new(self._key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(_b64(expected), signature):
            return False
        body = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
        return bool(body.get("exp", 0) > time.time())

    # -- what a member answers (an ExternalSasl the deployment registers for MONGODB-OIDC) ----------------

    def start(self, command: Mapping[str, Any]) -> tuple[dict[str, Any], None]:
        """The reply to ``saslStart`` (or a hello's speculative one): done when it carries a valid token, the
        provider's information when it carries none (the two-step conversation's principal step)."""
        payload = _payload(command)
        if payload is None:
            return _refused("the SASL payload is not a BSON document"), None
        if "jwt" not in payload:
            info = {"issuer": _ISSUER, "clientId": "harness"}
            return {"conversationId": 1, "done": False, "payload": encode(info), "ok": 1.0}, None
        return self._verdict(payload), None

    def finish(self, state: None, command: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to the ``saslContinue`` carrying the token after the principal step."""
        payload = _payload(command)
        if payload is None:
            return _refused("the SASL payload is not a BSON document")
        return self._verdict(payload)

    def _verdict(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        if not self.valid(payload.get("jwt")):
            return _refused("Authentication failed.")
        return {"conversationId": 1, "done": True, "payload": b"", "ok": 1.0}


def _payload(command: Mapping[str, Any]) -> dict[str, Any] | None:
    payload = command.get("payload")
    if not isinstance(payload, bytes | bytearray | memoryview):
        return None
    try:
        document: dict[str, Any] = decode(bytes(payload))
    except Exception:
        return None
    return document


def _refused(message: str) -> dict[str, Any]:
    return {"ok": 0.0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": message}
