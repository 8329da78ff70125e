"""Where retries go, on topologies the test server cannot form, shown with loopback peers answering as
mongoses or as the members of a replica set: the sharded-cluster prose tests of the retryable-reads (2.1, 2.2)
and retryable-writes (4, 5) READMEs, and the replica-set retargeting tests of retryable reads (3.1 to 3.3)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.events.command import CommandFailedEvent, CommandListener, CommandSucceededEvent
from mongio.topology.heartbeat_events import ServerListener
from mongio.topology.sdam_events import ServerDescriptionChangedEvent
from tests.support.loopback_peer import CLOSE, LoopbackPeer, Request, default_reply

OVERLOAD_LABELS = ["RetryableError", "SystemOverloadedError"]


class FakeServer:
    """A peer answering as a mongos or a replica set member; ``failures[command]`` lists the answers for the
    next attempts of that command (an error document or ``CLOSE``) before it succeeds."""

    def __init__(self) -> None:
        self.peer = LoopbackPeer(self.handle, max_wire_version=25)
        self.hello_fields: dict[str, Any] = {"msg": "isdbgrid"}
        self.failures: dict[str, list[Any]] = {}

    @property
    def host(self) -> str:
        host, port = self.peer.address
        return f"{host}:{port}"

    async def handle(self, request: Request) -> Any:
        name = request.command_name
        if name.lower() in ("hello", "ismaster"):
            reply = default_reply(request, self.peer)
            return {**reply, "logicalSessionTimeoutMinutes": 30, **self.hello_fields}
        pending = self.failures.get(name)
        if pending:
            return pending.pop(0)
        if name == "find":
            namespace = f"{request.db}.{request.document['find']}"
            return {"ok": 1, "cursor": {"id": 0, "ns": namespace, "firstBatch": [{"_id": 1}]}}
        if name == "insert":
            return {"ok": 1, "n": len(request.sequences.get("documents", []))}
        return {"ok": 1}


class Outcomes(CommandListener):
    def __init__(self) -> None:
        self.events: list[CommandSucceededEvent | CommandFailedEvent] = []

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.events.append(event)

    def failed(self, event: CommandFailedEvent) -> None:
        self.events.append(event)

    def of(self, name: str) -> list[tuple[str, Any]]:
        return [
            ("failed" if isinstance(event, CommandFailedEvent) else "succeeded", event.connection_id)
            for event in self.events
            if event.command_name == name
        ]


def error(code: int, *labels: str) -> dict[str, Any]:
    return {"ok": 0, "code": code, "errmsg": "injected", "errorLabels": list(labels)}


@pytest.fixture
async def servers() -> AsyncIterator[list[FakeServer]]:
    fakes = [FakeServer(), FakeServer()]
    async with AsyncExitStack() as stack:
        for fake in fakes:
            await stack.enter_async_context(fake.peer)
        yield fakes


class Discovery(ServerListener):
    """Wakes ``all_known`` once every one of ``count`` servers has answered its monitor."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.known: set[Any] = set()
        self.all_known = anyio.Event()

    def description_changed(self, event: ServerDescriptionChangedEvent) -> None:
        if event.new_description.is_server_type_known:
            self.known.add(event.server_address)
        else:
            self.known.discard(event.server_address)
        if len(self.known) == self.count:
            self.all_known.set()


async def run_client(
    hosts: Sequence[FakeServer], options: str, action: Any
) -> tuple[Outcomes, OperationFailure | None]:
    outcomes = Outcomes()
    discovery = Discovery(len(hosts))
    uri = f"mongodb://{','.join(fake.host for fake in hosts)}/?heartbeatFrequencyMS=500&{options}"
    async with MongoClient(uri, event_listeners=[outcomes, discovery]) as client:
        # Where a retry may go depends on which servers are known: all of them, before the operation.
        with anyio.fail_after(30):  # a guard against hanging, not a measurement
            await discovery.all_known.wait()
        try:
            await action(client)
        except OperationFailure as exc:
            return outcomes, exc
    return outcomes, None


