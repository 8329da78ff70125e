"""What every mechanism shares: the credential shape it reads, the command runner it talks through, and the
error it raises."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mongio.errors import AuthenticationFailed, OperationFailure

__all__ = [
    "REAUTHENTICATION_REQUIRED",
    "AuthenticationFailed",
    "CredentialLike",
    "RunCommand",
    "check_reply",
    "payload_bytes",
    "run_auth_command",
]

RunCommand = Callable[[str, dict[str, Any]], Awaitable[Mapping[str, Any]]]
"""``await run_command(db, command)``: run one command on the connection being authenticated."""

_AUTHENTICATION_FAILED = 18
REAUTHENTICATION_REQUIRED = 391
"""The server's ReauthenticationRequired: the connection's credential expired; authenticate again and retry."""


class CredentialLike(Protocol):
    """The fields of ``MongoCredential`` the mechanisms read."""

    @property
    def mechanism(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def username(self) -> str | None: ...

    @property
    def password(self) -> str | None: ...

    @property
    def mechanism_properties(self) -> Mapping[str, Any]: ...


def payload_bytes(reply: Mapping[str, Any], what: str) -> bytes:
    """The SASL ``payload`` of a reply, as bytes (servers send BinData; a base64 string is accepted too)."""
    payload = reply.get("payload")
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    if isinstance(payload, str):
        return base64.b64decode(payload)
    raise AuthenticationFailed(f"{what}: the server's reply has no SASL payload", details=reply)


def check_reply(reply: Mapping[str, Any], what: str) -> None:
    """Raise ``AuthenticationFailed`` for a reply whose ``ok`` is not 1 (for runners that return failures)."""
    if reply.get("ok") != 1:
        message = str(reply.get("errmsg", "authentication failed"))
        code = reply.get("code")
        raise AuthenticationFailed(
            f"{what}: {message}", code if isinstance(code, int) else _AUTHENTICATION_FAILED, reply
        )


async def run_auth_command(
    run_command: RunCommand, db: str, command: dict[str, Any], what: str
) -> Mapping[str, Any]:
    """Run one command of a conversation; a refusal becomes ``AuthenticationFailed`` naming ``what``.

    Network errors pass through unchanged: they say nothing about the credential.
    """
    try:
        reply = await run_command(db, command)
    except AuthenticationFailed:
        raise
    except OperationFailure as exc:
        details = exc.details or {}
        message = str(details.get("errmsg", exc.args[0] if exc.args else "authentication failed"))
        raise AuthenticationFailed(f"{what}: {message}", exc.code, details) from None
    check_reply(reply, what)
    return reply
