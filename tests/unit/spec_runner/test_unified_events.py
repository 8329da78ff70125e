"""expectEvents and expectLogMessages against recorded events and log messages."""

from __future__ import annotations

from typing import Any

import pytest
from spec_runner.unified.entities import EntityMap
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.events import (
    EVENT_CLASSES,
    EVENT_FAMILIES,
    ClientLogStore,
    CommandFailedEvent,
    CommandStartedEvent,
    CommandSucceededEvent,
    ConnectionCheckedInEvent,
    ConnectionCheckedOutEvent,
    ConnectionClosedEvent,
    LogMessage,
    PoolClearedEvent,
    ServerDescriptionChangedEvent,
    ServerHeartbeatStartedEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpeningEvent,
    acting_client,
    check_event,
    check_events,
    check_log_messages,
    count_matching,
    current_acting_client,
)
from spec_runner.unified.schema import CMAP_EVENTS, COMMAND_EVENTS, SDAM_EVENTS

from mongio.bson.objectid import ObjectId


def started(name: str = "insert", db: str = "test", **command: Any) -> CommandStartedEvent:
    return CommandStartedEvent(
        command_name=name, database_name=db, command={name: "coll", **command}, server_connection_id=7
    )


def test_every_event_type_of_the_format_has_a_recorded_class() -> None:
    assert EVENT_FAMILIES["command"] == set(COMMAND_EVENTS)
    assert EVENT_FAMILIES["cmap"] == set(CMAP_EVENTS)
    assert EVENT_FAMILIES["sdam"] == set(SDAM_EVENTS)
    assert set(EVENT_CLASSES) == {*COMMAND_EVENTS, *CMAP_EVENTS, *SDAM_EVENTS}


def test_command_started_event() -> None:
    event = started(documents=[{"_id": 1}], ordered=True, lsid={"id": 1})
    check_event(
        {
            "commandStartedEvent": {
                "command": {"insert": "coll", "documents": [{"_id": 1}], "ordered": True},
                "commandName": "insert",
                "databaseName": "test",
                "hasServerConnectionId": True,
                "hasServiceId": False,
            }
        },
        event,
    )
    with pytest.raises(MatchError) as info:
        check_event({"commandStartedEvent": {"command": {"documents": [{"_id": 2}]}}}, event, path="e")
    assert info.value.path == "e.command.documents[0]._id"
    with pytest.raises(MatchError):
        check_event({"commandStartedEvent": {"databaseName": "other"}}, event)
    with pytest.raises(MatchError):
        check_event({"commandStartedEvent": {"hasServiceId": True}}, event)


def test_command_succeeded_and_failed_events() -> None:
    succeeded = CommandSucceededEvent(
        command_name="find", database_name="db", reply={"ok": 1.0, "cursor": {"id": 0}}
    )
    check_event({"commandSucceededEvent": {"reply": {"ok": 1}, "commandName": "find"}}, succeeded)
    with pytest.raises(MatchError):
        check_event({"commandSucceededEvent": {"reply": {"cursor": {}}}}, succeeded)
    failed = CommandFailedEvent(command_name="find", database_name="db", failure=ValueError("x"))
    check_event({"commandFailedEvent": {"commandName": "find", "hasServerConnectionId": False}}, failed)
    with pytest.raises(MatchError):
        check_event({"commandFailedEvent": {}}, succeeded)


@pytest.mark.parametrize(
    ("service_id", "has"), [(ObjectId(), True), (ObjectId(b"\x00" * 12), False), (None, False)]
)
def test_has_service_id(service_id: Any, has: bool) -> None:
    event = PoolClearedEvent(service_id=service_id)
    check_event({"poolClearedEvent": {"hasServiceId": has}}, event)
    with pytest.raises(MatchError):
        check_event({"poolClearedEvent": {"hasServiceId": not has}}, event)


@pytest.mark.parametrize(("server_connection_id", "has"), [(5, True), (0, False), (-1, False), (None, False)])
def test_has_server_connection_id(server_connection_id: int | None, has: bool) -> None:
    event = CommandStartedEvent(command_name="ping", server_connection_id=server_connection_id)
    check_event({"commandStartedEvent": {"hasServerConnectionId": has}}, event)
    with pytest.raises(MatchError):
        check_event({"commandStartedEvent": {"hasServerConnectionId": not has}}, event)


