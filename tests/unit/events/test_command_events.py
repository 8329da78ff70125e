"""Command monitoring events and command log messages, without a server."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mongio.errors import AutoReconnect, OperationFailure
from mongio.events.command import (
    COMMAND_LOGGER_NAME,
    DEFAULT_MAX_DOCUMENT_LENGTH,
    CommandListener,
    CommandPublisher,
    CommandStartedEvent,
    is_sensitive,
)
from mongio.events.logs import LogMessage
from tests.support.recorders import CommandRecorder

ADDRESS = ("db.example", 27017)


SECRET = "c2VjcmV0"
# A server's error reply to a sensitive command: its message may echo what the command carried.
SENSITIVE_ERROR_REPLY = {
    "ok": 0,
    "errmsg": f"Authentication failed for payload {SECRET}",
    "code": 18,
    "codeName": "AuthenticationFailed",
    "errorLabels": ["SystemOverloadedError"],
    "payload": SECRET,
}


def publish_all(
    publisher: CommandPublisher,
    command: dict[str, Any],
    reply: dict[str, Any],
    error: BaseException | None = None,
) -> None:
    name = next(iter(command))
    common = (name, "admin", 7, 3, ADDRESS, 1, 42, None)
    if error is None:
        error = OperationFailure("boom", 8000, {"ok": 0, "errmsg": "boom", "code": 8000})
    publisher.started(command, *common)
    publisher.succeeded(reply, 0.0025, *common, sensitive=is_sensitive(name, command))
    publisher.failed(error, 0.001, *common, sensitive=is_sensitive(name, command))


def server_error(reply: dict[str, Any]) -> OperationFailure:
    return OperationFailure(str(reply["errmsg"]), reply.get("code"), reply)


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
    """Command logging and monitoring, Security: a sensitive command's command and reply are empty, and its
    server-generated failure keeps only code, codeName and errorLabels."""
    recorder = CommandRecorder()
    publish_all(
        CommandPublisher([recorder]),
        {name: 1, "payload": SECRET},
        {"ok": 1, "payload": SECRET},
        server_error(SENSITIVE_ERROR_REPLY),
    )
    started, succeeded, failed = recorder.events
    assert started.command == {} and started.command_name == name
    assert succeeded.reply == {}
    assert failed.failure == {
        "code": 18,
        "codeName": "AuthenticationFailed",
        "errorLabels": ["SystemOverloadedError"],
    }


def test_a_sensitive_commands_network_error_is_not_redacted(caplog: pytest.LogCaptureFixture) -> None:
    """Command logging and monitoring, Security: only a server-side error is redacted; a network error in
    response to a sensitive command is published and logged whole."""
    recorder = CommandRecorder()
    publisher = CommandPublisher([recorder])
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        publisher.failed(
            AutoReconnect("connection closed by peer"),
            0.0,
            "saslStart",
            "admin",
            1,
            1,
            ADDRESS,
            1,
            None,
            None,
            sensitive=True,
        )
    (event,) = recorder.events
    assert event.failure == {"errmsg": "connection closed by peer", "errtype": "AutoReconnect"}
    (record,) = [record for record in caplog.records if record.name == COMMAND_LOGGER_NAME]
    assert record.msg.fields["failure"] == "AutoReconnect: connection closed by peer"  # type: ignore[union-attr]


def test_a_redacted_failure_without_code_keeps_nothing() -> None:
    """Command logging and monitoring, Security: fields the reply lacks are not invented."""
    recorder = CommandRecorder()
    reply = {"ok": 0, "errmsg": f"bad {SECRET}"}
    publish_all(
        CommandPublisher([recorder]), {"createUser": "u", "pwd": SECRET}, {"ok": 1}, server_error(reply)
    )
    assert recorder.events[2].failure == {}


@pytest.mark.parametrize("name", ["hello", "isMaster", "ismaster"])
def test_hello_is_redacted_only_with_speculative_authenticate(name: str) -> None:
    recorder = CommandRecorder()
    publisher = CommandPublisher([recorder])
    publish_all(publisher, {name: 1, "speculativeAuthenticate": {"saslStart": 1}}, {"ok": 1, "me": "x"})
    publish_all(publisher, {name: 1}, {"ok": 1, "me": "x"})
    redacted, plain = recorder.events[:3], recorder.events[3:]
    assert redacted[0].command == {} and redacted[1].reply == {}
    assert plain[0].command == {name: 1} and plain[1].reply == {"ok": 1, "me": "x"}


def test_event_fields() -> None:
    recorder = CommandRecorder()
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
    recorder = CommandRecorder()
    publisher = CommandPublisher([recorder])
    publisher.failed(AutoReconnect("connection reset"), 0.0, "ping", "admin", 1, 1, ADDRESS, 1, None, None)
    (event,) = recorder.events
    assert event.failure == {"errmsg": "connection reset", "errtype": "AutoReconnect"}


def test_a_failing_listener_does_not_break_publishing(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(CommandListener):
        def started(self, event: CommandStartedEvent) -> None:
            raise RuntimeError("listener bug")

    recorder = CommandRecorder()
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
        assert CommandPublisher([CommandRecorder()]).enabled
        logger.setLevel(logging.DEBUG)
        assert CommandPublisher().enabled
    finally:
        logger.setLevel(previous)


def test_log_messages_truncate_documents(caplog: pytest.LogCaptureFixture) -> None:
    """Logging, Configurable Max Document Length (prose test 1 of command logging): without configuration a
    command is cut to 1000 characters plus "..."; a short reply is shown whole."""
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


@pytest.mark.parametrize(
    "command",
    [
        {"saslStart": 1, "payload": SECRET},
        {"hello": 1, "speculativeAuthenticate": {"saslStart": 1, "payload": SECRET}},
        {"isMaster": 1, "speculativeAuthenticate": {"saslStart": 1, "payload": SECRET}},
    ],
)
def test_log_messages_redact_sensitive_commands(
    caplog: pytest.LogCaptureFixture, command: dict[str, Any]
) -> None:
    """Command logging and monitoring, Security and Command Log Messages: the "command failed" message of a
    sensitive command keeps only code, codeName and errorLabels of the server's error, in its structured
    failure and in its text."""
    publisher = CommandPublisher()
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        publish_all(publisher, command, {"ok": 1, "payload": SECRET}, server_error(SENSITIVE_ERROR_REPLY))
    messages: list[Any] = [record.msg for record in caplog.records if record.name == COMMAND_LOGGER_NAME]
    assert messages[0].fields["command"] == "{}"
    assert messages[1].fields["reply"] == "{}"
    assert messages[2].fields["failure"] == {
        "code": 18,
        "codeName": "AuthenticationFailed",
        "errorLabels": ["SystemOverloadedError"],
    }
    assert '"codeName": "AuthenticationFailed"' in str(messages[2])
    assert all(SECRET not in str(message) for message in messages)
    assert all("Authentication failed for" not in str(message) for message in messages)


def command_messages(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [record.msg for record in caplog.records if record.name == COMMAND_LOGGER_NAME]


def test_max_document_length_comes_from_the_environment(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logging, Configurable Max Document Length (prose test 2 of command logging): with
    MONGODB_LOG_MAX_DOCUMENT_LENGTH=5 the command, the reply and the server's error are cut to 5 characters
    plus "..."; an invalid value means the default."""
    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "5")
    publisher = CommandPublisher()
    reply = {"ok": 0, "errmsg": "no such command: 'notARealCommand'", "code": 59}
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        publish_all(publisher, {"hello": True}, {"ok": 1, "isWritablePrimary": True}, server_error(reply))
        monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "-3")
        publisher.started(
            {"insert": "c", "documents": [{"x": "y" * 2000}]}, "insert", "db", 1, 1, ADDRESS, 1, None, None
        )
    started, succeeded, failed, default = command_messages(caplog)
    assert started.fields["command"] == '{"hel...'
    assert succeeded.fields["reply"] == '{"ok"...'
    assert failed.fields["failure"] == "OperationFailure: " + '{"ok"...'
    assert len(default.fields["command"]) == DEFAULT_MAX_DOCUMENT_LENGTH + 3


