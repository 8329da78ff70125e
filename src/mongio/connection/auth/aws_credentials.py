"""Where MONGODB-AWS finds its credentials, in the authentication specification's order:

1. the application's ``AWS_CREDENTIAL_PROVIDER`` (a plain function runs in a worker thread, a coroutine
   function is awaited);
2. credentials this process fetched earlier and cached, while they are more than five minutes from expiring;
3. the environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and, when set, ``AWS_SESSION_TOKEN``
   (read on every authentication, never cached);
4. ``AssumeRoleWithWebIdentity`` at STS when ``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN`` are set;
5. the ECS container endpoint when ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` is set, otherwise EC2's
   instance metadata (IMDSv2: a token from a ``PUT``, then the role name, then its credentials).

What 4 and 5 return is cached for the whole process (the specification's cache tests make a new client and
expect the cache to be used), and when several connections need credentials at once one fetch runs and the
others wait for its answer. Every request is asynchronous and bounded by a timeout.

The chain's inputs are the environment and :class:`AwsEndpoints`, the addresses of STS, ECS and the
instance metadata service; :func:`use_endpoints` replaces them (an internal hook for tests, which point
them at fakes on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import os
import secrets
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode

from mongio.backend import is_async_callable, running_loop, to_thread
from mongio.connection.http import HttpError, HttpResponse, http_request

__all__ = [
    "CREDENTIAL_CACHE",
    "AwsCredentials",
    "AwsCredentialsLike",
    "AwsEndpoints",
    "CredentialCache",
    "CredentialsUnavailable",
    "credentials_from_environment",
    "credentials_from_provider",
    "obtain_credentials",
    "use_endpoints",
]

REFRESH_MARGIN = datetime.timedelta(minutes=5)
"""Cached credentials are used only while they are further than this from expiring."""
_IMDS_TOKEN_TTL_SECONDS = "30"
_MAX_TOKEN_FILE = 64 << 10
_STS_VERSION = "2011-06-15"


class CredentialsUnavailable(Exception):
    """No credentials could be obtained; the message names the source and why (never a secret)."""


class AwsCredentialsLike(Protocol):
    """What an ``AWS_CREDENTIAL_PROVIDER`` returns: botocore's ``Credentials`` shape (``access_key``,
    ``secret_key``, ``token``), which :class:`AwsCredentials` has too."""

    @property
    def access_key(self) -> str: ...

    @property
    def secret_key(self) -> str: ...

    @property
    def token(self) -> str | None: ...


@dataclass(frozen=True)
class AwsCredentials:
    """An access key id, its secret key and, for temporary credentials, a session token and an expiry.

    The secret key and the session token never appear in the ``repr``.
    """

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)
    expiration: datetime.datetime | None = None

    def usable_at(self, now: datetime.datetime) -> bool:
        """True while these are more than five minutes from expiring (always, without an expiry)."""
        return self.expiration is None or self.expiration - now > REFRESH_MARGIN


@dataclass(frozen=True)
class AwsEndpoints:
    """The addresses the chain fetches temporary credentials from, and how long each request may take."""

    sts_url: str = "https://sts.amazonaws.com/"
    ecs_base: str = "http://169.254.170.2"
    imds_base: str = "http://169.254.169.254"
    timeout: float = 10.0
    sts_ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    """Verifies STS's certificate instead of the system's trust store (a test's own certificate authority)."""


_endpoints = AwsEndpoints()


def use_endpoints(endpoints: AwsEndpoints) -> AwsEndpoints:
    """Make the chain use ``endpoints`` from now on; returns the ones it used until now (internal: for tests)."""
    global _endpoints
    previous, _endpoints = _endpoints, endpoints
    return previous


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CredentialCache:
    """Temporary credentials fetched from AWS endpoints, shared by every client of the process.

    ``obtain(fetch)`` returns the cached credentials while usable, otherwise runs ``fetch`` once for all
    the connections of the same event loop asking meanwhile (they wait for its answer; a fetch whose caller
    was cancelled makes the next one in line fetch). Only credentials with an expiry are kept.
    """

    def __init__(self) -> None:
        self._credentials: AwsCredentials | None = None
        self._pending: asyncio.Future[AwsCredentials] | None = None

    def get(self) -> AwsCredentials | None:
        """The cached credentials if still usable; expiring ones are dropped."""
        cached = self._credentials
        if cached is not None and not cached.usable_at(_utcnow()):
            self._credentials = cached = None
        return cached

    def set(self, credentials: AwsCredentials) -> None:
        """Replace the cached credentials (written as one assignment)."""
        self._credentials = credentials

    def clear(self) -> None:
        self._credentials = None

    async def obtain(self, fetch: Callable[[], Awaitable[AwsCredentials]]) -> AwsCredentials:
        loop = running_loop()
        while True:
            cached = self.get()
            if cached is not None:
                return cached
            pending = self._pending
            if pending is None or pending.get_loop() is not loop:
                break
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this waiter was cancelled
        return await self._fetch(loop, fetch)

    async def _fetch(
        self, loop: asyncio.AbstractEventLoop, fetch: Callable[[], Awaitable[AwsCredentials]]
    ) -> AwsCredentials:
        future: asyncio.Future[AwsCredentials] = loop.create_future()
        self._pending = future
        try:
            credentials = await fetch()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # the waiters, if any, see it; nobody else has to
            raise
        finally:
            if self._pending is future:
                self._pending = None
        if credentials.expiration is not None:
            self.set(credentials)
        future.set_result(credentials)
        return credentials


CREDENTIAL_CACHE = CredentialCache()
"""The process's cache of credentials fetched from STS, ECS or EC2."""


def credentials_from_environment(environ: Mapping[str, str]) -> AwsCredentials | None:
    """``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN``), or None when unset."""
    access_key = environ.get("AWS_ACCESS_KEY_ID")
    secret_key = environ.get("AWS_SECRET_ACCESS_KEY")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        missing = "AWS_ACCESS_KEY_ID" if not access_key else "AWS_SECRET_ACCESS_KEY"
        raise CredentialsUnavailable(f"{missing} is not set while the other AWS key variable is")
    return AwsCredentials(access_key, secret_key, environ.get("AWS_SESSION_TOKEN") or None)


def _parse_expiration(value: Any, source: str) -> datetime.datetime:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.datetime.fromtimestamp(value, datetime.UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise CredentialsUnavailable(f"{source} answered an Expiration that is not a date") from None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)
    raise CredentialsUnavailable(f"{source} answered without an Expiration")


def _credentials_document(response: HttpResponse, source: str) -> Mapping[str, Any]:
    if not response.ok:
        raise CredentialsUnavailable(f"{source} answered HTTP {response.status}")
    try:
        document = json.loads(response.body)
    except ValueError:
        raise CredentialsUnavailable(f"{source} answered something other than JSON") from None
    if not isinstance(document, dict):
        raise CredentialsUnavailable(f"{source} answered JSON that is not an object")
    return document


def _temporary_credentials(document: Mapping[str, Any], token_field: str, source: str) -> AwsCredentials:
    access_key = document.get("AccessKeyId")
    secret_key = document.get("SecretAccessKey")
    token = document.get(token_field)
    for name, value in (("AccessKeyId", access_key), ("SecretAccessKey", secret_key), (token_field, token)):
        if not isinstance(value, str) or not value:
            raise CredentialsUnavailable(f"{source} answered without a {name}")
    assert isinstance(access_key, str) and isinstance(secret_key, str) and isinstance(token, str)
    return AwsCredentials(
        access_key, secret_key, token, _parse_expiration(document.get("Expiration"), source)
    )


async def _request(source: str, method: str, url: str, **kwargs: Any) -> HttpResponse:
    try:
        return await http_request(method, url, time_limit=_endpoints.timeout, **kwargs)
    except HttpError as exc:
        raise CredentialsUnavailable(f"{source}: {exc}") from None


def _read_token_file(path: str) -> str:
    with open(path, "rb") as file:
        data = file.read(_MAX_TOKEN_FILE + 1)
    if len(data) > _MAX_TOKEN_FILE:
        raise CredentialsUnavailable(
            f"AWS_WEB_IDENTITY_TOKEN_FILE {path!r} is larger than {_MAX_TOKEN_FILE} bytes"
        )
    return data.decode("utf-8").strip()


def _sts_result(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``Credentials`` object, at the top level or inside STS's response and result wrappers."""
    if "Credentials" not in document:
        response = document.get("AssumeRoleWithWebIdentityResponse")
        result = response.get("AssumeRoleWithWebIdentityResult") if isinstance(response, dict) else None
        document = result if isinstance(result, dict) else {}
    credentials = document.get("Credentials")
    if not isinstance(credentials, dict):
        raise CredentialsUnavailable("STS AssumeRoleWithWebIdentity answered without Credentials")
    return credentials


async def _web_identity(token_file: str, role_arn: str, session_name: str | None) -> AwsCredentials:
    source = "STS AssumeRoleWithWebIdentity"
    try:
        token = await to_thread(_read_token_file, token_file)
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialsUnavailable(
            f"cannot read AWS_WEB_IDENTITY_TOKEN_FILE {token_file!r}: {exc.__class__.__name__}"
        ) from None
    body = urlencode(
        {
            "Action": "AssumeRoleWithWebIdentity",
            "RoleSessionName": session_name or f"mongio-{secrets.token_hex(8)}",
            "RoleArn": role_arn,
            "WebIdentityToken": token,
            "Version": _STS_VERSION,
        }
    ).encode()
    headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    response = await _request(
        source, "POST", _endpoints.sts_url, headers=headers, body=body, ssl_context=_endpoints.sts_ssl_context
    )
    return _temporary_credentials(
        _sts_result(_credentials_document(response, source)), "SessionToken", source
    )


async def _ecs(relative_uri: str) -> AwsCredentials:
    source = "the ECS container credentials endpoint"
    if not relative_uri.startswith("/"):
        raise CredentialsUnavailable("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must start with '/'")
    response = await _request(source, "GET", _endpoints.ecs_base + relative_uri)
    return _temporary_credentials(_credentials_document(response, source), "Token", source)


async def _ec2() -> AwsCredentials:
    source = "the EC2 instance metadata service"
    base = _endpoints.imds_base
    token_response = await _request(
        source,
        "PUT",
        f"{base}/latest/api/token",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": _IMDS_TOKEN_TTL_SECONDS},
    )
    if not token_response.ok:
        raise CredentialsUnavailable(
            f"{source} answered HTTP {token_response.status} to the IMDSv2 token request"
        )
    token_headers = {"X-aws-ec2-metadata-token": token_response.body.decode("latin-1").strip()}
    roles_url = f"{base}/latest/meta-data/iam/security-credentials/"
    role_response = await _request(source, "GET", roles_url, headers=token_headers)
    if not role_response.ok:
        raise CredentialsUnavailable(
            f"{source} answered HTTP {role_response.status} to the role name request"
        )
    role = role_response.body.decode("latin-1").strip().splitlines()[:1]
    if not role or not role[0] or any(ch in role[0] for ch in "/?#% \t"):
        raise CredentialsUnavailable(f"{source} did not name an IAM role for this instance")
    response = await _request(source, "GET", roles_url + role[0], headers=token_headers)
    return _temporary_credentials(_credentials_document(response, source), "Token", source)


async def _fetch_temporary(environ: Mapping[str, str]) -> AwsCredentials:
    token_file = environ.get("AWS_WEB_IDENTITY_TOKEN_FILE")
    role_arn = environ.get("AWS_ROLE_ARN")
    if token_file and role_arn:
        return await _web_identity(token_file, role_arn, environ.get("AWS_ROLE_SESSION_NAME"))
    relative_uri = environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    if relative_uri:
        return await _ecs(relative_uri)
    return await _ec2()


def _checked(value: AwsCredentialsLike, name: str) -> AwsCredentials:
    try:
        access_key, secret_key, token = value.access_key, value.secret_key, value.token
    except AttributeError:
        raise CredentialsUnavailable(
            f"{name} returned {type(value).__name__}, not credentials with access_key, secret_key and token "
            "attributes"
        ) from None
    if not isinstance(access_key, str) or not access_key or not isinstance(secret_key, str) or not secret_key:
        raise CredentialsUnavailable(f"{name} returned credentials without an access key or secret key")
    if token is not None and not isinstance(token, str):
        raise CredentialsUnavailable(f"{name} returned a session token that is not a string")
    return AwsCredentials(access_key, secret_key, token or None)


def _call_sync_provider(provider: Callable[[], Any], name: str) -> AwsCredentials:
    # The attributes are read here too: an SDK's refreshable credentials may fetch when read.
    value = provider()
    if inspect.isawaitable(value):
        raise CredentialsUnavailable(f"{name} returned an awaitable from a plain function")
    return _checked(value, name)


async def credentials_from_provider(provider: Callable[[], Any], name: str) -> AwsCredentials:
    """The credentials an application's provider returns: a coroutine function is awaited, a plain function
    runs in a worker thread (an SDK's provider may block on the network). ``name`` says where the provider
    was given (``AWS_CREDENTIAL_PROVIDER``, ``credential_providers['aws']``) in the ``CredentialsUnavailable``
    raised when it fails or returns something unusable; the message names the exception's class only,
    never what the provider returned."""
    try:
        if is_async_callable(provider):
            return _checked(await provider(), name)
        return await to_thread(_call_sync_provider, provider, name)
    except CredentialsUnavailable:
        raise
    except Exception as exc:
        raise CredentialsUnavailable(f"{name} raised {exc.__class__.__name__}") from exc


async def obtain_credentials(
    provider: Callable[[], Any] | None, environ: Mapping[str, str] | None = None
) -> AwsCredentials:
    """The credentials to sign with (``provider``: the ``AWS_CREDENTIAL_PROVIDER``; ``environ``: the
    environment, ``os.environ`` by default, read anew on each call).

    Raises ``CredentialsUnavailable`` naming the source that failed.
    """
    if provider is not None:
        return await credentials_from_provider(provider, "AWS_CREDENTIAL_PROVIDER")
    env = os.environ if environ is None else environ
    cached = CREDENTIAL_CACHE.get()
    if cached is not None:
        return cached
    from_environment = credentials_from_environment(env)
    if from_environment is not None:
        return from_environment
    return await CREDENTIAL_CACHE.obtain(lambda: _fetch_temporary(env))