def test_cmap_event_fields() -> None:
    check_event(
        {"poolClearedEvent": {"interruptInUseConnections": True}},
        PoolClearedEvent(interrupt_in_use_connections=True),
    )
    with pytest.raises(MatchError):
        check_event({"poolClearedEvent": {"interruptInUseConnections": False}}, PoolClearedEvent())
    check_event({"connectionClosedEvent": {"reason": "stale"}}, ConnectionClosedEvent(reason="stale"))
    with pytest.raises(MatchError):
        check_event({"connectionClosedEvent": {"reason": "idle"}}, ConnectionClosedEvent(reason="stale"))


def test_sdam_event_fields() -> None:
    changed = ServerDescriptionChangedEvent(previous_type="Unknown", new_type="RSPrimary")
    check_event({"serverDescriptionChangedEvent": {"newDescription": {"type": "RSPrimary"}}}, changed)
    with pytest.raises(MatchError) as info:
        check_event(
            {"serverDescriptionChangedEvent": {"previousDescription": {"type": "RSPrimary"}}},
            changed,
            path="e",
        )
    assert info.value.path == "e.previousDescription.type"
    topology = TopologyDescriptionChangedEvent(previous_type="Unknown", new_type="Single")
    check_event({"topologyDescriptionChangedEvent": {"newDescription": {"type": "Single"}}}, topology)
    check_event({"serverHeartbeatStartedEvent": {"awaited": True}}, ServerHeartbeatStartedEvent(awaited=True))
    with pytest.raises(MatchError):
        check_event(
            {"serverHeartbeatStartedEvent": {"awaited": True}}, ServerHeartbeatStartedEvent(awaited=False)
        )


@pytest.mark.parametrize(
    "expected",
    [
        {},
        {"a": {}, "b": {}},
        {"noSuchEvent": {}},
        {"commandStartedEvent": {"reason": "x"}},
        {"poolReadyEvent": 1},
    ],
)
def test_malformed_expected_events(expected: Any) -> None:
    with pytest.raises(UnifiedTestError):
        check_event(expected, TopologyOpeningEvent())


def test_check_events_in_order_and_only_of_its_family() -> None:
    observed = [
        ConnectionCheckedOutEvent(),
        started("insert"),
        CommandSucceededEvent(command_name="insert", reply={"ok": 1}),
        ConnectionCheckedInEvent(),
    ]
    check_events(
        {
            "client": "client0",
            "events": [{"commandStartedEvent": {"commandName": "insert"}}, {"commandSucceededEvent": {}}],
        },
        observed,
    )
    check_events(
        {
            "client": "client0",
            "eventType": "cmap",
            "events": [{"connectionCheckedOutEvent": {}}, {"connectionCheckedInEvent": {}}],
        },
        observed,
    )
    with pytest.raises(MatchError) as info:
        check_events(
            {"client": "client0", "events": [{"commandSucceededEvent": {}}, {"commandStartedEvent": {}}]},
            observed,
        )
    assert info.value.path == "expectEvents[client0, command][0]"


def test_extra_and_missing_events() -> None:
    observed = [started("insert"), started("find")]
    one = {"client": "c", "events": [{"commandStartedEvent": {"commandName": "insert"}}]}
    with pytest.raises(MatchError, match="extra"):
        check_events(one, observed)
    check_events({**one, "ignoreExtraEvents": True}, observed)
    with pytest.raises(MatchError, match="observed 2"):
        check_events(
            {"client": "c", "events": [{"commandStartedEvent": {}}] * 3, "ignoreExtraEvents": True}, observed
        )
    check_events({"client": "c", "events": []}, [])
    with pytest.raises(MatchError):
        check_events({"client": "c", "events": []}, observed)


def test_count_matching() -> None:
    observed = [PoolClearedEvent(), started(), PoolClearedEvent(interrupt_in_use_connections=True)]
    assert count_matching({"poolClearedEvent": {}}, observed) == 2
    assert count_matching({"poolClearedEvent": {"interruptInUseConnections": True}}, observed) == 1
    assert count_matching({"commandFailedEvent": {}}, observed) == 0


def test_entity_operators_in_event_commands() -> None:
    entities = EntityMap()
    entities.add_session("session0", object(), {"id": b"\x01" * 16})
    event = started("ping", lsid={"id": b"\x01" * 16})
    check_event(
        {"commandStartedEvent": {"command": {"lsid": {"$$sessionLsid": "session0"}}}},
        event,
        entities=entities,
    )


# --- log messages -----------------------------------------------------------------------------------------


def message(level: str = "debug", component: str = "command", **data: Any) -> LogMessage:
    return LogMessage(level=level, component=component, data=data)


