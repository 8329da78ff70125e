"""MONGODB-AWS: the client proves who it is by signing an ``sts:GetCallerIdentity`` request (AWS
Signature Version 4) that the server then sends to STS itself.

Two SASL steps on ``$external``: the client sends a 32-byte random nonce; the server answers with its own
64-byte nonce (which must start with ours) and the STS host (which must be a well-formed name); the client
answers with the ``Authorization`` header and date of the signed request, and the session token of
temporary credentials. Credentials come from :mod:`mongio.connection.auth.aws_credentials`; when the
conversation fails for any reason the process's cached credentials are dropped, as the specification says.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
from collections.abc import Callable
from typing import Any

from mongio.backend import timeout_at
from mongio.bson import decode, encode
from mongio.bson.errors import BSONError
from mongio.connection.auth.aws_credentials import (
    CREDENTIAL_CACHE,
    AwsCredentials,
    CredentialsUnavailable,
    obtain_credentials,
)
from mongio.connection.auth.base import (
    AuthenticationFailed,
    CredentialLike,
    RunCommand,
    payload_bytes,
    run_auth_command,
)
from mongio.connection.auth.sigv4 import sign_get_caller_identity

__all__ = ["authenticate_aws", "check_server_first", "client_first_payload", "client_second_payload"]

_log = logging.getLogger("mongio.connection.auth")

EXTERNAL = "$external"
MECHANISM = "MONGODB-AWS"
_NONCE_SIZE = 32
_GS2_CB_FLAG_N = ord("n")
_WHAT = "MONGODB-AWS authentication failed"


def client_first_payload(client_nonce: bytes) -> bytes:
    """``{r: <nonce>, p: 110}``: the nonce and the gs2-cb-flag ``n`` (channel binding is never offered)."""
    return encode({"r": client_nonce, "p": _GS2_CB_FLAG_N})


def check_server_first(payload: bytes, client_nonce: bytes) -> tuple[bytes, str]:
    """The server nonce and STS host of the server's first message, checked; ``AuthenticationFailed`` else."""
    try:
        message = decode(payload)
    except (BSONError, ValueError):
        raise AuthenticationFailed(f"{_WHAT}: the server's first message is not a BSON document") from None
    server_nonce, host = message.get("s"), message.get("h")
    if not isinstance(server_nonce, bytes) or len(server_nonce) != 2 * _NONCE_SIZE:
        size = len(server_nonce) if isinstance(server_nonce, bytes) else "no"
        raise AuthenticationFailed(f"{_WHAT}: the server nonce has {size} bytes instead of 64")
    if not server_nonce.startswith(client_nonce):
        raise AuthenticationFailed(f"{_WHAT}: the server nonce does not start with the client nonce")
    if not isinstance(host, str):
        raise AuthenticationFailed(f"{_WHAT}: the server did not send the STS host")
    return server_nonce, host


def client_second_payload(
    credentials: AwsCredentials, server_nonce: bytes, host: str, now: datetime.datetime
) -> bytes:
    """``{a: <Authorization>, d: <X-Amz-Date>, t: <session token>}`` (``t`` only for temporary credentials)."""
    amz_date = now.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        signed = sign_get_caller_identity(
            credentials.access_key,
            credentials.secret_key,
            credentials.token,
            host,
            base64.b64encode(server_nonce).decode("ascii"),
            amz_date,
        )
    except ValueError as exc:
        raise AuthenticationFailed(f"{_WHAT}: {exc}") from None
    message: dict[str, Any] = {"a": signed.authorization, "d": signed.amz_date}
    if credentials.token is not None:
        message["t"] = credentials.token
    return encode(message)


async def _converse(run_command: RunCommand, credentials: AwsCredentials) -> None:
    client_nonce = os.urandom(_NONCE_SIZE)
    start = {"saslStart": 1, "mechanism": MECHANISM, "payload": client_first_payload(client_nonce)}
    reply = await run_auth_command(run_command, EXTERNAL, start, _WHAT)
    server_nonce, host = check_server_first(payload_bytes(reply, _WHAT), client_nonce)
    second = client_second_payload(credentials, server_nonce, host, datetime.datetime.now(datetime.UTC))
    continue_command = {"saslContinue": 1, "conversationId": reply.get("conversationId"), "payload": second}
    final = await run_auth_command(run_command, EXTERNAL, continue_command, _WHAT)
    if not final.get("done"):
        raise AuthenticationFailed(f"{_WHAT}: the server did not end the conversation", details=final)


async def authenticate_aws(
    credential: CredentialLike, run_command: RunCommand, *, deadline: float | None = None
) -> None:
    """Obtain credentials (see :func:`obtain_credentials`) within ``deadline`` and run the conversation."""
    provider: Callable[[], Any] | None = credential.mechanism_properties.get("AWS_CREDENTIAL_PROVIDER")
    try:
        async with timeout_at(deadline):
            credentials = await obtain_credentials(provider)
    except CredentialsUnavailable as exc:
        raise AuthenticationFailed(f"{_WHAT}: no AWS credentials: {exc}") from exc
    except TimeoutError:
        raise AuthenticationFailed(
            f"{_WHAT}: no AWS credentials before the connection's time limit (connectTimeoutMS or timeoutMS)"
        ) from None
    try:
        await _converse(run_command, credentials)
    except Exception:
        CREDENTIAL_CACHE.clear()
        raise
    _log.debug("authenticated access key %r with MONGODB-AWS", credentials.access_key)
