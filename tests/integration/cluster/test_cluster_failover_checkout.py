"""Operations that select the primary, then wait for a connection while it steps down (Retryable Writes,
"Supported Server Versions"; Retryable Reads): the attempt is judged on the server as selected, so a write
carries its txnNumber, is refused with a retryable NotWritablePrimary and is retried on the new primary with the
same txnNumber; a read is retried the same way.

The wait is made by the loopback cluster harness: the primary answers 0.3 s late, so a new client's first
connection to it is still in its handshake when the harness elects another member 0.1 s after the operation
started. The new primary's hello then shows the old one stale, and SDAM marks it Unknown, before the connection
is ready."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from spec_runner.cluster import Deployment, replica_set

from mongio.client import MongoClient
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.operations.models import InsertOne, UpdateOne
from mongio.topology.server_type import ServerType
from mongio.topology.topology_description import TopologyDescription

pytestmark = pytest.mark.server

WAIT = 20.0
HANDSHAKE_LATENCY = 0.3
FAILOVER_AFTER = 0.1


@dataclass
class Attempt:
    command_name: str
    address: str
    txn_number: int | None
    type_when_sent: ServerType | None
    error_code: int | None = None
    labels: tuple[str, ...] = ()
    succeeded: bool = False


class Attempts(CommandListener):
    """Each command sent, with the member it went to, its txnNumber, how the client described that member
    when the command went out, and how it ended."""

    def __init__(self) -> None:
        self.by_request: dict[int, Attempt] = {}
        self.order: list[Attempt] = []
        self.client: MongoClient | None = None

    def started(self, event: CommandStartedEvent) -> None:
        txn = event.command.get("txnNumber")
        attempt = Attempt(
            event.command_name,
            _address(event.connection_id),
            None if txn is None else int(txn),
            self._server_type(event.connection_id),
        )
        self.by_request[event.request_id] = attempt
        self.order.append(attempt)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.by_request[event.request_id].succeeded = True

    def failed(self, event: CommandFailedEvent) -> None:
        attempt = self.by_request[event.request_id]
        failure: Any = event.failure  # the server's reply, or a dict describing a client-side error
        attempt.error_code = failure.get("code")
        attempt.labels = tuple(failure.get("errorLabels", ()))

    def of(self, name: str) -> list[Attempt]:
        return [attempt for attempt in self.order if attempt.command_name == name]

    def _server_type(self, address: Any) -> ServerType | None:
        topology = None if self.client is None else self.client._topology
        if topology is None:
            return None
        description = topology.description.get(address)
        return None if description is None else description.server_type


def _address(address: Any) -> str:
    host, port = address
    return f"{host}:{port}"


@pytest.fixture(scope="module")
def rs() -> Iterator[Deployment]:
    with replica_set(3) as deployment:
        yield deployment


@pytest.fixture
def deployment(rs: Deployment) -> Iterator[Deployment]:
    rs.reset()
    yield rs
    rs.reset()


@pytest.fixture
async def seeded(deployment: Deployment) -> None:
    """Each test's collection emptied and seeded through a client of its own (its pool is not the test's)."""
    client = MongoClient(deployment.uri)
    try:
        collection = client.test.get_collection("failover_checkout")
        await collection.delete_many({})
        await collection.insert_many([{"_id": "seed", "n": 0}])
    finally:
        await client.close()


def _all_known(description: TopologyDescription) -> bool:
    types = sorted(sd.server_type.name for sd in description.server_descriptions().values())
    return types == ["RSPrimary", "RSSecondary", "RSSecondary"]


async def _fresh_client(deployment: Deployment, attempts: Attempts) -> MongoClient:
    """A client that knows every member and has no pooled connection yet."""
    client = MongoClient(deployment.uri, heartbeatFrequencyMS=60_000, event_listeners=[attempts])
    attempts.client = client
    await client.aconnect()
    with anyio.fail_after(WAIT):
        await client._topology.wait_for_description(_all_known)  # type: ignore[union-attr]
    return client


async def _run_through_failover(
    deployment: Deployment, operation: Callable[[MongoClient], Awaitable[Any]]
) -> tuple[Any, Attempts, str, str]:
    """Run ``operation`` on a fresh client while the primary steps down during its first checkout. Returns
    its result, the attempts, and the old and new primaries' addresses."""
    attempts = Attempts()
    client = await _fresh_client(deployment, attempts)
    old_primary = deployment.members[0]
    results: list[Any] = []

    async def run() -> None:
        results.append(await operation(client))

    try:
        deployment.set_latency(old_primary, HANDSHAKE_LATENCY)
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as running:
                running.start_soon(run)
                await anyio.sleep(FAILOVER_AFTER)
                new_primary = deployment.failover()
        return results[0], attempts, old_primary.address, new_primary.address
    finally:
        await client.close()


