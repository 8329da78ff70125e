"""Pool events, connection log messages, and pool options."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import pytest

from mongio.connection.pool_options import PoolOptions
from mongio.errors import ConfigurationError
from mongio.events import CONNECTION_LOGGER_NAME, LogMessage, cmap, listeners
from tests.support.fake_pool import FakeFactory, Recorder, make_pool


async def exercise(**options: Any) -> None:
    """One of everything: create, ready, check out (new and idle), check in, clear, close."""
    recorder = options.pop("recorder", None)
    pool = make_pool(FakeFactory(), recorder=recorder, **options)
    conn = await pool.check_out()
    pool.check_in(conn)
    conn = await pool.check_out()
    pool.check_in(conn)
    pool.clear()
    pool.ready()
    await pool.close()


async def test_without_listeners_or_logging_no_event_or_message_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    # Publishers take the event classes from mongio.events.cmap, the log messages from their own module.
    owners = [(cmap, name) for name in dir(cmap) if name.endswith("Event")] + [(listeners, "LogMessage")]
    for owner, name in owners:
        original = getattr(owner, name)

        def counting(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            built.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)
    logger = logging.getLogger(CONNECTION_LOGGER_NAME)
    previous = logger.level
    logger.setLevel(logging.WARNING)
    try:
        await exercise()
        assert built == []
        # The same run with a listener builds every event (so the counting above does see construction).
        recorder = Recorder()
        await exercise(recorder=recorder)
    finally:
        logger.setLevel(previous)
    assert len(built) == len(recorder.events) > 10
    assert "LogMessage" not in built


async def test_event_sequence_and_fields() -> None:
    recorder = Recorder()
    await exercise(recorder=recorder, max_pool_size=5)
    assert recorder.types() == [
        "PoolCreatedEvent",
        "PoolReadyEvent",
        "ConnectionCheckOutStartedEvent",
        "ConnectionCreatedEvent",
        "ConnectionReadyEvent",
        "ConnectionCheckedOutEvent",
        "ConnectionCheckedInEvent",
        "ConnectionCheckOutStartedEvent",
        "ConnectionCheckedOutEvent",
        "ConnectionCheckedInEvent",
        "PoolClearedEvent",
        "ConnectionClosedEvent",
        "PoolReadyEvent",
        "PoolClosedEvent",
    ]
    created = recorder.events[0]
    assert created.address == ("db.example.com", 27017)
    assert created.options == {"maxPoolSize": 5}
    ready = recorder.of("ConnectionReadyEvent")[0]
    checked_out = recorder.of("ConnectionCheckedOutEvent")[0]
    assert ready.connection_id == checked_out.connection_id == 1
    assert 0 <= ready.duration <= checked_out.duration
    cleared = recorder.of("PoolClearedEvent")[0]
    assert cleared.service_id is None and cleared.interrupt_connections is False
    assert recorder.of("ConnectionClosedEvent")[0].reason == "stale"


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    assert isinstance(record.msg, LogMessage)
    return record.msg.fields


async def test_connection_log_messages(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=CONNECTION_LOGGER_NAME)
    await exercise(max_pool_size=5, max_idle_time_seconds=10.0)
    records = [record for record in caplog.records if record.name == CONNECTION_LOGGER_NAME]
    assert all(record.levelno == logging.DEBUG for record in records)
    messages = [record.msg for record in records if isinstance(record.msg, LogMessage)]
    assert len(messages) == len(records)  # every record carries a LogMessage
    fields = [message.fields for message in messages]
    assert [f["message"] for f in fields] == [
        "Connection pool created",
        "Connection pool ready",
        "Connection checkout started",
        "Connection created",
        "Connection ready",
        "Connection checked out",
        "Connection checked in",
        "Connection checkout started",
        "Connection checked out",
        "Connection checked in",
        "Connection pool cleared",
        "Connection closed",
        "Connection pool ready",
        "Connection pool closed",
    ]
    assert all(f["serverHost"] == "db.example.com" and f["serverPort"] == 27017 for f in fields)
    assert fields[0]["maxPoolSize"] == 5 and fields[0]["maxIdleTimeMS"] == 10000
    assert "minPoolSize" not in fields[0]  # only options that were set
    assert records[0].getMessage() == (
        "Connection pool created for db.example.com:27017 using options maxIdleTimeMS=10000, maxPoolSize=5"
    )
    assert fields[3]["driverConnectionId"] == 1
    assert isinstance(fields[4]["durationMS"], float)
    assert (
        records[5]
        .getMessage()
        .startswith("Connection checked out: address=db.example.com:27017, driver-generated ID=1, duration=")
    )
    assert "serviceId" not in fields[10]  # absent values are left out, not null
    assert records[10].getMessage() == "Connection pool for db.example.com:27017 cleared"
    assert fields[11]["reason"] == "Connection became stale because the pool was cleared"
    assert "error" not in fields[11]


async def test_checkout_failure_log_message_carries_the_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=CONNECTION_LOGGER_NAME)
    pool = make_pool(FakeFactory(error=ConnectionRefusedError("no listener on the port")))
    with pytest.raises(ConnectionRefusedError):
        await pool.check_out()
    await pool.close()
    by_message = {
        record.msg.fields["message"]: record
        for record in caplog.records
        if isinstance(record.msg, LogMessage)
    }
    failed = _fields(by_message["Connection checkout failed"])
    assert failed["reason"] == "An error occurred while trying to establish a new connection"
    assert failed["error"] == "ConnectionRefusedError: no listener on the port"
    assert isinstance(failed["durationMS"], float)
    closed = by_message["Connection closed"]
    assert _fields(closed)["reason"] == "An error occurred while using the connection"
    assert closed.getMessage().endswith("Error: ConnectionRefusedError: no listener on the port")


def test_pool_options_defaults_and_explicit_values() -> None:
    defaults = PoolOptions()
    assert defaults.max_pool_size == 100 and defaults.min_pool_size == 0 and defaults.max_connecting == 2
    assert defaults.wait_queue_timeout is None and defaults.max_idle_time_seconds is None
    assert defaults.non_default_options == {}
    options = PoolOptions.from_uri_options(
        {"maxPoolSize": 0, "minPoolSize": 3, "waitQueueTimeoutMS": 0, "maxIdleTimeMS": 250, "appName": "x"}
    )
    assert options.max_pool_size == 0  # no limit
    assert options.wait_queue_timeout is None  # 0 means wait as long as it takes
    assert options.max_idle_time_seconds == 0.25
    assert options.non_default_options == {
        "maxPoolSize": 0,
        "minPoolSize": 3,
        "waitQueueTimeoutMS": 0,
        "maxIdleTimeMS": 250,
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_pool_size": 2, "min_pool_size": 3}, "minPoolSize=3 cannot be greater than maxPoolSize=2"),
        ({"max_connecting": 0}, "maxConnecting must be an integer >= 1"),
        ({"max_pool_size": -1}, "maxPoolSize must be an integer >= 0"),
        ({"wait_queue_timeout": -0.5}, "waitQueueTimeoutMS must be a number of seconds >= 0"),
        ({"max_idle_time_seconds": float("nan")}, "maxIdleTimeMS"),
    ],
)
def test_invalid_pool_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        PoolOptions(**options)


def test_a_server_reply_in_a_connection_error_is_cut(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logging, Representing Errors in Log Messages: a server reply carried by the error of a "connection
    closed" or "checkout failed" message is relaxed Extended JSON cut to the maximum document length."""
    from mongio.errors import OperationFailure
    from mongio.events.listeners import CmapPublisher

    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "12")
    caplog.set_level(logging.DEBUG, logger=CONNECTION_LOGGER_NAME)
    reply = {"ok": 0, "errmsg": "Authentication failed." + "!" * 2000, "code": 18}
    error = OperationFailure(str(reply["errmsg"]), 18, reply)
    publisher = CmapPublisher(("db.example", 27017))
    publisher.connection_closed(3, "error", error)
    publisher.connection_check_out_failed("connectionError", time.monotonic(), error)
    closed, failed = [record.msg for record in caplog.records if record.name == CONNECTION_LOGGER_NAME]
    assert isinstance(closed, LogMessage) and isinstance(failed, LogMessage)
    assert closed.fields["error"] == 'OperationFailure: {"ok": 0, "e...'
    assert failed.fields["error"] == closed.fields["error"]
    assert "!!!" not in str(closed) and "!!!" not in str(failed)
