"""Fixtures of the client-side encryption prose tests: a client on the test server holding the key vault, a key
vault namespace of the test's own, the stand-in query analyser, the fake cloud KMS with its certificates, and the
AWS credential chain's endpoints on loopback."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mongio import MongoClient
from mongio.connection.auth import aws_credentials
from mongio.connection.auth.aws_credentials import CREDENTIAL_CACHE, AwsEndpoints
from tests.support.fake_aws import AWS_CHAIN_VARIABLES, FakeAwsEndpoints, KeyStore
from tests.support.fake_kms import FakeCloudKms, KmsCertificates
from tests.support.query_analyser import QueryAnalyser


@pytest.fixture
async def key_client(server_uri: str) -> AsyncIterator[MongoClient]:
    """A client on the test server, without encryption: it holds the key vault."""
    async with MongoClient(server_uri) as client:
        yield client


@pytest.fixture
async def namespace(key_client: MongoClient) -> AsyncIterator[str]:
    """A key vault namespace of the test's own, its database dropped afterwards."""
    name = f"keyvault_{uuid.uuid4().hex[:10]}"
    yield f"{name}.datakeys"
    await key_client.drop_database(name)


@pytest.fixture
async def analyser() -> AsyncIterator[QueryAnalyser]:
    """The stand-in query analyser (mongocryptd's part), serving on loopback for the test."""
    async with QueryAnalyser() as serving:
        yield serving


@pytest.fixture
def certificates(tmp_path: Path) -> KmsCertificates:
    return KmsCertificates.make(str(tmp_path))


@pytest.fixture
async def kms(certificates: KmsCertificates) -> AsyncIterator[FakeCloudKms]:
    """The fake cloud KMS, serving on loopback for the test."""
    async with FakeCloudKms(certificates) as fake:
        yield fake


@pytest.fixture
async def aws_endpoints(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeAwsEndpoints]:
    """The AWS credential chain's endpoints (EC2 instance metadata, ECS, STS) on loopback, and an
    environment without AWS credentials."""
    for name in AWS_CHAIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    CREDENTIAL_CACHE.clear()
    async with FakeAwsEndpoints(KeyStore()) as endpoints:
        previous = aws_credentials.use_endpoints(
            AwsEndpoints(
                sts_url=endpoints.base + "/", ecs_base=endpoints.base, imds_base=endpoints.base, timeout=5
            )
        )
        try:
            yield endpoints
        finally:
            aws_credentials.use_endpoints(previous)
            CREDENTIAL_CACHE.clear()
