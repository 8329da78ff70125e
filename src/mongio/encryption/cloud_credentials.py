"""On-demand KMS credentials (the specification's "Automatic Credentials"): a provider configured empty,
``{"aws": {}}``, ``{"gcp": {}}`` or ``{"azure": {}}``, gets its credentials when libmongocrypt first needs
them, without blocking the loop:

- ``aws``: the application's provider when ``credential_providers={"aws": provider}`` gives one (the
  specification's ``credentialProviders``: used instead of the chain), else MONGODB-AWS's credential chain
  (:mod:`mongio.connection.auth.aws_credentials`: environment, web identity, ECS, EC2 instance metadata),
  with its cache;
- ``gcp``: an access token from the GCE metadata server (``GCE_METADATA_HOST``, by default
  ``metadata.google.internal``);
- ``azure``: an access token from the Azure instance metadata service (IMDS), cached until one minute
  before it expires. ``MONGIO_KMS_AZURE_ENDPOINT`` replaces the IMDS base URL (``http://169.254.169.254``),
  for a test or a metadata proxy; the path and query string stay the specification's.

Every request goes through mongio's asynchronous HTTP helper with a 10-second limit. Errors name the
source and the HTTP status, never a token.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.backend import LockLike, new_lock
from mongio.connection.auth.aws_credentials import (
    CredentialsUnavailable,
    credentials_from_provider,
    obtain_credentials,
)
from mongio.connection.http import HttpError, http_request
from mongio.errors import ConfigurationError, EncryptionError

__all__ = [
    "AZURE_ENDPOINT_VARIABLE",
    "AZURE_IMDS_URL",
    "OnDemandCredentials",
    "aws_credential_provider",
    "on_demand_providers",
]

AZURE_ENDPOINT_VARIABLE = "MONGIO_KMS_AZURE_ENDPOINT"
_AZURE_IMDS_BASE = "http://169.254.169.254"
_AZURE_IMDS_PATH = "/metadata/identity/oauth2/token"
AZURE_IMDS_URL = _AZURE_IMDS_BASE + _AZURE_IMDS_PATH
_AZURE_RESOURCE = "https://vault.azure.net"
_AZURE_MARGIN = datetime.timedelta(minutes=1)
_TIMEOUT = 10.0
_MAX_TOKEN_DOCUMENT = 64 << 10


def on_demand_providers(kms_providers: Mapping[str, Any]) -> list[str]:
    """The cloud providers configured empty, whose credentials are fetched on demand."""
    return [name for name in ("aws", "gcp", "azure") if name in kms_providers and not kms_providers[name]]


def aws_credential_provider(
    credential_providers: Mapping[str, Any] | None, kms_providers: Mapping[str, Any]
) -> Callable[[], Any] | None:
    """The application's AWS credential provider of ``credential_providers`` (None when it gives none), after
    the specification's checks: the only provider name is ``aws``, the provider is callable (a function or a
    coroutine function returning credentials with ``access_key``, ``secret_key`` and ``token``, as
    MONGODB-AWS's ``AWS_CREDENTIAL_PROVIDER``), and ``kms_providers["aws"]`` is the empty map that asks for
    credentials on demand. Raises ``ConfigurationError`` naming what is wrong (never a credential)."""
    if credential_providers is None:
        return None
    if not isinstance(credential_providers, Mapping):
        raise ConfigurationError(
            f"credential_providers must be a mapping such as {{'aws': provider}}, "
            f"not {type(credential_providers).__name__}"
        )
    unknown = sorted(repr(name) for name in credential_providers if name != "aws")
    if unknown:
        raise ConfigurationError(
            f"credential_providers has no provider named {', '.join(unknown)}: the only one is 'aws'"
        )
    if "aws" not in credential_providers:
        return None
    provider: Callable[[], Any] = credential_providers["aws"]
    if not callable(provider):
        raise ConfigurationError(
            "credential_providers['aws'] must be a function or coroutine function returning AWS credentials, "
            f"not {type(provider).__name__}"
        )
    configured = kms_providers.get("aws")
    if not isinstance(configured, Mapping) or configured:
        state = "is not given" if "aws" not in kms_providers else "is not the empty map"
        raise ConfigurationError(
            f"credential_providers['aws'] needs kms_providers['aws'] to be the empty map {{}} (credentials "
            f"fetched on demand), but kms_providers['aws'] {state}"
        )
    return provider


def _token_document(body: bytes, source: str) -> Mapping[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        raise EncryptionError(RuntimeError(f"{source} answered with a body that is not JSON")) from None
    if not isinstance(document, Mapping):
        raise EncryptionError(RuntimeError(f"{source} answered with JSON that is not an object"))
    return document


@dataclass
class _AzureToken:
    access_token: str = field(repr=False)
    expires: datetime.datetime


@dataclass
class OnDemandCredentials:
    """Fetches the on-demand credentials; one per ``ClientEncryption`` (or encrypted client), which owns
    the Azure token it caches. The addresses are parameters so that tests can point them at fakes."""

    gcp_metadata_host: str | None = None
    azure_imds_url: str | None = None
    """The IMDS token URL; None: ``MONGIO_KMS_AZURE_ENDPOINT``'s base (else IMDS's) with the token path."""
    timeout: float = _TIMEOUT
    """Seconds each metadata request may take (the specification's 10)."""
    aws_provider: Callable[[], Any] | None = field(default=None, repr=False)
    """The application's AWS credential provider (``credential_providers["aws"]``, checked by
    :func:`aws_credential_provider`), used instead of the AWS credential chain."""
    _azure: _AzureToken | None = field(default=None, repr=False)
    # Made at the first Azure fetch, for the runtime it runs on (asyncio's lock, or trio's through the seam).
    _azure_lock: LockLike | None = field(default=None, repr=False)

    async def fetch(self, kms_providers: Mapping[str, Any]) -> dict[str, Any]:
        """Credentials for every provider of ``kms_providers`` configured empty."""
        wanted = on_demand_providers(kms_providers)
        answers: dict[str, Any] = {}
        if "aws" in wanted:
            answers["aws"] = await self.aws()
        if "gcp" in wanted:
            answers["gcp"] = await self.gcp()
        if "azure" in wanted:
            answers["azure"] = await self.azure()
        return answers

    async def aws(self) -> dict[str, str]:
        """``accessKeyId``, ``secretAccessKey`` and, for temporary credentials, ``sessionToken``: from the
        application's provider when there is one, else from the AWS credential chain."""
        try:
            if self.aws_provider is not None:
                credentials = await credentials_from_provider(
                    self.aws_provider, "credential_providers['aws']"
                )
            else:
                credentials = await obtain_credentials(None)
        except CredentialsUnavailable as exc:
            raise EncryptionError(exc) from exc
        answer = {"accessKeyId": credentials.access_key, "secretAccessKey": credentials.secret_key}
        if credentials.token:
            answer["sessionToken"] = credentials.token
        return answer

    async def gcp(self) -> dict[str, str]:
        """``accessToken`` from the GCE metadata server."""
        host = self.gcp_metadata_host or os.environ.get("GCE_METADATA_HOST") or "metadata.google.internal"
        url = f"http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
        source = "the GCE metadata server"
        try:
            response = await http_request(
                "GET",
                url,
                headers={"Metadata-Flavor": "Google"},
                time_limit=self.timeout,
                max_body=_MAX_TOKEN_DOCUMENT,
            )
        except HttpError as exc:
            raise EncryptionError(exc) from exc
        if response.status != 200:
            raise EncryptionError(RuntimeError(f"{source} answered HTTP {response.status}, not 200"))
        token = _token_document(response.body, source).get("access_token")
        if not isinstance(token, str) or not token:
            raise EncryptionError(RuntimeError(f"{source} answered without an access_token"))
        return {"accessToken": token}

    async def azure(self) -> dict[str, str]:
        """``accessToken`` from the Azure IMDS, cached until a minute before it expires."""
        if self._azure_lock is None:
            self._azure_lock = new_lock()
        async with self._azure_lock:
            now = datetime.datetime.now(datetime.UTC)
            if self._azure is None or self._azure.expires - now < _AZURE_MARGIN:
                self._azure = None
                self._azure = await self._fetch_azure(now)
            return {"accessToken": self._azure.access_token}

    def _azure_url(self) -> str:
        if self.azure_imds_url is not None:
            return self.azure_imds_url
        base = os.environ.get(AZURE_ENDPOINT_VARIABLE) or _AZURE_IMDS_BASE
        return base.rstrip("/") + _AZURE_IMDS_PATH

    async def _fetch_azure(self, now: datetime.datetime) -> _AzureToken:
        url = f"{self._azure_url()}?api-version=2018-02-01&resource={_AZURE_RESOURCE}"
        source = "the Azure instance metadata service"
        try:
            response = await http_request(
                "GET",
                url,
                headers={"Metadata": "true", "Accept": "application/json"},
                time_limit=self.timeout,
                max_body=_MAX_TOKEN_DOCUMENT,
            )
        except HttpError as exc:
            raise EncryptionError(exc) from exc
        if response.status != 200:
            raise EncryptionError(RuntimeError(f"{source} answered HTTP {response.status}, not 200"))
        document = _token_document(response.body, source)
        token, expires_in = document.get("access_token"), document.get("expires_in")
        if not isinstance(token, str) or not token:
            raise EncryptionError(RuntimeError(f"{source} answered without an access_token"))
        try:
            seconds = int(expires_in) if isinstance(expires_in, int | str) else None
        except ValueError:
            seconds = None
        if seconds is None:
            raise EncryptionError(RuntimeError(f"{source} answered without an integer expires_in"))
        return _AzureToken(token, now + datetime.timedelta(seconds=seconds))
