"""SCRAM-SHA-1 and SCRAM-SHA-256: the authentication spec's example conversations byte for byte, the checks
on what the server sends, the key cache, and the event loop staying free while keys are derived."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mongio.connection.auth import Authenticator, authenticate
from mongio.connection.auth import scram as scram_module
from mongio.connection.auth.base import AuthenticationFailed
from mongio.connection.auth.scram import (
    MIN_ITERATIONS,
    SCRAM_SHA_1,
    SCRAM_SHA_256,
    ScramConversation,
    ScramKeyCache,
    authenticate_scram,
)
from mongio.errors import ConfigurationError, OperationFailure
from mongio.options.credentials import MongoCredential

# The authentication spec's SCRAM-SHA-1 example (user "user", password "pencil").
SHA1_NONCE = "fyko+d2lbbFgONRv9qkxdawL"
SHA1_START = "biwsbj11c2VyLHI9ZnlrbytkMmxiYkZnT05Sdjlxa3hkYXdM"
SHA1_SERVER_FIRST = (
    "cj1meWtvK2QybGJiRmdPTlJ2OXFreGRhd0xIbytWZ2s3cXZVT0tVd3VXTElXZzRsLzlTcmFHTUhFRSxzPXJROVpZM01udEJldVAzRTFURFZD"
    "NHc9PSxpPTEwMDAw"
)
SHA1_CONTINUE = (
    "Yz1iaXdzLHI9ZnlrbytkMmxiYkZnT05Sdjlxa3hkYXdMSG8rVmdrN3F2VU9LVXd1V0xJV2c0bC85U3JhR01IRUUscD1NQzJUOEJ2Ym1XUmNr"
    "RHc4b1dsNUlWZ2h3Q1k9"
)
SHA1_SERVER_FINAL = "dj1VTVdlSTI1SkQxeU5ZWlJNcFo0Vkh2aFo5ZTA9"

# The SCRAM-SHA-256 example.
SHA256_NONCE = "rOprNGfwEbeRWgbNEkqO"
SHA256_START = "biwsbj11c2VyLHI9ck9wck5HZndFYmVSV2diTkVrcU8="
SHA256_SERVER_FIRST = (
    "cj1yT3ByTkdmd0ViZVJXZ2JORWtxTyVodllEcFdVYTJSYVRDQWZ1eEZJbGopaE5sRiRrMCxzPVcyMlphSjBTTlk3c29Fc1VFamI2Z1E9PSxp"
    "PTQwOTY="
)
SHA256_CONTINUE = (
    "Yz1iaXdzLHI9ck9wck5HZndFYmVSV2diTkVrcU8laHZZRHBXVWEyUmFUQ0FmdXhGSWxqKWhObEYkazAscD1kSHpiWmFwV0lrNGpVaE4rVXRl"
    "OXl0YWc5empmTUhnc3FtbWl6N0FuZFZRPQ=="
)
SHA256_SERVER_FINAL = "dj02cnJpVFJCaTIzV3BSUi93dHVwK21NaFVaVW4vZEI1bkxUSlJzamw5NUc0PQ=="

EXAMPLES = {
    "SCRAM-SHA-1": (SHA1_NONCE, SHA1_START, SHA1_SERVER_FIRST, SHA1_CONTINUE, SHA1_SERVER_FINAL),
    "SCRAM-SHA-256": (SHA256_NONCE, SHA256_START, SHA256_SERVER_FIRST, SHA256_CONTINUE, SHA256_SERVER_FINAL),
}


def b64(text: str) -> bytes:
    return base64.b64decode(text)


def credential(mechanism: str = "DEFAULT", password: str = "pencil", user: str = "user") -> MongoCredential:
    return MongoCredential(mechanism=mechanism, source="admin", username=user, password=password)


class ScriptedServer:
    """A ``run_command`` that answers from a script and records every command."""

    def __init__(self, *replies: Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]) -> None:
        self.replies = list(replies)
        self.commands: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, db: str, command: dict[str, Any]) -> Mapping[str, Any]:
        self.commands.append((db, command))
        reply = self.replies.pop(0)
        return reply(command) if callable(reply) else reply


def spec_server(mechanism: str, *, final: str | None = None, done_after_final: bool = True) -> ScriptedServer:
    _, _, server_first, _, server_final = EXAMPLES[mechanism]
    replies: list[Mapping[str, Any]] = [
        {"conversationId": 1, "payload": b64(server_first), "done": False, "ok": 1},
        {"conversationId": 1, "payload": b64(final or server_final), "done": done_after_final, "ok": 1},
    ]
    if not done_after_final:
        replies.append({"conversationId": 1, "payload": b"", "done": True, "ok": 1})
    return ScriptedServer(*replies)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
async def test_spec_example_conversation_byte_for_byte(mechanism: str) -> None:
    nonce, start, _, continue_payload, _ = EXAMPLES[mechanism]
    server = spec_server(mechanism)
    authenticator = Authenticator(credential(mechanism), nonce=nonce, cache=ScramKeyCache())
    await authenticator.authenticate(server, None)

    (db1, first), (db2, second) = server.commands
    assert db1 == db2 == "admin"
    assert first["saslStart"] == 1 and first["mechanism"] == mechanism
    assert first["options"] == {"skipEmptyExchange": True}
    assert first["payload"] == b64(start)
    assert second == {"saslContinue": 1, "conversationId": 1, "payload": b64(continue_payload)}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
async def test_older_server_gets_the_extra_empty_exchange(mechanism: str) -> None:
    nonce = EXAMPLES[mechanism][0]
    server = spec_server(mechanism, done_after_final=False)
    await Authenticator(credential(mechanism), nonce=nonce, cache=ScramKeyCache()).authenticate(server, None)
    assert len(server.commands) == 3
    assert server.commands[2][1] == {"saslContinue": 1, "conversationId": 1, "payload": b""}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
async def test_wrong_server_signature_is_an_error(mechanism: str) -> None:
    nonce = EXAMPLES[mechanism][0]
    signature = b64(EXAMPLES[mechanism][4])
    forged = bytearray(base64.b64decode(signature[2:]))
    forged[0] ^= 1
    final = base64.b64encode(b"v=" + base64.b64encode(bytes(forged))).decode()
    server = spec_server(mechanism, final=final)
    with pytest.raises(AuthenticationFailed, match="signature is wrong"):
        await Authenticator(credential(mechanism), nonce=nonce, cache=ScramKeyCache()).authenticate(server, None)


def test_server_signature_must_be_present() -> None:
    conversation = ScramConversation(SCRAM_SHA_256, "user", "pencil", nonce=SHA256_NONCE)
    conversation.server_first(b64(SHA256_SERVER_FIRST))
    conversation.client_final(conversation.keys_now())
    with pytest.raises(AuthenticationFailed, match="no signature"):
        conversation.verify_server_final(b"x=1")
    with pytest.raises(AuthenticationFailed, match="'bad'"):
        conversation.verify_server_final(b"e=bad")
    conversation.verify_server_final(b64(SHA256_SERVER_FINAL))


@pytest.mark.parametrize(
    ("server_first", "message"),
    [
        (b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095", "fewer than the minimum 4096"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=ten", "not a number"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "lacks r, s or i"),
        (b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "extension"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=***,i=4096", "base64"),
        (b"garbage", "malformed"),
    ],
)
def test_server_first_message_checks(server_first: bytes, message: str) -> None:
    conversation = ScramConversation(SCRAM_SHA_256, "user", "pencil", nonce=SHA256_NONCE)
    with pytest.raises(AuthenticationFailed, match=message):
        conversation.server_first(server_first)


def test_minimum_iteration_count_is_accepted() -> None:
    conversation = ScramConversation(SCRAM_SHA_256, "user", "pencil", nonce="abc")
    conversation.server_first(f"r=abcdef,s=c2FsdA==,i={MIN_ITERATIONS}".encode())
    assert conversation.iterations == MIN_ITERATIONS


def test_username_is_escaped_but_not_saslprepped() -> None:
    first = ScramConversation(SCRAM_SHA_256, "a=b,c\u2168", "pw", nonce="n").client_first()
    assert first == "n,,n=a=3Db=2Cc\u2168,r=n".encode()


def test_sha256_password_is_saslprepped_and_sha1_password_is_not() -> None:
    # "I\u00adX" SASLpreps to "IX": same SCRAM-SHA-256 keys, different SCRAM-SHA-1 keys.
    def keys(mechanism: Any, password: str) -> Any:
        conversation = ScramConversation(mechanism, "user", password, nonce="n")
        conversation.server_first(b"r=nn,s=c2FsdA==,i=4096")
        return conversation.keys_now()

    assert keys(SCRAM_SHA_256, "I\u00adX") == keys(SCRAM_SHA_256, "IX")
    assert keys(SCRAM_SHA_1, "I\u00adX") != keys(SCRAM_SHA_1, "IX")


def test_sha1_uses_the_mongodb_password_digest() -> None:
    conversation = ScramConversation(SCRAM_SHA_1, "user", "pencil", nonce="n")
    conversation.server_first(b"r=nn,s=c2FsdA==,i=4096")
    digest = hashlib.md5(b"user:mongo:pencil").hexdigest().encode()
    salted = hashlib.pbkdf2_hmac("sha1", digest, b"salt", 4096)
    assert conversation.keys_now().client_key == hmac.new(salted, b"Client Key", "sha1").digest()


def test_prohibited_password_is_a_configuration_error_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as info:
        ScramConversation(SCRAM_SHA_256, "user", "secret\u0007", nonce="n")
    assert "secret" not in str(info.value)


async def test_server_refusal_is_authentication_failed_without_secrets(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    refusal = {"ok": 0, "errmsg": "Authentication failed.", "code": 18, "codeName": "AuthenticationFailed"}
    server = ScriptedServer(
        {"conversationId": 1, "payload": b64(SHA256_SERVER_FIRST), "done": False, "ok": 1}, refusal
    )
    cred = credential("SCRAM-SHA-256", password="pencil")
    with pytest.raises(AuthenticationFailed) as info:
        await Authenticator(cred, nonce=SHA256_NONCE, cache=ScramKeyCache()).authenticate(server, None)
    error = info.value
    assert isinstance(error, OperationFailure) and error.code == 18
    text = str(error) + repr(error.details)
    proof = b64(SHA256_CONTINUE).split(b"p=")[1].decode()
    assert "authentication failed" in text.lower()
    assert "pencil" not in text and proof not in text
    assert "'user'" in text and "SCRAM-SHA-256" in text
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "pencil" not in logged and proof not in logged


async def test_runner_raising_operation_failure_becomes_authentication_failed() -> None:
    async def run_command(db: str, command: dict[str, Any]) -> Mapping[str, Any]:
        raise OperationFailure("Authentication failed.", 18, {"ok": 0, "errmsg": "Authentication failed.", "code": 18})

    with pytest.raises(AuthenticationFailed, match="Authentication failed") as info:
        await authenticate(credential("SCRAM-SHA-256"), run_command)
    assert info.value.__cause__ is None and info.value.__suppress_context__


async def test_done_before_proof_is_an_error() -> None:
    server = ScriptedServer({"conversationId": 1, "payload": b64(SHA256_SERVER_FIRST), "done": True, "ok": 1})
    with pytest.raises(AuthenticationFailed, match="before the client's proof"):
        await Authenticator(credential("SCRAM-SHA-256"), nonce=SHA256_NONCE).authenticate(server, None)


async def test_never_ending_conversation_is_cut() -> None:
    endless = {"conversationId": 1, "payload": b"", "done": False, "ok": 1}
    server = ScriptedServer(
        {"conversationId": 1, "payload": b64(SHA256_SERVER_FIRST), "done": False, "ok": 1},
        {"conversationId": 1, "payload": b64(SHA256_SERVER_FINAL), "done": False, "ok": 1},
        *([endless] * 10),
    )
    with pytest.raises(AuthenticationFailed, match="did not end"):
        await Authenticator(credential("SCRAM-SHA-256"), nonce=SHA256_NONCE, cache=ScramKeyCache()).authenticate(
            server, None
        )
    assert len(server.commands) < 6


# -- the key cache --------------------------------------------------------------------------------------------


async def test_cache_hit_skips_the_derivation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = scram_module.derive_keys

    def counting(*args: Any) -> Any:
        calls.append(args[3])
        return real(*args)

    monkeypatch.setattr(scram_module, "derive_keys", counting)
    cache = ScramKeyCache()
    for _ in range(3):
        await Authenticator(credential("SCRAM-SHA-256"), nonce=SHA256_NONCE, cache=cache).authenticate(
            spec_server("SCRAM-SHA-256"), None
        )
    assert calls == [4096]
    assert len(cache) == 1
    # A different password (same salt and count) is a different entry: it must not reuse the keys.
    with pytest.raises(AuthenticationFailed, match="signature"):
        await Authenticator(credential("SCRAM-SHA-256", password="other"), nonce=SHA256_NONCE, cache=cache).authenticate(
            spec_server("SCRAM-SHA-256"), None
        )
    assert calls == [4096, 4096]


async def test_concurrent_misses_share_one_derivation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = scram_module.derive_keys

    def counting(*args: Any) -> Any:
        calls.append(1)
        time.sleep(0.05)  # runs in the executor thread: makes the misses overlap
        return real(*args)

    monkeypatch.setattr(scram_module, "derive_keys", counting)
    cache = ScramKeyCache()
    await asyncio.gather(
        *(
            Authenticator(credential("SCRAM-SHA-256"), nonce=SHA256_NONCE, cache=cache).authenticate(
                spec_server("SCRAM-SHA-256"), None
            )
            for _ in range(5)
        )
    )
    assert calls == [1]


def test_cache_drops_least_recently_used() -> None:
    cache = ScramKeyCache(max_entries=2)
    keys = scram_module.ScramKeys(b"c", b"s")
    cache.put(SCRAM_SHA_256, b"p1", b"salt", 4096, keys)
    cache.put(SCRAM_SHA_256, b"p2", b"salt", 4096, keys)
    assert cache.get(SCRAM_SHA_256, b"p1", b"salt", 4096) is keys  # p1 now most recent
    cache.put(SCRAM_SHA_256, b"p3", b"salt", 4096, keys)
    assert cache.get(SCRAM_SHA_256, b"p2", b"salt", 4096) is None
    assert cache.get(SCRAM_SHA_256, b"p1", b"salt", 4096) is keys
    assert cache.get(SCRAM_SHA_1, b"p1", b"salt", 4096) is None  # the mechanism is part of the key
    assert "c" not in repr(keys).replace("ScramKeys", "")


async def test_event_loop_stays_responsive_during_a_cache_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key derivation of a cache miss runs off the loop: the loop keeps running other tasks while it is
    under way (the derivation is held until they have run, so a derivation on the loop would hang, not pass)."""
    iterations = 4096
    salt = b"fresh salt"
    nonce = "clientnonce"
    conversation = ScramConversation(SCRAM_SHA_256, "user", "pencil", nonce=nonce)
    # The server's stored keys, computed before the loop is watched (the client's cache is fresh).
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()

    def server_first(command: dict[str, Any]) -> Mapping[str, Any]:
        message = f"r={nonce}server,s={base64.b64encode(salt).decode()},i={iterations}".encode()
        return {"conversationId": 7, "payload": message, "done": False, "ok": 1}

    def server_final(command: dict[str, Any]) -> Mapping[str, Any]:
        # The server's side: check the proof against the known password's keys, then sign.
        final = command["payload"].decode()
        without_proof, proof = final.rsplit(",p=", 1)
        auth_message = f"n=user,r={nonce},r={nonce}server,s={base64.b64encode(salt).decode()},i={iterations},{without_proof}"
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message.encode(), "sha256").digest()
        assert bytes(a ^ b for a, b in zip(client_key, signature, strict=True)) == base64.b64decode(proof)
        verifier = hmac.new(server_key, auth_message.encode(), "sha256").digest()
        return {"conversationId": 7, "payload": b"v=" + base64.b64encode(verifier), "done": True, "ok": 1}

    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    derivation_threads: list[int] = []
    derivation_started = asyncio.Event()
    release = threading.Event()
    real_derive_keys = scram_module.derive_keys

    def held_derive_keys(*args: Any) -> Any:
        derivation_threads.append(threading.get_ident())
        loop.call_soon_threadsafe(derivation_started.set)
        if not release.wait(5.0):
            raise AssertionError("the loop ran nothing else while the keys were derived")
        return real_derive_keys(*args)

    monkeypatch.setattr(scram_module, "derive_keys", held_derive_keys)
    turns_while_deriving = 0

    async def other_work() -> None:
        nonlocal turns_while_deriving
        await derivation_started.wait()
        for _ in range(10):
            await asyncio.sleep(0)
            turns_while_deriving += 1
        release.set()

    working = asyncio.create_task(other_work())
    server = ScriptedServer(server_first, server_final)
    try:
        await authenticate_scram(
            credential("SCRAM-SHA-256"), "SCRAM-SHA-256", server, conversation=conversation, cache=ScramKeyCache()
        )
    finally:
        release.set()
        await working
    assert derivation_threads and derivation_threads[0] != loop_thread
    assert turns_while_deriving == 10
