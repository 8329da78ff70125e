"""Command monitoring events and command log messages, without a server."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mongio.errors import AutoReconnect, OperationFailure
from mongio.events.command import (
    COMMAND_LOGGER_NAME,
    DEFAULT_MAX_DOCUMENT_LENGTH,
    CommandFailedEvent,
    CommandListener,
    CommandPublisher,
    CommandStartedEvent,
    CommandSucceededEvent,
    is_sensitive,
)
from mongio.events.logs import LogMessage

ADDRESS = ("db.example", 27017)


class Recorder(CommandListener):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.events.append(event)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.events.append(event)

    def failed(self, event: CommandFailedEvent) -> None:
        self.events.append(event)


def publish_all(publisher: CommandPublisher, command: dict[str, Any], reply: dict[str, Any]) -> None:
    name = next(iter(command))
    common = (name, "admin", 7, 3, ADDRESS, 1, 42, None)
    publisher.started(command, *common)
    publisher.succeeded(reply, 0.0025, *common, sensitive=is_sensitive(name, command))
    publisher.failed(
        OperationFailure("boom", 8000, {"ok": 0, "errmsg": "boom", "code": 8000}),
        0.001,
        *common,
        sensitive=is_sensitive(name, command),
    )


@pytest.mark.parametrize(
    "name",
    [
        "authenticate",
        "saslStart",
        "saslContinue",
        "getnonce",
        "createUser",
        "updateUser",
        "copydbgetnonce",
        "copydbsaslstart",
        "copydb",
    ],
)
def test_sensitive_commands_are_redacted(name: str) -> None:
    recorder = Recorder()
    publish_all(CommandPublisher([recorder]), {name: 1, "payload": b"secret"}, {"ok": 1, "payload": "x"})
    started, succeeded, failed = recorder.events
    assert started.command == {} and started.command_name == name
    assert succeeded.reply == {}
    assert failed.failure == {}


@pytest.mark.parametrize("name", ["hello", "isMaster", "ismaster"])
def test_hello_is_redacted_only_with_speculative_authenticate(name: str) -> None:
    recorder = Recorder()
    publisher = CommandPublisher([recorder])
    publish_all(publisher, {name: 1, "speculativeAuthenticate": {"saslStart": 1}}, {"ok": 1, "me": "x"})
    publish_all(publisher, {name: 1}, {"ok": 1, "me": "x"})
    redacted, plain = recorder.events[:3], recorder.events[3:]
    assert redacted[0].command == {} and redacted[1].reply == {}
    assert plain[0].command == {name: 1} and plain[1].reply == {"ok": 1, "me": "x"}


def test_event_fields() -> None:
    recorder = Recorder()
    publish_all(CommandPublisher([recorder]), {"find": "c", "$db": "admin"}, {"ok": 1})
    _, succeeded, failed = recorder.events
    for event in recorder.events:
        assert event.command_name == "find"
        assert event.request_id == 7 and event.operation_id == 3
        assert event.connection_id == ADDRESS
        assert event.server_connection_id == 42
        assert event.database_name == "admin"
        assert event.service_id is None
    assert succeeded.duration_micros == 2500
    assert failed.duration_micros == 1000
    assert failed.failure == {"ok": 0, "errmsg": "boom", "code": 8000}


def test_client_side_failure_document() -> None:
    recorder = Recorder()
    publisher = CommandPublisher([recorder])
    publisher.failed(AutoReconnect("connection reset"), 0.0, "ping", "admin", 1, 1, ADDRESS, 1, None, None)
    (event,) = recorder.events
    assert event.failure == {"errmsg": "connection reset", "errtype": "AutoReconnect"}


def test_a_failing_listener_does_not_break_publishing(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(CommandListener):
        def started(self, event: CommandStartedEvent) -> None:
            raise RuntimeError("listener bug")

    recorder = Recorder()
    publisher = CommandPublisher([Broken(), recorder])
    with caplog.at_level(logging.ERROR, logger="mongio.events"):
        publisher.started({"ping": 1}, "ping", "admin", 1, 1, ADDRESS, 1, None, None)
    assert len(recorder.events) == 1
    assert "listener bug" in caplog.text


def test_disabled_without_listeners_or_logging() -> None:
    logger = logging.getLogger(COMMAND_LOGGER_NAME)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        assert not CommandPublisher().enabled
        assert CommandPublisher([Recorder()]).enabled
        logger.setLevel(logging.DEBUG)
        assert CommandPublisher().enabled
    finally:
        logger.setLevel(previous)


def test_log_messages_truncate_documents(caplog: pytest.LogCaptureFixture) -> None:
    publisher = CommandPublisher()
    big = {"insert": "c", "documents": [{"x": "y" * 5000}]}
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        publish_all(publisher, big, {"ok": 1, "n": 1})
    messages: list[Any] = [record.msg for record in caplog.records if record.name == COMMAND_LOGGER_NAME]
    assert len(messages) == 3
    started, succeeded, failed = messages
    assert isinstance(started, LogMessage)
    assert started.fields["message"] == "Command started"
    assert len(started.fields["command"]) == DEFAULT_MAX_DOCUMENT_LENGTH + 3
    assert started.fields["command"].endswith("...")
    assert started.fields["commandName"] == "insert"
    assert started.fields["serverHost"] == "db.example" and started.fields["serverPort"] == 27017
    assert started.fields["serverConnectionId"] == 42
    assert started.fields["driverConnectionId"] == 1
    assert succeeded.fields["message"] == "Command succeeded"
    assert succeeded.fields["reply"] == '{"ok": 1, "n": 1}'
    assert succeeded.fields["durationMS"] == pytest.approx(2.5)
    assert failed.fields["message"] == "Command failed"
    assert "boom" in failed.fields["failure"]


def test_log_messages_redact_sensitive_commands(caplog: pytest.LogCaptureFixture) -> None:
    publisher = CommandPublisher()
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        publish_all(publisher, {"saslStart": 1, "payload": "c2VjcmV0"}, {"ok": 1, "payload": "c2VjcmV0"})
    messages: list[Any] = [record.msg for record in caplog.records if record.name == COMMAND_LOGGER_NAME]
    assert messages[0].fields["command"] == "{}"
    assert messages[1].fields["reply"] == "{}"
    assert messages[2].fields["failure"] == "{}"
    assert all("c2VjcmV0" not in str(message) for message in messages)
