"""MONGODB-OIDC (auth.md, "MONGODB-OIDC"): the conversations of one connection, over the client's token cache.

Machine flow (``ENVIRONMENT`` or ``OIDC_CALLBACK``): a one-step ``saslStart`` with ``{jwt}``. A cached token the
server refuses with AuthenticationFailed (18) is invalidated and one new token fetched and tried; any other error
is raised with the cache left alone. Human flow (``OIDC_HUMAN_CALLBACK``): the cached token, then the refresh
token, then the two-step conversation (``{n}`` for the identity provider's information, then ``{jwt}``), each
later step reached only when the server refused the earlier one with 18. A human callback is never called for a
host outside ``ALLOWED_HOSTS``.

The token a connection authenticated with is its *Connection Cache*: reauthentication (after
ReauthenticationRequired, 391) invalidates exactly that token, then authenticates again without a hello.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mongio.auth_oidc import CallbackLike, OIDCCallbackContext, OIDCCallbackResult, OIDCIdPInfo
from mongio.backend import running_loop
from mongio.bson import decode, encode
from mongio.connection.auth.base import CredentialLike, RunCommand, payload_bytes, run_auth_command
from mongio.connection.auth.oidc_cache import CachedToken, OidcTokenCache, call_callback
from mongio.connection.auth.oidc_environments import OidcTokenError, environment_callback
from mongio.errors import AuthenticationFailed, ConfigurationError

__all__ = [
    "HUMAN_CALLBACK_TIMEOUT",
    "MACHINE_CALLBACK_TIMEOUT",
    "MECHANISM",
    "OidcConversation",
    "OidcTokenError",
    "host_allowed",
]

_log = logging.getLogger("mongio.connection.auth")

MECHANISM = "MONGODB-OIDC"
EXTERNAL = "$external"
MACHINE_CALLBACK_TIMEOUT = 60.0
"""Seconds a machine callback has when no connect or operation deadline is nearer."""
HUMAN_CALLBACK_TIMEOUT = 300.0
"""Seconds a human callback has (a person is involved: no operation timeout applies)."""
_AUTHENTICATION_FAILED = 18


def host_allowed(host: str, allowed_hosts: tuple[str, ...] | list[str]) -> bool:
    """Whether ``host`` (no port) matches ``ALLOWED_HOSTS``: exactly, or below a ``*.domain`` pattern."""
    host = host.lower().rstrip(".")
    for pattern in allowed_hosts:
        pattern = pattern.lower().rstrip(".")
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]):
                return True
        elif host == pattern:
            return True
    return False


def jwt_payload(token: CachedToken) -> bytes:
    return encode({"jwt": token.value})


def _sasl_start(payload: bytes) -> dict[str, Any]:
    return {"saslStart": 1, "mechanism": MECHANISM, "payload": payload}


class OidcConversation:
    """MONGODB-OIDC for one connection with the client's ``cache``; ``host`` is the server's host name (for
    ``ALLOWED_HOSTS``). Holds the Connection Cache: the token this connection authenticated with."""

    def __init__(self, credential: CredentialLike, cache: OidcTokenCache, *, host: str | None = None) -> None:
        self._credential = credential
        self._cache = cache
        self._host = host
        self._token: CachedToken | None = None
        properties = credential.mechanism_properties
        self._human: CallbackLike | None = properties.get("OIDC_HUMAN_CALLBACK")
        machine = properties.get("OIDC_CALLBACK")
        environment = properties.get("ENVIRONMENT")
        if self._human is None and machine is None:
            if environment is None:
                raise ConfigurationError("MONGODB-OIDC: either ENVIRONMENT or an OIDC_CALLBACK is required")
            self._machine: CallbackLike | None = environment_callback(
                environment, properties.get("TOKEN_RESOURCE")
            )
        else:
            self._machine = machine
        self._what = (
            "OIDC_HUMAN_CALLBACK"
            if self._human is not None
            else ("OIDC_CALLBACK" if machine is not None else f"ENVIRONMENT={environment} token source")
        )

    def __repr__(self) -> str:
        return f"OidcConversation({self._what}, authenticated={self._token is not None})"

    # -- speculative authentication ---------------------------------------------------------------------

    def speculative_command(self) -> dict[str, Any] | None:
        """The hello's ``speculativeAuthenticate`` (with ``db``), only when the client has a cached token."""
        token = self._cache.token
        if token is None or (self._human is not None and not self._host_allowed()):
            return None  # a human flow's token never goes to a host outside ALLOWED_HOSTS, not even here
        self._token = token
        return {**_sasl_start(jwt_payload(token)), "db": EXTERNAL}

    # -- authentication -----------------------------------------------------------------------------------

    async def authenticate(
        self,
        run_command: RunCommand,
        *,
        speculative_reply: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> None:
        """Authenticate after the handshake; ``deadline`` (``loop.time()`` terms) bounds a machine callback."""
        if (
            speculative_reply is not None
            and speculative_reply.get("done") is True
            and self._token is not None
        ):
            _log.debug("authenticated with MONGODB-OIDC (speculative)")
            return
        self._token = None  # the speculative attempt, if any, did not authenticate (its token stays cached)
        if self._human is not None:
            await self._authenticate_human(run_command, self._human)
        else:
            assert self._machine is not None
            await self._authenticate_machine(run_command, self._machine, deadline)

    async def reauthenticate(self, run_command: RunCommand, *, deadline: float | None = None) -> None:
        """After ReauthenticationRequired (391): drop this connection's token from the client cache and run the
        conversation again (never speculatively, never with a hello)."""
        self._cache.invalidate(self._token)
        self._token = None
        await self.authenticate(run_command, deadline=deadline)

    async def _authenticate_machine(
        self, run_command: RunCommand, callback: CallbackLike, deadline: float | None
    ) -> None:
        async def fetch() -> OIDCCallbackResult:
            context = OIDCCallbackContext(
                timeout_seconds=_machine_timeout(deadline), username=self._credential.username
            )
            return await call_callback(callback, context, self._what)

        token, from_cache = await self._cache.get(fetch, pace=True)
        if from_cache:
            try:
                await self._one_step(run_command, token)
                return
            except AuthenticationFailed as exc:
                if exc.code != _AUTHENTICATION_FAILED:
                    raise
                self._cache.invalidate(token)
            token, _ = await self._cache.get(fetch, pace=True)
        await self._one_step(run_command, token)

    async def _authenticate_human(self, run_command: RunCommand, callback: CallbackLike) -> None:
        if not self._host_allowed():
            allowed = list(self._credential.mechanism_properties.get("ALLOWED_HOSTS") or ())
            raise ConfigurationError(
                f"MONGODB-OIDC: host {self._host!r} is not in ALLOWED_HOSTS {allowed}; the "
                "OIDC_HUMAN_CALLBACK was not called"
            )
        cached = self._cache.token
        if cached is not None and await self._one_step_unless_refused(run_command, cached):
            return
        refresh_token = self._cache.refresh_token
        idp_info = self._cache.idp_info
        if refresh_token is not None and idp_info is not None:

            async def refresh() -> OIDCCallbackResult:
                return await self._call_human(callback, idp_info, refresh_token)

            token, _ = await self._cache.get(refresh, pace=False)
            if await self._one_step_unless_refused(run_command, token):
                return
            self._cache.forget_refresh_token(refresh_token)
        await self._two_step(run_command, callback)

    def _host_allowed(self) -> bool:
        allowed = tuple(self._credential.mechanism_properties.get("ALLOWED_HOSTS") or ())
        return self._host is not None and host_allowed(self._host, allowed)

    async def _one_step_unless_refused(self, run_command: RunCommand, token: CachedToken) -> bool:
        """One-step with ``token``: True when it authenticated; False (``token`` invalidated) when the server
        refused it with 18; any other error is raised."""
        try:
            await self._one_step(run_command, token)
            return True
        except AuthenticationFailed as exc:
            if exc.code != _AUTHENTICATION_FAILED:
                raise
        self._cache.invalidate(token)
        self._token = None
        return False

    async def _two_step(self, run_command: RunCommand, callback: CallbackLike) -> None:
        principal: dict[str, Any] = {}
        if self._credential.username:
            principal["n"] = self._credential.username
        what = "MONGODB-OIDC authentication failed"
        reply = await run_auth_command(
            run_command, EXTERNAL, {**_sasl_start(encode(principal)), "db": EXTERNAL}, what
        )
        idp_info = _idp_info(payload_bytes(reply, what))
        self._cache.remember_idp_info(idp_info)

        async def fetch() -> OIDCCallbackResult:
            return await self._call_human(callback, idp_info, None)  # never a cached refresh token here

        token, _ = await self._cache.get(fetch, pace=False)
        self._token = token
        await run_auth_command(
            run_command,
            EXTERNAL,
            {"saslContinue": 1, "conversationId": reply.get("conversationId"), "payload": jwt_payload(token)},
            what,
        )
        _log.debug("authenticated with MONGODB-OIDC (two-step)")

    async def _call_human(
        self, callback: CallbackLike, idp_info: OIDCIdPInfo, refresh_token: str | None
    ) -> OIDCCallbackResult:
        context = OIDCCallbackContext(
            timeout_seconds=HUMAN_CALLBACK_TIMEOUT,
            username=self._credential.username,
            refresh_token=refresh_token,
            idp_info=idp_info,
        )
        return await call_callback(callback, context, self._what)

    async def _one_step(self, run_command: RunCommand, token: CachedToken) -> None:
        self._token = token
        command = {**_sasl_start(jwt_payload(token)), "db": EXTERNAL}
        await run_auth_command(run_command, EXTERNAL, command, "MONGODB-OIDC authentication failed")
        _log.debug("authenticated with MONGODB-OIDC")


def _machine_timeout(deadline: float | None) -> float:
    if deadline is None:
        return MACHINE_CALLBACK_TIMEOUT
    return max(deadline - running_loop().time(), 0.0)


def _idp_info(payload: bytes) -> OIDCIdPInfo:
    """The identity provider's information from the server's first two-step reply (checked: hostile bytes)."""
    try:
        document = decode(payload)
    except Exception:
        raise AuthenticationFailed(
            "MONGODB-OIDC: the server's identity provider information is not BSON"
        ) from None
    issuer = document.get("issuer")
    client_id = document.get("clientId")
    scopes = document.get("requestScopes")
    if not isinstance(issuer, str) or not issuer:
        raise AuthenticationFailed("MONGODB-OIDC: the server's identity provider information has no issuer")
    if client_id is not None and not isinstance(client_id, str):
        raise AuthenticationFailed("MONGODB-OIDC: the server's identity provider clientId is not a string")
    if scopes is not None and (not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes)):
        raise AuthenticationFailed(
            "MONGODB-OIDC: the server's identity provider requestScopes is not a list of strings"
        )
    return OIDCIdPInfo(issuer=issuer, client_id=client_id, request_scopes=tuple(scopes) if scopes else None)
