"""SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677) as MongoDB speaks them over ``saslStart``/``saslContinue``.

``ScramConversation`` is the sans-I/O client side: it produces the client messages and checks the server's,
given the keys derived from the password. Deriving them (PBKDF2 with at least 4096 iterations) is the one
costly step, so it runs in the loop's default executor and its result is cached by (mechanism, password,
salt, iteration count), as the authentication spec requires: a pool opening many connections pays for it once.
``authenticate_scram`` drives a conversation through an injected ``run_command``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import logging
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mongio.backend import running_loop
from mongio.connection.auth.base import (
    AuthenticationFailed,
    CredentialLike,
    RunCommand,
    payload_bytes,
    run_auth_command,
)
from mongio.connection.auth.saslprep import SASLprepError, saslprep
from mongio.errors import ConfigurationError

__all__ = [
    "MIN_ITERATIONS",
    "SCRAM_SHA_1",
    "SCRAM_SHA_256",
    "ScramConversation",
    "ScramKeyCache",
    "ScramKeys",
    "ScramMechanism",
    "authenticate_scram",
    "default_key_cache",
    "scram_mechanism",
]

_log = logging.getLogger("mongio.connection.auth")

MIN_ITERATIONS = 4096
"""The spec's floor: fewer iterations from the server is taken for a downgrade attempt and refused."""

_MAX_EMPTY_EXCHANGES = 2


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1")
SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256")
_MECHANISMS = {m.name: m for m in (SCRAM_SHA_1, SCRAM_SHA_256)}


def scram_mechanism(name: str) -> ScramMechanism:
    try:
        return _MECHANISMS[name]
    except KeyError:
        raise ConfigurationError(f"{name!r} is not a SCRAM mechanism") from None


def prepare_password(mechanism: ScramMechanism, username: str, password: str) -> bytes:
    """The password as the mechanism feeds it to PBKDF2.

    SCRAM-SHA-1 uses MongoDB's digest ``hex(md5(user:mongo:password))`` (neither part SASLprepped);
    SCRAM-SHA-256 uses the SASLprepped password itself.
    """
    if mechanism is SCRAM_SHA_1:
        return hashlib.md5(f"{username}:mongo:{password}".encode(), usedforsecurity=False).hexdigest().encode()
    try:
        return saslprep(password).encode("utf-8")
    except SASLprepError as exc:
        raise ConfigurationError(f"the password cannot be used with SCRAM-SHA-256: {exc}") from None


@dataclass(frozen=True, slots=True)
class ScramKeys:
    """``ClientKey`` and ``ServerKey``: all a conversation needs from the password once the salt is known."""

    client_key: bytes
    server_key: bytes

    def __repr__(self) -> str:
        return "ScramKeys(<hidden>)"


def derive_keys(mechanism: ScramMechanism, prepared_password: bytes, salt: bytes, iterations: int) -> ScramKeys:
    """The RFC 5802 key derivation (blocking: seconds for high iteration counts)."""
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, prepared_password, salt, iterations)
    return ScramKeys(mechanism.hmac(salted, b"Client Key"), mechanism.hmac(salted, b"Server Key"))


_CacheKey = tuple[str, bytes, bytes, int]


