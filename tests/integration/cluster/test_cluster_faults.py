"""Retryable writes and reads through the harness's injected faults: every kind but the black hole is
survived by one retry, and a write whose reply was lost is applied exactly once (Retryable Writes, Retryable
Reads, Client Backpressure)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from spec_runner.cluster import Deployment, Fault, FaultKind, FaultPlan, replica_set

from mongio.client import MongoClient
from mongio.errors import PyMongoError

pytestmark = pytest.mark.server

SURVIVED = [kind for kind in FaultKind if kind is not FaultKind.BLACK_HOLE]


@pytest.fixture(scope="module")
def rs() -> Iterator[Deployment]:
    with replica_set(3) as deployment:
        yield deployment


@pytest.fixture
def deployment(rs: Deployment) -> Iterator[Deployment]:
    rs.reset()
    yield rs
    rs.reset()


def injected(deployment: Deployment, kind: FaultKind) -> int:
    return deployment.injected_faults().get(kind.value, 0)


@pytest.mark.parametrize("kind", SURVIVED, ids=lambda kind: kind.name)
async def test_a_retryable_write_survives_one_fault_and_is_applied_once(deployment: Deployment, kind: FaultKind) -> None:
    client = MongoClient(deployment.uri)
    try:
        collection = client.test.get_collection("cluster_faults_write")
        await collection.delete_many({})
        before = injected(deployment, kind)
        deployment.set_faults(0, FaultPlan([Fault(kind, seconds=0.05)], commands=["insert"]))
        await collection.insert_one({"_id": kind.name})
        assert injected(deployment, kind) == before + 1
        assert await collection.count_documents({"_id": kind.name}) == 1
    finally:
        await client.close()


@pytest.mark.parametrize("kind", SURVIVED, ids=lambda kind: kind.name)
async def test_a_retryable_read_survives_one_fault(deployment: Deployment, kind: FaultKind) -> None:
    client = MongoClient(deployment.uri)
    try:
        collection = client.test.get_collection("cluster_faults_read")
        await collection.delete_many({})
        await collection.insert_one({"_id": 1, "kind": kind.name})
        before = injected(deployment, kind)
        deployment.set_faults(0, FaultPlan([Fault(kind, seconds=0.05)], commands=["find"]))
        assert await collection.find_one({"_id": 1}) == {"_id": 1, "kind": kind.name}
        assert injected(deployment, kind) == before + 1
    finally:
        await client.close()


async def test_a_black_holed_write_ends_with_the_operation_timeout(
    deployment: Deployment,
) -> None:
    client = MongoClient(deployment.uri, timeoutMS=300, retryWrites=False)
    try:
        collection = client.test.get_collection("cluster_faults_black_hole")
        before = injected(deployment, FaultKind.BLACK_HOLE)
        deployment.set_faults(0, FaultPlan([Fault(FaultKind.BLACK_HOLE)], commands=["insert"]))
        with pytest.raises(PyMongoError):
            await collection.insert_one({"_id": 1})
        await collection.insert_one({"_id": 2})  # the next one is served
        assert injected(deployment, FaultKind.BLACK_HOLE) == before + 1
    finally:
        await client.close()


async def test_random_faults_with_a_seed_are_the_same_every_time(deployment: Deployment) -> None:
    draws = []
    for _ in range(2):
        plan = FaultPlan(rate=0.5, seed=7)
        draws.append([getattr(plan.take("insert"), "kind", None) for _ in range(50)])
    assert draws[0] == draws[1]
    assert {kind for kind in draws[0] if kind is not None} == set(FaultKind)
