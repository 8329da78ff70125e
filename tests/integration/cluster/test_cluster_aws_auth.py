"""MONGODB-AWS through the loopback cluster harness: the members answer the conversation on ``$external`` as
servers configured for it (recomputing the SigV4 signature with the key store's secrets), then the client's
reads and writes reach the test server as usual."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Iterator

import pytest
from spec_runner.cluster import Deployment, replica_set
from spec_runner.cluster.aws_sasl import AwsSaslServer, KeyStore

from mongio.client import MongoClient
from mongio.connection.auth import aws_credentials
from mongio.connection.auth.aws_credentials import CREDENTIAL_CACHE, AwsEndpoints
from mongio.errors import OperationFailure
from tests.support.fake_aws import AWS_CHAIN_VARIABLES, ECS_RELATIVE_URI, FakeAwsEndpoints

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def rs() -> Iterator[Deployment]:
    with replica_set(3) as deployment:
        yield deployment


@pytest.fixture
def sasl(rs: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsSaslServer]:
    for name in AWS_CHAIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    CREDENTIAL_CACHE.clear()
    server = AwsSaslServer(KeyStore())
    rs.accept_external_auth("MONGODB-AWS", server)
    try:
        yield server
    finally:
        rs.accept_external_auth("MONGODB-AWS", None)
        CREDENTIAL_CACHE.clear()


@pytest.fixture
async def endpoints(sasl: AwsSaslServer) -> AsyncIterator[FakeAwsEndpoints]:
    async with FakeAwsEndpoints(sasl.keys) as fake:
        previous = aws_credentials.use_endpoints(AwsEndpoints(ecs_base=fake.base, imds_base=fake.base))
        try:
            yield fake
        finally:
            aws_credentials.use_endpoints(previous)


async def test_environment_credentials_authenticate_every_pooled_connection(
    rs: Deployment, sasl: AwsSaslServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sasl.keys.add("AKIAHARNESSEXAMPLE", "harness-secret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAHARNESSEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "harness-secret")
    async with MongoClient(rs.uri, authMechanism="MONGODB-AWS") as client:
        collection = client.aws_auth.people
        await collection.delete_many({})
        await collection.insert_one({"name": "ada"})
        assert (await collection.find_one({}, {"_id": 0})) == {"name": "ada"}
    assert sasl.accepted and set(sasl.accepted) == {"AKIAHARNESSEXAMPLE"} and sasl.refused == []


async def test_a_wrong_secret_is_refused_by_the_members(
    rs: Deployment, sasl: AwsSaslServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sasl.keys.add("AKIAHARNESSEXAMPLE", "harness-secret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAHARNESSEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    async with MongoClient(rs.uri, authMechanism="MONGODB-AWS", serverSelectionTimeoutMS=5000) as client:
        with pytest.raises(OperationFailure, match="MONGODB-AWS authentication failed"):
            await client.aws_auth.people.find_one({})
    assert "signature mismatch" in sasl.refused and sasl.accepted == []


async def test_ecs_credentials_through_the_harness(
    rs: Deployment, sasl: AwsSaslServer, endpoints: FakeAwsEndpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoints.expires_in = datetime.timedelta(hours=1)
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", ECS_RELATIVE_URI)
    async with MongoClient(rs.uri, authMechanism="MONGODB-AWS") as client:
        await client.aws_auth.people.insert_one({"name": "grace"})
        assert await client.aws_auth.people.count_documents({"name": "grace"}) >= 1
    assert endpoints.hits["ecs"] == 1
    assert set(sasl.accepted) == {endpoints.issued[0].access_key}
