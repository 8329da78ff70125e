"""On-demand KMS credentials against a fake metadata service on loopback: prose tests 17 (GCP: failure and
success) and 18 (Azure IMDS: success, empty JSON, bad JSON, HTTP 404, HTTP 500, a slow answer), and the
Azure token's cache."""

from __future__ import annotations

import pytest

from mongio.encryption.cloud_credentials import OnDemandCredentials, on_demand_providers
from mongio.errors import EncryptionError
from tests.support.fake_metadata import TOKEN, FakeMetadataServer


def test_only_the_cloud_providers_given_empty_are_fetched() -> None:
    providers = {"aws": {}, "gcp": {"accessToken": "t"}, "azure": {}, "local": {}, "aws:named": {}}
    assert on_demand_providers(providers) == ["aws", "azure"]


async def test_prose_17_gcp_success_asks_the_metadata_server_with_its_header() -> None:
    async with FakeMetadataServer() as server:
        credentials = OnDemandCredentials(gcp_metadata_host=server.host)
        assert await credentials.fetch({"gcp": {}}) == {"gcp": {"accessToken": TOKEN}}
    target, headers = server.requests[0]
    assert target == "/computeMetadata/v1/instance/service-accounts/default/token"
    assert headers["metadata-flavor"] == "Google"


async def test_prose_17_gcp_failure_is_an_encryption_error() -> None:
    async with FakeMetadataServer(case="404") as server:
        with pytest.raises(EncryptionError, match="GCE metadata server answered HTTP 404"):
            await OnDemandCredentials(gcp_metadata_host=server.host).gcp()


async def test_prose_18_case_1_azure_success_and_its_request() -> None:
    async with FakeMetadataServer() as server:
        credentials = OnDemandCredentials(
            azure_imds_url=f"http://{server.host}/metadata/identity/oauth2/token"
        )
        assert await credentials.azure() == {"accessToken": TOKEN}
    target, headers = server.requests[0]
    assert target.startswith(
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://vault.azure.net"
    )
    assert headers["metadata"] == "true" and headers["accept"] == "application/json"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("empty-json", "without an access_token"),
        ("bad-json", "not JSON"),
        ("404", "HTTP 404"),
        ("500", "HTTP 500"),
    ],
)
async def test_prose_18_cases_2_to_5_azure_failures_are_encryption_errors(case: str, message: str) -> None:
    async with FakeMetadataServer(case=case) as server:
        credentials = OnDemandCredentials(azure_imds_url=f"http://{server.host}/token")
        with pytest.raises(EncryptionError, match=message):
            await credentials.azure()


async def test_prose_18_case_6_a_slow_azure_answer_times_out() -> None:
    async with FakeMetadataServer(case="slow") as server:
        credentials = OnDemandCredentials(azure_imds_url=f"http://{server.host}/token", timeout=0.2)
        with pytest.raises(EncryptionError, match="no complete answer"):
            await credentials.azure()


@pytest.mark.parametrize(("expires_in", "requests"), [(70, 1), (30, 2)])
async def test_the_azure_token_is_cached_until_a_minute_before_it_expires(
    expires_in: int, requests: int
) -> None:
    async with FakeMetadataServer(expires_in=expires_in) as server:
        credentials = OnDemandCredentials(azure_imds_url=f"http://{server.host}/token")
        await credentials.azure()
        await credentials.azure()
    assert len(server.requests) == requests
