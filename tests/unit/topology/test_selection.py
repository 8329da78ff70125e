"""Server selection and the RTT tracker: the edges the spec tables leave open."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mongio.errors import ConfigurationError
from mongio.topology.selection import (
    NEAREST,
    PRIMARY,
    PRIMARY_PREFERRED,
    SECONDARY,
    SECONDARY_PREFERRED,
    RoundTripTimeTracker,
    choose_server,
    latency_window,
    select_servers,
    suitable_servers,
    validate_max_staleness,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType


@dataclass(frozen=True)
class Pref:
    mode: int
    tag_sets: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    max_staleness: float = -1


def server(
    name: str,
    kind: ServerType,
    rtt_ms: float = 5,
    tags: dict[str, str] | None = None,
    last_write: float | None = None,
    updated: float = 100.0,
    max_wire: int = 21,
) -> ServerDescription:
    hello: dict[str, Any] = {"ok": 1, "maxWireVersion": max_wire, "tags": tags or {}}
    if last_write is not None:
        hello["lastWrite"] = {"lastWriteDate": datetime.fromtimestamp(last_write, tz=UTC)}
    return ServerDescription(
        (name, 27017), hello, round_trip_time=rtt_ms / 1000, last_update_time=updated, server_type=kind
    )


def topology(kind: TopologyType, *servers: ServerDescription, **settings: Any) -> TopologyDescription:
    ts = TopologySettings(seeds=tuple(s.address for s in servers) or (("x", 1),), **settings)
    return TopologyDescription(kind, {s.address: s for s in servers}, "rs", None, None, ts)


def names(servers: list[ServerDescription]) -> list[str]:
    return sorted(s.address[0] for s in servers)


P = server("p", ServerType.RSPrimary, 5, {"dc": "ny"})
S1 = server("s1", ServerType.RSSecondary, 10, {"dc": "ny"})
S2 = server("s2", ServerType.RSSecondary, 30, {"dc": "sf"})
RS = topology(TopologyType.ReplicaSetWithPrimary, P, S1, S2)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (PRIMARY, ["p"]),
        (PRIMARY_PREFERRED, ["p"]),
        (SECONDARY, ["s1", "s2"]),
        (SECONDARY_PREFERRED, ["s1", "s2"]),
        (NEAREST, ["p", "s1", "s2"]),
    ],
)
def test_modes(mode: int, expected: list[str]) -> None:
    assert names(suitable_servers(RS, Pref(mode))) == expected


def test_writes_ignore_the_read_preference() -> None:
    assert names(suitable_servers(RS, Pref(SECONDARY), is_write=True)) == ["p"]
    no_primary = topology(TopologyType.ReplicaSetNoPrimary, S1, S2)
    assert suitable_servers(no_primary, is_write=True) == []


def test_tag_sets_are_tried_in_order_and_empty_list_matches_all() -> None:
    assert names(suitable_servers(RS, Pref(SECONDARY, [{"dc": "tokyo"}, {"dc": "sf"}, {}]))) == ["s2"]
    assert names(suitable_servers(RS, Pref(SECONDARY, []))) == ["s1", "s2"]
    assert suitable_servers(RS, Pref(SECONDARY, [{"dc": "tokyo"}])) == []
    # Only secondaries were candidates: secondaryPreferred falls back to the primary, whatever its tags.
    assert names(suitable_servers(RS, Pref(SECONDARY_PREFERRED, [{"dc": "tokyo"}]))) == ["p"]


def test_deprioritized_servers_are_avoided_unless_nothing_else_suits() -> None:
    assert names(suitable_servers(RS, Pref(NEAREST), deprioritized={S1.address})) == ["p", "s2"]
    assert names(suitable_servers(RS, Pref(PRIMARY), deprioritized={P.address})) == ["p"]
    # primaryPreferred with the primary deprioritized picks a secondary.
    assert names(suitable_servers(RS, Pref(PRIMARY_PREFERRED), deprioritized={P.address})) == ["s1", "s2"]


def test_single_and_sharded_ignore_the_read_preference() -> None:
    single = topology(TopologyType.Single, server("a", ServerType.RSSecondary))
    assert names(suitable_servers(single, Pref(PRIMARY))) == ["a"]
    assert names(suitable_servers(single, is_write=True)) == ["a"]
    unknown_single = topology(TopologyType.Single, ServerDescription(("a", 27017)))
    assert suitable_servers(unknown_single) == []
    sharded = topology(
        TopologyType.Sharded, server("m1", ServerType.Mongos), ServerDescription(("m2", 27017))
    )
    assert names(suitable_servers(sharded, Pref(SECONDARY, [{"dc": "x"}]))) == ["m1"]
    assert suitable_servers(topology(TopologyType.Unknown, S1), Pref(NEAREST)) == []


def test_custom_selector_and_incompatible_topology() -> None:
    chosen = select_servers(
        RS, Pref(NEAREST), server_selector=lambda s: [x for x in s if x.address[0] != "p"]
    )
    assert names(chosen) == ["s1"]  # s2 is outside the 15 ms window of s1
    old = topology(TopologyType.ReplicaSetWithPrimary, server("p", ServerType.RSPrimary, max_wire=6))
    with pytest.raises(ConfigurationError, match="wire version"):
        select_servers(old)


def test_latency_window_is_inclusive() -> None:
    a = server("a", ServerType.Mongos, 10)
    b = server("b", ServerType.Mongos, 25)
    c = server("c", ServerType.Mongos, 25.5)
    assert names(latency_window([a, b, c], 15)) == ["a", "b"]
    assert names(latency_window([a, b, c], 0)) == ["a"]
    assert latency_window([], 15) == []


@given(
    rtts=st.lists(st.floats(min_value=0, max_value=10_000, allow_nan=False), min_size=1, max_size=8),
    threshold=st.floats(min_value=0, max_value=1_000, allow_nan=False),
)
def test_latency_window_properties(rtts: list[float], threshold: float) -> None:
    servers = [server(f"h{i}", ServerType.Mongos, rtt) for i, rtt in enumerate(rtts)]
    window = latency_window(servers, threshold)
    fastest = min(s.round_trip_time or 0 for s in servers)
    assert any(s.round_trip_time == fastest for s in window)
    for s in servers:
        inside = (s.round_trip_time or 0) <= fastest + threshold / 1000
        assert (s in window) == inside


def test_max_staleness_validation() -> None:
    validate_max_staleness(RS, Pref(NEAREST, max_staleness=90))
    with pytest.raises(ConfigurationError, match="at least 90"):
        validate_max_staleness(RS, Pref(NEAREST, max_staleness=89))
    slow = topology(TopologyType.ReplicaSetWithPrimary, P, heartbeat_frequency=100)
    with pytest.raises(ConfigurationError, match="at least 110"):
        validate_max_staleness(slow, Pref(NEAREST, max_staleness=109))
    validate_max_staleness(slow, Pref(NEAREST, max_staleness=110))
    with pytest.raises(ConfigurationError, match="primary"):
        validate_max_staleness(RS, Pref(PRIMARY, max_staleness=120))
    # Outside a replica set there is nothing to check.
    validate_max_staleness(
        topology(TopologyType.Sharded, server("m", ServerType.Mongos)), Pref(NEAREST, max_staleness=1)
    )


def test_staleness_with_a_primary() -> None:
    heartbeat = 10.0
    primary = server("p", ServerType.RSPrimary, last_write=1000.0, updated=500.0)
    fresh = server("fresh", ServerType.RSSecondary, last_write=1000.0 - 80, updated=500.0)
    stale = server("stale", ServerType.RSSecondary, last_write=1000.0 - 81, updated=500.0)
    missing = server("missing", ServerType.RSSecondary, updated=500.0)
    td = topology(
        TopologyType.ReplicaSetWithPrimary, primary, fresh, stale, missing, heartbeat_frequency=heartbeat
    )
    # staleness = lag + heartbeat: 80 + 10 = 90 is eligible, 91 is not; without lastWrite nothing proves freshness.
    assert names(suitable_servers(td, Pref(SECONDARY, max_staleness=90))) == ["fresh"]


def test_staleness_without_a_primary_uses_the_freshest_secondary() -> None:
    a = server("a", ServerType.RSSecondary, last_write=1000.0)
    b = server("b", ServerType.RSSecondary, last_write=1000.0 - 80)
    c = server("c", ServerType.RSSecondary, last_write=1000.0 - 100)
    td = topology(TopologyType.ReplicaSetNoPrimary, a, b, c)
    assert names(suitable_servers(td, Pref(NEAREST, max_staleness=90))) == ["a", "b"]


def test_choose_server_prefers_the_less_busy_of_two() -> None:
    a, b, c = (server(n, ServerType.Mongos) for n in "abc")
    counts = {a.address: 5, b.address: 1, c.address: 9}
    picks = {
        choose_server([a, b, c], counts.__getitem__, random.Random(seed)).address[0] for seed in range(50)
    }
    assert picks == {"a", "b"}  # c loses every pair it is in
    assert choose_server([c], counts.__getitem__) is c
    with pytest.raises(ValueError):
        choose_server([], counts.__getitem__)


def test_choose_server_is_reproducible_with_a_seeded_rng() -> None:
    servers = [server(n, ServerType.Mongos) for n in "abcdef"]
    zero: dict[Address, int] = dict.fromkeys((s.address for s in servers), 0)
    first = [choose_server(servers, zero.__getitem__, rng).address for rng in [random.Random(3)] * 20]
    second = [choose_server(servers, zero.__getitem__, rng).address for rng in [random.Random(3)] * 20]
    assert first == second


def _average_and_min(tracker: RoundTripTimeTracker) -> tuple[float | None, float]:
    # Read through a function so the checker does not carry a narrowed property across add_sample().
    return tracker.average, tracker.min


def test_rtt_tracker_average_and_minimum() -> None:
    tracker = RoundTripTimeTracker()
    assert _average_and_min(tracker) == (None, 0.0)
    tracker.add_sample(0.010)
    assert tracker.average == 0.010
    assert tracker.min == 0.0  # reported as 0 until two samples
    tracker.add_sample(0.020)
    assert tracker.average == pytest.approx(0.2 * 0.020 + 0.8 * 0.010)
    assert tracker.min == 0.010
    for _ in range(10):
        tracker.add_sample(0.050)
    assert tracker.min == 0.050  # only the last 10 samples count
    tracker.reset()
    assert _average_and_min(tracker) == (None, 0.0)
    with pytest.raises(ValueError):
        tracker.add_sample(-0.001)


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=1, max_size=30))
def test_rtt_tracker_stays_within_the_samples(samples: list[float]) -> None:
    tracker = RoundTripTimeTracker()
    for sample in samples:
        tracker.add_sample(sample)
    assert tracker.average is not None
    assert min(samples) - 1e-9 <= tracker.average <= max(samples) + 1e-9
    if len(samples) >= 2:
        assert tracker.min == min(samples[-10:])


def test_the_driver_read_preferences_drive_selection() -> None:
    from mongio.options.read_preference import Nearest, ReadPreference, SecondaryPreferred

    assert names(suitable_servers(RS, ReadPreference.PRIMARY)) == ["p"]
    assert names(suitable_servers(RS, ReadPreference.SECONDARY)) == ["s1", "s2"]
    assert names(suitable_servers(RS, SecondaryPreferred(tag_sets=[{"dc": "sf"}]))) == ["s2"]
    with pytest.raises(ConfigurationError):
        select_servers(RS, Nearest(max_staleness=30))
    assert RS.has_readable_server(ReadPreference.NEAREST)
