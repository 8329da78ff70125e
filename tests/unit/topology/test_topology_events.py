"""SDAM events: which are due for a change of description, and in which order."""

from __future__ import annotations

from mongio.topology.sdam_events import (
    ServerClosedEvent,
    ServerDescriptionChangedEvent,
    ServerOpeningEvent,
    TopologyClosedEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpeningEvent,
    closing_events,
    opening_events,
    update_events,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import initial_topology_description, updated_topology_description
from mongio.topology.topology_type import TopologyType

A: Address = ("a", 27017)
B: Address = ("b", 27017)
C: Address = ("c", 27017)


def test_opening_events() -> None:
    td = initial_topology_description(TopologySettings(seeds=(A, B)))
    events = opening_events("id", td)
    assert [type(e) for e in events] == [
        TopologyOpeningEvent,
        TopologyDescriptionChangedEvent,
        ServerOpeningEvent,
        ServerOpeningEvent,
    ]
    changed = events[1]
    assert isinstance(changed, TopologyDescriptionChangedEvent)
    assert changed.previous_description.topology_type == TopologyType.Unknown
    assert changed.previous_description.server_descriptions() == {}
    assert changed.new_description is td
    assert [e.server_address for e in events[2:] if isinstance(e, ServerOpeningEvent)] == [A, B]
    assert all(e.topology_id == "id" for e in events)


def test_update_events_order_with_added_and_removed_servers() -> None:
    td = initial_topology_description(TopologySettings(seeds=(A, B), replica_set_name="rs"))
    primary = ServerDescription(
        A,
        {
            "ok": 1,
            "setName": "rs",
            "isWritablePrimary": True,
            "hosts": ["a:27017", "c:27017"],
            "maxWireVersion": 21,
        },
    )
    new = updated_topology_description(td, primary)
    events = update_events("id", td, new, primary)
    assert [type(e) for e in events] == [
        ServerDescriptionChangedEvent,
        ServerOpeningEvent,
        ServerClosedEvent,
        TopologyDescriptionChangedEvent,
    ]
    first = events[0]
    assert isinstance(first, ServerDescriptionChangedEvent)
    assert first.server_address == A and first.new_description is primary
    assert first.previous_description == ServerDescription(A)
    assert isinstance(events[1], ServerOpeningEvent) and events[1].server_address == C
    assert isinstance(events[2], ServerClosedEvent) and events[2].server_address == B


def test_equal_descriptions_publish_nothing() -> None:
    td = initial_topology_description(TopologySettings(seeds=(A,), direct_connection=True))
    reply = {"ok": 1, "isWritablePrimary": True, "maxWireVersion": 21}
    first = ServerDescription(A, reply, round_trip_time=0.001)
    td1 = updated_topology_description(td, first)
    assert len(update_events("id", td, td1, first)) == 2
    again = ServerDescription(A, dict(reply), round_trip_time=0.009)  # only the round trip time differs
    td2 = updated_topology_description(td1, again)
    assert td2 is not td1  # the description is still replaced, to keep the times current
    assert update_events("id", td1, td2, again) == []


def test_ignored_update_publishes_nothing() -> None:
    td = initial_topology_description(TopologySettings(seeds=(A,)))
    stray = ServerDescription(("z", 1), {"ok": 1, "msg": "isdbgrid", "maxWireVersion": 21})
    new = updated_topology_description(td, stray)
    assert new is td
    assert update_events("id", td, new, stray) == []


def test_closing_events() -> None:
    td = initial_topology_description(TopologySettings(seeds=(A, B)))
    events = closing_events("id", td)
    assert [type(e) for e in events] == [
        ServerClosedEvent,
        ServerClosedEvent,
        TopologyDescriptionChangedEvent,
        TopologyClosedEvent,
    ]
    change = events[2]
    assert isinstance(change, TopologyDescriptionChangedEvent)
    assert change.new_description.topology_type == TopologyType.Unknown
    assert change.new_description.server_descriptions() == {}