def address(fake: FakeServer) -> Any:
    return fake.peer.address


# -- sharded clusters ---------------------------------------------------------------------------------------


async def test_reads_prose_2_1_retried_on_another_mongos(servers: list[FakeServer]) -> None:
    for fake in servers:
        fake.failures["find"] = [error(6)]
    outcomes, raised = await run_client(
        servers, "retryReads=true&localThresholdMS=1000", lambda client: client.db.coll.find_one({})
    )
    assert raised is not None and raised.code == 6
    failed = outcomes.of("find")
    assert [kind for kind, _ in failed] == ["failed", "failed"]
    assert {where for _, where in failed} == {address(fake) for fake in servers}


async def test_reads_prose_2_2_retried_on_the_same_mongos_when_alone(servers: list[FakeServer]) -> None:
    only = servers[0]
    only.failures["find"] = [error(6)]
    outcomes, raised = await run_client([only], "retryReads=true&directConnection=false", _find)
    assert raised is None
    assert outcomes.of("find") == [("failed", address(only)), ("succeeded", address(only))]


async def test_writes_prose_4_retried_on_another_mongos(servers: list[FakeServer]) -> None:
    for fake in servers:
        fake.failures["insert"] = [error(6, "RetryableWriteError")]
    outcomes, raised = await run_client(
        servers, "retryWrites=true&localThresholdMS=1000", lambda client: client.db.coll.insert_one({})
    )
    assert raised is not None and raised.code == 6
    failed = outcomes.of("insert")
    assert [kind for kind, _ in failed] == ["failed", "failed"]
    assert {where for _, where in failed} == {address(fake) for fake in servers}


async def test_writes_prose_5_retried_on_the_same_mongos_when_alone(servers: list[FakeServer]) -> None:
    only = servers[0]
    only.failures["insert"] = [CLOSE]
    outcomes, raised = await run_client(
        [only], "retryWrites=true&directConnection=false", lambda client: client.db.coll.insert_one({})
    )
    assert raised is None
    assert outcomes.of("insert") == [("failed", address(only)), ("succeeded", address(only))]
    first, retry = only.peer.commands("insert")
    assert first.document["txnNumber"] == retry.document["txnNumber"]


# -- replica sets -------------------------------------------------------------------------------------------


def replica_set(servers: list[FakeServer]) -> tuple[FakeServer, FakeServer]:
    primary, secondary = servers
    hosts = [fake.host for fake in servers]
    for fake, role in ((primary, {"isWritablePrimary": True}), (secondary, {"secondary": True})):
        fake.hello_fields = {"setName": "rs", "hosts": hosts, "me": fake.host, "setVersion": 1, **role}
    secondary.hello_fields["isWritablePrimary"] = False
    return primary, secondary


async def _find(client: MongoClient) -> None:
    assert await client.db.coll.find_one({}) == {"_id": 1}


@pytest.mark.parametrize(
    ("labels", "retargeting", "retried_on"),
    [
        (OVERLOAD_LABELS, True, "secondary"),  # 3.1
        (["RetryableError"], False, "primary"),  # 3.2: not an overload error
        (OVERLOAD_LABELS, False, "primary"),  # 3.3: retargeting off
    ],
    ids=["3.1-overload-retargeted", "3.2-not-overload", "3.3-retargeting-off"],
)
async def test_reads_prose_3_replica_set_retargeting(
    servers: list[FakeServer], labels: list[str], retargeting: bool, retried_on: str
) -> None:
    primary, secondary = replica_set(servers)
    primary.failures["find"] = [error(6, *labels)]
    options = "replicaSet=rs&readPreference=primaryPreferred&retryReads=true"
    options += f"&enableOverloadRetargeting={str(retargeting).lower()}"
    outcomes, raised = await run_client(servers, options, _find)
    assert raised is None
    expected = address(secondary if retried_on == "secondary" else primary)
    assert outcomes.of("find") == [("failed", address(primary)), ("succeeded", expected)]
