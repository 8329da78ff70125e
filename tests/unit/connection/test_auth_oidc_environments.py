"""The built-in MONGODB-OIDC environments against fakes: token files (``test``, ``k8s``) the test writes, and
Azure / GCP metadata endpoints on 127.0.0.1 that answer well, slowly, with errors, hostile bodies, or new tokens
once the old ones expired. Azure prose tests 5.1 and 5.2 run here against the fake endpoint."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mongio import MongoClient
from mongio.auth_oidc import OIDCCallbackContext
from mongio.connection.auth.oidc_environments import (
    AZURE_ENDPOINT_VARIABLE,
    GCP_ENDPOINT_VARIABLE,
    K8S_DEFAULT_TOKEN_FILE,
    OidcTokenError,
    environment_callback,
)
from mongio.connection.http import MAX_BODY
from mongio.errors import AuthenticationFailed
from tests.support.metadata_endpoint import Answer, MetadataEndpoint
from tests.support.oidc_server import OidcServer

RESOURCE = "api://mongodb,resource:1"


@pytest.fixture
async def endpoint() -> AsyncIterator[MetadataEndpoint]:
    async with MetadataEndpoint() as running:
        yield running


@pytest.fixture
async def server() -> AsyncIterator[OidcServer]:
    async with OidcServer() as running:
        yield running


def context(timeout: float = 5.0, username: str | None = None) -> OIDCCallbackContext:
    return OIDCCallbackContext(timeout_seconds=timeout, username=username)


def azure(token: str) -> Answer:
    return Answer(
        200, json.dumps({"access_token": token, "expires_in": "3599", "token_type": "Bearer"}).encode()
    )


def oidc_client(server: OidcServer, properties: dict[str, str], **options: Any) -> MongoClient:
    return MongoClient(
        server.uri,
        authMechanism="MONGODB-OIDC",
        authMechanismProperties=properties,
        directConnection=True,
        retryReads=False,
        serverSelectionTimeoutMS=3000,
        **options,
    )


# -- Azure ------------------------------------------------------------------------------------------------------


async def test_azure_request_is_the_specifications(endpoint: MetadataEndpoint) -> None:
    endpoint.answer = azure("tok")
    callback = environment_callback("azure", RESOURCE, {AZURE_ENDPOINT_VARIABLE: endpoint.base_url})
    result = await callback(context(username="client-id-1"))
    assert result.access_token == "tok" and result.expires_in_seconds == 3599
    (seen,) = endpoint.requests
    path, _, query = seen.target.partition("?")
    assert path == "/metadata/identity/oauth2/token"
    assert urllib.parse.parse_qs(query) == {
        "api-version": ["2018-02-01"],
        "resource": [RESOURCE],
        "client_id": ["client-id-1"],
    }
    assert seen.headers["accept"] == "application/json" and seen.headers["metadata"] == "true"


async def test_azure_without_username_sends_no_client_id(endpoint: MetadataEndpoint) -> None:
    endpoint.answer = azure("tok")
    await environment_callback("azure", RESOURCE, {AZURE_ENDPOINT_VARIABLE: endpoint.base_url})(context())
    assert "client_id" not in endpoint.requests[0].target


async def test_azure_5_1_no_username_authenticates(
    server: OidcServer, endpoint: MetadataEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AZURE_ENDPOINT_VARIABLE, endpoint.base_url)
    endpoint.answer = azure(server.issue())
    async with oidc_client(server, {"ENVIRONMENT": "azure", "TOKEN_RESOURCE": RESOURCE}) as client:
        assert await client.db.coll.find_one({}) is None
    assert len(endpoint.requests) == 1


async def test_azure_5_2_bad_username_fails_with_the_reply_body(
    server: OidcServer, endpoint: MetadataEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AZURE_ENDPOINT_VARIABLE, endpoint.base_url)
    endpoint.answer = Answer(400, b'{"error":"invalid_request","error_description":"Identity not found"}')
    properties = {"ENVIRONMENT": "azure", "TOKEN_RESOURCE": RESOURCE}
    async with oidc_client(server, properties, username="bad") as client:
        with pytest.raises(AuthenticationFailed, match=r"HTTP 400: .*Identity not found"):
            await client.db.coll.find_one({})
    assert "client_id=bad" in endpoint.requests[0].target


async def test_azure_reply_without_access_token_is_an_error(endpoint: MetadataEndpoint) -> None:
    endpoint.answer = Answer(200, b'{"token_type": "Bearer"}')
    with pytest.raises(OidcTokenError, match="no access_token"):
        await environment_callback("azure", RESOURCE, {AZURE_ENDPOINT_VARIABLE: endpoint.base_url})(context())


async def test_expiring_tokens_are_fetched_again_from_the_endpoint(
    server: OidcServer, endpoint: MetadataEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AZURE_ENDPOINT_VARIABLE, endpoint.base_url)
    first, second = server.issue(), server.issue()
    endpoint.answer = azure(first)
    async with oidc_client(server, {"ENVIRONMENT": "azure", "TOKEN_RESOURCE": RESOURCE}) as client:
        await client.db.coll.insert_one({"x": 1})
        server.revoke(first)  # expired: the server asks for reauthentication
        endpoint.answer = azure(second)
        assert (await client.db.coll.find_one({}))["x"] == 1  # type: ignore[index]
    assert len(endpoint.requests) == 2 and server.accepted[-1] == second


# -- GCP --------------------------------------------------------------------------------------------------------


async def test_gcp_request_is_the_specifications_and_the_body_is_the_token(
    endpoint: MetadataEndpoint,
) -> None:
    endpoint.answer = Answer(200, b"gcp-token\n", chunked=True)
    result = await environment_callback("gcp", RESOURCE, {GCP_ENDPOINT_VARIABLE: endpoint.base_url})(
        context()
    )
    assert result.access_token == "gcp-token"
    (seen,) = endpoint.requests
    path, _, query = seen.target.partition("?")
    assert path == "/computeMetadata/v1/instance/service-accounts/default/identity"
    assert urllib.parse.parse_qs(query) == {"audience": [RESOURCE]}
    assert seen.headers["metadata-flavor"] == "Google"


async def test_gcp_authenticates_a_client(
    server: OidcServer, endpoint: MetadataEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GCP_ENDPOINT_VARIABLE, endpoint.base_url)
    endpoint.answer = Answer(200, server.issue().encode())
    async with oidc_client(server, {"ENVIRONMENT": "gcp", "TOKEN_RESOURCE": RESOURCE}) as client:
        assert await client.db.coll.find_one({}) is None


async def test_failing_endpoint_error_includes_the_body(endpoint: MetadataEndpoint) -> None:
    endpoint.answer = Answer(503, b"metadata server unavailable")
    with pytest.raises(
        OidcTokenError, match="GCP metadata endpoint answered HTTP 503: metadata server unavailable"
    ):
        await environment_callback("gcp", RESOURCE, {GCP_ENDPOINT_VARIABLE: endpoint.base_url})(context())


async def test_slow_endpoint_is_abandoned_at_the_callback_timeout(endpoint: MetadataEndpoint) -> None:
    endpoint.answer = Answer(200, b"late", delay=30)
    with pytest.raises(
        OidcTokenError, match=r"GCP metadata endpoint failed: .*no complete answer within 0\.2 s"
    ):
        await environment_callback("gcp", RESOURCE, {GCP_ENDPOINT_VARIABLE: endpoint.base_url})(context(0.2))


async def test_endpoint_that_hangs_up_is_an_error(endpoint: MetadataEndpoint) -> None:
    endpoint.answer = Answer(hang_up=True)
    with pytest.raises(OidcTokenError, match=r"GCP metadata endpoint failed: .*closed the connection"):
        await environment_callback("gcp", RESOURCE, {GCP_ENDPOINT_VARIABLE: endpoint.base_url})(context())


@pytest.mark.parametrize("chunked", [False, True])
async def test_oversized_reply_is_refused(endpoint: MetadataEndpoint, chunked: bool) -> None:
    endpoint.answer = Answer(200, b"x" * (MAX_BODY + 1), chunked=chunked)
    with pytest.raises(
        OidcTokenError, match=f"more than the {MAX_BODY} accepted|larger than {MAX_BODY} bytes"
    ):
        await environment_callback("gcp", RESOURCE, {GCP_ENDPOINT_VARIABLE: endpoint.base_url})(context())


async def test_unreachable_endpoint_is_an_error() -> None:
    async with MetadataEndpoint() as closed:
        base = closed.base_url
    with pytest.raises(OidcTokenError, match=r"GCP metadata endpoint failed: cannot connect to 127\.0\.0\.1"):
        await environment_callback("gcp", RESOURCE, {GCP_ENDPOINT_VARIABLE: base})(context())


# -- token files --------------------------------------------------------------------------------------------------


async def test_test_environment_needs_oidc_token_file() -> None:
    with pytest.raises(OidcTokenError, match="OIDC_TOKEN_FILE variable is not set"):
        await environment_callback("test", None, {})(context())


async def test_empty_token_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    await asyncio.to_thread(path.write_text, "\n")
    with pytest.raises(OidcTokenError, match="is empty"):
        await environment_callback("test", None, {"OIDC_TOKEN_FILE": str(path)})(context())


async def test_k8s_token_file_order(tmp_path: Path) -> None:
    azure_file, aws_file = tmp_path / "azure", tmp_path / "aws"
    await asyncio.to_thread(azure_file.write_text, "azure-token")
    await asyncio.to_thread(aws_file.write_text, "aws-token")
    both = {"AZURE_FEDERATED_TOKEN_FILE": str(azure_file), "AWS_WEB_IDENTITY_TOKEN_FILE": str(aws_file)}
    assert (await environment_callback("k8s", None, both)(context())).access_token == "azure-token"
    only_aws = {"AWS_WEB_IDENTITY_TOKEN_FILE": str(aws_file)}
    assert (await environment_callback("k8s", None, only_aws)(context())).access_token == "aws-token"


async def test_k8s_default_is_the_service_account_token() -> None:
    if await asyncio.to_thread(Path(K8S_DEFAULT_TOKEN_FILE).exists):
        pytest.skip("running inside Kubernetes: the service account token exists")
    with pytest.raises(OidcTokenError, match=K8S_DEFAULT_TOKEN_FILE):
        await environment_callback("k8s", None, {})(context())


async def test_k8s_authenticates_a_client(
    server: OidcServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "token"
    await asyncio.to_thread(path.write_text, server.issue())
    monkeypatch.delenv("AZURE_FEDERATED_TOKEN_FILE", raising=False)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(path))
    async with oidc_client(server, {"ENVIRONMENT": "k8s"}) as client:
        assert await client.db.coll.find_one({}) is None
