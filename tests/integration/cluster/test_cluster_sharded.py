"""mongio against the harness's sharded cluster (two mongoses with fail points of their own) and its load
balancer (a serviceId per mongos): Retryable Writes prose test 4 and Retryable Reads prose 2.1 (a retry goes
to another mongos), and the load-balanced handshake."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from spec_runner.cluster import Deployment, load_balanced, sharded
from spec_runner.raw_wire import command_once

from mongio.client import MongoClient
from mongio.errors import PyMongoError
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

pytestmark = pytest.mark.server


class Failures(CommandListener):
    def __init__(self) -> None:
        self.addresses: list[str] = []

    def started(self, event: CommandStartedEvent) -> None:
        pass

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        host, port = event.connection_id
        self.addresses.append(f"{host}:{port}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Deployment]:
    with sharded(2) as deployment:
        yield deployment


@pytest.fixture
def deployment(cluster: Deployment) -> Iterator[Deployment]:
    cluster.reset()
    yield cluster
    cluster.reset()


def fail_once(command: str) -> dict[str, Any]:
    return {
        "configureFailPoint": "failCommand",
        "mode": {"times": 1},
        "data": {"failCommands": [command], "errorCode": 6, "errorLabels": ["RetryableWriteError"]},
    }


@pytest.mark.parametrize(("command", "options"), [("insert", "retryWrites=true"), ("find", "retryReads=true")])
async def test_a_retry_goes_to_the_other_mongos(deployment: Deployment, command: str, options: str) -> None:
    for mongos in deployment.members:
        deployment.configure_fail_point(mongos, fail_once(command))
    failures = Failures()
    client = MongoClient(f"{deployment.uri}?{options}", event_listeners=[failures])
    try:
        collection = client.test.get_collection("cluster_sharded_retry")
        with pytest.raises(PyMongoError):
            if command == "insert":
                await collection.insert_one({"x": 1})
            else:
                await collection.find_one({})
    finally:
        await client.close()
    assert sorted(failures.addresses) == sorted(m.address for m in deployment.members)


async def test_a_fail_point_on_one_mongos_leaves_the_other_alone(deployment: Deployment) -> None:
    first, second = deployment.members
    deployment.configure_fail_point(first, fail_once("find"))
    reply = command_once(second.host, second.port, {"find": "cluster_sharded_fp", "$db": "test"})
    assert reply["ok"] == 1
    reply = command_once(first.host, first.port, {"find": "cluster_sharded_fp", "$db": "test"})
    assert reply["code"] == 6


def test_each_load_balanced_connection_carries_the_service_id_of_its_mongos() -> None:
    with load_balanced(2) as deployment:
        host, port = deployment.uri.split("//", 1)[1].split("/", 1)[0].split(":")
        hello = {"hello": 1, "loadBalanced": True, "$db": "admin"}
        replies = [command_once(host, int(port), hello) for _ in range(4)]
        services = [reply["serviceId"] for reply in replies]
        assert all(reply["msg"] == "isdbgrid" for reply in replies)
        assert services[0] != services[1]
        assert services[:2] == services[2:]  # connections are dealt to the mongoses in turn
        assert set(services) == {m.service_id for m in deployment.members}
