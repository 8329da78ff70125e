"""PyMongo async and Motor code that ports by changing its imports, against the test server: listeners
written for ``pymongo.monitoring``, both change stream and session idioms, the client's deployment
properties, ``append_metadata``, collations, and CSOT timeouts caught by PyMongo's ``except`` clauses."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from pymongo import monitoring as pymongo_monitoring

from mongio import listener_registry, monitoring
from mongio.asynchronous.mongo_client import AsyncMongoClient
from mongio.client import MongoClient
from mongio.collation import Collation, CollationStrength
from mongio.driver_info import DriverInfo
from mongio.errors import (
    AutoReconnect,
    ClientClosedError,
    ExecutionTimeout,
    InvalidOperation,
    NetworkTimeout,
    OperationTimeoutError,
    PyMongoError,
)

pytestmark = pytest.mark.server


class Events:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def names(self) -> list[str]:
        return [type(event).__name__ for event in self.events]


class PyMongoCommands(pymongo_monitoring.CommandListener, Events):
    def started(self, event: Any) -> None:
        self.events.append(event)

    def succeeded(self, event: Any) -> None:
        self.events.append(event)

    def failed(self, event: Any) -> None:
        self.events.append(event)

    def commands(self, name: str) -> list[Any]:
        return [e.command for e in self.events if type(e).__name__ == "CommandStartedEvent" and e.command_name == name]


class PyMongoHeartbeats(pymongo_monitoring.ServerHeartbeatListener, Events):
    def started(self, event: Any) -> None:
        self.events.append(event)

    def succeeded(self, event: Any) -> None:
        self.events.append(event)

    def failed(self, event: Any) -> None:
        self.events.append(event)


class PyMongoServers(pymongo_monitoring.ServerListener, Events):
    def opened(self, event: Any) -> None:
        self.events.append(event)

    def description_changed(self, event: Any) -> None:
        self.events.append(event)

    def closed(self, event: Any) -> None:
        self.events.append(event)


class PyMongoTopologies(pymongo_monitoring.TopologyListener, Events):
    def opened(self, event: Any) -> None:
        self.events.append(event)

    def description_changed(self, event: Any) -> None:
        self.events.append(event)

    def closed(self, event: Any) -> None:
        self.events.append(event)


class PyMongoPool(pymongo_monitoring.ConnectionPoolListener, Events):
    def __getattribute__(self, name: str) -> Any:
        if name.startswith(("pool_", "connection_")):
            return lambda event: object.__getattribute__(self, "events").append(event)
        return object.__getattribute__(self, name)


class DuckCommands(Events):
    def started(self, event: Any) -> None:
        self.events.append(event)

    def succeeded(self, event: Any) -> None:
        self.events.append(event)

    def failed(self, event: Any) -> None:
        self.events.append(event)


@pytest.fixture
async def client(server_uri: str) -> AsyncIterator[MongoClient]:
    async with AsyncMongoClient(server_uri) as client:
        yield client


def unique_name() -> str:
    return f"idioms_{uuid.uuid4().hex[:10]}"


# -- listeners ---------------------------------------------------------------------------------------------------


async def test_pymongo_listeners_of_every_kind_receive_events(server_uri: str) -> None:
    commands, heartbeats, servers = PyMongoCommands(), PyMongoHeartbeats(), PyMongoServers()
    topologies, pool = PyMongoTopologies(), PyMongoPool()
    listeners = [commands, heartbeats, servers, topologies, pool]
    async with AsyncMongoClient(server_uri, event_listeners=listeners) as client:
        await client.admin.command("ping")
    assert commands.names()[:2] == ["CommandStartedEvent", "CommandSucceededEvent"]
    assert commands.commands("ping") == [{"ping": 1, "$db": "admin", **_extra(commands.commands("ping")[0])}]
    assert "ServerHeartbeatStartedEvent" in heartbeats.names()
    assert "CommandStartedEvent" not in heartbeats.names()
    assert servers.names()[0] == "ServerOpeningEvent"
    assert topologies.names()[0] == "TopologyOpeningEvent" and topologies.names()[-1] == "TopologyClosedEvent"
    assert "ConnectionCheckedOutEvent" in pool.names() and "PoolCreatedEvent" in pool.names()


def _extra(command: Any) -> dict[str, Any]:
    return {key: value for key, value in command.items() if key not in ("ping", "$db")}


async def test_register_reaches_clients_made_afterwards_only(
    server_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_registry, "_registered", [])
    before = AsyncMongoClient(server_uri)
    registered = DuckCommands()
    monitoring.register(registered)
    async with before, AsyncMongoClient(server_uri) as after:
        await before.admin.command("ping")
        assert registered.events == []
        await after.admin.command("ping")
        assert [e.command_name for e in registered.events] == ["ping", "ping"]  # started, succeeded


# -- change streams and sessions: PyMongo's and Motor's idioms ---------------------------------------------------


async def _one_change(stream: Any, collection: Any, document: dict[str, Any]) -> Any:
    await collection.insert_one(document)
    change = await stream.next()
    return change["fullDocument"]


async def test_watch_opens_when_entered_awaited_or_iterated(client: MongoClient) -> None:
    collection = client[unique_name()].events
    await collection.insert_one({"warm": True})
    async with collection.watch() as stream:  # Motor
        assert (await _one_change(stream, collection, {"n": 1}))["n"] == 1
    assert not stream.alive
    async with await collection.watch() as stream:  # PyMongo async
        assert (await _one_change(stream, collection, {"n": 2}))["n"] == 2
    stream = await collection.watch()
    try:
        assert (await _one_change(stream, collection, {"n": 3}))["n"] == 3
    finally:
        await stream.close()
    stream = collection.watch(max_await_time_ms=50)  # Motor: opened by the first request for a change
    try:
        assert await stream.try_next() is None
        assert (await _one_change(stream, collection, {"n": 4}))["n"] == 4
    finally:
        await stream.close()


async def test_watch_opens_the_stream_once(client: MongoClient) -> None:
    commands = PyMongoCommands()
    async with AsyncMongoClient(_uri(client), event_listeners=[commands]) as watched:
        collection = watched[unique_name()].events
        stream = await collection.watch()
        async with await stream:
            pass
    assert len(commands.commands("aggregate")) == 1


async def test_an_invalidated_stream_answers_try_next_with_none(client: MongoClient) -> None:
    """As PyMongo's: once the stream returned its ``invalidate`` event (the collection was dropped), it is no
    longer alive, try_next returns None (again and again) and next raises StopAsyncIteration."""
    collection = client[unique_name()].events
    await collection.insert_one({"warm": True})
    stream = await collection.watch(max_await_time_ms=50)
    await collection.insert_one({"n": 1})
    await collection.drop()
    kinds = [(await stream.next())["operationType"] for _ in range(3)]
    assert kinds == ["insert", "drop", "invalidate"]
    assert not stream.alive
    assert await stream.try_next() is None
    assert await stream.try_next() is None
    with pytest.raises(StopAsyncIteration):
        await stream.next()
    await stream.close()
    assert await stream.try_next() is None


def _uri(client: MongoClient) -> str:
    host, port = client.options.seeds[0]
    return f"mongodb://{host}:{port}/"


async def test_sessions_work_awaited_entered_or_both(client: MongoClient) -> None:
    async with await client.start_session() as session:  # Motor
        await client.admin.command("ping", session=session)
    assert session.has_ended
    async with client.start_session() as session:  # PyMongo async
        await client.admin.command("ping", session=session)
    assert session.has_ended
    session = await client.start_session()
    assert not session.has_ended
    await session.end_session()


async def test_an_ended_session_is_refused_in_pymongo_s_words(client: MongoClient) -> None:
    session = client.start_session()
    await session.end_session()
    attempts: list[Callable[[], Awaitable[object]]] = [
        lambda: client.admin.command("ping", session=session),
        lambda: client[unique_name()].c.insert_one({}, session=session),
        lambda: session.with_transaction(lambda s: client.admin.command("ping", session=s)),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidOperation, match=r"^Cannot use ended session: end_session") as raised:
            await attempt()
        assert "client.start_session()" in str(raised.value)
    with pytest.raises(InvalidOperation, match=r"^Cannot use ended session"):
        session.start_transaction()


# -- the client --------------------------------------------------------------------------------------------------


async def test_aclose_closes(server_uri: str) -> None:
    client = AsyncMongoClient(server_uri)
    await client.admin.command("ping")
    await client.aclose()
    with pytest.raises(ClientClosedError):
        await client.admin.command("ping")


async def test_deployment_properties_awaited_connect_first(server_uri: str) -> None:
    async with AsyncMongoClient(server_uri, connect=False) as client:
        pass
    client = AsyncMongoClient(server_uri)
    try:
        assert client.nodes == frozenset()
        address = await client.address  # PyMongo: connects and selects the server writes go to
        assert address is not None and address == client.options.seeds[0]
        assert client.address == address  # Motor: the value known now
        assert client.nodes == frozenset({address})
        assert await client.is_primary is True and client.is_primary
        assert await client.is_mongos is False and not client.is_mongos
        assert await client.primary == address  # the test server is a one-member replica set
        assert await client.secondaries == set() and client.secondaries == set()
        assert await client.arbiters == set()
    finally:
        await client.close()
    assert (MongoClient.HOST, MongoClient.PORT) == ("localhost", 27017)


async def test_append_metadata_reaches_new_connections(server_uri: str) -> None:
    pymongo_driver_info = pytest.importorskip("pymongo.driver_info")
    async with AsyncMongoClient(server_uri) as client:
        client.append_metadata(DriverInfo("odm", "1.2"))
        client.append_metadata(pymongo_driver_info.DriverInfo("framework", "3.4", "web"))
        assert client._metadata.document["driver"]["name"].endswith("|odm|framework")
        with pytest.raises(TypeError):
            client.append_metadata({"name": "x"})  # type: ignore[arg-type]


async def test_names_starting_with_an_underscore_are_no_databases(client: MongoClient) -> None:
    with pytest.raises(AttributeError, match=r"client\['_private'\]"):
        client._private  # noqa: B018
    assert client.append_metadata.__name__ == "append_metadata"
    assert client.reports.name == "reports"


async def test_a_collation_object_is_sent_as_its_document(server_uri: str) -> None:
    commands = PyMongoCommands()
    async with AsyncMongoClient(server_uri, event_listeners=[commands]) as client:
        collection = client[unique_name()].items
        collation = Collation("en", strength=CollationStrength.SECONDARY)
        await collection.insert_one({"name": "Tea"})
        await collection.find({"name": "tea"}, collation=collation).to_list()
        await collection.update_one({"name": "tea"}, {"$set": {"seen": True}}, collation=collation)
        await collection.create_index("name", collation=collation)
    sent = {"locale": "en", "strength": 2}
    assert commands.commands("find")[0]["collation"] == sent
    assert commands.commands("update")[0]["updates"][0]["collation"] == sent
    assert commands.commands("createIndexes")[0]["indexes"][0]["collation"] == sent


# -- CSOT timeouts, caught as PyMongo code catches them ----------------------------------------------------------


async def _fail_point(client: MongoClient, data: dict[str, Any]) -> None:
    await client.admin.command({"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": data})


async def test_a_timeout_while_waiting_for_the_reply_is_a_network_timeout(server_uri: str) -> None:
    async with AsyncMongoClient(server_uri) as setup, AsyncMongoClient(server_uri, timeoutMS=300) as client:
        await client.admin.command("ping")
        await _fail_point(setup, {"failCommands": ["find"], "blockConnection": True, "blockTimeMS": 1000})
        with pytest.raises(NetworkTimeout) as caught:
            await client[unique_name()].items.find_one({})
        error = caught.value
        assert isinstance(error, AutoReconnect) and isinstance(error, PyMongoError) and error.timeout
        assert isinstance(error, OperationTimeoutError)


async def test_the_servers_maxtimemsexpired_under_csot_is_an_execution_timeout(server_uri: str) -> None:
    async with AsyncMongoClient(server_uri) as setup, AsyncMongoClient(server_uri, timeoutMS=5000) as client:
        await _fail_point(setup, {"failCommands": ["find"], "errorCode": 50})
        with pytest.raises(ExecutionTimeout) as caught:
            await client[unique_name()].items.find_one({})
        assert caught.value.code == 50 and caught.value.timeout


async def test_a_stream_made_in_a_timeout_block_keeps_that_timeout_when_opened_later(server_uri: str) -> None:
    from mongio import timeout

    commands = PyMongoCommands()
    async with AsyncMongoClient(server_uri, event_listeners=[commands]) as client:
        collection = client[unique_name()].events
        with timeout(30):
            stream = collection.watch()
        async with stream:
            pass
    (aggregate,) = commands.commands("aggregate")
    assert 0 < aggregate["maxTimeMS"] <= 30_000
