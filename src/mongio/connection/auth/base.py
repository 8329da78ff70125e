"""What every mechanism shares: the credential shape it reads, the command runner it talks through, and the
error it raises."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mongio.errors import OperationFailure

__all__ = [
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

# The reply fields an error may carry; anything else (a payload above all) stays out of error messages.
_SAFE_REPLY_FIELDS = ("ok", "errmsg", "code", "codeName", "errorLabels")


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


class AuthenticationFailed(OperationFailure):
    """Authentication did not succeed: the server refused the credential, or its answers could not be trusted
    (a wrong server signature, a nonce that does not extend ours, too few iterations).

    The message names the user, the database and the mechanism; it never holds the password or anything
    derived from it.
    """

    def __init__(
        self,
        message: str,
        code: int | None = _AUTHENTICATION_FAILED,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        safe = None if details is None else {k: details[k] for k in _SAFE_REPLY_FIELDS if k in details}
        super().__init__(message, code, safe)


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
