"""The command logging prose tests (command-logging-and-monitoring tests README) against the test server."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.events import COMMAND_LOGGER_NAME


def messages(caplog: pytest.LogCaptureFixture, message: str, command_name: str) -> list[dict[str, Any]]:
    return [
        dict(record.msg.fields)  # type: ignore[union-attr]
        for record in caplog.records
        if record.name == COMMAND_LOGGER_NAME
        and record.msg.fields["message"] == message  # type: ignore[union-attr]
        and record.msg.fields["commandName"] == command_name  # type: ignore[union-attr]
    ]


async def test_default_truncation_limit(
    server_uri: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Command logging prose test 1 (Logging, Configurable Max Document Length): without configuration the
    insertMany command is cut to 1000 characters plus "...", its reply is at most that long, and a find
    reply holding the 100 documents is cut to 1000 plus "..."."""
    monkeypatch.delenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", raising=False)
    name = f"prose_{uuid.uuid4().hex[:12]}"
    async with MongoClient(server_uri) as client:
        coll = client[name]["c"]
        with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
            await coll.insert_many([{"x": "y"} for _ in range(100)])
            await coll.find().to_list()
        await client.drop_database(name)
    (insert_started,) = messages(caplog, "Command started", "insert")
    (insert_succeeded,) = messages(caplog, "Command succeeded", "insert")
    (find_succeeded,) = messages(caplog, "Command succeeded", "find")
    assert len(insert_started["command"]) == 1000 + 3 and insert_started["command"].endswith("...")
    assert len(insert_succeeded["reply"]) <= 1000 + 3
    assert len(find_succeeded["reply"]) == 1000 + 3 and find_succeeded["reply"].endswith("...")


async def test_explicitly_configured_truncation_limit(
    server_uri: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Command logging prose test 2 (Logging, Configurable Max Document Length, through
    MONGODB_LOG_MAX_DOCUMENT_LENGTH): with 5, the hello command and reply are 5 characters plus "...", and
    the server's error reply in a failed command's failure is too."""
    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "5")
    async with MongoClient(server_uri) as client:
        with caplog.at_level(logging.DEBUG, logger=COMMAND_LOGGER_NAME):
            await client.admin.command({"hello": True})
            with pytest.raises(OperationFailure):
                await client.admin.command({"notARealCommand": True})
    (started,) = messages(caplog, "Command started", "hello")
    (succeeded,) = messages(caplog, "Command succeeded", "hello")
    (failed,) = messages(caplog, "Command failed", "notARealCommand")
    assert len(started["command"]) == 5 + 3 and started["command"].endswith("...")
    assert len(succeeded["reply"]) == 5 + 3 and succeeded["reply"].endswith("...")
    server_error = failed["failure"].split(": ", 1)[1]
    assert server_error == '{"ok"...'
