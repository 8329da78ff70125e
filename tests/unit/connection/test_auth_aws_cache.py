"""The process's cache of fetched AWS credentials: expiry, one fetch for concurrent callers, failures and
cancellations shared or recovered from, and the environment variables read as they are now."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from mongio.connection.auth.aws_credentials import (
    AwsCredentials,
    CredentialCache,
    CredentialsUnavailable,
    credentials_from_environment,
)


def _expiring_in(delta: datetime.timedelta, key: str = "ASIA1") -> AwsCredentials:
    return AwsCredentials(key, "secret", "token", datetime.datetime.now(datetime.UTC) + delta)


class SlowFetch:
    """A fetch that waits to be released, counting its calls."""

    def __init__(self, result: AwsCredentials | Exception) -> None:
        self.result = result
        self.calls = 0
        self.release = asyncio.Event()

    async def __call__(self) -> AwsCredentials:
        self.calls += 1
        await self.release.wait()
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize(("minutes", "usable"), [(4, False), (6, True), (-1, False)])
def test_credentials_are_usable_until_five_minutes_before_expiry(minutes: int, usable: bool) -> None:
    cache = CredentialCache()
    cache.set(_expiring_in(datetime.timedelta(minutes=minutes)))
    assert (cache.get() is not None) is usable


async def test_concurrent_callers_share_one_fetch() -> None:
    cache = CredentialCache()
    fetch = SlowFetch(_expiring_in(datetime.timedelta(hours=1)))
    callers = [asyncio.create_task(cache.obtain(fetch)) for _ in range(10)]
    await asyncio.sleep(0)
    fetch.release.set()
    results = await asyncio.gather(*callers)
    assert fetch.calls == 1 and all(result is results[0] for result in results)
    assert cache.get() is results[0]


async def test_a_failed_fetch_fails_every_waiter_and_caches_nothing() -> None:
    cache = CredentialCache()
    fetch = SlowFetch(CredentialsUnavailable("the endpoint answered HTTP 500"))
    callers = [asyncio.create_task(cache.obtain(fetch)) for _ in range(3)]
    await asyncio.sleep(0)
    fetch.release.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert fetch.calls == 1 and all(isinstance(outcome, CredentialsUnavailable) for outcome in outcomes)
    assert cache.get() is None


async def test_when_the_fetching_caller_is_cancelled_a_waiter_fetches() -> None:
    cache = CredentialCache()
    fetch = SlowFetch(_expiring_in(datetime.timedelta(hours=1)))
    first = asyncio.create_task(cache.obtain(fetch))
    await asyncio.sleep(0)
    second = asyncio.create_task(cache.obtain(fetch))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    fetch.release.set()
    assert (await second).access_key == "ASIA1"
    assert first.cancelled() and fetch.calls == 2


async def test_a_cancelled_waiter_leaves_the_fetch_running() -> None:
    cache = CredentialCache()
    fetch = SlowFetch(_expiring_in(datetime.timedelta(hours=1)))
    first = asyncio.create_task(cache.obtain(fetch))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cache.obtain(fetch))
    await asyncio.sleep(0)
    waiter.cancel()
    fetch.release.set()
    assert (await first).access_key == "ASIA1"
    assert waiter.cancelled() and fetch.calls == 1


async def test_credentials_without_expiry_are_not_cached() -> None:
    cache = CredentialCache()
    fetch = SlowFetch(AwsCredentials("AKIA", "secret"))
    fetch.release.set()
    await cache.obtain(fetch)
    await cache.obtain(fetch)
    assert fetch.calls == 2 and cache.get() is None


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s"}, ("AKIA", "s", None)),
        (
            {"AWS_ACCESS_KEY_ID": "ASIA", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"},
            ("ASIA", "s", "t"),
        ),
    ],
)
def test_environment_credentials(
    environ: dict[str, str], expected: tuple[str, str, str | None] | None
) -> None:
    found = credentials_from_environment(environ)
    assert (None if found is None else (found.access_key, found.secret_key, found.token)) == expected


@pytest.mark.parametrize("present", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
def test_half_of_the_environment_keys_is_named(present: str) -> None:
    missing = ({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} - {present}).pop()
    with pytest.raises(CredentialsUnavailable, match=f"{missing} is not set"):
        credentials_from_environment({present: "value"})