def _sent_after_the_step_down_was_seen(first: Attempt, old_primary: str) -> None:
    """The scenario itself: the first attempt went to the member selected as primary, and by then the client
    no longer described it as primary (without this, the retry would prove nothing about the rule)."""
    assert first.address == old_primary, first
    assert first.type_when_sent is not None and first.type_when_sent is not ServerType.RSPrimary, first


def _retried_once_with_the_same_txn_number(
    attempts: list[Attempt], old_primary: str, new_primary: str
) -> None:
    """The write went out twice: to the old primary with a txnNumber, refused as a retryable
    NotWritablePrimary, then to the new one with the same txnNumber, which took it."""
    assert len(attempts) == 2, attempts
    first, retry = attempts
    _sent_after_the_step_down_was_seen(first, old_primary)
    assert first.txn_number is not None, first
    assert first.error_code == 10107 and "RetryableWriteError" in first.labels, first
    assert retry.address == new_primary and retry.succeeded, retry
    assert retry.txn_number == first.txn_number


async def test_an_insert_waiting_for_a_connection_through_a_step_down_is_retried(
    deployment: Deployment, seeded: None
) -> None:
    async def insert(client: MongoClient) -> Any:
        return await client.test.failover_checkout.insert_one({"_id": "during-failover"})

    result, attempts, old, new = await _run_through_failover(deployment, insert)
    assert result.inserted_id == "during-failover"
    _retried_once_with_the_same_txn_number(attempts.of("insert"), old, new)


async def test_find_one_and_update_waiting_for_a_connection_through_a_step_down_is_retried(
    deployment: Deployment, seeded: None
) -> None:
    async def find_and_modify(client: MongoClient) -> Any:
        return await client.test.failover_checkout.find_one_and_update({"_id": "seed"}, {"$inc": {"n": 1}})

    result, attempts, old, new = await _run_through_failover(deployment, find_and_modify)
    assert result == {"_id": "seed", "n": 0}
    _retried_once_with_the_same_txn_number(attempts.of("findAndModify"), old, new)
    client = MongoClient(deployment.uri)
    try:
        # Applied once: the retry was not a second increment.
        assert await client.test.failover_checkout.find_one({"_id": "seed"}) == {"_id": "seed", "n": 1}
    finally:
        await client.close()


async def test_a_bulk_write_waiting_for_a_connection_through_a_step_down_is_retried(
    deployment: Deployment, seeded: None
) -> None:
    async def bulk(client: MongoClient) -> Any:
        return await client.test.failover_checkout.bulk_write(
            [InsertOne({"_id": "bulk"}), UpdateOne({"_id": "seed"}, {"$set": {"bulk": True}})]
        )

    result, attempts, old, new = await _run_through_failover(deployment, bulk)
    assert (result.inserted_count, result.modified_count) == (1, 1)
    _retried_once_with_the_same_txn_number(attempts.of("insert"), old, new)
    # The bulk's second batch went to the new primary alone, with a txnNumber of its own.
    updates = attempts.of("update")
    assert len(updates) == 1 and updates[0].address == new and updates[0].succeeded
    assert updates[0].txn_number is not None


async def test_a_client_bulk_write_waiting_for_a_connection_through_a_step_down_is_retried(
    deployment: Deployment, seeded: None
) -> None:
    async def client_bulk(client: MongoClient) -> Any:
        return await client.bulk_write(
            [
                InsertOne({"_id": "client-bulk"}, namespace="test.failover_checkout"),
                UpdateOne({"_id": "seed"}, {"$set": {"client_bulk": True}}, namespace="test.failover_checkout"),
            ]
        )

    result, attempts, old, new = await _run_through_failover(deployment, client_bulk)
    assert (result.inserted_count, result.modified_count) == (1, 1)
    _retried_once_with_the_same_txn_number(attempts.of("bulkWrite"), old, new)


async def test_a_read_waiting_for_a_connection_through_a_step_down_is_retried(
    deployment: Deployment, seeded: None
) -> None:
    async def read(client: MongoClient) -> Any:
        return await client.test.failover_checkout.find_one({"_id": "seed"})

    result, attempts, old, new = await _run_through_failover(deployment, read)
    assert result == {"_id": "seed", "n": 0}
    finds = attempts.of("find")
    assert [attempt.address for attempt in finds] == [old, new], finds
    _sent_after_the_step_down_was_seen(finds[0], old)
    assert finds[0].error_code is not None and not finds[0].succeeded
    assert finds[1].succeeded
