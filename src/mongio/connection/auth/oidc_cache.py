"""The MONGODB-OIDC *Client Cache* (auth.md, "Credential Caching"): one access token per client, and for the
human flow the identity provider's information and the refresh token; plus the calling of callbacks.

Only one callback call runs at a time: a connection that needs a token while another fetches one waits for it
and takes that token. No lock is held while a connection talks to the server. Tokens are held as
``CachedToken`` objects and invalidated by identity, so a connection can only clear the very token it was
refused with, never a newer one another connection fetched meanwhile (even if the strings are equal).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mongio.auth_oidc import CallbackLike, OIDCCallback, OIDCCallbackContext, OIDCCallbackResult, OIDCIdPInfo
from mongio.backend import (
    LockLike,
    is_async_callable,
    new_lock,
    running_loop,
    sleep,
    timeout,
    to_thread_abandoning,
)
from mongio.connection.auth.oidc_environments import OidcTokenError

__all__ = ["MIN_CALL_INTERVAL", "CachedToken", "OidcTokenCache", "call_callback"]

MIN_CALL_INTERVAL = 0.1
"""Seconds between two calls of a machine callback (the specification's 100 ms), so a burst of refused tokens
cannot hammer the identity provider."""


@dataclass(frozen=True, eq=False)
class CachedToken:
    """One access token as fetched; equal only to itself."""

    value: str = field(repr=False)

    def __repr__(self) -> str:
        return f"<CachedToken {id(self):#x}>"


class OidcTokenCache:
    """The per-client cache. ``get()`` is the read-through fetch; ``invalidate()`` the compare-and-clear."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._state = threading.Lock()  # guards the fields below; never held across an await
        self._token: CachedToken | None = None
        self._refresh_token: str | None = None
        self._idp_info: OIDCIdPInfo | None = None
        self._last_call: float | None = None
        self._clock = clock
        # One fetch at a time per event loop (a client may run on several loops; asyncio locks are per loop).
        self._fetch_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LockLike] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        with self._state:
            return (
                f"OidcTokenCache(token={'cached' if self._token else 'none'}, "
                f"refresh_token={'cached' if self._refresh_token else 'none'}, idp_info={self._idp_info!r})"
            )

    @property
    def token(self) -> CachedToken | None:
        with self._state:
            return self._token

    @property
    def refresh_token(self) -> str | None:
        with self._state:
            return self._refresh_token

    @property
    def idp_info(self) -> OIDCIdPInfo | None:
        with self._state:
            return self._idp_info

    def remember_idp_info(self, idp_info: OIDCIdPInfo) -> None:
        with self._state:
            self._idp_info = idp_info

    def put(self, token: str) -> CachedToken:
        """Cache ``token`` as if a callback had returned it (a token obtained elsewhere, e.g. by another
        client of the same identity)."""
        cached = CachedToken(token)
        with self._state:
            self._token = cached
        return cached

    def invalidate(self, token: CachedToken | None) -> None:
        """Forget ``token`` if it is still the cached one."""
        with self._state:
            if token is not None and self._token is token:
                self._token = None

    def forget_refresh_token(self, refresh_token: str | None) -> None:
        """Forget the refresh token if it is still ``refresh_token`` (the one that just failed)."""
        with self._state:
            if refresh_token is not None and self._refresh_token is refresh_token:
                self._refresh_token = None

    async def get(
        self, fetch: Callable[[], Awaitable[OIDCCallbackResult]], *, pace: bool
    ) -> tuple[CachedToken, bool]:
        """``(token, from_cache)``: the cached token, or one ``fetch()`` returns (then cached, with its refresh
        token). Only one fetch runs at a time; ``pace`` keeps ``MIN_CALL_INTERVAL`` since the last one."""
        async with self._fetch_lock():
            cached = self.token
            if cached is not None:
                return cached, True
            if pace:
                await self._pace()
            try:
                result = await fetch()
            finally:
                with self._state:
                    self._last_call = self._clock()
            token = CachedToken(result.access_token)
            with self._state:
                self._token = token
                self._refresh_token = result.refresh_token
            return token, False

    async def _pace(self) -> None:
        with self._state:
            last = self._last_call
        if last is not None:
            wait = last + MIN_CALL_INTERVAL - self._clock()
            if wait > 0:
                await sleep(wait)

    def _fetch_lock(self) -> LockLike:
        loop = running_loop()
        with self._state:
            lock = self._fetch_locks.get(loop)
            if lock is None:
                lock = self._fetch_locks[loop] = new_lock()
            return lock


def _drop_late_result(result: object) -> None:
    """What a callback returns after its timeout: a token nobody waits for any more, dropped (a coroutine it
    returned is closed, so it is not reported as never awaited)."""
    if inspect.iscoroutine(result):
        result.close()


async def call_callback(
    callback: CallbackLike, context: OIDCCallbackContext, what: str
) -> OIDCCallbackResult:
    """Call an OIDC callback within ``context.timeout_seconds``: a coroutine function on the loop, a plain
    function in a worker thread (whose late result is then dropped). Its result is checked; any failure is an
    ``OidcTokenError`` naming ``what`` (the callback's kind)."""
    fetch = callback.fetch if isinstance(callback, OIDCCallback) else callback
    try:
        async with timeout(context.timeout_seconds):
            if is_async_callable(fetch):
                answer = fetch(context)
            else:
                # Abandoned at the timeout: on trio a plain worker thread would hold the caller until it ends.
                answer = await to_thread_abandoning(functools.partial(fetch, context), _drop_late_result)
            result = await answer if inspect.isawaitable(answer) else answer
    except TimeoutError:
        raise OidcTokenError(
            f"MONGODB-OIDC: the {what} did not return within {context.timeout_seconds:g} s"
        ) from None
    except OidcTokenError:
        raise
    except Exception as exc:
        raise OidcTokenError(f"MONGODB-OIDC: the {what} failed: {type(exc).__name__}: {exc}") from exc
    return checked_result(result, what)


def checked_result(result: object, what: str) -> OIDCCallbackResult:
    """``result`` if it is a usable ``OIDCCallbackResult``; else an error saying what is wrong with it."""
    if not isinstance(result, OIDCCallbackResult):
        raise OidcTokenError(
            f"MONGODB-OIDC: the {what} returned {type(result).__name__}, not an OIDCCallbackResult"
        )
    if not isinstance(result.access_token, str) or not result.access_token:
        raise OidcTokenError(f"MONGODB-OIDC: the {what} returned no access_token")
    expires = result.expires_in_seconds
    if expires is not None and (not isinstance(expires, int | float) or expires < 0):
        raise OidcTokenError(
            f"MONGODB-OIDC: the {what} returned expires_in_seconds {expires!r} (must be >= 0)"
        )
    if result.refresh_token is not None and not isinstance(result.refresh_token, str):
        raise OidcTokenError(f"MONGODB-OIDC: the {what} returned a refresh_token that is not a string")
    return result
