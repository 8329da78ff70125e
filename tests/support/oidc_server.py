"""A MongoDB-wire server on 127.0.0.1 configured for MONGODB-OIDC, as a server with an identity provider would be.

It answers ``saslStart``/``saslContinue`` on ``$external`` (one-step ``{jwt}`` and two-step ``{n}`` then
``{jwt}``) and a hello's ``speculativeAuthenticate``, verifying each token: an HS256 JWT signed with the
server's key (``issue()`` makes them, the test writes them where the client reads them), not expired, not
revoked. Every other command but hello and ping needs an authenticated connection (Unauthorized, 13); a
connection whose token was revoked since gets ReauthenticationRequired (391), as a server does once the token
expires. ``failCommand`` fail points (``times``, ``failCommands``, ``errorCode``, ``closeConnection``,
``appName``) apply to every command, ``saslStart`` included. Data: an in-memory store answering ``insert``,
``find`` (no filter; ``batchSize`` honoured), ``getMore`` and ``killCursors``; transactions are accepted.

    async with OidcServer() as server:
        token = server.issue("machine")
        ...
        server.revoke(token)        # connections authenticated with it now get 391
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import Int64, decode, encode
from tests.support.loopback_peer import (
    CLOSE,
    HandlerResult,
    LoopbackPeer,
    PeerConnection,
    Reply,
    Request,
    default_reply,
)

__all__ = ["ISSUER", "OidcServer", "make_jwt"]

ISSUER = "https://idp.test.invalid"
CLIENT_ID = "mongio-tests"
_OPEN = frozenset(
    {"hello", "ismaster", "ping", "saslstart", "saslcontinue", "configurefailpoint", "endsessions"}
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(key: bytes, claims: Mapping[str, Any]) -> str:
    """An HS256-signed compact JWT."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(dict(claims)).encode())
    signature = hmac.new(key, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


@dataclass
class _FailPoint:
    times: int
    commands: frozenset[str]
    error_code: int | None
    close_connection: bool
    app_name: str | None


@dataclass
class _Session:
    token: str | None = None
    principal: str | None = None
    app_name: str | None = None


@dataclass
class OidcServer:
    """The server; ``users`` maps a principal name (``n``) to whether it may use the human flow's IdP."""

    key: bytes = b"the-test-signing-key"
    replica_set: str | None = "rs0"
    known_principals: frozenset[str] | None = None
    """When set, a two-step ``n`` outside it is refused (a multi-IdP server with no IdP for that user)."""
    sasl_delay: float = 0.0
    """Seconds each ``saslStart``/``saslContinue`` reply waits (a server slow to check tokens)."""
    peer: LoopbackPeer = field(init=False)
    revoked: set[str] = field(default_factory=set)
    sasl_starts: int = 0
    speculative_successes: int = 0
    principal_requests: list[str | None] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    """Every token that authenticated a connection, in order."""
    _fail_points: list[_FailPoint] = field(default_factory=list)
    _sessions: dict[int, _Session] = field(default_factory=dict)
    _data: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _cursors: dict[int, tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)
    _cursor_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _serial: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.peer = LoopbackPeer(self._handle)

    async def __aenter__(self) -> OidcServer:
        await self.peer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.peer.__aexit__(*exc)  # type: ignore[arg-type]

    @property
    def uri(self) -> str:
        host, port = self.peer.address
        return f"mongodb://{host}:{port}/"

    # -- tokens ---------------------------------------------------------------------------------------------

    def issue(self, subject: str = "machine", *, expires_in: float = 3600.0, key: bytes | None = None) -> str:
        """A token for ``subject`` (signed with ``key``, by default the server's own: another key makes a token
        the server refuses)."""
        claims = {"sub": subject, "iss": ISSUER, "exp": time.time() + expires_in, "jti": next(self._serial)}
        return make_jwt(self.key if key is None else key, claims)

    def revoke(self, token: str) -> None:
        """From now on ``token`` authenticates nothing, and its connections must reauthenticate (391)."""
        self.revoked.add(token)

    def fail(self, *commands: str, code: int | None = None, close: bool = False, times: int = 1) -> None:
        """Fail the next ``times`` of ``commands`` with ``code`` (or by closing the connection)."""
        self._fail_points.append(_FailPoint(times, frozenset(c.lower() for c in commands), code, close, None))

    def _valid(self, token: str) -> bool:
        parts = token.split(".")
        if len(parts) != 3 or token in self.revoked:
            return False
        expected = hmac.new(self.key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(_b64(expected), parts[2]):
            return False
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return bool(claims.get("exp", 0) > time.time())

    # -- serving --------------------------------------------------------------------------------------------

    def _session(self, connection: PeerConnection) -> _Session:
        return self._sessions.setdefault(connection.index, _Session())

    def _handle(self, request: Request) -> HandlerResult:
        name = request.command_name.lower()
        session = self._session(request.connection)
        document = request.document
        if name in ("hello", "ismaster") and isinstance(document.get("client"), Mapping):
            app = document["client"].get("application")
            session.app_name = app.get("name") if isinstance(app, Mapping) else None
        failed = self._fail_point(name, session)
        if failed is not None:
            return failed
        if name in ("hello", "ismaster"):
            return self._hello(request, session)
        if name == "configurefailpoint":
            return self._configure(document)
        if name == "saslstart":
            return self._slowed(self._sasl_start(document, session))
        if name == "saslcontinue":
            return self._slowed(self._sasl_continue(document, session))
        if name not in _OPEN:
            if session.token is None:
                return _error(13, "Unauthorized", f"command {request.command_name} requires authentication")
            if not self._valid(session.token):
                return _error(391, "ReauthenticationRequired", "the connection's access token expired")
        return self._command(request)

    def _slowed(self, reply: dict[str, Any]) -> HandlerResult:
        return Reply(reply, delay=self.sasl_delay) if self.sasl_delay else reply

    def _fail_point(self, name: str, session: _Session) -> HandlerResult | None:
        for point in self._fail_points:
            if point.times > 0 and name in point.commands and point.app_name in (None, session.app_name):
                point.times -= 1
                if point.close_connection:
                    return CLOSE
                return _error(point.error_code or 1, "FailPoint", "failpoint")
        return None

    def _configure(self, document: Mapping[str, Any]) -> dict[str, Any]:
        mode = document.get("mode")
        data = document.get("data") or {}
        times = 0 if mode == "off" else (int(mode["times"]) if isinstance(mode, Mapping) else 1 << 30)
        self._fail_points = [
            _FailPoint(
                times,
                frozenset(str(c).lower() for c in data.get("failCommands", ())),
                data.get("errorCode"),
                bool(data.get("closeConnection")),
                data.get("appName"),
            )
        ]
        return {"ok": 1}

    def _hello(self, request: Request, session: _Session) -> dict[str, Any]:
        reply = default_reply(request, self.peer)
        reply["logicalSessionTimeoutMinutes"] = 30
        if self.replica_set is not None:
            host, port = self.peer.address
            reply.update(
                setName=self.replica_set, hosts=[f"{host}:{port}"], me=f"{host}:{port}", secondary=False
            )
        speculative = request.document.get("speculativeAuthenticate")
        if isinstance(speculative, Mapping) and speculative.get("mechanism") == "MONGODB-OIDC":
            token = decode(bytes(speculative["payload"])).get("jwt")
            if isinstance(token, str) and self._valid(token):
                session.token = token
                self.accepted.append(token)
                self.speculative_successes += 1
                reply["speculativeAuthenticate"] = {"conversationId": 1, "done": True, "payload": b""}
        return reply

    def _sasl_start(self, document: Mapping[str, Any], session: _Session) -> dict[str, Any]:
        self.sasl_starts += 1
        if document.get("mechanism") != "MONGODB-OIDC" or document.get("$db") != "$external":
            return _error(2, "BadValue", "this server only offers MONGODB-OIDC on $external")
        payload = decode(bytes(document["payload"]))
        if "jwt" in payload:
            return self._jwt_step(payload["jwt"], session)
        principal = payload.get("n")
        self.principal_requests.append(principal)
        if self.known_principals is not None and principal not in self.known_principals:
            return _error(18, "AuthenticationFailed", "no identity provider for this principal")
        session.principal = principal or "implicit"
        idp = {"issuer": ISSUER, "clientId": CLIENT_ID, "requestScopes": ["openid"]}
        return {"conversationId": 1, "done": False, "payload": encode(idp), "ok": 1}

    def _sasl_continue(self, document: Mapping[str, Any], session: _Session) -> dict[str, Any]:
        if session.principal is None:
            return _error(17, "ProtocolError", "saslContinue without a conversation")
        session.principal = None
        return self._jwt_step(decode(bytes(document["payload"])).get("jwt"), session)

    def _jwt_step(self, token: Any, session: _Session) -> dict[str, Any]:
        if not isinstance(token, str) or not self._valid(token):
            return _error(18, "AuthenticationFailed", "Authentication failed.")
        session.token = token
        self.accepted.append(token)
        return {"conversationId": 1, "done": True, "payload": b"", "ok": 1}

    def _command(self, request: Request) -> dict[str, Any]:
        name = request.command_name.lower()
        document = request.document
        namespace = f"{request.db}.{document.get(request.command_name)}"
        if name == "insert":
            docs = list(document.get("documents") or request.sequences.get("documents", []))
            self._data.setdefault(namespace, []).extend(docs)
            return {"n": len(docs), "ok": 1}
        if name == "find":
            return self._first_batch(
                namespace, list(self._data.get(namespace, [])), document.get("batchSize")
            )
        if name == "getmore":
            return self._next_batch(int(document["getMore"]), document.get("batchSize"))
        if name == "killcursors":
            for cursor_id in document.get("cursors", []):
                self._cursors.pop(int(cursor_id), None)
        return {"ok": 1}

    def _first_batch(self, namespace: str, docs: list[dict[str, Any]], batch_size: Any) -> dict[str, Any]:
        size = int(batch_size) if batch_size else len(docs)
        cursor_id = 0
        if len(docs) > size:
            cursor_id = next(self._cursor_ids)
            self._cursors[cursor_id] = (namespace, docs[size:])
        return {"cursor": {"firstBatch": docs[:size], "id": Int64(cursor_id), "ns": namespace}, "ok": 1}

    def _next_batch(self, cursor_id: int, batch_size: Any) -> dict[str, Any]:
        namespace, docs = self._cursors.pop(cursor_id, ("", []))
        size = int(batch_size) if batch_size else len(docs)
        next_id = 0
        if len(docs) > size:
            self._cursors[cursor_id] = (namespace, docs[size:])
            next_id = cursor_id
        return {"cursor": {"nextBatch": docs[:size], "id": Int64(next_id), "ns": namespace}, "ok": 1}


def _error(code: int, code_name: str, message: str) -> dict[str, Any]:
    return {"ok": 0, "code": code, "codeName": code_name, "errmsg": message}
