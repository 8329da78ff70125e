"""mongio against a three-member replica set of the loopback cluster harness: discovery of every member,
reads served by secondaries, writes refused by them, and retryable writes through step-downs, deaths and
partitions (Server Discovery and Monitoring, Server Selection, Retryable Writes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import pytest
from spec_runner.cluster import Deployment, MemberConfig, replica_set
from spec_runner.raw_wire import command_once

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.options.read_preference import Secondary
from mongio.topology.server_type import ServerType
from mongio.topology.topology_description import TopologyDescription

pytestmark = pytest.mark.server

WAIT = 20.0


class Commands(CommandListener):
    """Every command's outcome, with the member that answered."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, str, int | None]] = []  # (command, "host:port", error code)

    def started(self, event: CommandStartedEvent) -> None:
        pass

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.outcomes.append((event.command_name, _address(event.connection_id), None))

    def failed(self, event: CommandFailedEvent) -> None:
        code = getattr(event.failure, "get", lambda *_: None)("code")
        self.outcomes.append((event.command_name, _address(event.connection_id), code))

    def of(self, name: str) -> list[tuple[str, str, int | None]]:
        return [outcome for outcome in self.outcomes if outcome[0] == name]


def _address(address: Any) -> str:
    host, port = address
    return f"{host}:{port}"


@pytest.fixture(scope="module")
def rs() -> Iterator[Deployment]:
    with replica_set(
        [MemberConfig(tags={"dc": "east"}), MemberConfig(tags={"dc": "west"}), MemberConfig(tags={"dc": "west"})]
    ) as deployment:
        yield deployment


@pytest.fixture
def deployment(rs: Deployment) -> Iterator[Deployment]:
    rs.reset()
    yield rs
    rs.reset()


@pytest.fixture
async def client_and_commands(deployment: Deployment) -> AsyncIterator[tuple[MongoClient, Commands]]:
    commands = Commands()
    # A long heartbeat: any change the client notices within WAIT seconds was pushed by the streaming hello.
    client = MongoClient(deployment.uri, heartbeatFrequencyMS=60_000, event_listeners=[commands])
    await client.aconnect()
    try:
        yield client, commands
    finally:
        await client.close()


async def wait_for(client: MongoClient, predicate: Callable[[TopologyDescription], bool]) -> TopologyDescription:
    with anyio.fail_after(WAIT):
        return await client._topology.wait_for_description(predicate)  # type: ignore[union-attr]


def member_is(address: str, server_type: ServerType) -> Callable[[TopologyDescription], bool]:
    """Whether the description shows the member at ``address`` as ``server_type``."""

    def check(description: TopologyDescription) -> bool:
        return any(
            sd.server_type is server_type and _address(sd.address) == address
            for sd in description.server_descriptions().values()
        )

    return check


def primary_is(address: str) -> Callable[[TopologyDescription], bool]:
    return member_is(address, ServerType.RSPrimary)


def all_known(description: TopologyDescription) -> bool:
    types = sorted(sd.server_type.name for sd in description.server_descriptions().values())
    return types == ["RSPrimary", "RSSecondary", "RSSecondary"]


async def test_the_client_discovers_every_member_and_their_roles(client_and_commands: Any, deployment: Deployment) -> None:
    client, _ = client_and_commands
    description = await wait_for(client, all_known)
    assert description.replica_set_name == "rs0"
    by_address = {_address(sd.address): sd for sd in description.server_descriptions().values()}
    assert set(by_address) == {m.address for m in deployment.members}
    primary = by_address[deployment.members[0].address]
    assert primary.server_type is ServerType.RSPrimary
    assert primary.tags == {"dc": "east"}
    assert primary.election_id is not None


async def test_secondary_reads_go_to_a_secondary_and_primary_reads_to_the_primary(
    client_and_commands: Any, deployment: Deployment
) -> None:
    client, commands = client_and_commands
    await wait_for(client, all_known)
    collection = client.test.get_collection("cluster_reads")
    await collection.delete_many({})
    await collection.insert_one({"_id": 1})
    await collection.with_options(read_preference=Secondary()).find_one({"_id": 1})
    await collection.with_options(read_preference=Secondary(tag_sets=[{"dc": "west"}])).find_one({})
    await collection.find_one({"_id": 1})
    secondaries = {m.address for m in deployment.members[1:]}
    finds = commands.of("find")
    assert [outcome[2] for outcome in finds] == [None, None, None]
    assert finds[0][1] in secondaries
    assert finds[1][1] in secondaries
    assert finds[2][1] == deployment.members[0].address


async def test_a_secondary_refuses_writes_with_not_writable_primary(deployment: Deployment) -> None:
    secondary = deployment.members[1]
    client = MongoClient(f"mongodb://{secondary.address}/?directConnection=true")
    try:
        with pytest.raises(OperationFailure) as raised:
            await client.test.cluster_refused.insert_one({"_id": 1})
        assert raised.value.code == 10107
        # Direct to one server, the driver asks for primaryPreferred, so the secondary serves the read...
        assert await client.test.cluster_refused.find_one({"_id": 1}) is None
    finally:
        await client.close()
    # ...which a primary read preference (none given, over OP_MSG) is refused.
    reply = command_once(secondary.host, secondary.port, {"find": "cluster_refused", "$db": "test"})
    assert reply["code"] == 13435, reply


