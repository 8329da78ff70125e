"""The built-in MONGODB-OIDC machine callbacks, one per ``ENVIRONMENT`` (auth.md, "Built-in OIDC Environment
Integrations"): ``test`` and ``k8s`` read a token file, ``azure`` and ``gcp`` ask the cloud's metadata endpoint.

Every input they take from the process environment is declared here:

- ``OIDC_TOKEN_FILE``: the token file of ``ENVIRONMENT:test``.
- ``AZURE_FEDERATED_TOKEN_FILE``, then ``AWS_WEB_IDENTITY_TOKEN_FILE``, then the service account token path:
  the token file of ``ENVIRONMENT:k8s`` (AKS, EKS, GKE).
- ``MONGIO_OIDC_AZURE_ENDPOINT`` and ``MONGIO_OIDC_GCP_ENDPOINT``: replace the base URL of the Azure instance
  metadata service (``http://169.254.169.254``) and of the GCP metadata server (``http://metadata``), for a
  test or a metadata proxy; the paths and query strings stay the specification's.

No callback caches: the client's token cache does (``oidc_cache``). File reads run in a worker thread and
HTTP requests are asynchronous, so the event loop never waits on either.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from mongio.auth_oidc import OIDCCallbackContext, OIDCCallbackResult
from mongio.backend import to_thread
from mongio.connection.http import HttpError, http_request
from mongio.errors import AuthenticationFailed, ConfigurationError

__all__ = [
    "AZURE_ENDPOINT_VARIABLE",
    "GCP_ENDPOINT_VARIABLE",
    "K8S_DEFAULT_TOKEN_FILE",
    "MachineCallback",
    "OidcTokenError",
    "environment_callback",
]

TOKEN_FILE_VARIABLE = "OIDC_TOKEN_FILE"
K8S_TOKEN_FILE_VARIABLES = ("AZURE_FEDERATED_TOKEN_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE")
K8S_DEFAULT_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
AZURE_ENDPOINT_VARIABLE = "MONGIO_OIDC_AZURE_ENDPOINT"
GCP_ENDPOINT_VARIABLE = "MONGIO_OIDC_GCP_ENDPOINT"
_AZURE_BASE = "http://169.254.169.254"
_GCP_BASE = "http://metadata"
_SHOWN_BODY = 512  # of an error reply (a failure's body is an error description, never a token)

MachineCallback = Callable[[OIDCCallbackContext], Awaitable[OIDCCallbackResult]]


class OidcTokenError(AuthenticationFailed):
    """No access token could be had: a built-in environment failed (missing file, metadata endpoint failure) or
    a callback failed, timed out or returned no usable token. Never holds a token."""

    def __init__(self, message: str) -> None:
        super().__init__(message, None)


def environment_callback(
    environment: str, token_resource: str | None, environ: Mapping[str, str] = os.environ
) -> MachineCallback:
    """The machine callback of ``ENVIRONMENT`` ``environment``; ``environ`` is read at each call."""
    if environment == "test":
        return lambda context: _read_token_file(_required(environ, TOKEN_FILE_VARIABLE, "test"))
    if environment == "k8s":
        return lambda context: _read_token_file(_k8s_token_file(environ))
    if environment == "azure":
        resource = _resource(environment, token_resource)
        return lambda context: _azure_token(
            resource, context, environ.get(AZURE_ENDPOINT_VARIABLE) or _AZURE_BASE
        )
    if environment == "gcp":
        resource = _resource(environment, token_resource)
        return lambda context: _gcp_token(resource, context, environ.get(GCP_ENDPOINT_VARIABLE) or _GCP_BASE)
    raise ConfigurationError(f"MONGODB-OIDC: ENVIRONMENT {environment!r} is not supported")


def _resource(environment: str, token_resource: str | None) -> str:
    if not token_resource:
        raise ConfigurationError(f"MONGODB-OIDC: ENVIRONMENT={environment} requires TOKEN_RESOURCE")
    return token_resource


def _required(environ: Mapping[str, str], name: str, environment: str) -> str:
    value = environ.get(name)
    if not value:
        raise OidcTokenError(f"MONGODB-OIDC ENVIRONMENT={environment}: the {name} variable is not set")
    return value


def _k8s_token_file(environ: Mapping[str, str]) -> str:
    for name in K8S_TOKEN_FILE_VARIABLES:
        if environ.get(name):
            return environ[name]
    return K8S_DEFAULT_TOKEN_FILE


async def _read_token_file(path: str) -> OIDCCallbackResult:
    try:
        text = await to_thread(Path(path).read_text, encoding="utf-8")
    except OSError as exc:
        raise OidcTokenError(f"MONGODB-OIDC: cannot read the token file {path!r}: {exc.strerror}") from None
    token = text.strip()
    if not token:
        raise OidcTokenError(f"MONGODB-OIDC: the token file {path!r} is empty")
    return OIDCCallbackResult(access_token=token)


async def _azure_token(resource: str, context: OIDCCallbackContext, base: str) -> OIDCCallbackResult:
    query = {"api-version": "2018-02-01", "resource": resource}
    if context.username:
        query["client_id"] = context.username
    url = f"{base.rstrip('/')}/metadata/identity/oauth2/token?{urllib.parse.urlencode(query)}"
    body = await _get(url, {"Accept": "application/json", "Metadata": "true"}, context, "Azure")
    try:
        document = json.loads(body)
        token = document["access_token"]
    except (ValueError, KeyError, TypeError):
        raise OidcTokenError(
            "MONGODB-OIDC ENVIRONMENT=azure: the metadata service's reply has no access_token"
        ) from None
    if not isinstance(token, str) or not token:
        raise OidcTokenError("MONGODB-OIDC ENVIRONMENT=azure: the metadata service's access_token is empty")
    expires_in = document.get("expires_in")
    seconds = float(expires_in) if isinstance(expires_in, str | int) and str(expires_in).isdigit() else None
    return OIDCCallbackResult(access_token=token, expires_in_seconds=seconds)


async def _gcp_token(resource: str, context: OIDCCallbackContext, base: str) -> OIDCCallbackResult:
    query = urllib.parse.urlencode({"audience": resource})
    url = f"{base.rstrip('/')}/computeMetadata/v1/instance/service-accounts/default/identity?{query}"
    body = await _get(url, {"Metadata-Flavor": "Google"}, context, "GCP")
    token = body.decode("utf-8", "replace").strip()
    if not token:
        raise OidcTokenError("MONGODB-OIDC ENVIRONMENT=gcp: the metadata server returned an empty token")
    return OIDCCallbackResult(access_token=token)


async def _get(url: str, headers: Mapping[str, str], context: OIDCCallbackContext, cloud: str) -> bytes:
    """The body of a 200 reply, within the callback's timeout; any other status is an error that includes the
    body (as the specification asks: it explains the failure)."""
    try:
        response = await http_request("GET", url, headers=headers, time_limit=context.timeout_seconds)
    except HttpError as exc:
        raise OidcTokenError(f"MONGODB-OIDC: the {cloud} metadata endpoint failed: {exc}") from None
    if response.status != 200:
        shown = response.body[:_SHOWN_BODY].decode("utf-8", "replace")
        raise OidcTokenError(
            f"MONGODB-OIDC: the {cloud} metadata endpoint answered HTTP {response.status}: {shown}"
        )
    return response.body
