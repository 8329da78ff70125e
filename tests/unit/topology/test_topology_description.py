"""TopologyDescription: the rules the spec files leave open (settings, SRV polling, compatibility, readability)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mongio.errors import ConfigurationError
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import (
    MAX_SUPPORTED_WIRE_VERSION,
    MIN_SUPPORTED_WIRE_VERSION,
    TopologyDescription,
    compare_topology_version,
    initial_topology_description,
    updated_topology_description,
    updated_topology_description_srv_polling,
)
from mongio.topology.topology_type import TopologyType

A: Address = ("a", 27017)
B: Address = ("b", 27017)
C: Address = ("c", 27017)


def settings(*seeds: Address, **kwargs: Any) -> TopologySettings:
    return TopologySettings(seeds=seeds or (A,), **kwargs)


def primary(address: Address = A, **fields: Any) -> ServerDescription:
    reply = {
        "ok": 1,
        "setName": "rs",
        "isWritablePrimary": True,
        "hosts": ["a:27017", "b:27017"],
        "maxWireVersion": 21,
        "logicalSessionTimeoutMinutes": 30,
        **fields,
    }
    return ServerDescription(address, reply, round_trip_time=0.001)


def secondary(address: Address = B, **fields: Any) -> ServerDescription:
    reply = {
        "ok": 1,
        "setName": "rs",
        "secondary": True,
        "hosts": ["a:27017", "b:27017"],
        "maxWireVersion": 21,
        "logicalSessionTimeoutMinutes": 30,
        **fields,
    }
    return ServerDescription(address, reply, round_trip_time=0.001)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, TopologyType.Unknown),
        ({"direct_connection": False}, TopologyType.Unknown),
        ({"direct_connection": True}, TopologyType.Single),
        ({"direct_connection": True, "replica_set_name": "rs"}, TopologyType.Single),
        ({"replica_set_name": "rs"}, TopologyType.ReplicaSetNoPrimary),
        ({"load_balanced": True}, TopologyType.LoadBalanced),
    ],
)
def test_initial_topology_type(kwargs: dict[str, Any], expected: TopologyType) -> None:
    td = initial_topology_description(settings(A, **kwargs))
    assert td.topology_type == expected
    assert list(td.server_descriptions()) == [A]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"seeds": (A, B), "direct_connection": True},
        {"seeds": (A,), "load_balanced": True, "direct_connection": True},
        {"seeds": (A,), "load_balanced": True, "replica_set_name": "rs"},
        {"seeds": (A,), "heartbeat_frequency": 0},
        {"seeds": (A,), "srv_max_hosts": -1},
    ],
)
def test_forbidden_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        TopologySettings(**kwargs)


def test_wire_version_compatibility_messages() -> None:
    base = initial_topology_description(settings(A, B))
    too_new = ServerDescription(
        A,
        {"ok": 1, "msg": "isdbgrid", "minWireVersion": MAX_SUPPORTED_WIRE_VERSION + 1, "maxWireVersion": 99},
    )
    td = updated_topology_description(base, too_new)
    assert not td.compatible
    assert td.compatibility_error == (
        f"Server at a:27017 requires wire version {MAX_SUPPORTED_WIRE_VERSION + 1}, but this version of "
        f"mongio only supports up to {MAX_SUPPORTED_WIRE_VERSION}."
    )
    with pytest.raises(ConfigurationError, match="requires wire version"):
        td.check_compatible()

    base = initial_topology_description(settings(A))
    too_old = ServerDescription(A, {"ok": 1, "maxWireVersion": MIN_SUPPORTED_WIRE_VERSION - 1})
    td = updated_topology_description(base, too_old)
    assert td.compatibility_error == (
        f"Server at a:27017 reports wire version {MIN_SUPPORTED_WIRE_VERSION - 1}, but this version of "
        f"mongio requires at least {MIN_SUPPORTED_WIRE_VERSION} (MongoDB 4.2)."
    )
    # Unknown servers are never incompatible.
    assert updated_topology_description(td, ServerDescription(A)).compatible


def test_logical_session_timeout_is_the_least_of_data_bearing_servers() -> None:
    td = initial_topology_description(settings(A, B, C, replica_set_name="rs"))
    td = updated_topology_description(
        td, primary(hosts=["a:27017", "b:27017", "c:27017"], logicalSessionTimeoutMinutes=30)
    )
    assert td.logical_session_timeout_minutes == 30
    td = updated_topology_description(
        td, secondary(hosts=["a:27017", "b:27017", "c:27017"], logicalSessionTimeoutMinutes=10)
    )
    assert td.logical_session_timeout_minutes == 10
    # An arbiter is not data-bearing, so its missing value does not matter...
    arbiter = ServerDescription(C, {"ok": 1, "setName": "rs", "arbiterOnly": True, "maxWireVersion": 21})
    td = updated_topology_description(td, arbiter)
    assert td.logical_session_timeout_minutes == 10
    # ...but a data-bearing server without one disables sessions.
    td = updated_topology_description(
        td, secondary(hosts=["a:27017", "b:27017", "c:27017"], logicalSessionTimeoutMinutes=None)
    )
    assert td.logical_session_timeout_minutes is None


def test_updates_for_unmonitored_or_older_servers_are_ignored() -> None:
    td = initial_topology_description(settings(A, replica_set_name="rs"))
    assert updated_topology_description(td, secondary(("z", 1))) is td
    version = {"processId": "p", "counter": 5}
    td = updated_topology_description(td, primary(topologyVersion=version))
    older = primary(topologyVersion={"processId": "p", "counter": 4}, setVersion=9)
    assert updated_topology_description(td, older) is td
    same = primary(topologyVersion=version, setVersion=9)
    assert updated_topology_description(td, same) is not td


def test_compare_topology_version() -> None:
    p1 = {"processId": "p", "counter": 1}
    p2 = {"processId": "p", "counter": 2}
    other = {"processId": "q", "counter": 0}
    assert compare_topology_version(p1, p2) == -1
    assert compare_topology_version(p2, p1) == 1
    assert compare_topology_version(p1, dict(p1)) == 0
    assert compare_topology_version(p2, other) == -1  # a new process is always newer
    assert compare_topology_version(None, p1) == -1
    assert compare_topology_version(p1, None) == -1


def test_single_with_wrong_set_name_becomes_unknown() -> None:
    td = initial_topology_description(settings(A, direct_connection=True, replica_set_name="other"))
    td = updated_topology_description(td, primary())
    sd = td.server_descriptions()[A]
    assert sd.server_type == ServerType.Unknown
    assert "other" in str(sd.error)
    assert td.topology_type == TopologyType.Single


def test_reset_makes_everything_unknown() -> None:
    td = initial_topology_description(settings(A, replica_set_name="rs"))
    td = updated_topology_description(td, primary())
    assert td.topology_type == TopologyType.ReplicaSetWithPrimary
    reset = td.reset()
    assert reset.topology_type == TopologyType.ReplicaSetNoPrimary
    assert all(sd.server_type == ServerType.Unknown for sd in reset.server_descriptions().values())
    assert set(reset.server_descriptions()) == {A, B}
    assert td.reset_server(A).topology_type == TopologyType.ReplicaSetNoPrimary
    assert td.reset_server(("z", 1)) is td


def test_readable_and_writable_per_topology_type() -> None:
    unknown = initial_topology_description(settings(A, B))
    assert not unknown.has_readable_server() and not unknown.has_writable_server()

    rs = initial_topology_description(settings(A, B, replica_set_name="rs"))
    rs = updated_topology_description(rs, secondary())
    assert rs.topology_type == TopologyType.ReplicaSetNoPrimary
    assert not rs.has_readable_server() and not rs.has_writable_server()

    class Secondary:
        mode = 2
        tag_sets: list[dict[str, str]] = [{}]
        max_staleness = -1

    assert rs.has_readable_server(Secondary())
    rs = updated_topology_description(rs, primary())
    assert rs.has_readable_server() and rs.has_writable_server()

    single = updated_topology_description(
        initial_topology_description(settings(A, direct_connection=True)), secondary(A)
    )
    assert single.has_readable_server() and single.has_writable_server()

    lb = initial_topology_description(settings(A, load_balanced=True))
    assert lb.has_readable_server() and lb.has_writable_server()


def test_srv_polling_keeps_unchanged_hosts_and_removes_gone_ones() -> None:
    td = initial_topology_description(settings(A, B))
    mongos = ServerDescription(A, {"ok": 1, "msg": "isdbgrid", "maxWireVersion": 21}, round_trip_time=0.001)
    td = updated_topology_description(td, mongos)
    polled = updated_topology_description_srv_polling(td, [A, C])
    assert set(polled.server_descriptions()) == {A, C}
    assert polled.server_descriptions()[A] is mongos  # left alone, not re-added
    assert polled.server_descriptions()[C].server_type == ServerType.Unknown
    assert updated_topology_description_srv_polling(td, [B, A]) is td
    assert updated_topology_description_srv_polling(td, []) is td


def test_srv_polling_respects_srv_max_hosts() -> None:
    hosts = [(f"h{i}", 27017) for i in range(10)]
    td = initial_topology_description(settings(hosts[0], hosts[1], srv_max_hosts=3))
    polled = updated_topology_description_srv_polling(td, hosts, random.Random(7))
    servers = set(polled.server_descriptions())
    assert len(servers) == 3
    assert {hosts[0], hosts[1]} <= servers  # existing hosts are kept, one new one is drawn
    drawn = {
        next(
            iter(
                set(
                    updated_topology_description_srv_polling(
                        td, hosts, random.Random(seed)
                    ).server_descriptions()
                )
                - {hosts[0], hosts[1]}
            )
        )
        for seed in range(40)
    }
    assert len(drawn) > 1  # the new host is chosen at random


def test_topology_description_equality() -> None:
    td = initial_topology_description(settings(A, replica_set_name="rs"))
    one = updated_topology_description(td, primary())
    two = updated_topology_description(td, primary())
    assert one == two
    assert one != updated_topology_description(td, primary(setVersion=3))
    assert one != td
    assert isinstance(repr(one), str) and "ReplicaSetWithPrimary" in repr(one)


def test_description_is_a_snapshot() -> None:
    td = initial_topology_description(settings(A))
    servers = td.server_descriptions()
    servers.clear()
    assert td.has_server(A)
    assert isinstance(td, TopologyDescription)