class ScramKeyCache:
    """Derived keys by (mechanism, prepared password, salt, iterations), least recently used dropped first.

    ``keys()`` derives on a miss in the loop's default executor, and concurrent misses for the same entry on
    one loop share one derivation.
    """

    def __init__(self, max_entries: int = 64) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[_CacheKey, ScramKeys] = OrderedDict()
        self._pending: dict[_CacheKey, asyncio.Future[ScramKeys]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def get(
        self, mechanism: ScramMechanism, prepared_password: bytes, salt: bytes, iterations: int
    ) -> ScramKeys | None:
        key = (mechanism.name, prepared_password, salt, iterations)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(
        self, mechanism: ScramMechanism, prepared_password: bytes, salt: bytes, iterations: int, keys: ScramKeys
    ) -> None:
        self._store((mechanism.name, prepared_password, salt, iterations), keys)

    def _store(self, key: _CacheKey, keys: ScramKeys) -> None:
        self._entries[key] = keys
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    async def keys(
        self, mechanism: ScramMechanism, prepared_password: bytes, salt: bytes, iterations: int
    ) -> ScramKeys:
        """The cached keys, or derive them off the event loop and remember them."""
        found = self.get(mechanism, prepared_password, salt, iterations)
        if found is not None:
            return found
        loop = running_loop()
        key = (mechanism.name, prepared_password, salt, iterations)
        pending = self._pending.get(key)
        if pending is None or pending.get_loop() is not loop:
            pending = loop.run_in_executor(None, derive_keys, mechanism, prepared_password, salt, iterations)
            self._pending[key] = pending
            pending.add_done_callback(functools.partial(self._settle, key))
        # Shielded: one waiter being cancelled must not cancel the derivation the others share.
        return await asyncio.shield(pending)

    def _settle(self, key: _CacheKey, done: asyncio.Future[ScramKeys]) -> None:
        if self._pending.get(key) is done:
            del self._pending[key]
        if not done.cancelled() and done.exception() is None:
            self._store(key, done.result())


default_key_cache = ScramKeyCache()
"""The process-wide cache every client shares (keys are only as reusable as the passwords they came from)."""


def _escape_username(username: str) -> str:
    # RFC 5802 section 5.1: "=" and "," are the only characters a saslname must escape.
    return username.replace("=", "=3D").replace(",", "=2C")


def _parse_attributes(message: bytes, what: str) -> dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"{what}: the server's SCRAM message is not UTF-8") from None
    attributes: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise AuthenticationFailed(f"{what}: malformed SCRAM message from the server")
        attributes.setdefault(name, value)
    return attributes


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise AuthenticationFailed(f"{what}: the server sent malformed base64 in its SCRAM message") from None


class ScramConversation:
    """The client side of one SCRAM exchange, without I/O.

    Call ``client_first()``, give the server's answer to ``server_first()``, send ``client_final(keys)``
    (the keys from ``keys_for(server_first)``), and check the server's last message with ``verify_server_final()``.
    ``nonce`` is injectable for tests; by default 24 random bytes, base64-encoded.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        source: str = "admin",
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self.username = username
        self.source = source
        self._prepared_password = prepare_password(mechanism, username, password)
        self.client_nonce = nonce if nonce is not None else base64.b64encode(secrets.token_bytes(24)).decode()
        self._client_first_bare = f"n={_escape_username(username)},r={self.client_nonce}"
        self._auth_message: bytes | None = None
        self._server_signature: bytes | None = None
        self.salt: bytes | None = None
        self.iterations: int | None = None
        self.server_nonce: str | None = None
        self._server_first: bytes | None = None

    def __repr__(self) -> str:
        return f"<ScramConversation {self.mechanism.name} user={self.username!r} db={self.source!r}>"

    @property
    def what(self) -> str:
        """How errors name this conversation."""
        return f"{self.mechanism.name} authentication failed for user {self.username!r} on {self.source!r}"

    def client_first(self) -> bytes:
        """``n,,n=<user>,r=<nonce>``: no channel binding is ever advertised."""
        return f"n,,{self._client_first_bare}".encode()

    def sasl_start(self) -> dict[str, Any]:
        """The ``saslStart`` command carrying the first message."""
        return {
            "saslStart": 1,
            "mechanism": self.mechanism.name,
            "payload": self.client_first(),
            "autoAuthorize": 1,
            "options": {"skipEmptyExchange": True},
        }

    def speculative_command(self) -> dict[str, Any]:
        """``saslStart`` plus the ``db`` to authenticate against, for the hello's ``speculativeAuthenticate``."""
        return {**self.sasl_start(), "db": self.source}

    def server_first(self, message: bytes) -> None:
        """Check the server's first message: our nonce extended, a salt, at least ``MIN_ITERATIONS``."""
        attributes = _parse_attributes(message, self.what)
        if "m" in attributes:
            raise AuthenticationFailed(f"{self.what}: the server requires an unsupported SCRAM extension")
        nonce, salt, iterations = attributes.get("r"), attributes.get("s"), attributes.get("i")
        if nonce is None or salt is None or iterations is None:
            raise AuthenticationFailed(f"{self.what}: the server's first SCRAM message lacks r, s or i")
        if not nonce.startswith(self.client_nonce) or len(nonce) <= len(self.client_nonce):
            raise AuthenticationFailed(f"{self.what}: the server's nonce does not extend the client's")
        try:
            count = int(iterations)
        except ValueError:
            raise AuthenticationFailed(f"{self.what}: the iteration count is not a number") from None
        if count < MIN_ITERATIONS:
            raise AuthenticationFailed(
                f"{self.what}: the server asked for {count} iterations, fewer than the minimum {MIN_ITERATIONS}"
            )
        self.server_nonce = nonce
        self.salt = _b64decode(salt, self.what)
        self.iterations = count
        self._server_first = message

    async def keys(self, cache: ScramKeyCache | None = None) -> ScramKeys:
        """The keys for the salt and iteration count the server sent, from ``cache`` or derived off-loop."""
        if self.salt is None or self.iterations is None:
            raise RuntimeError("server_first() must come first")
        return await (cache if cache is not None else default_key_cache).keys(
            self.mechanism, self._prepared_password, self.salt, self.iterations
        )

    def keys_now(self) -> ScramKeys:
        """The keys derived on the spot (blocking; for tests and synchronous tools)."""
        if self.salt is None or self.iterations is None:
            raise RuntimeError("server_first() must come first")
        return derive_keys(self.mechanism, self._prepared_password, self.salt, self.iterations)

    def client_final(self, keys: ScramKeys) -> bytes:
        """``c=biws,r=<nonce>,p=<proof>``; remembers the server signature to expect."""
        if self._server_first is None or self.server_nonce is None:
            raise RuntimeError("server_first() must come first")
        without_proof = f"c=biws,r={self.server_nonce}"
        auth_message = b",".join(
            (self._client_first_bare.encode(), self._server_first, without_proof.encode())
        )
        stored_key = self.mechanism.digest(keys.client_key)
        client_signature = self.mechanism.hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(keys.client_key, client_signature, strict=True))
        self._auth_message = auth_message
        self._server_signature = self.mechanism.hmac(keys.server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, message: bytes) -> None:
        """Check ``v=<server signature>``: proof that the server knows the password too."""
        if self._server_signature is None:
            raise RuntimeError("client_final() must come first")
        attributes = _parse_attributes(message, self.what)
        if "e" in attributes:
            raise AuthenticationFailed(f"{self.what}: the server reported {attributes['e']!r}")
        signature = attributes.get("v")
        if signature is None:
            raise AuthenticationFailed(f"{self.what}: the server's final SCRAM message has no signature")
        if not hmac.compare_digest(_b64decode(signature, self.what), self._server_signature):
            raise AuthenticationFailed(f"{self.what}: the server's signature is wrong")