async def test_an_election_is_pushed_to_the_monitors_and_retryable_writes_follow_it(
    client_and_commands: Any, deployment: Deployment
) -> None:
    client, commands = client_and_commands
    before = await wait_for(client, all_known)
    old_election = next(sd.election_id for sd in before.known_servers if sd.server_type is ServerType.RSPrimary)
    collection = client.test.get_collection("cluster_failover")
    await collection.delete_many({})
    await collection.insert_one({"_id": 1})
    new_primary = deployment.failover()
    # The insert may reach the old primary before its monitor reports the change: it is then refused with a
    # retryable NotWritablePrimary, and retried on the new primary.
    await collection.insert_one({"_id": 2})
    after = await wait_for(client, primary_is(new_primary.address))
    new_election = next(sd.election_id for sd in after.known_servers if sd.server_type is ServerType.RSPrimary)
    assert new_election is not None and old_election is not None
    assert new_election > old_election
    inserts = commands.of("insert")
    assert inserts[-1][1] == new_primary.address and inserts[-1][2] is None
    assert all(code == 10107 for _, _, code in inserts[1:-1])
    assert sorted([doc["_id"] async for doc in collection.find({})]) == [1, 2]


async def test_writes_continue_after_the_primary_dies_and_it_rejoins_as_a_secondary(
    client_and_commands: Any, deployment: Deployment
) -> None:
    client, _ = client_and_commands
    await wait_for(client, all_known)
    collection = client.test.get_collection("cluster_kill")
    await collection.delete_many({})
    old = deployment.members[0]
    deployment.kill(old)
    deployment.elect(2)
    await collection.insert_one({"_id": "after-kill"})
    assert _address(client.primary) == deployment.members[2].address
    deployment.restart(old)

    # Nothing streams from a member that was dead: the client learns of its return from a check. Whether one
    # is due soon depends on how the death was noticed (by its monitor, checked again at once, or by the write,
    # which cancels the monitor's check and leaves it waiting heartbeatFrequencyMS, as the monitoring spec
    # says). A read that only the old member can serve (its tag) asks every monitor to check now.
    only_old = collection.with_options(read_preference=Secondary(tag_sets=[{"dc": "east"}]))
    assert await only_old.find_one({"_id": "after-kill"}) == {"_id": "after-kill"}
    await wait_for(client, member_is(old.address, ServerType.RSSecondary))
    assert await collection.count_documents({}) == 1


async def test_a_partitioned_secondary_is_left_out_of_secondary_reads(
    client_and_commands: Any, deployment: Deployment
) -> None:
    client, commands = client_and_commands
    await wait_for(client, all_known)
    cut_off, other = deployment.members[1], deployment.members[2]
    deployment.partition(cut_off)

    await wait_for(client, member_is(cut_off.address, ServerType.Unknown))
    reader = client.test.get_collection("cluster_partition", read_preference=Secondary())
    for _ in range(5):
        await reader.find_one({})
    assert {address for _, address, _ in commands.of("find")} == {other.address}


async def test_a_fail_point_set_on_one_member_fires_only_there(deployment: Deployment) -> None:
    deployment.configure_fail_point(
        1,
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {"failCommands": ["find"], "errorCode": 91},
        },
    )
    await _direct_find(deployment.members[2].address)  # another member: not failed
    with pytest.raises(OperationFailure) as raised:
        await _direct_find(deployment.members[1].address)
    assert raised.value.code == 91
    await _direct_find(deployment.members[1].address)  # times: 1 is used up


async def test_kill_all_sessions_interrupts_a_command_held_by_a_fail_point(deployment: Deployment) -> None:
    # blockConnection is an interruptible wait on the server: a write held there when killAllSessions arrives
    # fails and never runs. (Left to run, a write a timed-out test abandoned lands on the next test's data.)
    primary = deployment.primary
    assert primary is not None
    client = MongoClient(deployment.uri, retryWrites=False)
    try:
        collection = client.test.cluster_held
        await collection.delete_many({})
        deployment.configure_fail_point(
            primary,
            {
                "configureFailPoint": "failCommand",
                "mode": {"times": 1},
                "data": {"failCommands": ["insert"], "blockConnection": True, "blockTimeMS": 2000},
            },
        )
        outcome: list[OperationFailure | None] = []
        ended = anyio.Event()

        async def insert() -> None:
            try:
                await collection.insert_one({"_id": 1})
            except OperationFailure as error:
                outcome.append(error)
            else:
                outcome.append(None)
            ended.set()

        async with anyio.create_task_group() as holding:
            holding.start_soon(insert)
            # The member is the harness loop's (another thread): the test cannot await its holding, only give
            # it time.
            await anyio.sleep(0.5)
            assert not ended.is_set()
            await client.admin.command("killAllSessions", [])
            with anyio.fail_after(1.0):  # interrupted at once, not at the end of the 2 s block
                await ended.wait()
        [raised] = outcome
        assert raised is not None and raised.code == 11601
        assert await collection.count_documents({}) == 0
    finally:
        await client.close()


async def _direct_find(address: str) -> None:
    client = MongoClient(f"mongodb://{address}/?directConnection=true&retryReads=false")
    try:
        await client.test.cluster_fp.find_one({})
    finally:
        await client.close()


@pytest.mark.parametrize("compressor", ["snappy", "zlib", "zstd"])
async def test_messages_are_compressed_both_ways_through_the_members(deployment: Deployment, compressor: str) -> None:
    before = deployment.compressed_requests().get(compressor, 0)
    client = MongoClient(deployment.uri, compressors=compressor)
    try:
        collection = client.test.get_collection("cluster_compressed")
        await collection.delete_many({})
        payload = "x" * 10_000
        await collection.insert_many([{"_id": n, "payload": payload} for n in range(20)])
        found = [doc async for doc in collection.with_options(read_preference=Secondary()).find({}).sort("_id")]
        assert [doc["_id"] for doc in found] == list(range(20))
        assert all(doc["payload"] == payload for doc in found)
    finally:
        await client.close()
    # delete, insert and find at least, each as OP_COMPRESSED (the replies came back compressed the same way:
    # the driver read them above).
    assert deployment.compressed_requests().get(compressor, 0) - before >= 3
