"""Why server selection left each server out: the reasons a timeout error names, and the removal reasons a
topology description keeps so that an empty topology can still be explained."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from mongio.topology.selection import (
    NEAREST,
    PRIMARY,
    PRIMARY_PREFERRED,
    SECONDARY,
    SECONDARY_PREFERRED,
    rejection_reasons,
    select_servers,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import describe_topology
from mongio.topology.topology_description import (
    MAX_REMOVAL_REASONS,
    TopologyDescription,
    initial_topology_description,
    updated_topology_description,
    updated_topology_description_srv_polling,
)
from mongio.topology.topology_type import TopologyType

A: Address = ("a", 27017)
B: Address = ("b", 27017)
C: Address = ("c", 27017)


@dataclass(frozen=True)
class Pref:
    mode: int
    tag_sets: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    max_staleness: float = -1


def hello(
    set_name: str | None, role: str, hosts: Sequence[Address] = (A, B, C), **extra: Any
) -> dict[str, Any]:
    reply: dict[str, Any] = {"ok": 1, "maxWireVersion": 21, "minWireVersion": 0}
    if set_name is not None:
        reply["setName"] = set_name
        reply["hosts"] = [f"{host}:{port}" for host, port in hosts]
    if role == "primary":
        reply["isWritablePrimary"] = True
    elif role == "secondary":
        reply["secondary"] = True
    elif role == "arbiter":
        reply["arbiterOnly"] = True
    elif role == "mongos":
        reply["msg"] = "isdbgrid"
    else:
        assert role == "standalone"
    reply.update(extra)
    return reply


def described(
    address: Address, reply: dict[str, Any], rtt_ms: float = 5, updated: float = 100.0
) -> ServerDescription:
    return ServerDescription(address, reply, round_trip_time=rtt_ms / 1000, last_update_time=updated)


def apply(td: TopologyDescription, *servers: ServerDescription) -> TopologyDescription:
    for sd in servers:
        td = updated_topology_description(td, sd)
    return td


def start(*seeds: Address, **settings: Any) -> TopologyDescription:
    return initial_topology_description(TopologySettings(seeds=seeds, **settings))


def write_date(seconds: float) -> dict[str, Any]:
    return {"lastWrite": {"lastWriteDate": datetime.fromtimestamp(seconds, tz=UTC)}}


# -- why servers were removed ----------------------------------------------------------------------------------


def test_a_seed_of_another_replica_set_is_removed_and_the_reason_kept() -> None:
    td = apply(start(A, replica_set_name="rs0"), described(A, hello("secantus", "primary", [A])))
    assert td.server_descriptions() == {}
    assert td.removed_servers == {
        A: "it reports replica set name 'secantus', but the client's replicaSet option asks for 'rs0'"
    }
    text = describe_topology(td)
    assert "servers: none; removed from the topology: a:27017 (it reports replica set name 'secantus'" in text


@pytest.mark.parametrize("role", ["secondary", "arbiter"])
def test_a_member_of_another_set_is_removed_with_or_without_a_primary(role: str) -> None:
    without_primary = apply(start(A, B, replica_set_name="rs0"), described(A, hello("other", role)))
    assert "replica set name 'other'" in without_primary.removed_servers[A]

    with_primary = apply(
        start(A, B, replica_set_name="rs0"),
        described(B, hello("rs0", "primary", [A, B])),
        described(A, hello("other", role)),
    )
    assert with_primary.topology_type == TopologyType.ReplicaSetWithPrimary
    assert not with_primary.has_server(A)
    assert "replica set name 'other'" in with_primary.removed_servers[A]


def test_each_removal_rule_names_its_reason() -> None:
    standalone_among_seeds = apply(start(A, B), described(A, hello(None, "standalone")))
    assert "standalone" in standalone_among_seeds.removed_servers[A]

    mongos_in_a_set = apply(start(A, B, replica_set_name="rs0"), described(B, hello(None, "mongos")))
    assert mongos_in_a_set.removed_servers[B] == "it is a Mongos server, not a replica set member"

    shard_member_among_mongos = apply(
        start(A, B), described(A, hello(None, "mongos")), described(B, hello("rs0", "secondary"))
    )
    assert shard_member_among_mongos.topology_type == TopologyType.Sharded
    assert "RSSecondary" in shard_member_among_mongos.removed_servers[B]

    known_by_another_name = apply(
        start(A, B, replica_set_name="rs0"), described(A, hello("rs0", "secondary", me="c:27017"))
    )
    assert "calls itself c:27017" in known_by_another_name.removed_servers[A]

    left_out_by_the_primary = apply(start(A, B), described(A, hello("rs0", "primary", [A, C])))
    assert left_out_by_the_primary.removed_servers == {
        B: "the primary a:27017 does not list it among the set's hosts"
    }

    gone_from_dns = updated_topology_description_srv_polling(start(A, B), [A, C])
    assert gone_from_dns.removed_servers == {B: "its host is no longer in the SRV records"}


def test_an_address_that_rejoins_is_forgotten_and_reasons_survive_unrelated_updates() -> None:
    td = apply(start(A, B), described(A, hello("rs0", "primary", [A, C])))
    td = apply(td, described(C, hello("rs0", "secondary", [A, C])))  # an unrelated update
    assert B in td.removed_servers
    td = apply(td, described(A, hello("rs0", "primary", [A, B, C])))  # the primary lists B again
    assert td.has_server(B)
    assert td.removed_servers == {}


def test_removal_reasons_are_bounded_and_keep_the_latest() -> None:
    many = [(f"h{i}", 27017) for i in range(3 * MAX_REMOVAL_REASONS)]
    td = apply(start(A), described(A, hello("rs0", "primary", [A, *many])))
    td = apply(td, described(A, hello("rs0", "primary", [A])))  # every other host removed at once
    assert len(td.removed_servers) == MAX_REMOVAL_REASONS
    td = apply(td, described(A, hello("other", "primary", [A])))  # and then the seed itself
    assert len(td.removed_servers) == MAX_REMOVAL_REASONS
    assert "replica set name 'other'" in td.removed_servers[A]


def test_removal_reasons_do_not_change_description_equality() -> None:
    one_removed = apply(
        start(A, B, replica_set_name="rs0"),
        described(A, hello("other", "secondary")),
    )
    never_seen = apply(start(B, replica_set_name="rs0"))
    assert one_removed.removed_servers and not never_seen.removed_servers
    assert one_removed.server_descriptions().keys() == never_seen.server_descriptions().keys()
    assert one_removed == never_seen


# -- why present servers were not selected --------------------------------------------------------------------


def replica_set(*servers: ServerDescription, **settings: Any) -> TopologyDescription:
    td = start(*(sd.address for sd in servers), replica_set_name="rs0", **settings)
    return apply(td, *servers)


def test_a_write_names_every_secondary_and_the_unknown_server_with_its_error() -> None:
    td = replica_set(described(A, hello("rs0", "secondary")), described(B, hello("rs0", "arbiter")))
    td = apply(td, ServerDescription(C, error=ConnectionRefusedError(111, "Connection refused")))
    reasons = rejection_reasons(td, is_write=True)
    assert reasons == {
        A: "a write needs the primary",
        B: "a write needs the primary",
        C: "error: ConnectionRefusedError: [Errno 111] Connection refused",
    }
    text = describe_topology(td, reasons)
    assert "a:27017 (RSSecondary, a write needs the primary)" in text
    assert "c:27017 (Unknown, error: ConnectionRefusedError" in text


def test_secondary_reads_name_the_primary_the_arbiter_and_the_unchecked_server() -> None:
    td = replica_set(described(A, hello("rs0", "primary")), described(B, hello("rs0", "arbiter")))
    reasons = rejection_reasons(td, Pref(SECONDARY))
    assert reasons == {
        A: "read preference secondary reads only from secondaries",
        B: "it serves no reads",
        C: "not reached yet: no check has succeeded",
    }


def test_stale_secondaries_say_how_stale() -> None:
    td = replica_set(
        described(A, hello("rs0", "primary", **write_date(1000.0)), updated=500.0),
        described(B, hello("rs0", "secondary", **write_date(1000.0 - 81)), updated=500.0),
        described(C, hello("rs0", "secondary"), updated=500.0),
        heartbeat_frequency=10.0,
    )
    reasons = rejection_reasons(td, Pref(SECONDARY, max_staleness=90))
    # 81 s behind the primary plus the heartbeat: 91 s.
    assert reasons[B] == "stale: estimated 91 s behind, more than maxStalenessSeconds 90"
    assert reasons[C] == "stale: its staleness cannot be estimated (no lastWriteDate to compare)"
    assert reasons[A] == "read preference secondary reads only from secondaries"


def test_tag_mismatches_name_the_tags_and_the_tag_sets() -> None:
    td = replica_set(
        described(A, hello("rs0", "primary", tags={"dc": "ny"})),
        described(B, hello("rs0", "secondary", tags={"dc": "ny"})),
        described(C, hello("rs0", "secondary", tags={"dc": "sf"})),
    )
    none_match = rejection_reasons(td, Pref(SECONDARY, tag_sets=[{"dc": "mars"}]))
    assert none_match[B] == "its tags {'dc': 'ny'} match none of the tag sets [{'dc': 'mars'}]"
    assert none_match[C] == "its tags {'dc': 'sf'} match none of the tag sets [{'dc': 'mars'}]"

    first_set_wins = rejection_reasons(td, Pref(NEAREST, tag_sets=[{"dc": "sf"}, {"dc": "ny"}]))
    assert set(first_set_wins) == {A, B}
    assert (
        first_set_wins[B]
        == "its tags {'dc': 'ny'} do not match {'dc': 'sf'}, the first tag set other servers match"
    )


def test_latency_window_selector_and_deprioritized_reasons() -> None:
    td = replica_set(
        described(A, hello("rs0", "primary"), rtt_ms=5),
        described(B, hello("rs0", "secondary"), rtt_ms=10),
        described(C, hello("rs0", "secondary"), rtt_ms=40),
        local_threshold_ms=15,
    )
    too_far = rejection_reasons(td, Pref(NEAREST))
    assert too_far == {
        C: "outside the latency window: round trip 40 ms, more than localThresholdMS 15 ms "
        "above the fastest server's 5 ms"
    }

    def only_b(servers: list[ServerDescription]) -> list[ServerDescription]:
        return [sd for sd in servers if sd.address == B]

    refused = rejection_reasons(td, Pref(NEAREST), server_selector=only_b)
    assert refused == {A: "refused by the custom server selector", C: "refused by the custom server selector"}

    avoided = rejection_reasons(td, Pref(SECONDARY), deprioritized=[C])
    assert avoided[C].startswith("deprioritized: it failed an earlier attempt")
    assert B not in avoided


def test_an_incompatible_server_is_named() -> None:
    td = replica_set(described(A, hello("rs0", "primary", maxWireVersion=6)))
    assert rejection_reasons(td, is_write=True)[A].startswith("incompatible: it reports wire version 6")


@pytest.mark.parametrize(
    "pref",
    [
        None,
        Pref(PRIMARY),
        Pref(PRIMARY_PREFERRED),
        Pref(SECONDARY),
        Pref(SECONDARY_PREFERRED, tag_sets=[{"dc": "sf"}]),
        Pref(SECONDARY_PREFERRED, tag_sets=[{"dc": "mars"}]),
        Pref(NEAREST, tag_sets=[{"dc": "ny"}, {}]),
        Pref(NEAREST, max_staleness=90),
    ],
)
@pytest.mark.parametrize("with_primary", [True, False])
def test_the_reasons_cover_exactly_the_servers_selection_leaves_out(
    pref: Pref | None, with_primary: bool
) -> None:
    primary_role = "primary" if with_primary else "secondary"
    td = replica_set(
        described(
            A, hello("rs0", primary_role, tags={"dc": "ny"}, **write_date(1000.0)), rtt_ms=5, updated=500.0
        ),
        described(
            B, hello("rs0", "secondary", tags={"dc": "sf"}, **write_date(900.0)), rtt_ms=8, updated=500.0
        ),
        described(
            C, hello("rs0", "secondary", tags={"dc": "ny"}, **write_date(999.0)), rtt_ms=50, updated=500.0
        ),
    )
    for is_write in (False, True):
        selected = {sd.address for sd in select_servers(td, pref, is_write=is_write)}
        reasons = rejection_reasons(td, pref, is_write=is_write)
        assert selected.isdisjoint(reasons)
        assert selected | reasons.keys() == set(td.server_descriptions())
