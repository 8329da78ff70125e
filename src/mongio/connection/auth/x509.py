"""MONGODB-X509: the TLS client certificate's subject is the user; one ``authenticate`` command on
``$external``, or none at all when the hello's speculative authentication already did it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mongio.connection.auth.base import CredentialLike, RunCommand, run_auth_command

__all__ = ["authenticate_x509", "x509_command"]

_log = logging.getLogger("mongio.connection.auth")

EXTERNAL = "$external"


def x509_command(username: str | None) -> dict[str, Any]:
    """``{authenticate: 1, mechanism: "MONGODB-X509"}``, with ``user`` only when the application gave one
    (the server otherwise takes the certificate's subject)."""
    command: dict[str, Any] = {"authenticate": 1, "mechanism": "MONGODB-X509"}
    if username:
        command["user"] = username
    return command


def speculative_x509_command(username: str | None) -> dict[str, Any]:
    return {**x509_command(username), "db": EXTERNAL}


async def authenticate_x509(
    credential: CredentialLike,
    run_command: RunCommand,
    *,
    speculative_reply: Mapping[str, Any] | None = None,
) -> None:
    if speculative_reply is not None:
        # The server answers a speculative X.509 authenticate only when it succeeded.
        _log.debug("authenticated %r with MONGODB-X509 (speculative)", speculative_reply.get("user"))
        return
    what = "MONGODB-X509 authentication failed" + (
        f" for user {credential.username!r}" if credential.username else ""
    )
    reply = await run_auth_command(run_command, EXTERNAL, x509_command(credential.username), what)
    _log.debug("authenticated %r with MONGODB-X509", reply.get("user"))
