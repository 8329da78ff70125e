"""Each client option changes what the client does: shown against loopback peers that record every message.

Every test here builds a ``MongoClient`` from options exactly as an application does and asserts what the
option changes on the wire, in the pool or in the values returned.
``tests/unit/options/test_option_table.py`` maps every option to the test that proves its effect (or to its
refusal).
"""

from __future__ import annotations

import asyncio
import datetime
import math
import struct
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from spec_runner.task_census import running_tasks

from mongio import MongoClient
from mongio.bson.codec_options import TypeEncoder, TypeRegistry
from mongio.bson.datetime_ms import DatetimeConversion, DatetimeMS
from mongio.bson.errors import InvalidBSON
from mongio.bson.raw_bson import RawBSONDocument
from mongio.connection.handshake import DriverInfo
from mongio.errors import (
    AutoReconnect,
    ClientClosedError,
    NetworkTimeout,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)
from mongio.events.listeners import ConnectionPoolListener
from mongio.options import ConfigurationWarning
from mongio.topology.heartbeat_events import ServerHeartbeatListener, ServerListener
from mongio.topology.sdam_events import ServerDescriptionChangedEvent, ServerHeartbeatFailedEvent
from mongio.topology.server_type import ServerType
from mongio.topology.topology_type import TopologyType
from mongio.wire.compression import ZLIB_ID
from tests.support.loopback_peer import CLOSE, NO_REPLY, LoopbackPeer, Reply, Request, default_reply

GUARD = 10.0
"""Seconds an awaited effect may take before the test fails (a guard against hanging, not a measurement)."""


