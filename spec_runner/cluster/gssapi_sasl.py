"""The server side of GSSAPI (Kerberos, RFC 4752), for the cluster harness's members and the tests' fake member.

A server configured for Kerberos holds the keys of its service principal (``mongodb/<host>``) in a keytab and
runs a GSS-API acceptor: ``saslStart`` carries the client's first context token, ``saslContinue`` the next ones
until the context is established; the server then sends its security layer offer wrapped (integrity-protected),
and the client's wrapped answer (layer, maximum size, authorization identity) ends the conversation.
:class:`GssapiSaslServer` does this with python-gssapi's real acceptor (``SecurityContext(usage="accept")``) and
the keytab it is given. Its calls block (they read the keytab, check tickets): the tests' fake member runs them in
worker threads; the harness's members call them directly, a few milliseconds per step on loopback.

Payloads may come as BinData or as base64 text (PyMongo sends text); the replies use the client's form.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NO_LAYER_OFFER", "GssapiExchange", "GssapiSaslServer"]

MECHANISM = "GSSAPI"
# RFC 4752's offer: "no security layer" only, and a maximum message size the server could receive.
NO_LAYER_OFFER = bytes((0x01, 0x00, 0x10, 0x00))
_FAILED = {"ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "Authentication failed."}


@dataclass
class GssapiExchange:
    """One conversation's acceptor side."""

    context: Any
    text: bool
    """The client sent base64 text payloads, so the replies are base64 text too."""
    offered: bool = False
    initiator: str | None = None


@dataclass
class GssapiSaslServer:
    """Answers GSSAPI conversations with the keys in ``keytab_path``.

    ``offer`` is the security layer offer sent wrapped, its last byte flipped after wrapping when
    ``tamper_offer``. ``authenticated`` lists ``(initiator principal, authorization id)`` per success,
    ``targets`` the service principal each established context was for, ``answers`` the client's unwrapped
    security layer answers, ``failures`` why a conversation was refused.
    """

    keytab_path: str
    offer: bytes = NO_LAYER_OFFER
    tamper_offer: bool = False
    authenticated: list[tuple[str, str]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    answers: list[bytes] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def _refuse(self, reason: str) -> dict[str, Any]:
        self.failures.append(reason)
        return dict(_FAILED)

    def start(self, command: Mapping[str, Any]) -> tuple[dict[str, Any], GssapiExchange | None]:
        """The reply to ``saslStart`` and the conversation it opens (None when refused)."""
        import gssapi
        from gssapi.raw.misc import GSSError

        if command.get("mechanism") != MECHANISM:
            return self._refuse(f"saslStart with {command.get('mechanism')}"), None
        try:
            credentials = gssapi.Credentials(usage="accept", store={"keytab": self.keytab_path})
        except GSSError as exc:
            return self._refuse(str(exc.gen_message())), None
        exchange = GssapiExchange(
            gssapi.SecurityContext(creds=credentials, usage="accept"), isinstance(command.get("payload"), str)
        )
        reply = self._step(exchange, _payload(command))
        return reply, (exchange if reply.get("ok") else None)

    def finish(self, exchange: GssapiExchange | None, command: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to one ``saslContinue``: a context token, the wrapped offer, or the end (``done``)."""
        if exchange is None:
            return self._refuse("saslContinue without saslStart")
        payload = _payload(command)
        if not exchange.context.complete:
            return self._step(exchange, payload)
        if not exchange.offered:
            exchange.offered = True
            wrapped = bytes(exchange.context.wrap(self.offer, False).message)
            if self.tamper_offer:
                wrapped = wrapped[:-1] + bytes((wrapped[-1] ^ 0xFF,))
            return _reply(exchange, wrapped)
        return self._check_answer(exchange, payload)

    def _step(self, exchange: GssapiExchange, token: bytes) -> dict[str, Any]:
        from gssapi.raw.misc import GSSError

        try:
            produced = exchange.context.step(token)
        except GSSError as exc:
            return self._refuse(str(exc.gen_message()))
        if exchange.context.complete:
            exchange.initiator = str(exchange.context.initiator_name)
            self.targets.append(str(exchange.context.target_name))
        return _reply(exchange, produced or b"")

    def _check_answer(self, exchange: GssapiExchange, payload: bytes) -> dict[str, Any]:
        from gssapi.raw.misc import GSSError

        try:
            answer = bytes(exchange.context.unwrap(payload).message)
        except GSSError as exc:
            return self._refuse(str(exc.gen_message()))
        self.answers.append(answer)
        if len(answer) < 4 or answer[0] != 0x01:
            return self._refuse(f"bad security layer answer {answer[:4]!r}")
        authorization_id = answer[4:].decode("utf-8")
        if authorization_id != exchange.initiator:
            return self._refuse(f"authorization id {authorization_id!r} is not {exchange.initiator!r}")
        self.authenticated.append((exchange.initiator, authorization_id))
        return _reply(exchange, b"", done=True)


def _payload(command: Mapping[str, Any]) -> bytes:
    payload = command.get("payload", b"")
    return base64.b64decode(payload) if isinstance(payload, str) else bytes(payload)


def _reply(exchange: GssapiExchange, payload: bytes, *, done: bool = False) -> dict[str, Any]:
    sent: bytes | str = base64.b64encode(payload).decode() if exchange.text else payload
    return {"conversationId": 1, "payload": sent, "done": done, "ok": 1}
