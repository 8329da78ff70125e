"""MongoClient settings that reach the layers below: listeners of every kind, codec options, timeouts, logs."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.events.command import COMMAND_LOGGER_NAME, CommandListener, CommandStartedEvent
from mongio.events.listeners import ConnectionPoolListener
from mongio.execution.deadline import timeout
from mongio.topology.heartbeat_events import ServerListener, TopologyListener


class Everything(CommandListener, ConnectionPoolListener):
    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.commands: list[CommandStartedEvent] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.commands.append(event)

    def connection_checked_out(self, event: Any) -> None:
        self.kinds.append("checked_out")


class Sdam(ServerListener):
    def __init__(self, kinds: list[str]) -> None:
        self.kinds = kinds

    def opened(self, event: Any) -> None:
        self.kinds.append(type(event).__name__)


class Topo(TopologyListener):
    def __init__(self, kinds: list[str]) -> None:
        self.kinds = kinds

    def opened(self, event: Any) -> None:
        self.kinds.append(type(event).__name__)


async def test_event_listeners_reach_commands_pools_and_sdam(server_uri: str) -> None:
    listener = Everything()
    listeners = [listener, Sdam(listener.kinds), Topo(listener.kinds)]
    async with MongoClient(server_uri, event_listeners=listeners) as client:
        await client.admin.command("ping")
    assert any(event.command_name == "ping" for event in listener.commands)
    assert "checked_out" in listener.kinds
    assert "TopologyOpeningEvent" in listener.kinds
    assert "ServerOpeningEvent" in listener.kinds


async def test_document_class_and_tz_aware(server_uri: str) -> None:
    from mongio.bson.son import SON

    async with MongoClient(server_uri, document_class=SON, tz_aware=True) as client:
        assert client.codec_options.document_class is SON
        assert client.codec_options.tz_aware
        coll = client.test_client_codec.items
        await coll.insert_one(SON({"x": 1}))
        document = await coll.find_one({})
        assert isinstance(document, SON)
        await client.drop_database("test_client_codec")


async def test_csot_sends_max_time_ms(server_uri: str) -> None:
    listener = Everything()
    async with MongoClient(server_uri, event_listeners=[listener], timeoutMS=5000) as client:
        await client.admin.command("ping")
        sent = listener.commands[-1].command
        assert 0 < sent["maxTimeMS"] <= 5000
    async with MongoClient(server_uri, event_listeners=[listener]) as client:
        await client.admin.command("ping")
        assert "maxTimeMS" not in listener.commands[-1].command
        with timeout(2.0):
            await client.admin.command("ping")
        assert 0 < listener.commands[-1].command["maxTimeMS"] <= 2000


async def test_command_log_messages(server_uri: str, caplog: pytest.LogCaptureFixture) -> None:
    async with MongoClient(server_uri) as client:
        with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
            await client.admin.command("ping")
    messages: list[Any] = [r.msg for r in caplog.records if r.name == COMMAND_LOGGER_NAME]
    kinds = [m.fields["message"] for m in messages]
    assert kinds == ["Command started", "Command succeeded"]
    started, succeeded = messages
    assert started.fields["commandName"] == "ping"
    assert started.fields["requestId"] == succeeded.fields["requestId"]
    assert '"ping": 1' in started.fields["command"]
    assert succeeded.fields["durationMS"] >= 0


async def test_snapshot_session_reads_send_at_cluster_time(server_uri: str) -> None:
    listener = Everything()
    async with MongoClient(server_uri, event_listeners=[listener]) as client:
        coll = client.test_client_snapshot.items
        await coll.insert_one({"x": 1})
        async with client.start_session(snapshot=True) as session:
            await coll.find_one({}, session=session)
            await coll.find_one({}, session=session)
        finds = [e for e in listener.commands if e.command_name == "find"]
        assert finds[0].command["readConcern"] == {"level": "snapshot"}
        second = finds[1].command["readConcern"]
        assert second["level"] == "snapshot" and "atClusterTime" in second
        await client.drop_database("test_client_snapshot")


async def test_session_default_timeout_ms(server_uri: str) -> None:
    listener = Everything()
    async with MongoClient(server_uri, event_listeners=[listener]) as client:
        async with client.start_session(default_timeout_ms=3000) as session:
            await client.admin.command("ping", session=session)
            assert 0 < listener.commands[-1].command["maxTimeMS"] <= 3000
        async with client.start_session() as session:
            await client.admin.command("ping", session=session)
            assert "maxTimeMS" not in listener.commands[-1].command
