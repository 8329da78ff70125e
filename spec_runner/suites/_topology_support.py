"""What the server-less topology suites share: reading their JSON, their URIs, servers and read preferences."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

from mongio.errors import ConfigurationError
from mongio.topology.server_description import Address, ServerDescription, format_address, parse_address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings

# Test servers that do not state a wire version get one the driver supports: the selection tables are
# about types, tags and times, not about wire compatibility.
DEFAULT_TEST_WIRE_VERSION = 21


def json_files(directory: Path) -> Iterator[Path]:
    """The ``.json`` files under ``directory`` (``.yml`` twins are ignored), sorted, if it exists."""
    if directory.is_dir():
        yield from sorted(directory.rglob("*.json"))


def load_json(path: Path) -> Any:
    return from_extended_json(json.loads(path.read_text(encoding="utf-8")))


def from_extended_json(value: Any) -> Any:
    """Turn the few Extended JSON forms these suites use into driver values (``$oid``, ``$numberLong``)."""
    if isinstance(value, list):
        return [from_extended_json(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        if "$oid" in value:
            from mongio.bson.objectid import ObjectId

            return ObjectId(value["$oid"])
        if "$numberLong" in value:
            return int(value["$numberLong"])
    return {k: from_extended_json(v) for k, v in value.items()}


def address(text: str) -> Address:
    return parse_address(text)


def address_text(value: Address) -> str:
    return format_address(value)


_TRUE = {"true", "1", "yes"}


def settings_from_uri(uri: str, heartbeat_frequency_ms: float | None = None) -> TopologySettings:
    """The topology settings a ``mongodb://`` test URI asks for (hosts, replicaSet, directConnection,
    loadBalanced, heartbeatFrequencyMS, localThresholdMS, srvMaxHosts)."""
    if not uri.startswith("mongodb://"):
        raise ValueError(f"unsupported test URI {uri!r}")
    rest = uri[len("mongodb://") :]
    hosts_part, _, tail = rest.partition("/")
    if "?" in hosts_part:  # "mongodb://a?x=y" without the slash
        hosts_part, _, query = hosts_part.partition("?")
    else:
        _, _, query = tail.partition("?")
    seeds = tuple(dict.fromkeys(parse_address(unquote(h)) for h in hosts_part.split(",") if h))
    options = {k.lower(): v for k, v in parse_qsl(query)}
    kwargs: dict[str, Any] = {}
    if "replicaset" in options:
        kwargs["replica_set_name"] = options["replicaset"]
    if "directconnection" in options:
        kwargs["direct_connection"] = options["directconnection"].lower() in _TRUE
    if "loadbalanced" in options:
        kwargs["load_balanced"] = options["loadbalanced"].lower() in _TRUE
    if "heartbeatfrequencyms" in options:
        kwargs["heartbeat_frequency"] = float(options["heartbeatfrequencyms"]) / 1000
    if "localthresholdms" in options:
        kwargs["local_threshold_ms"] = float(options["localthresholdms"])
    if "srvmaxhosts" in options:
        kwargs["srv_max_hosts"] = int(options["srvmaxhosts"])
    if heartbeat_frequency_ms is not None:
        kwargs["heartbeat_frequency"] = heartbeat_frequency_ms / 1000
    return TopologySettings(seeds=seeds, **kwargs)


def server_type(name: str) -> ServerType:
    """A spec ServerType name; ``PossiblePrimary`` is ``Unknown`` for an asynchronous driver."""
    if name == "PossiblePrimary":
        return ServerType.Unknown
    return ServerType[name]


def server_from_table(spec: Mapping[str, Any]) -> ServerDescription:
    """A server of a selection test's ``topology_description`` (times in the file are milliseconds)."""
    hello: dict[str, Any] = {
        "ok": 1,
        "minWireVersion": 0,
        "maxWireVersion": spec.get("maxWireVersion", DEFAULT_TEST_WIRE_VERSION),
    }
    if "tags" in spec:
        hello["tags"] = spec["tags"]
    last_write = (spec.get("lastWrite") or {}).get("lastWriteDate")
    if last_write is not None:
        hello["lastWrite"] = {"lastWriteDate": datetime.fromtimestamp(int(last_write) / 1000, tz=UTC)}
    rtt = spec.get("avg_rtt_ms")
    last_update = spec.get("lastUpdateTime")
    return ServerDescription(
        parse_address(spec["address"]),
        hello,
        round_trip_time=None if rtt is None else float(rtt) / 1000,
        last_update_time=None if last_update is None else float(last_update) / 1000,
        server_type=server_type(spec["type"]),
    )


def read_preference(document: Mapping[str, Any] | None) -> Any:
    """The driver's read preference for a test document (mode names in any case; default primary).

    Raises what the read preference classes raise for an invalid combination (e.g. primary with
    ``maxStalenessSeconds``, or a staleness of 0).
    """
    from mongio.options.read_preference import make_read_preference, read_pref_mode_from_name

    document = document or {}
    mode = read_pref_mode_from_name(str(document.get("mode", "primary")))
    max_staleness = document.get("maxStalenessSeconds")
    return make_read_preference(
        mode, document.get("tag_sets"), -1 if max_staleness is None else max_staleness
    )


def run_selection_table(test: Mapping[str, Any]) -> None:
    """One server-selection or max-staleness table: build the topology and read preference, select, and
    compare the suitable servers and those in the latency window (or expect an error)."""
    from mongio.topology.selection import select_servers, suitable_servers
    from mongio.topology.topology_description import TopologyDescription
    from mongio.topology.topology_type import TopologyType

    table = test["topology_description"]
    servers = [server_from_table(s) for s in table.get("servers", [])]
    settings = TopologySettings(
        seeds=tuple(sd.address for sd in servers),
        heartbeat_frequency=test.get("heartbeatFrequencyMS", 10_000) / 1000,
    )
    td = TopologyDescription(
        TopologyType[table["type"]], {sd.address: sd for sd in servers}, None, None, None, settings
    )
    is_write = test.get("operation", "read") == "write"
    deprioritized = {parse_address(s["address"]) for s in test.get("deprioritized_servers", [])}

    if test.get("error"):
        try:
            rp = read_preference(test.get("read_preference"))
            select_servers(td, None if is_write else rp, is_write=is_write, deprioritized=deprioritized)
        except (ValueError, TypeError, ConfigurationError):
            return
        raise AssertionError("selection should have raised an error for this read preference")

    rp = None if is_write else read_preference(test.get("read_preference"))

    def names(descriptions: Any) -> list[str]:
        return sorted(format_address(sd.address) for sd in descriptions)

    def expected(key: str) -> list[str]:
        return sorted(format_address(parse_address(s["address"])) for s in test[key])

    if "suitable_servers" in test:
        got = names(suitable_servers(td, rp, is_write=is_write, deprioritized=deprioritized))
        want = expected("suitable_servers")
        if got != want:
            raise AssertionError(f"suitable servers {got}, expected {want}")
    if "in_latency_window" in test:
        got = names(select_servers(td, rp, is_write=is_write, deprioritized=deprioritized))
        want = expected("in_latency_window")
        if got != want:
            raise AssertionError(f"servers in the latency window {got}, expected {want}")