def find_reply(request: Request, documents: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    namespace = f"{request.db}.{request.document['find']}"
    return {"ok": 1, "cursor": {"id": 0, "ns": namespace, "firstBatch": documents or [{"_id": 1}]}}


def answer(request: Request, peer: LoopbackPeer, **hello_fields: Any) -> Any:
    """hello with ``hello_fields`` added; find with one document; insert counting its documents; else ok."""
    name = request.command_name
    if name.lower() in ("hello", "ismaster"):
        return {**default_reply(request, peer), **hello_fields}
    if name == "find":
        return find_reply(request)
    if name == "insert":
        return {"ok": 1, "n": len(request.sequences.get("documents", []))}
    return {"ok": 1}


def handshakes(peer: LoopbackPeer) -> list[Request]:
    """The first hello (or legacy isMaster) of every connection: the one carrying the client's metadata."""
    return [request for request in hellos(peer) if "client" in request.document]


def hellos(peer: LoopbackPeer) -> list[Request]:
    return [request for request in peer.requests if request.command_name.lower() in ("hello", "ismaster")]


def mongos_peer(**kwargs: Any) -> LoopbackPeer:
    """A peer answering as a mongos with sessions (so retryable writes and $readPreference apply)."""
    peer = LoopbackPeer(**kwargs)
    peer.handler = lambda request: answer(request, peer, msg="isdbgrid", logicalSessionTimeoutMinutes=30)
    return peer


@asynccontextmanager
async def client_of(uri: str, **kwargs: Any) -> AsyncIterator[MongoClient]:
    client = MongoClient(uri, **kwargs)
    try:
        yield client
    finally:
        await client.close()


# -- the handshake ------------------------------------------------------------------------------------------


async def test_appname_and_driver_are_in_the_handshake() -> None:
    async with (
        LoopbackPeer() as peer,
        client_of(peer.uri + "?appname=inventory", driver=DriverInfo("orm", "2.1")) as client,
    ):
        await client.admin.command("ping")
    hello = handshakes(peer)[0].document
    assert hello["client"]["application"] == {"name": "inventory"}
    assert "orm" in hello["client"]["driver"]["name"] and "2.1" in hello["client"]["driver"]["version"]


async def test_compressors_are_offered_and_used() -> None:
    async with LoopbackPeer(compressors=["zlib"]) as peer:
        async with client_of(peer.uri + "?compressors=zlib") as client:
            await client.admin.command("ping")
        async with client_of(peer.uri) as plain:
            await plain.admin.command("ping")
    offered, unoffered = handshakes(peer)[0], handshakes(peer)[-1]
    assert offered.document["compression"] == ["zlib"]
    assert "compression" not in unoffered.document
    pings = peer.commands("ping")
    assert [ping.compressor_id for ping in pings] == [ZLIB_ID, None]


async def test_zlib_compression_level_changes_the_bytes_sent() -> None:
    document = {"text": "abcdefgh" * 4000}
    sizes = {}
    async with LoopbackPeer(compressors=["zlib"]) as peer:
        for level in (0, 9):
            async with client_of(peer.uri, compressors="zlib", zlibCompressionLevel=level) as client:
                await client.db.coll.insert_one(dict(document))
            sizes[level] = len(peer.commands("insert")[-1].raw)
    # Level 0 stores the bytes as they are; level 9 squeezes the repeated text to a fraction of them.
    assert sizes[0] > len(document["text"]) > 10 * sizes[9]


async def test_load_balanced_says_so_in_the_handshake_and_makes_a_load_balanced_topology() -> None:
    peer = LoopbackPeer()
    peer.handler = lambda request: answer(request, peer, msg="isdbgrid", serviceId=uuid_oid())
    async with peer, client_of(peer.uri + "?loadBalanced=true") as client:
        await client.admin.command("ping")
        assert client.topology_description.topology_type is TopologyType.LoadBalanced
    assert handshakes(peer) and all(hello.document.get("loadBalanced") is True for hello in handshakes(peer))


def uuid_oid() -> Any:
    from mongio.bson import ObjectId

    return ObjectId()


async def test_connect_true_starts_monitoring_before_any_operation() -> None:
    async with LoopbackPeer() as peer:
        client = MongoClient(peer.uri, connect=True)
        try:
            # The monitor's hello arrives with no operation run (a wait for it, not a timed assertion).
            with anyio.fail_after(10):
                await peer.wait_for_requests(1)
            assert peer.connections
            assert _mongio_tasks()
        finally:
            await client.close()
        # close() stopped what connect=True started: nothing of the client's is left running.
        assert _mongio_tasks() == []


async def test_connect_true_closed_at_once_leaves_nothing_running() -> None:
    async with LoopbackPeer() as peer:
        client = MongoClient(peer.uri, connect=True)
        assert _mongio_tasks()  # the background start, not run yet
        await client.close()
        assert _mongio_tasks() == []
        assert peer.connections == []
        with pytest.raises(ClientClosedError):
            await client.admin.command("ping")


def _mongio_tasks() -> list[str]:
    return [name for name in running_tasks().values() if name is not None and name.startswith("mongio")]


def test_connect_true_outside_a_loop_connects_at_the_first_operation() -> None:
    async def first_operation(client: MongoClient, peer: LoopbackPeer) -> None:
        assert peer.connections == []
        await client.admin.command("ping")
        assert peer.connections
        await client.close()

    async def scenario() -> None:
        async with LoopbackPeer() as peer:
            # Made where no loop runs (a worker thread here, module level in an application).
            client: MongoClient = await asyncio.to_thread(MongoClient, peer.uri, connect=True)
            await first_operation(client, peer)

    asyncio.run(scenario())


async def test_connect_false_leaves_every_connection_to_the_first_operation() -> None:
    async with LoopbackPeer() as peer:
        client = MongoClient(peer.uri, connect=False)
        try:
            await anyio.sleep(0.2)  # time for a background connection, were one started
            assert peer.connections == []
            await client.admin.command("ping")
            assert peer.connections
        finally:
            await client.close()


# -- authentication ---------------------------------------------------------------------------------------------


def plain_auth_peer() -> LoopbackPeer:
    peer = LoopbackPeer()

    def handler(request: Request) -> Any:
        if request.command_name == "saslStart":
            return {"conversationId": 1, "payload": b"", "done": True, "ok": 1}
        return answer(request, peer)

    peer.handler = handler
    return peer


async def test_credentials_mechanism_and_source_drive_the_authentication() -> None:
    async with (
        plain_auth_peer() as peer,
        client_of(
            peer.uri, username="alice", password="pencil", authMechanism="PLAIN", authSource="$external"
        ) as client,
    ):
        await client.admin.command("ping")
    start = peer.commands("saslStart")[0].document
    assert start["mechanism"] == "PLAIN"
    assert start["$db"] == "$external"
    assert bytes(start["payload"]) == b"\x00alice\x00pencil"


# -- concerns and read preferences ----------------------------------------------------------------------------


async def test_write_concern_options_reach_the_write_command() -> None:
    async with mongos_peer() as peer:
        async with client_of(peer.uri + "?w=2&journal=true&wTimeoutMS=1500") as client:
            await client.db.coll.insert_one({"x": 1})
        async with client_of(peer.uri, w="majority", fsync=True) as client:
            await client.db.coll.insert_one({"x": 1})
        # The aliases: j for journal, the deprecated wtimeout for wTimeoutMS.
        with pytest.warns(ConfigurationWarning, match="wtimeout"):
            aliased = MongoClient(peer.uri + "?w=1&j=false&wtimeout=700")
        async with aliased as client:
            await client.db.coll.insert_one({"x": 1})
    concerns = [insert.document["writeConcern"] for insert in peer.commands("insert")]
    assert concerns == [
        {"w": 2, "j": True, "wtimeout": 1500},
        {"w": "majority", "fsync": True},
        {"w": 1, "j": False, "wtimeout": 700},
    ]


async def test_read_concern_level_reaches_the_read_command() -> None:
    async with mongos_peer() as peer:
        async with client_of(peer.uri + "?readConcernLevel=majority") as client:
            await client.db.coll.find_one()
        async with client_of(peer.uri) as plain:
            await plain.db.coll.find_one()
    finds = peer.commands("find")
    assert finds[0].document["readConcern"] == {"level": "majority"}
    assert "readConcern" not in finds[1].document


async def test_read_preference_options_reach_a_mongos() -> None:
    from mongio.options import Nearest

    async with mongos_peer() as peer:
        uri = peer.uri + "?readPreference=secondary&readPreferenceTags=dc:ny&maxStalenessSeconds=120"
        async with client_of(uri) as client:
            await client.db.coll.find_one()
        async with client_of(peer.uri, read_preference=Nearest(tag_sets=[{"rack": "1"}])) as client:
            await client.db.coll.find_one()
    sent = [find.document["$readPreference"] for find in peer.commands("find")]
    assert sent == [
        {"mode": "secondary", "tags": [{"dc": "ny"}], "maxStalenessSeconds": 120},
        {"mode": "nearest", "tags": [{"rack": "1"}]},
    ]


# -- retries ----------------------------------------------------------------------------------------------------


async def test_retry_writes_decides_whether_a_write_carries_a_transaction_number() -> None:
    async with mongos_peer() as peer:
        async with client_of(peer.uri) as client:
            await client.db.coll.insert_one({"x": 1})
        async with client_of(peer.uri + "?retryWrites=false") as client:
            await client.db.coll.insert_one({"x": 1})
    retried, not_retried = peer.commands("insert")
    assert "txnNumber" in retried.document
    assert "txnNumber" not in not_retried.document


async def test_retry_reads_decides_whether_a_read_is_sent_again_after_a_network_error() -> None:
    failures = {"count": 0}
    peer = LoopbackPeer()

    def handler(request: Request) -> Any:
        if request.command_name == "find" and failures["count"] == 0:
            failures["count"] = 1
            return CLOSE
        return answer(request, peer, msg="isdbgrid", logicalSessionTimeoutMinutes=30)

    peer.handler = handler
    async with peer:
        async with client_of(peer.uri) as client:
            assert await client.db.coll.find_one() == {"_id": 1}
        assert len(peer.commands("find")) == 2
        failures["count"] = 0
        async with client_of(peer.uri + "?retryReads=false") as client:
            with pytest.raises(AutoReconnect):
                await client.db.coll.find_one()
        assert len(peer.commands("find")) == 3


# -- timeouts -----------------------------------------------------------------------------------------------------


async def test_socket_timeout_ends_a_read_the_server_never_answers() -> None:
    peer = LoopbackPeer()
    peer.handler = lambda request: NO_REPLY if request.command_name == "find" else answer(request, peer)
    async with peer, client_of(peer.uri + "?socketTimeoutMS=200") as client:
        with anyio.fail_after(GUARD):
            with pytest.raises(NetworkTimeout):
                await client.db.coll.find_one()


class HeartbeatFailures(ServerHeartbeatListener):
    def __init__(self) -> None:
        self._failures, self.errors = anyio.create_memory_object_stream[BaseException](math.inf)

    def failed(self, event: ServerHeartbeatFailedEvent) -> None:
        self._failures.send_nowait(event.failure)


async def test_connect_timeout_bounds_a_handshake_the_server_never_answers() -> None:
    peer = LoopbackPeer()
    peer.handler = lambda request: NO_REPLY
    failures = HeartbeatFailures()
    async with peer, client_of(peer.uri + "?connectTimeoutMS=200", event_listeners=[failures]) as client:
        await client.aconnect()
        with anyio.fail_after(GUARD):  # the default connectTimeoutMS (20 s) would outlast the guard
            error = await failures.errors.receive()
    assert isinstance(error, (NetworkTimeout, TimeoutError)), error


async def test_server_selection_timeout_bounds_the_wait_for_a_suitable_server() -> None:
    peer = LoopbackPeer()
    peer.handler = lambda request: CLOSE
    async with peer, client_of(peer.uri + "?serverSelectionTimeoutMS=300") as client:
        with anyio.fail_after(GUARD):  # the default (30 s) would outlast the guard
            with pytest.raises(ServerSelectionTimeoutError):
                await client.admin.command("ping")


async def test_selection_waits_for_a_server_that_answers_late_as_server_selection_try_once_false_asks() -> (
    None
):
    peer = LoopbackPeer()
    peer.handler = lambda request: (
        Reply(default_reply(request, peer), delay=0.3)
        if request.command_name.lower() in ("hello", "ismaster")
        else answer(request, peer)
    )
    async with peer, client_of(peer.uri + "?serverSelectionTryOnce=false") as client:
        # The server is Unknown when the ping starts; one scan would fail, the wait succeeds.
        assert (await client.admin.command("ping"))["ok"] == 1


async def test_heartbeat_frequency_sets_how_often_the_monitor_checks() -> None:
    peer = LoopbackPeer()
    async with peer, client_of(peer.uri + "?heartbeatFrequencyMS=500&serverMonitoringMode=poll") as client:
        await client.aconnect()
        with anyio.fail_after(GUARD):  # the default (10 s) would outlast the guard
            while len([hello for hello in hellos(peer) if hello.connection.index == 0]) < 3:
                await peer.wait_for_requests(len(peer.requests) + 1)


async def test_server_monitoring_mode_chooses_streaming_or_polling() -> None:
    async def hellos_in(mode: str) -> list[dict[str, Any]]:
        peer = LoopbackPeer()

        def handler(request: Request) -> Any:
            reply = {**default_reply(request, peer), "topologyVersion": {"processId": PROCESS, "counter": 0}}
            if "topologyVersion" in request.document:
                return Reply(reply, delay=0.2)  # an awaitable hello: answer after a while
            return reply

        peer.handler = handler
        async with peer, client_of(peer.uri, serverMonitoringMode=mode, heartbeatFrequencyMS=500) as client:
            await client.aconnect()
            with anyio.fail_after(GUARD):
                while len(hellos(peer)) < 4:
                    await peer.wait_for_requests(len(peer.requests) + 1)
        return [hello.document for hello in hellos(peer)]

    assert any("maxAwaitTimeMS" in hello for hello in await hellos_in("stream"))
    assert not any("maxAwaitTimeMS" in hello for hello in await hellos_in("poll"))


# -- topology -----------------------------------------------------------------------------------------------------


def member_peer(**hello_fields: Any) -> LoopbackPeer:
    peer = LoopbackPeer()
    peer.handler = lambda request: answer(request, peer, **hello_fields)
    return peer


async def test_direct_connection_talks_to_a_secondary_alone() -> None:
    fields = {"isWritablePrimary": False, "secondary": True, "setName": "rs", "hosts": ["elsewhere:1"]}
    async with member_peer(**fields) as peer:
        async with client_of(peer.uri + "?directConnection=true") as client:
            await client.aconnect()
            assert await client.db.coll.find_one() == {"_id": 1}
            assert client.topology_description.topology_type is TopologyType.Single
        async with client_of(peer.uri + "?directConnection=false&serverSelectionTimeoutMS=500") as client:
            with pytest.raises(ServerSelectionTimeoutError):
                await client.db.coll.find_one()
            assert client.topology_description.topology_type is TopologyType.ReplicaSetNoPrimary


async def test_replica_set_name_removes_a_member_of_another_set() -> None:
    peer = LoopbackPeer()

    def handler(request: Request) -> Any:
        host, port = peer.address
        return answer(request, peer, setName="other", hosts=[f"{host}:{port}"])

    peer.handler = handler
    async with peer:
        async with client_of(peer.uri + "?replicaSet=other") as client:
            assert (await client.admin.command("ping"))["ok"] == 1
        async with client_of(peer.uri + "?replicaSet=mine&serverSelectionTimeoutMS=500") as client:
            with pytest.raises(ServerSelectionTimeoutError):
                await client.admin.command("ping")
            assert client.nodes == frozenset()


async def test_local_threshold_decides_whether_a_slow_mongos_gets_operations() -> None:
    async def finds_by_peer(**kwargs: Any) -> tuple[int, int]:
        fast = mongos_peer()
        slow = LoopbackPeer()

        def slow_handler(request: Request) -> Any:
            result = answer(request, slow, msg="isdbgrid", logicalSessionTimeoutMinutes=30)
            return (
                Reply(result, delay=0.5) if request.command_name.lower() in ("hello", "ismaster") else result
            )

        slow.handler = slow_handler
        async with fast, slow:
            hosts = ",".join(f"{peer.address[0]}:{peer.address[1]}" for peer in (fast, slow))
            known = KnownServers(2)
            async with client_of(f"mongodb://{hosts}/", event_listeners=[known], **kwargs) as client:
                await client.aconnect()
                with anyio.fail_after(GUARD):
                    await known.all_known.wait()
                for _ in range(40):
                    await client.db.coll.find_one()
            return len(fast.commands("find")), len(slow.commands("find"))

    assert await finds_by_peer() == (40, 0)  # 15 ms by default: the slow mongos is outside the window
    _, slow_finds = await finds_by_peer(localThresholdMS=5000)
    assert slow_finds > 0


class KnownServers(ServerListener):
    def __init__(self, count: int) -> None:
        self.count = count
        self.known: set[Any] = set()
        self.all_known = anyio.Event()

    def description_changed(self, event: ServerDescriptionChangedEvent) -> None:
        if event.new_description.server_type is not ServerType.Unknown:
            self.known.add(event.server_address)
        if len(self.known) >= self.count:
            self.all_known.set()


async def test_server_selector_filters_every_selection() -> None:
    first, second = mongos_peer(), mongos_peer()
    async with first, second:
        chosen = second.address

        def only_the_second(servers: list[Any]) -> list[Any]:
            return [server for server in servers if server.address == chosen]

        hosts = ",".join(f"{peer.address[0]}:{peer.address[1]}" for peer in (first, second))
        known = KnownServers(2)
        async with client_of(
            f"mongodb://{hosts}/", server_selector=only_the_second, event_listeners=[known]
        ) as client:
            await client.aconnect()
            with anyio.fail_after(GUARD):
                await known.all_known.wait()
            for _ in range(20):
                await client.db.coll.find_one()
    assert (len(first.commands("find")), len(second.commands("find"))) == (0, 20)


# -- the pool -------------------------------------------------------------------------------------------------------


class PoolEvents(ConnectionPoolListener):
    def __init__(self) -> None:
        self.created = 0
        self.ready = 0
        self.most_pending = 0
        self.closed_reasons: list[str] = []
        self._ready, self.readied = anyio.create_memory_object_stream[None](math.inf)

    def connection_created(self, event: Any) -> None:
        self.created += 1
        self.most_pending = max(self.most_pending, self.created - self.ready)

    def connection_ready(self, event: Any) -> None:
        self.ready += 1
        self._ready.send_nowait(None)

    def connection_closed(self, event: Any) -> None:
        self.closed_reasons.append(str(event.reason))


def slow_find_peer(delay: float = 0.1, hello_delay: float = 0.0) -> LoopbackPeer:
    peer = LoopbackPeer()

    def handler(request: Request) -> Any:
        result = answer(request, peer)
        if request.command_name == "find":
            return Reply(result, delay=delay)
        if (
            request.command_name.lower() in ("hello", "ismaster")
            and hello_delay
            and request.connection.index > 0
        ):
            return Reply(result, delay=hello_delay)
        return result

    peer.handler = handler
    return peer


async def test_max_pool_size_caps_the_connections_of_concurrent_operations() -> None:
    async with slow_find_peer() as peer:
        for size, expected in ((1, 1), (3, 3)):
            events = PoolEvents()
            async with (
                client_of(peer.uri, maxPoolSize=size, event_listeners=[events]) as client,
                anyio.create_task_group() as finds,
            ):
                for _ in range(8):
                    finds.start_soon(client.db.coll.find_one)
            assert events.created == expected


async def test_min_pool_size_opens_connections_before_any_operation() -> None:
    events = PoolEvents()
    async with (
        LoopbackPeer() as peer,
        client_of(peer.uri + "?minPoolSize=3", event_listeners=[events]) as client,
    ):
        await client.aconnect()
        with anyio.fail_after(GUARD):
            for _ in range(3):
                await events.readied.receive()
    assert not peer.commands("find")
    assert len(handshakes(peer)) == 4  # the monitor's connection and the three of the pool


async def test_max_idle_time_closes_a_connection_idle_for_longer() -> None:
    events = PoolEvents()
    async with (
        LoopbackPeer() as peer,
        client_of(peer.uri + "?maxIdleTimeMS=50", event_listeners=[events]) as client,
    ):
        await client.admin.command("ping")
        await anyio.sleep(0.2)  # longer than maxIdleTimeMS: the pooled connection is now stale
        await client.admin.command("ping")
    assert "idle" in events.closed_reasons
    assert events.created == 2


async def test_max_connecting_caps_the_connections_being_established_at_once() -> None:
    async with slow_find_peer(hello_delay=0.1) as peer:
        for limit in (1, 3):
            events = PoolEvents()
            async with (
                client_of(peer.uri, maxConnecting=limit, event_listeners=[events]) as client,
                anyio.create_task_group() as finds,
            ):
                for _ in range(6):
                    finds.start_soon(client.db.coll.find_one)
            assert events.most_pending == limit


async def test_wait_queue_timeout_ends_a_wait_for_a_busy_pool() -> None:
    async with (
        slow_find_peer(delay=2.0) as peer,
        client_of(peer.uri, maxPoolSize=1, waitQueueTimeoutMS=100) as client,
        anyio.create_task_group() as busy,
    ):
        busy.start_soon(client.db.coll.find_one)
        with anyio.fail_after(GUARD):
            await peer.wait_for_requests(len(peer.requests) + 1)
            with pytest.raises(WaitQueueTimeoutError):
                await client.admin.command("ping")


# -- what replies decode to -----------------------------------------------------------------------------------------

PROCESS = uuid_oid()
WHEN = datetime.datetime(2024, 5, 17, 10, 30, tzinfo=datetime.UTC)


def document_peer(document: dict[str, Any]) -> LoopbackPeer:
    peer = LoopbackPeer()
    peer.handler = lambda request: (
        find_reply(request, [document]) if request.command_name == "find" else answer(request, peer)
    )
    return peer


async def test_codec_keywords_shape_the_documents_returned() -> None:
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    async with document_peer({"_id": 1, "at": WHEN}) as peer:
        async with client_of(peer.uri, tz_aware=True, tzinfo=plus_two) as client:
            found = await client.db.coll.find_one()
            assert found is not None and found["at"].utcoffset() == datetime.timedelta(hours=2)
        async with client_of(peer.uri, datetime_conversion=DatetimeConversion.DATETIME_MS) as client:
            found = await client.db.coll.find_one()
            assert found is not None and isinstance(found["at"], DatetimeMS)
        async with client_of(peer.uri) as client:
            found = await client.db.coll.find_one()
            assert found is not None and found["at"] == WHEN.replace(tzinfo=None)


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents


class MoneyEncoder(TypeEncoder):
    python_type = Money

    def transform_python(self, value: Any) -> Any:
        return value.cents


async def test_type_registry_encodes_the_applications_types() -> None:
    async with (
        mongos_peer() as peer,
        client_of(peer.uri, type_registry=TypeRegistry([MoneyEncoder()])) as client,
    ):
        await client.db.coll.insert_one({"price": Money(250)})
    assert peer.commands("insert")[0].sequences["documents"][0]["price"] == 250


async def test_uuid_representation_decides_how_a_uuid_is_sent() -> None:
    value = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    async with mongos_peer() as peer:
        async with client_of(peer.uri + "?uuidRepresentation=standard") as client:
            await client.db.coll.insert_one({"u": value})
        async with client_of(peer.uri + "?uuidRepresentation=javaLegacy") as client:
            await client.db.coll.insert_one({"u": value})
    standard, java = (insert.sequences["documents"][0]["u"] for insert in peer.commands("insert"))
    assert (standard.subtype, bytes(standard)) == (4, value.bytes)
    assert java.subtype == 3 and bytes(java) != value.bytes


def invalid_utf8_document() -> RawBSONDocument:
    """``{"s": <the bytes ff fe, which are not UTF-8>}`` as raw BSON, which the peer sends as it is."""
    body = b"\x02s\x00" + struct.pack("<i", 3) + b"\xff\xfe\x00"
    return RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00")


async def test_unicode_decode_error_handler_decides_what_invalid_utf8_becomes() -> None:
    async with document_peer({"_id": 1, "doc": invalid_utf8_document()}) as peer:
        async with client_of(peer.uri, unicode_decode_error_handler="replace") as client:
            found = await client.db.coll.find_one()
            assert found is not None and found["doc"] == {"s": "\ufffd\ufffd"}
        async with client_of(peer.uri) as client:
            with pytest.raises(InvalidBSON):
                await client.db.coll.find_one()