def test_log_messages_in_order() -> None:
    observed = [message(message="Command started", commandName="ping"), message(message="Command succeeded")]
    expected = {
        "client": "client0",
        "messages": [
            {"level": "debug", "component": "command", "data": {"message": "Command started"}},
            {"level": "debug", "component": "command", "data": {"message": "Command succeeded"}},
        ],
    }
    check_log_messages(expected, observed)
    with pytest.raises(MatchError) as info:
        check_log_messages(expected, observed[::-1])
    assert info.value.path == "expectLogMessages[client0][0].data.message"


def test_log_message_level_and_component() -> None:
    expected = {"client": "c", "messages": [{"level": "info", "component": "command", "data": {}}]}
    with pytest.raises(MatchError, match="level"):
        check_log_messages(expected, [message(level="debug")])
    with pytest.raises(MatchError, match="component"):
        check_log_messages(expected, [message(level="info", component="connection")])


def test_ignore_messages_and_extra_messages() -> None:
    observed = [message(message="heartbeat"), message(message="Command started"), message(message="later")]
    expected: dict[str, Any] = {
        "client": "c",
        "messages": [{"level": "debug", "component": "command", "data": {"message": "Command started"}}],
        "ignoreMessages": [{"level": "debug", "component": "command", "data": {"message": "heartbeat"}}],
    }
    with pytest.raises(MatchError, match="observed 2"):
        check_log_messages(expected, observed)
    check_log_messages({**expected, "ignoreExtraMessages": True}, observed)
    with pytest.raises(MatchError):
        check_log_messages({**expected, "ignoreMessages": [], "ignoreExtraMessages": True}, observed)


def test_failure_is_redacted() -> None:
    redacted = message(message="Command failed", failure={"code": 18, "codeName": "AuthenticationFailed"})
    full = message(message="Command failed", failure={"code": 18, "errmsg": "Authentication failed."})
    nothing = message(message="Command failed")

    def expectation(value: bool) -> dict[str, Any]:
        item = {"level": "debug", "component": "command", "data": {}, "failureIsRedacted": value}
        return {"client": "c", "messages": [item]}

    check_log_messages(expectation(True), [redacted])
    check_log_messages(expectation(False), [full])
    with pytest.raises(MatchError):
        check_log_messages(expectation(True), [full])
    with pytest.raises(MatchError):
        check_log_messages(expectation(False), [redacted])
    with pytest.raises(MatchError, match="no"):
        check_log_messages(expectation(False), [nothing])
    told = LogMessage(level="debug", component="command", data={"failure": "text"}, failure_redacted=True)
    check_log_messages(expectation(True), [told])


def test_failure_logged_as_text_is_redacted_when_it_keeps_only_codes() -> None:
    def expectation(value: bool) -> dict[str, Any]:
        item = {"level": "debug", "component": "command", "data": {}, "failureIsRedacted": value}
        return {"client": "c", "messages": [item]}

    for text in ("{}", "", '{"code": 18, "codeName": "AuthenticationFailed", "errorLabels": []}'):
        check_log_messages(expectation(True), [message(message="Command failed", failure=text)])
        with pytest.raises(MatchError, match="failure is redacted"):
            check_log_messages(expectation(False), [message(message="Command failed", failure=text)])
    for text in ('{"code": 18, "errmsg": "Authentication failed."}', "OperationFailure: Authentication failed."):
        check_log_messages(expectation(False), [message(message="Command failed", failure=text)])
        with pytest.raises(MatchError, match="failure is not redacted"):
            check_log_messages(expectation(True), [message(message="Command failed", failure=text)])


def test_log_data_is_a_root_document() -> None:
    expected = {
        "client": "c",
        "messages": [{"level": "debug", "component": "command", "data": {"a": {"b": 1}}}],
    }
    check_log_messages(expected, [message(a={"b": 1}, other=2)])
    with pytest.raises(MatchError):
        check_log_messages(expected, [message(a={"b": 1, "c": 2})])


def test_a_log_store_keeps_only_its_own_clients_messages() -> None:
    store = ClientLogStore({"connection": "debug"}, client="client")
    message = LogMessage(level="debug", component="connection", data={"message": "Connection pool ready"})
    with acting_client("failPointClient"):
        store.record(message)
    assert store.messages == []
    with acting_client("client"):
        store.record(message)
    store.record(message)  # nobody known to be acting: kept
    assert len(store.messages) == 2
    anyone = ClientLogStore({"connection": "debug"})
    with acting_client("failPointClient"):
        anyone.record(message)
    assert anyone.messages == [message]


async def test_the_acting_client_follows_tasks_started_inside_the_block() -> None:
    import asyncio

    async def who() -> str | None:
        return current_acting_client()

    with acting_client("client"):
        task = asyncio.get_running_loop().create_task(who())
    assert current_acting_client() is None
    assert await task == "client"