def test_a_publishers_own_length_wins_over_the_environment(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logging, Supporting Both Programmatic and Environment Variable Configuration: a length given to the
    publisher takes precedence over MONGODB_LOG_MAX_DOCUMENT_LENGTH."""
    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "5")
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        CommandPublisher(max_document_length=8).started(
            {"ping": 1}, "ping", "db", 1, 1, ADDRESS, 1, None, None
        )
    (message,) = command_messages(caplog)
    assert message.fields["command"] == '{"ping":...'
    with pytest.raises(ValueError, match="positive"):
        CommandPublisher(max_document_length=0)


def test_no_truncation_up_to_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    """Logging, Configurable Max Document Length: a document exactly as long as the limit is shown whole,
    without an ellipsis (which does not count toward the length)."""
    text = '{"ping": 1}'
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        CommandPublisher(max_document_length=len(text)).started(
            {"ping": 1}, "ping", "db", 1, 1, ADDRESS, 1, None, None
        )
        CommandPublisher(max_document_length=len(text) - 1).started(
            {"ping": 1}, "ping", "db", 1, 1, ADDRESS, 1, None, None
        )
    whole, cut = command_messages(caplog)
    assert whole.fields["command"] == text
    assert cut.fields["command"] == text[:-1] + "..."


@pytest.mark.parametrize("limit", range(10, 20))
def test_truncation_keeps_multi_byte_code_points_whole(caplog: pytest.LogCaptureFixture, limit: int) -> None:
    """Logging, Configurable Max Document Length (prose test 3 of command logging): the length counts code
    points, so text of multi-byte code points (2, 3 and 4 bytes in UTF-8) is cut between code points and the
    result is valid Unicode that shows the characters themselves."""
    value = "é中😀" * 10
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        CommandPublisher(max_document_length=limit).started(
            {"find": value}, "find", "db", 1, 1, ADDRESS, 1, None, None
        )
    (message,) = command_messages(caplog)
    shown = message.fields["command"]
    full = '{"find": "' + value + '"}'
    assert shown == full[:limit] + "..."
    assert shown.encode("utf-8").decode("utf-8") == shown  # no lone surrogate or broken sequence
    assert "\\u" not in shown


def test_a_long_server_error_is_cut_in_the_failure(caplog: pytest.LogCaptureFixture) -> None:
    """Logging, Representing Errors in Log Messages: a server reply the error carries is cut to the maximum
    document length in the "command failed" message, the error's class still shown."""
    reply = {"ok": 0, "errmsg": "x" * 3000, "code": 2, "codeName": "BadValue"}
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        CommandPublisher().failed(server_error(reply), 0.0, "find", "db", 1, 1, ADDRESS, 1, None, None)
    (message,) = command_messages(caplog)
    failure = message.fields["failure"]
    assert failure.startswith('OperationFailure: {"ok": 0, "errmsg": "xxx')
    assert len(failure) == len("OperationFailure: ") + DEFAULT_MAX_DOCUMENT_LENGTH + 3
    assert failure.endswith("...")


def test_unstructured_text_follows_the_specification(caplog: pytest.LogCaptureFixture) -> None:
    """Command logging and monitoring, Command Log Messages: the unstructured form of the three messages,
    and an absent value (operation id, server connection id, port) leaves out its field and its segment."""
    publisher = CommandPublisher()
    with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
        publish_all(publisher, {"ping": 1}, {"ok": 1})
        publisher.started({"ping": 1}, "ping", "db", 9, None, ("/tmp/m.sock", None), 4, None, None)
    started, succeeded, failed, bare = command_messages(caplog)
    where = (
        "using a connection with driver-generated ID 1 and server-generated ID 42 to db.example:27017. "
        "The requestID is 7 and the operation ID is 3"
    )
    assert str(started) == f'Command "ping" started on database "admin" {where}. Command: {{"ping": 1}}'
    assert str(succeeded) == (
        f'Command "ping" succeeded on database "admin" in 2.5 ms {where}. Command reply: {{"ok": 1}}'
    )
    assert str(failed).startswith(f'Command "ping" failed on database "admin" in 1 ms {where}. Error: ')
    assert str(bare) == (
        'Command "ping" started on database "db" using a connection with driver-generated ID 4 to '
        '/tmp/m.sock. The requestID is 9. Command: {"ping": 1}'
    )
    assert not {"operationId", "serverPort", "serverConnectionId", "serviceId"} & set(bare.fields)
