"""PLAIN (RFC 4616), which MongoDB uses for LDAP: the password travels as it is, so use it only over TLS."""

from __future__ import annotations

import logging
from typing import Any

from mongio.connection.auth.base import AuthenticationFailed, CredentialLike, RunCommand, run_auth_command
from mongio.errors import ConfigurationError

__all__ = ["authenticate_plain", "plain_payload", "plain_sasl_start"]

_log = logging.getLogger("mongio.connection.auth")


def plain_payload(username: str, password: str) -> bytes:
    """``\\0user\\0password``: no authorization identity, which the server then takes to be the user."""
    return b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")


def plain_sasl_start(username: str, password: str) -> dict[str, Any]:
    return {
        "saslStart": 1,
        "mechanism": "PLAIN",
        "payload": plain_payload(username, password),
        "autoAuthorize": 1,
    }


async def authenticate_plain(credential: CredentialLike, run_command: RunCommand) -> None:
    """One ``saslStart`` on the credential's source (``$external`` unless the URI named a database)."""
    if not credential.username or credential.password is None:
        raise ConfigurationError("PLAIN needs a username and a password")
    what = f"PLAIN authentication failed for user {credential.username!r} on {credential.source!r}"
    reply = await run_auth_command(
        run_command, credential.source, plain_sasl_start(credential.username, credential.password), what
    )
    if not reply.get("done"):
        raise AuthenticationFailed(f"{what}: the server did not end the conversation", details=reply)
    _log.debug("authenticated user %r on %r with PLAIN", credential.username, credential.source)
