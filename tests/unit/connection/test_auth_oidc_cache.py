"""The MONGODB-OIDC client cache and callback calling: one fetch at a time, invalidation by identity, the pause
between machine callback calls, coroutine and thread callbacks, result checks, ALLOWED_HOSTS matching, and
hostile identity provider information."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest

from mongio.auth_oidc import OIDCCallback, OIDCCallbackContext, OIDCCallbackResult
from mongio.bson import encode
from mongio.connection.auth import oidc_cache
from mongio.connection.auth.oidc import _idp_info, host_allowed
from mongio.connection.auth.oidc_cache import MIN_CALL_INTERVAL, OidcTokenCache, call_callback
from mongio.connection.auth.oidc_environments import OidcTokenError
from mongio.errors import AuthenticationFailed
from mongio.options.credentials import DEFAULT_ALLOWED_HOSTS


def context(timeout: float = 5.0) -> OIDCCallbackContext:
    return OIDCCallbackContext(timeout_seconds=timeout, username=None)


async def test_one_fetch_at_a_time_the_others_take_its_token() -> None:
    cache = OidcTokenCache()
    release = asyncio.Event()
    calls = 0

    async def fetch() -> OIDCCallbackResult:
        nonlocal calls
        calls += 1
        await release.wait()
        return OIDCCallbackResult(access_token="the-token")

    waiting = [asyncio.create_task(cache.get(fetch, pace=True)) for _ in range(10)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiting)
    assert calls == 1
    assert len({id(token) for token, _ in results}) == 1
    assert sorted(from_cache for _, from_cache in results) == [False] + [True] * 9


def test_invalidation_compares_identity_not_text() -> None:
    cache = OidcTokenCache()
    current = cache.put("same-text")
    older = oidc_cache.CachedToken("same-text")
    cache.invalidate(older)  # another connection's stale token with equal text
    assert cache.token is current
    cache.invalidate(current)
    assert cache.token is None


def test_refresh_token_is_forgotten_only_if_unchanged() -> None:
    cache = OidcTokenCache()
    cache.put("t")

    async def scenario() -> None:
        async def fetch() -> OIDCCallbackResult:
            return OIDCCallbackResult(access_token="a", refresh_token="r1")

        cache.invalidate(cache.token)
        await cache.get(fetch, pace=False)

    asyncio.run(scenario())
    cache.forget_refresh_token("other")
    assert cache.refresh_token == "r1"
    cache.forget_refresh_token(cache.refresh_token)
    assert cache.refresh_token is None


async def test_machine_callbacks_are_paced(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    cache = OidcTokenCache(clock=lambda: now[0])
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recording_sleep)

    async def fetch() -> OIDCCallbackResult:
        return OIDCCallbackResult(access_token="t")

    first, _ = await cache.get(fetch, pace=True)
    assert slept == []  # the first call is never delayed
    cache.invalidate(first)
    now[0] += 0.03
    await cache.get(fetch, pace=True)
    assert slept == [pytest.approx(MIN_CALL_INTERVAL - 0.03)]
    cache.invalidate(cache.token)
    now[0] += 1.0
    await cache.get(fetch, pace=True)
    assert len(slept) == 1  # long enough since the last call


async def test_a_plain_callback_runs_in_a_worker_thread_a_coroutine_on_the_loop() -> None:
    threads: list[int] = []

    class Plain(OIDCCallback):
        def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
            threads.append(threading.get_ident())
            return OIDCCallbackResult(access_token="plain")

    async def coroutine(context: OIDCCallbackContext) -> OIDCCallbackResult:
        threads.append(threading.get_ident())
        return OIDCCallbackResult(access_token="coro")

    assert (await call_callback(Plain(), context(), "OIDC_CALLBACK")).access_token == "plain"
    assert (await call_callback(coroutine, context(), "OIDC_CALLBACK")).access_token == "coro"
    assert threads[0] != threading.get_ident() and threads[1] == threading.get_ident()


async def test_a_plain_function_returning_a_coroutine_is_awaited() -> None:
    async def later(context: OIDCCallbackContext) -> OIDCCallbackResult:
        return OIDCCallbackResult(access_token="later")

    result = await call_callback(lambda context: later(context), context(), "OIDC_CALLBACK")
    assert result.access_token == "later"


async def test_a_callback_past_its_timeout_is_an_error() -> None:
    async def slow(context: OIDCCallbackContext) -> OIDCCallbackResult:
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    with pytest.raises(OidcTokenError, match=r"did not return within 0\.05 s"):
        await call_callback(slow, context(0.05), "OIDC_CALLBACK")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_plain_callback_past_its_timeout_is_given_up_on_while_its_thread_still_runs(backend: str) -> None:
    """A plain function blocks in its worker thread; at the timeout the caller gets the error at once, on trio as
    on asyncio (where a worker thread is not waited for when its caller is cancelled anyway)."""
    release, finished = threading.Event(), threading.Event()

    def blocking(context: OIDCCallbackContext) -> OIDCCallbackResult:
        release.wait(10)
        finished.set()
        return OIDCCallbackResult(access_token="late")

    async def call() -> bool:
        with pytest.raises(OidcTokenError, match=r"did not return within 0\.05 s"):
            await call_callback(blocking, context(0.05), "OIDC_CALLBACK")
        waited = finished.is_set()
        release.set()  # before the run ends: asyncio.run waits for its worker threads
        return waited

    try:
        assert not anyio.run(call, backend=backend), "the caller waited for the callback's thread to end"
    finally:
        release.set()
    assert finished.wait(5)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (None, "returned NoneType"),
        (OIDCCallbackResult(access_token=""), "no access_token"),
        (OIDCCallbackResult(access_token="t", expires_in_seconds=-1), "expires_in_seconds -1"),
        (OIDCCallbackResult(access_token="t", refresh_token=3), "refresh_token that is not a string"),  # type: ignore[arg-type]
    ],
)
async def test_unusable_results_are_refused(returned: Any, message: str) -> None:
    with pytest.raises(OidcTokenError, match=message):
        await call_callback(lambda context: returned, context(), "OIDC_CALLBACK")


async def test_a_failing_callback_is_an_authentication_error_naming_it() -> None:
    def failing(context: OIDCCallbackContext) -> OIDCCallbackResult:
        raise RuntimeError("identity provider down")

    with pytest.raises(
        AuthenticationFailed, match="OIDC_HUMAN_CALLBACK failed: RuntimeError: identity provider down"
    ):
        await call_callback(failing, context(), "OIDC_HUMAN_CALLBACK")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("cluster0.abcde.mongodb.net", True),
        ("shard-00.cluster0.abcde.mongodb.net", True),
        ("mongodb.net", False),
        ("evilmongodb.net", False),
        ("localhost", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("example.com", False),
        ("LOCALHOST", True),
    ],
)
def test_allowed_hosts_matching(host: str, allowed: bool) -> None:
    assert host_allowed(host, DEFAULT_ALLOWED_HOSTS) is allowed


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x05\x00", "not BSON"),
        (encode({"clientId": "c"}), "no issuer"),
        (encode({"issuer": "https://i", "clientId": 5}), "clientId is not a string"),
        (encode({"issuer": "https://i", "requestScopes": "openid"}), "requestScopes is not a list"),
    ],
)
def test_hostile_identity_provider_information_is_refused(payload: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=message):
        _idp_info(payload)


def test_identity_provider_information_without_client_id_is_accepted() -> None:
    """Human prose test 1.8's shape: a machine IdP answers the principal step without a clientId."""
    info = _idp_info(encode({"issuer": "https://issuer"}))
    assert info.issuer == "https://issuer" and info.client_id is None and info.request_scopes is None