def _conversation_id(reply: Mapping[str, Any]) -> Any:
    return reply.get("conversationId")


async def authenticate_scram(
    credential: CredentialLike,
    mechanism_name: str,
    run_command: RunCommand,
    *,
    conversation: ScramConversation | None = None,
    speculative_reply: Mapping[str, Any] | None = None,
    cache: ScramKeyCache | None = None,
) -> None:
    """Run a SCRAM conversation to its end, or raise ``AuthenticationFailed``.

    With ``speculative_reply`` (the hello's ``speculativeAuthenticate`` answer to ``conversation``'s
    ``speculative_command()``) the first round trip is skipped.
    """
    mechanism = scram_mechanism(mechanism_name)
    if conversation is None:
        if not credential.username or credential.password is None:
            raise ConfigurationError(f"{mechanism.name} needs a username and a password")
        conversation = ScramConversation(
            mechanism, credential.username, credential.password, source=credential.source
        )
    what = conversation.what
    source = conversation.source
    if speculative_reply is not None:
        reply: Mapping[str, Any] = speculative_reply
    else:
        reply = await run_auth_command(run_command, source, conversation.sasl_start(), what)
    if reply.get("done"):
        raise AuthenticationFailed(f"{what}: the server ended the conversation before the client's proof")
    conversation_id = _conversation_id(reply)
    conversation.server_first(payload_bytes(reply, what))
    keys = await conversation.keys(cache)
    final = conversation.client_final(keys)
    reply = await run_auth_command(
        run_command,
        source,
        {"saslContinue": 1, "conversationId": conversation_id, "payload": final},
        what,
    )
    conversation.verify_server_final(payload_bytes(reply, what))
    # Servers that ignore skipEmptyExchange want one more empty message before they say done.
    exchanges = 0
    while not reply.get("done"):
        exchanges += 1
        if exchanges > _MAX_EMPTY_EXCHANGES:
            raise AuthenticationFailed(f"{what}: the server did not end the conversation")
        reply = await run_auth_command(
            run_command,
            source,
            {"saslContinue": 1, "conversationId": conversation_id, "payload": b""},
            what,
        )
    _log.debug("authenticated user %r on %r with %s", conversation.username, source, mechanism.name)
