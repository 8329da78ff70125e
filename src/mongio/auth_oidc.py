"""The MONGODB-OIDC callback API: what an ``OIDC_CALLBACK`` or ``OIDC_HUMAN_CALLBACK`` is given and returns.

The names are PyMongo's, so a PyMongo program's callback ports by changing its import::

    from mongio.auth_oidc import OIDCCallback, OIDCCallbackContext, OIDCCallbackResult

    class MyCallback(OIDCCallback):
        async def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
            token = await my_identity_provider.token(timeout=context.timeout_seconds)
            return OIDCCallbackResult(access_token=token)

    client = MongoClient(uri, authMechanism="MONGODB-OIDC",
                         authMechanismProperties={"OIDC_CALLBACK": MyCallback()})

``fetch`` may be a coroutine function (awaited on the event loop) or a plain function (run in a worker thread,
so it may block). A plain callable taking the context is accepted in place of an ``OIDCCallback``.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CALLBACK_VERSION",
    "OIDCCallback",
    "OIDCCallbackContext",
    "OIDCCallbackResult",
    "OIDCIdPInfo",
]

CALLBACK_VERSION = 1
"""The callback API version given to every callback (``context.version``)."""


@dataclass(frozen=True)
class OIDCIdPInfo:
    """The identity provider the server named in the human flow's first step."""

    issuer: str
    """The IdP's issuer URL (the ``iss`` of its tokens)."""
    client_id: str | None = None
    """The OIDC client id to request tokens for (absent for a machine identity)."""
    request_scopes: Sequence[str] | None = None
    """Extra scopes to request."""


@dataclass(frozen=True)
class OIDCCallbackContext:
    """What a callback is told each time it is called."""

    timeout_seconds: float
    """How long the callback has: it is cancelled (coroutine) or its result ignored (thread) after that."""
    username: str | None
    """The username of the connection string or the client's options (an Azure managed identity's client id)."""
    version: int = CALLBACK_VERSION
    refresh_token: str | None = field(default=None, repr=False)
    """Human flow: the refresh token the previous call returned, to get a new access token without a person."""
    idp_info: OIDCIdPInfo | None = None
    """Human flow: the identity provider to obtain the token from."""


@dataclass(frozen=True)
class OIDCCallbackResult:
    """What a callback returns: an access token, and for the human flow optionally a refresh token."""

    access_token: str = field(repr=False)
    expires_in_seconds: float | None = None
    """Seconds until the token expires (must not be negative); informational."""
    refresh_token: str | None = field(default=None, repr=False)


class OIDCCallback(abc.ABC):
    """A source of OIDC access tokens. Implement ``fetch`` as ``async def`` (run on the event loop) or as a plain
    ``def`` (run in a worker thread)."""

    @abc.abstractmethod
    def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult | Awaitable[OIDCCallbackResult]:
        """Return a token for ``context``; raise to fail the authentication."""


CallbackLike = (
    OIDCCallback | Callable[[OIDCCallbackContext], OIDCCallbackResult | Awaitable[OIDCCallbackResult]]
)
"""What ``OIDC_CALLBACK`` and ``OIDC_HUMAN_CALLBACK`` accept."""
