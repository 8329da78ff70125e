"""Server Discovery and Monitoring: the server-less formats (single, rs, sharded, load-balanced, monitoring,
errors), run against the pure topology description, error-handling and event code.

Each file is one case: a simulated topology (a description, a pool generation per server and the events
published) is fed the file's hello replies and application errors, and checked against each phase's outcome,
as the tests' README describes. The ``unified`` directory's files run in the unified runner against the
server (those for a single server against a standalone one started for them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mongio.error_classification import (
    SYSTEM_OVERLOADED_ERROR,
    ApplicationError,
    ErrorKind,
    application_error_decision,
)
from mongio.errors import ConnectionFailure
from mongio.topology.sdam_events import (
    SdamEvent,
    ServerClosedEvent,
    ServerDescriptionChangedEvent,
    ServerOpeningEvent,
    TopologyDescriptionChangedEvent,
    TopologyOpeningEvent,
    opening_events,
    update_events,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import (
    TopologyDescription,
    initial_topology_description,
    updated_topology_description,
)
from spec_runner.model import RunContext, SpecCase, Suite, relative_file, unique_names
from spec_runner.suites._topology_support import (
    address,
    address_text,
    from_extended_json,
    json_files,
    server_type,
    settings_from_uri,
)
from spec_runner.suites._unified_support import unified_collector

NAME = "server-discovery-and-monitoring"
FORMATS = ("single", "rs", "sharded", "load-balanced", "monitoring", "errors")
TOPOLOGY_ID = "42"


class SimulatedTopology:
    """The bookkeeping a ``Topology`` does around the pure update rules, without monitors or sockets."""

    def __init__(self, settings: TopologySettings) -> None:
        self.description = initial_topology_description(settings)
        self.events: list[SdamEvent] = list(opening_events(TOPOLOGY_ID, self.description))
        self.generations: dict[Address, int] = dict.fromkeys(self.description.server_descriptions(), 0)
        if settings.load_balanced:
            for seed in settings.seeds:
                self.apply(ServerDescription.load_balancer(seed))

    def apply(self, server: ServerDescription) -> None:
        previous = self.description
        new = updated_topology_description(previous, server)
        self.events.extend(update_events(TOPOLOGY_ID, previous, new, server))
        self.description = new
        current = new.server_descriptions()
        for gone in [a for a in self.generations if a not in current]:
            del self.generations[gone]
        for added in current:
            self.generations.setdefault(added, 0)

    def hello(self, where: Address, reply: Mapping[str, Any]) -> None:
        if not reply:
            # A failed check marks the server Unknown and clears its pool.
            if not self.description.has_server(where):
                return
            self.apply(
                ServerDescription(where, error=ConnectionFailure(f"{address_text(where)}: network error"))
            )
            self.generations[where] += 1
            return
        self.apply(ServerDescription(where, reply, round_trip_time=0.0))

    def application_error(self, spec: Mapping[str, Any]) -> None:
        where = address(spec["address"])
        pool_generation = self.generations.get(where, 0)
        generation = int(spec.get("generation", pool_generation))
        completed = spec["when"] == "afterHandshakeCompletes"
        kind = spec["type"]
        error: ApplicationError | None
        if kind == "command":
            error = ApplicationError.from_reply(
                spec["response"], generation=generation, completed_handshake=completed
            )
        else:
            # The pool labels network errors and timeouts of connection establishment as possible overload.
            labels = frozenset() if completed else frozenset({SYSTEM_OVERLOADED_ERROR})
            error = ApplicationError(
                kind=ErrorKind.NETWORK if kind == "network" else ErrorKind.TIMEOUT,
                generation=generation,
                completed_handshake=completed,
                message=f"simulated {kind} error",
                labels=labels,
            )
        if error is None:
            return
        decision = application_error_decision(self.description, where, error, pool_generation)
        if decision.mark_unknown is not None:
            self.apply(decision.mark_unknown)
        if decision.clear_pool and where in self.generations:
            self.generations[where] += 1


# --- outcome checks -----------------------------------------------------------------------------------


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _same_topology_version(actual: Mapping[str, Any] | None, expected: Mapping[str, Any] | None) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    return str(actual.get("processId")) == str(expected.get("processId")) and int(
        actual.get("counter", 0)
    ) == int(expected.get("counter", 0))


def _check_server(
    sim: SimulatedTopology, where: str, sd: ServerDescription, expected: Mapping[str, Any]
) -> None:
    label = f"server {where}"
    want_type = server_type(expected["type"])
    _check(sd.server_type == want_type, f"{label}: type {sd.server_type.name}, expected {expected['type']}")
    if "setName" in expected:
        _check(
            sd.replica_set_name == expected["setName"],
            f"{label}: setName {sd.replica_set_name!r}, expected {expected['setName']!r}",
        )
    if "setVersion" in expected:
        _check(
            sd.set_version == expected["setVersion"],
            f"{label}: setVersion {sd.set_version!r}, expected {expected['setVersion']!r}",
        )
    if "electionId" in expected:
        want = expected["electionId"]
        got = sd.election_id
        _check(
            (got is None and want is None)
            or (got is not None and want is not None and str(got) == str(want)),
            f"{label}: electionId {got!r}, expected {want!r}",
        )
    if "logicalSessionTimeoutMinutes" in expected:
        _check(
            sd.logical_session_timeout_minutes == expected["logicalSessionTimeoutMinutes"],
            f"{label}: logicalSessionTimeoutMinutes {sd.logical_session_timeout_minutes!r}, "
            f"expected {expected['logicalSessionTimeoutMinutes']!r}",
        )
    for key, wire in (("minWireVersion", sd.min_wire_version), ("maxWireVersion", sd.max_wire_version)):
        if key in expected:
            # null stands for "unset", whose default is 0.
            wanted = 0 if expected[key] is None else expected[key]
            _check(wire == wanted, f"{label}: {key} {wire!r}, expected {wanted!r}")
    if "topologyVersion" in expected:
        _check(
            _same_topology_version(sd.topology_version, expected["topologyVersion"]),
            f"{label}: topologyVersion {sd.topology_version!r}, expected {expected['topologyVersion']!r}",
        )
    if "error" in expected:
        _check(
            sd.error is not None and expected["error"] in str(sd.error),
            f"{label}: error {sd.error!r} should contain {expected['error']!r}",
        )
    if "pool" in expected:
        got_generation = sim.generations.get(sd.address)
        want_generation = expected["pool"]["generation"]
        _check(
            got_generation == want_generation,
            f"{label}: pool generation {got_generation}, expected {want_generation}",
        )


def _check_outcome(sim: SimulatedTopology, outcome: Mapping[str, Any]) -> None:
    td = sim.description
    _check(
        td.topology_type.name == outcome["topologyType"],
        f"topologyType {td.topology_type.name}, expected {outcome['topologyType']}",
    )
    if "setName" in outcome:
        _check(
            td.replica_set_name == outcome["setName"],
            f"setName {td.replica_set_name!r}, expected {outcome['setName']!r}",
        )
    if "logicalSessionTimeoutMinutes" in outcome:
        _check(
            td.logical_session_timeout_minutes == outcome["logicalSessionTimeoutMinutes"],
            f"logicalSessionTimeoutMinutes {td.logical_session_timeout_minutes!r}, "
            f"expected {outcome['logicalSessionTimeoutMinutes']!r}",
        )
    if "maxSetVersion" in outcome:
        _check(
            td.max_set_version == outcome["maxSetVersion"],
            f"maxSetVersion {td.max_set_version!r}, expected {outcome['maxSetVersion']!r}",
        )
    if "maxElectionId" in outcome:
        want = outcome["maxElectionId"]
        got = td.max_election_id
        _check(
            (got is None and want is None)
            or (got is not None and want is not None and str(got) == str(want)),
            f"maxElectionId {got!r}, expected {want!r}",
        )
    if "compatible" in outcome:
        _check(
            td.compatible == outcome["compatible"],
            f"compatible {td.compatible} ({td.compatibility_error}), expected {outcome['compatible']}",
        )
    servers = td.server_descriptions()
    actual = sorted(address_text(a) for a in servers)
    expected_servers = outcome.get("servers", {})
    wanted = sorted(address_text(address(a)) for a in expected_servers)
    _check(actual == wanted, f"servers {actual}, expected {wanted}")
    for where, spec in expected_servers.items():
        _check_server(sim, where, servers[address(where)], spec)


def _server_document(sd: ServerDescription) -> dict[str, Any]:
    return {
        "address": address_text(sd.address),
        "arbiters": sorted(address_text(a) for a in sd.arbiters),
        "hosts": sorted(address_text(a) for a in sd.hosts),
        "passives": sorted(address_text(a) for a in sd.passives),
        "primary": None if sd.primary is None else address_text(sd.primary),
        "setName": sd.replica_set_name,
        "type": sd.server_type.name,
    }


def _expected_server_document(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "address": address_text(address(spec["address"])),
        "arbiters": sorted(address_text(address(a)) for a in spec.get("arbiters", [])),
        "hosts": sorted(address_text(address(a)) for a in spec.get("hosts", [])),
        "passives": sorted(address_text(address(a)) for a in spec.get("passives", [])),
        "primary": None if spec.get("primary") is None else address_text(address(spec["primary"])),
        "setName": spec.get("setName"),
        "type": server_type(spec["type"]).name,
    }


def _topology_document(td: TopologyDescription) -> dict[str, Any]:
    servers = sorted(td.server_descriptions().values(), key=lambda sd: address_text(sd.address))
    return {
        "topologyType": td.topology_type.name,
        "setName": td.replica_set_name,
        "servers": [_server_document(sd) for sd in servers],
    }


def _expected_topology_document(spec: Mapping[str, Any]) -> dict[str, Any]:
    servers = [_expected_server_document(s) for s in spec.get("servers", [])]
    return {
        "topologyType": spec["topologyType"],
        "setName": spec.get("setName"),
        "servers": sorted(servers, key=lambda s: s["address"]),
    }


def _event_document(event: SdamEvent) -> dict[str, Any]:
    if isinstance(event, TopologyOpeningEvent):
        return {"topology_opening_event": {}}
    if isinstance(event, ServerOpeningEvent):
        return {"server_opening_event": {"address": address_text(event.server_address)}}
    if isinstance(event, ServerClosedEvent):
        return {"server_closed_event": {"address": address_text(event.server_address)}}
    if isinstance(event, ServerDescriptionChangedEvent):
        return {
            "server_description_changed_event": {
                "address": address_text(event.server_address),
                "previousDescription": _server_document(event.previous_description),
                "newDescription": _server_document(event.new_description),
            }
        }
    if isinstance(event, TopologyDescriptionChangedEvent):
        return {
            "topology_description_changed_event": {
                "previousDescription": _topology_document(event.previous_description),
                "newDescription": _topology_document(event.new_description),
            }
        }
    return {type(event).__name__: {}}


def _expected_event_document(spec: Mapping[str, Any]) -> dict[str, Any]:
    ((name, body),) = spec.items()
    if name == "topology_opening_event":
        return {name: {}}
    if name in ("server_opening_event", "server_closed_event"):
        return {name: {"address": address_text(address(body["address"]))}}
    if name == "server_description_changed_event":
        return {
            name: {
                "address": address_text(address(body["address"])),
                "previousDescription": _expected_server_document(body["previousDescription"]),
                "newDescription": _expected_server_document(body["newDescription"]),
            }
        }
    if name == "topology_description_changed_event":
        return {
            name: {
                "previousDescription": _expected_topology_document(body["previousDescription"]),
                "newDescription": _expected_topology_document(body["newDescription"]),
            }
        }
    raise AssertionError(f"unknown event type in the test file: {name}")


def _check_events(sim: SimulatedTopology, expected: list[Mapping[str, Any]]) -> None:
    got = [_event_document(e) for e in sim.events]
    want = [_expected_event_document(e) for e in expected]
    if got != want:
        lines = [f"{len(got)} events published, {len(want)} expected"]
        for index in range(max(len(got), len(want))):
            g = got[index] if index < len(got) else None
            w = want[index] if index < len(want) else None
            mark = "  " if g == w else "!!"
            lines.append(f"{mark} #{index}: got {g}\n      expected {w}")
        raise AssertionError("\n".join(lines))


def _run_file(test: Mapping[str, Any]) -> None:
    sim = SimulatedTopology(settings_from_uri(test["uri"]))
    for number, phase in enumerate(test["phases"], start=1):
        try:
            for where, reply in phase.get("responses", []):
                sim.hello(address(where), reply)
            for error in phase.get("applicationErrors", []):
                sim.application_error(error)
            outcome = phase["outcome"]
            if "events" in outcome:
                _check_events(sim, outcome["events"])
                sim.events.clear()
            else:
                _check_outcome(sim, outcome)
        except AssertionError as exc:
            title = phase.get("description") or f"phase {number}"
            raise AssertionError(f"{title}: {exc}") from None


def _collect(tests_dir: Path) -> Iterator[SpecCase]:
    for fmt in FORMATS:
        paths = list(json_files(tests_dir / fmt))
        tests = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
        names = unique_names([t.get("description", p.stem) for p, t in zip(paths, tests)])
        for path, test, name in zip(paths, tests, names):

            def run(ctx: RunContext, test: Mapping[str, Any] = test) -> None:
                _run_file(from_extended_json(test))

            yield SpecCase(suite=NAME, file=relative_file(tests_dir, path), name=name, run=run)


_collect_unified = unified_collector(NAME, directories=("unified",), standalone=True, auth=True)


def _collect_all(tests_dir: Path) -> Iterator[SpecCase]:
    yield from _collect(tests_dir)
    yield from _collect_unified(tests_dir)


SUITE = Suite(name=NAME, collect=_collect_all, needs_server=True)
