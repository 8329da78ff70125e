"""``establish()`` over real sockets against the loopback peer: the handshake as sent, compression and
load-balanced negotiation, and the SCRAM-SHA-1, SCRAM-SHA-256, PLAIN and MONGODB-X509 conversations, with the
peer checking what the client proved (the SCRAM proof recomputed from the password it knows, PLAIN's payload,
X.509's command), not only that it answered."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Any

import pytest

from mongio.connection import Connection
from mongio.connection.auth import AuthenticationFailed
from mongio.connection.auth.scram import ScramConversation, ScramKeyCache
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.handshake import ClientMetadata, DriverInfo
from mongio.errors import ConfigurationError, NetworkTimeout, OperationFailure
from mongio.options.credentials import MongoCredential
from mongio.wire import negotiate_compressor
from tests.support.loopback_peer import NO_REPLY, LoopbackPeer, Request, default_reply

USER = "user"
PASSWORD = "pencil"
REFUSED = {"ok": 0, "errmsg": "Authentication failed.", "code": 18, "codeName": "AuthenticationFailed"}


def payload_of(document: Mapping[str, Any]) -> bytes:
    return bytes(document["payload"])


class ScramPeer:
    """The server side of SCRAM for the loopback peer, for one user whose password it knows.

    It checks the client's proof against keys derived from that password (independently of the driver's
    code), signs its final message, answers speculative ``saslStart`` in the hello when ``speculative``, and
    lists ``mechanisms`` in ``saslSupportedMechs``.
    """

    def __init__(
        self,
        mechanisms: tuple[str, ...] = ("SCRAM-SHA-256",),
        *,
        speculative: bool = True,
        skip_empty_exchange: bool = True,
        sasl_supported_mechs: list[str] | None = None,
        iterations: int = 4096,
    ) -> None:
        self.mechanisms = mechanisms
        self.speculative = speculative
        self.skip_empty_exchange = skip_empty_exchange
        self.sasl_supported_mechs = sasl_supported_mechs
        self.iterations = iterations
        self.salt = secrets.token_bytes(16)
        self.verified: list[str] = []
        self.refused = 0
        self.peer: LoopbackPeer | None = None
        self._state: dict[int, dict[str, Any]] = {}

    def _keys(self, mechanism: str) -> tuple[str, bytes, bytes]:
        if mechanism == "SCRAM-SHA-1":
            hash_name = "sha1"
            secret = hashlib.md5(f"{USER}:mongo:{PASSWORD}".encode()).hexdigest().encode()
        else:
            hash_name = "sha256"
            secret = PASSWORD.encode()
        salted = hashlib.pbkdf2_hmac(hash_name, secret, self.salt, self.iterations)
        return (
            hash_name,
            hmac.new(salted, b"Client Key", hash_name).digest(),
            hmac.new(salted, b"Server Key", hash_name).digest(),
        )

    def _start(self, request: Request, command: Mapping[str, Any]) -> dict[str, Any]:
        mechanism = command["mechanism"]
        if mechanism not in self.mechanisms:
            return {"ok": 0, "errmsg": f"no {mechanism} credentials", "code": 18}
        first = payload_of(command).decode()
        assert first.startswith("n,,"), "channel binding must not be advertised"
        assert command["options"] == {"skipEmptyExchange": True}
        bare = first[3:]
        attributes = dict(part.split("=", 1) for part in bare.split(","))
        assert attributes["n"] == USER
        nonce = attributes["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
        server_first = f"r={nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
        self._state[request.connection.index] = {
            "mechanism": mechanism,
            "auth_prefix": f"{bare},{server_first}",
            "nonce": nonce,
            "step": 1,
        }
        return {"conversationId": 1, "payload": server_first.encode(), "done": False, "ok": 1}

    def _continue(self, request: Request, command: Mapping[str, Any]) -> dict[str, Any]:
        state = self._state[request.connection.index]
        if state["step"] == 2:
            assert payload_of(command) == b""
            return {"conversationId": 1, "payload": b"", "done": True, "ok": 1}
        final = payload_of(command).decode()
        without_proof, proof = final.rsplit(",p=", 1)
        assert without_proof == f"c=biws,r={state['nonce']}"
        hash_name, client_key, server_key = self._keys(state["mechanism"])
        auth_message = f"{state['auth_prefix']},{without_proof}".encode()
        stored_key = hashlib.new(hash_name, client_key).digest()
        signature = hmac.new(stored_key, auth_message, hash_name).digest()
        expected_proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if base64.b64decode(proof) != expected_proof:
            self.refused += 1
            return REFUSED
        self.verified.append(state["mechanism"])
        state["step"] = 2
        verifier = hmac.new(server_key, auth_message, hash_name).digest()
        return {
            "conversationId": 1,
            "payload": b"v=" + base64.b64encode(verifier),
            "done": self.skip_empty_exchange,
            "ok": 1,
        }

    def __call__(self, request: Request) -> Any:
        command = request.document
        name = request.command_name
        if name in ("hello", "isMaster"):
            assert self.peer is not None
            reply = default_reply(request, self.peer)
            if self.sasl_supported_mechs is not None:
                reply["saslSupportedMechs"] = self.sasl_supported_mechs
            elif "saslSupportedMechs" in command:
                reply["saslSupportedMechs"] = list(self.mechanisms)
            speculative = command.get("speculativeAuthenticate")
            if self.speculative and speculative is not None and "saslStart" in speculative:
                answer = self._start(request, speculative)
                if answer["ok"] == 1:
                    reply["speculativeAuthenticate"] = {k: v for k, v in answer.items() if k != "ok"}
            return reply
        if name == "saslStart":
            assert request.db == "admin"
            return self._start(request, command)
        if name == "saslContinue":
            return self._continue(request, command)
        if name == "ping":
            return {"ok": 1}
        return {"ok": 0, "errmsg": f"unexpected {name}", "code": 59}


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    """The connections closed during the test, in order (recorded by wrapping ``Connection.close``)."""
    connections: list[Connection] = []
    close = Connection.close

    def recording(self: Connection, reason: str = "closed by the driver") -> None:
        connections.append(self)
        close(self, reason)

    monkeypatch.setattr(Connection, "close", recording)
    return connections


def scram_credential(mechanism: str = "DEFAULT", password: str = PASSWORD) -> MongoCredential:
    return MongoCredential(mechanism=mechanism, source="admin", username=USER, password=password)


def settings(**kwargs: Any) -> ConnectionSettings:
    kwargs.setdefault("metadata", ClientMetadata(appname="auth-tests"))
    kwargs.setdefault("scram_cache", ScramKeyCache())
    return ConnectionSettings(**kwargs)


def names(peer: LoopbackPeer) -> list[str]:
    return [request.command_name for request in peer.requests]


# -- the handshake as sent ------------------------------------------------------------------------------------


async def test_handshake_is_the_first_command_with_metadata_only_there() -> None:
    metadata = ClientMetadata(appname="inventory", driver_info=DriverInfo("wrapper", "9.9"))
    async with LoopbackPeer() as peer:
        conn = await establish(peer.address, settings(metadata=metadata))
        try:
            await conn.command("admin", {"hello": 1})
        finally:
            conn.close()
    first, second = peer.requests
    assert first.command_name == "isMaster" and first.document["helloOk"] is True
    assert first.db == "admin" and first.compressor_id is None
    assert first.document["client"] == metadata.document
    assert first.document["client"]["application"] == {"name": "inventory"}
    assert first.document["backpressure"] == "2"  # handshake prose test 9
    assert "client" not in second.document
    assert conn.server_connection_id == 1 and conn.max_wire_version == peer.max_wire_version


async def test_api_version_sends_hello() -> None:
    class Api:
        version = "1"
        strict = True
        deprecation_errors = None

    async with LoopbackPeer() as peer:
        conn = await establish(peer.address, settings(server_api=Api()))
        conn.close()
    hello = peer.requests[0].document
    assert next(iter(hello)) == "hello"
    assert hello["apiVersion"] == "1" and hello["apiStrict"] is True and "apiDeprecationErrors" not in hello


@pytest.mark.parametrize("offered", [["zstd", "zlib"], ["snappy"], []])
async def test_compression_negotiated_from_the_reply(offered: list[str]) -> None:
    async with LoopbackPeer(compressors=["zlib", "snappy"]) as peer:
        conn = await establish(peer.address, settings(compressors=offered))
        try:
            await conn.command("admin", {"ping": 1})
        finally:
            conn.close()
    hello, ping = peer.requests
    assert hello.document.get("compression", []) == offered
    expected = negotiate_compressor(offered, ["zlib", "snappy"])
    assert (conn.compressor.name if conn.compressor else None) == expected
    assert ping.compressor_name == expected


async def test_load_balanced_needs_a_service_id(closed: list[Connection]) -> None:
    async with LoopbackPeer() as peer:
        with pytest.raises(ConfigurationError, match="Driver attempted to initialize in load balancing mode"):
            await establish(peer.address, settings(load_balanced=True))
    assert len(closed) == 1 and closed[0].closed and not closed[0].ready
    hello = peer.requests[0].document
    assert next(iter(hello)) == "hello" and hello["loadBalanced"] is True


async def test_load_balanced_service_id_is_kept() -> None:
    def handler(request: Request) -> Any:
        if request.command_name == "hello":
            return {**default_reply(request, peer), "serviceId": "service-1", "msg": "isdbgrid"}
        return None

    peer = LoopbackPeer(handler)
    async with peer:
        conn = await establish(peer.address, settings(load_balanced=True))
        conn.close()
    assert conn.service_id == "service-1"


async def test_failed_hello_closes_the_connection(closed: list[Connection]) -> None:
    async with LoopbackPeer(lambda request: {"ok": 0, "errmsg": "no", "code": 2}) as peer:
        with pytest.raises(OperationFailure, match="no"):
            await establish(peer.address, settings())
    assert len(closed) == 1 and closed[0].closed and not closed[0].ready


async def test_unanswered_hello_times_out_and_closes(closed: list[Connection]) -> None:
    async with LoopbackPeer(lambda request: NO_REPLY) as peer:
        started = time.monotonic()
        with pytest.raises(NetworkTimeout):
            await establish(peer.address, settings(connect_timeout=0.3))
        assert 0.25 < time.monotonic() - started < 2
    assert len(closed) == 1 and closed[0].closed


# -- SCRAM ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
@pytest.mark.parametrize("speculative", [True, False])
async def test_scram_conversation_checked_by_the_peer(mechanism: str, speculative: bool) -> None:
    scram = ScramPeer((mechanism,), speculative=speculative)
    async with LoopbackPeer(scram) as peer:
        scram.peer = peer
        conn = await establish(peer.address, settings(credential=scram_credential(mechanism)))
        try:
            assert conn.ready
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
        finally:
            conn.close()
    assert scram.verified == [mechanism]
    hello = peer.requests[0].document
    assert "saslSupportedMechs" not in hello  # the mechanism was named
    assert hello["speculativeAuthenticate"]["mechanism"] == mechanism
    assert hello["speculativeAuthenticate"]["db"] == "admin"
    if speculative:
        assert names(peer) == ["isMaster", "saslContinue", "ping"]
    else:
        assert names(peer) == ["isMaster", "saslStart", "saslContinue", "ping"]


@pytest.mark.parametrize(
    ("listed", "expected"),
    [
        (["SCRAM-SHA-1", "SCRAM-SHA-256"], "SCRAM-SHA-256"),
        (["SCRAM-SHA-1"], "SCRAM-SHA-1"),
        (["ARBITRARY-MECHANISM"], "SCRAM-SHA-1"),  # handshake prose test 2: no error for unknown names
    ],
)
async def test_default_mechanism_negotiated_in_the_handshake(listed: list[str], expected: str) -> None:
    scram = ScramPeer(("SCRAM-SHA-1", "SCRAM-SHA-256"), speculative=False, sasl_supported_mechs=listed)
    async with LoopbackPeer(scram) as peer:
        scram.peer = peer
        conn = await establish(peer.address, settings(credential=scram_credential()))
        conn.close()
    hello = peer.requests[0].document
    assert hello["saslSupportedMechs"] == f"admin.{USER}"
    assert hello["speculativeAuthenticate"]["mechanism"] == "SCRAM-SHA-256"
    assert peer.commands("saslStart")[0].document["mechanism"] == expected
    assert scram.verified == [expected]


async def test_long_conversation_for_servers_ignoring_skip_empty_exchange() -> None:
    scram = ScramPeer(speculative=False, skip_empty_exchange=False)
    async with LoopbackPeer(scram) as peer:
        scram.peer = peer
        conn = await establish(peer.address, settings(credential=scram_credential("SCRAM-SHA-256")))
        conn.close()
    assert names(peer) == ["isMaster", "saslStart", "saslContinue", "saslContinue"]


async def test_wrong_password_is_refused_and_closes_the_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, closed: list[Connection]
) -> None:
    caplog.set_level(logging.DEBUG)
    sent_finals: list[bytes] = []
    client_final = ScramConversation.client_final

    def spy(self: ScramConversation, keys: Any) -> bytes:
        message = client_final(self, keys)
        sent_finals.append(message)
        return message

    monkeypatch.setattr(ScramConversation, "client_final", spy)
    scram = ScramPeer()
    wrong = "not-the-password"
    async with LoopbackPeer(scram) as peer:
        scram.peer = peer
        with pytest.raises(AuthenticationFailed) as info:
            await establish(
                peer.address, settings(credential=scram_credential("SCRAM-SHA-256", password=wrong))
            )
    assert len(closed) == 1 and closed[0].closed and not closed[0].ready
    assert scram.refused == 1 and scram.verified == []
    proof = sent_finals[0].split(b",p=")[1].decode()
    text = f"{info.value} {info.value!r} {info.value.details!r}"
    assert "authentication failed" in text.lower()
    assert wrong not in text and proof not in text
    logged = " ".join(f"{record.getMessage()} {record.exc_text or ''}" for record in caplog.records)
    assert wrong not in logged and proof not in logged


async def test_speculative_reply_absent_falls_back_to_full_conversation() -> None:
    scram = ScramPeer(speculative=False)
    async with LoopbackPeer(scram) as peer:
        scram.peer = peer
        conn = await establish(peer.address, settings(credential=scram_credential()))
        conn.close()
    assert names(peer)[:3] == ["isMaster", "saslStart", "saslContinue"]
    assert scram.verified == ["SCRAM-SHA-256"]


async def test_monitoring_connections_do_not_authenticate() -> None:
    scram = ScramPeer()
    async with LoopbackPeer(scram) as peer:
        scram.peer = peer
        conn = await establish(peer.address, settings(credential=scram_credential()), authenticate=False)
        conn.close()
    hello = peer.requests[0].document
    assert "speculativeAuthenticate" not in hello and "saslSupportedMechs" not in hello
    assert names(peer) == ["isMaster"]


# -- PLAIN and X.509 ------------------------------------------------------------------------------------------


async def test_plain_payload_checked_by_the_peer() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Any:
        if request.command_name == "saslStart":
            seen.append(request)
            ok = (
                request.db == "$external"
                and request.document["mechanism"] == "PLAIN"
                and payload_of(request.document) == b"\x00ldap-user\x00ldap-pass"
            )
            return {"conversationId": 1, "payload": b"", "done": True, "ok": 1} if ok else REFUSED
        return None

    credential = MongoCredential(
        mechanism="PLAIN", source="$external", username="ldap-user", password="ldap-pass"
    )
    async with LoopbackPeer(handler) as peer:
        conn = await establish(peer.address, settings(credential=credential))
        conn.close()
        assert "speculativeAuthenticate" not in peer.requests[0].document
        bad = MongoCredential(mechanism="PLAIN", source="$external", username="ldap-user", password="nope")
        with pytest.raises(AuthenticationFailed):
            await establish(peer.address, settings(credential=bad))
    assert len(seen) == 2


@pytest.mark.parametrize("speculative", [True, False])
@pytest.mark.parametrize("username", [None, "CN=client,OU=Drivers"])
async def test_x509_command_checked_by_the_peer(speculative: bool, username: str | None) -> None:
    expected: dict[str, Any] = {"authenticate": 1, "mechanism": "MONGODB-X509"}
    if username:
        expected["user"] = username

    def handler(request: Request) -> Any:
        if request.command_name == "isMaster":
            reply = default_reply(request, peer)
            spec = request.document.get("speculativeAuthenticate")
            if speculative and spec == {**expected, "db": "$external"}:
                reply["speculativeAuthenticate"] = {"dbname": "$external", "user": username or "CN=client"}
            return reply
        if request.command_name == "authenticate":
            document = dict(request.document)
            assert document.pop("$db") == "$external"
            if document == expected:
                return {"dbname": "$external", "user": username or "CN=client", "ok": 1}
            return REFUSED
        return None

    credential = MongoCredential(
        mechanism="MONGODB-X509", source="$external", username=username, password=None
    )
    peer = LoopbackPeer(handler)
    async with peer:
        conn = await establish(peer.address, settings(credential=credential))
        conn.close()
    assert names(peer) == (["isMaster"] if speculative else ["isMaster", "authenticate"])
