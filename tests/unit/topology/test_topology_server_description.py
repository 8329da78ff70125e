"""ServerDescription: type detection, field parsing and the equality SDAM events rely on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from mongio.errors import ConnectionFailure, NotPrimaryError, OperationFailure
from mongio.topology.server_description import ServerDescription, format_address, parse_address
from mongio.topology.server_type import ServerType
from mongio.wire.header import (
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_WRITE_BATCH_SIZE,
    MAX_BSON_SIZE_CEILING,
)

A = ("a", 27017)


def sd(hello: dict[str, Any] | None = None, **kwargs: Any) -> ServerDescription:
    return ServerDescription(A, hello, **kwargs)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"ok": 1}, ServerType.Standalone),
        ({"ok": 1, "msg": "isdbgrid"}, ServerType.Mongos),
        ({"ok": 1, "isreplicaset": True}, ServerType.RSGhost),
        ({"ok": 1, "setName": "rs", "isWritablePrimary": True}, ServerType.RSPrimary),
        ({"ok": 1, "setName": "rs", "ismaster": True}, ServerType.RSPrimary),
        # isWritablePrimary wins over the legacy field when both are present.
        ({"ok": 1, "setName": "rs", "isWritablePrimary": False, "ismaster": True}, ServerType.RSOther),
        ({"ok": 1, "setName": "rs", "secondary": True}, ServerType.RSSecondary),
        ({"ok": 1, "setName": "rs", "arbiterOnly": True}, ServerType.RSArbiter),
        ({"ok": 1, "setName": "rs", "secondary": True, "hidden": True}, ServerType.RSOther),
        ({"ok": 1, "setName": "rs"}, ServerType.RSOther),
        ({"ok": 0, "setName": "rs", "isWritablePrimary": True}, ServerType.Unknown),
        ({}, ServerType.Unknown),
    ],
)
def test_type_detection(reply: dict[str, Any], expected: ServerType) -> None:
    assert sd(reply).server_type == expected


def test_not_ok_reply_keeps_no_fields() -> None:
    d = sd({"ok": 0, "setName": "rs", "hosts": ["b:1"], "maxWireVersion": 21})
    assert d.replica_set_name is None
    assert d.hosts == frozenset()
    assert d.max_wire_version == 0


def test_host_names_are_lower_cased() -> None:
    d = sd(
        {
            "ok": 1,
            "setName": "rs",
            "secondary": True,
            "hosts": ["A:27017", "B:1"],
            "passives": ["C"],
            "arbiters": ["[::1]:5"],
            "me": "A:27017",
            "primary": "B:1",
        }
    )
    assert d.hosts == {("a", 27017), ("b", 1)}
    assert d.passives == {("c", 27017)}
    assert d.arbiters == {("::1", 5)}
    assert d.all_hosts == d.hosts | d.passives | d.arbiters
    assert d.me == ("a", 27017)
    assert d.primary == ("b", 1)


def test_last_write_date_forms() -> None:
    when = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    aware = sd({"ok": 1, "lastWrite": {"lastWriteDate": when}})
    naive = sd({"ok": 1, "lastWrite": {"lastWriteDate": when.replace(tzinfo=None)}})
    other_zone = sd({"ok": 1, "lastWrite": {"lastWriteDate": when.astimezone(timezone(timedelta(hours=5)))}})
    millis = sd({"ok": 1, "lastWrite": {"lastWriteDate": int(when.timestamp() * 1000)}})
    assert aware.last_write_date == pytest.approx(when.timestamp())
    assert naive.last_write_date == aware.last_write_date
    assert other_zone.last_write_date == aware.last_write_date
    assert millis.last_write_date == pytest.approx(when.timestamp())
    assert sd({"ok": 1}).last_write_date is None


def test_round_trip_time_is_none_while_unknown() -> None:
    assert sd({"ok": 1}, round_trip_time=0.02).round_trip_time == 0.02
    assert sd(None, round_trip_time=0.02).round_trip_time is None
    assert sd(None, error=ConnectionFailure("down"), round_trip_time=0.02).round_trip_time is None


def test_equality_ignores_times_but_not_error_or_fields() -> None:
    reply = {"ok": 1, "setName": "rs", "isWritablePrimary": True, "hosts": ["a:27017"], "maxWireVersion": 21}
    first = sd(reply, round_trip_time=0.001, last_update_time=1.0)
    again = sd(dict(reply), round_trip_time=0.5, last_update_time=99.0)
    assert first == again
    assert first != sd({**reply, "tags": {"dc": "ny"}})
    assert first != sd({**reply, "setVersion": 2})
    down = sd(None, error=ConnectionFailure("connection refused"))
    assert down == sd(None, error=ConnectionFailure("connection refused"))
    assert down != sd(None, error=ConnectionFailure("timed out"))
    assert down != sd(None)


def test_topology_version_from_state_change_error() -> None:
    version = {"processId": "p", "counter": 3}
    error = OperationFailure("not primary", 10107, {"ok": 0, "topologyVersion": version})
    assert sd(None, error=error).topology_version == version
    explicit = {"processId": "p", "counter": 4}
    assert sd(None, error=error, topology_version=explicit).topology_version == explicit
    assert sd(None, error=NotPrimaryError("x")).topology_version is None


def test_load_balancer_description() -> None:
    lb = ServerDescription.load_balancer(A)
    assert lb.server_type == ServerType.LoadBalancer
    assert lb.is_writable and lb.is_readable and lb.retryable_writes_supported
    assert lb.replica_set_name is None and lb.max_wire_version == 0


def test_capabilities() -> None:
    primary = sd({"ok": 1, "setName": "rs", "isWritablePrimary": True, "logicalSessionTimeoutMinutes": 30})
    secondary = sd({"ok": 1, "setName": "rs", "secondary": True, "logicalSessionTimeoutMinutes": 30})
    arbiter = sd({"ok": 1, "setName": "rs", "arbiterOnly": True})
    assert primary.is_writable and primary.retryable_writes_supported
    assert secondary.is_readable and not secondary.is_writable and not secondary.retryable_writes_supported
    assert not arbiter.is_readable and not arbiter.is_data_bearing
    no_sessions = sd({"ok": 1, "setName": "rs", "isWritablePrimary": True})
    assert not no_sessions.retryable_writes_supported


def test_size_limits_are_believed_up_to_their_ceilings_and_only_as_positive_integers() -> None:
    def limits(description: ServerDescription) -> tuple[int, int, int]:
        return description.max_bson_size, description.max_message_size, description.max_write_batch_size

    real = {"maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 10}
    assert limits(sd({"ok": 1, **real})) == (16_777_216, 48_000_000, 10)
    forged = {"maxBsonObjectSize": 10**12, "maxMessageSizeBytes": 0, "maxWriteBatchSize": -5}
    assert limits(sd({"ok": 1, **forged})) == (
        MAX_BSON_SIZE_CEILING,
        DEFAULT_MAX_MESSAGE_SIZE,
        DEFAULT_MAX_WRITE_BATCH_SIZE,
    )


def test_to_unknown_keeps_address_and_error() -> None:
    error = ConnectionFailure("gone")
    unknown = sd({"ok": 1}).to_unknown(error)
    assert unknown.address == A and unknown.server_type == ServerType.Unknown and unknown.error is error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host", ("host", 27017)),
        ("HOST:1", ("host", 1)),
        ("[::1]", ("::1", 27017)),
        ("[::1]:2", ("::1", 2)),
        ("/tmp/mongodb-27017.sock", ("/tmp/mongodb-27017.sock", None)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int | None]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["a:", "a:x", "a:70000", "[::1", "[::1]x"])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_format_address_round_trips() -> None:
    for address in [("a", 1), ("::1", 27017), ("/tmp/s.sock", None)]:
        assert parse_address(format_address(address)) == address
    assert format_address(("::1", 27017)) == "[::1]:27017"
