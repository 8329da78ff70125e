"""``runOnRequirements``: whether the server (and the driver) a test would run against satisfies them.

Pure: the facts are gathered elsewhere (``hello``, ``buildInfo``, ``getParameter``, the ``config.shards``
documents, how the runner was configured) and passed in as a ``ServerFacts``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_runner.unified.matcher import values_equal

Version = tuple[int, int, int]

TOPOLOGIES = frozenset({"single", "replicaset", "sharded", "sharded-replicaset", "load-balanced"})

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(text: str) -> Version:
    """``"4.9.0-alpha4-271-g7d5cf02"`` -> ``(4, 9, 0)``; missing minor or patch parts are zero."""
    found = _VERSION.match(text.strip())
    if found is None:
        raise ValueError(f"not a version string: {text!r}")
    major, minor, patch = found.groups()
    return int(major), int(minor or 0), int(patch or 0)


def format_version(version: Sequence[int]) -> str:
    return ".".join(str(part) for part in version)


def server_version(build_info: Mapping[str, Any]) -> Version:
    """The server version from a ``buildInfo`` reply: the first three ``versionArray`` elements."""
    array = build_info.get("versionArray")
    if isinstance(array, list | tuple) and len(array) >= 3:
        return int(array[0]), int(array[1]), int(array[2])
    return parse_version(str(build_info["version"]))


def topology_from_hello(hello: Mapping[str, Any], *, load_balanced: bool = False) -> str:
    """``single``, ``replicaset``, ``sharded`` or ``load-balanced`` from a ``hello`` reply and the client's
    ``loadBalanced`` setting (a load balancer's reply looks like a mongos')."""
    if load_balanced:
        return "load-balanced"
    if hello.get("msg") == "isdbgrid":
        return "sharded"
    if "setName" in hello:
        return "replicaset"
    return "single"


def shards_use_replica_sets(shards: Iterable[Mapping[str, Any]]) -> bool:
    """Whether every ``config.shards`` document's ``host`` is a replica set seed list (``rs0/h1:1,h2:2``)."""
    return all("/" in str(shard.get("host", "")) for shard in shards)


@dataclass(frozen=True)
class ServerFacts:
    """What the requirements are checked against.

    ``server_parameters`` is the ``getParameter: "*"`` reply (``None`` if it could not be read);
    ``csfle_available`` says whether the driver has libmongocrypt and crypt_shared or mongocryptd.
    """

    version: Version
    topology: str
    shards_are_replica_sets: bool = False
    serverless: bool = False
    auth_enabled: bool = False
    server_parameters: Mapping[str, Any] | None = None
    csfle_available: bool = False
    libmongocrypt_version: Version | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_replies(
        cls,
        *,
        hello: Mapping[str, Any],
        build_info: Mapping[str, Any],
        parameters: Mapping[str, Any] | None = None,
        shards: Iterable[Mapping[str, Any]] | None = None,
        load_balanced: bool = False,
        auth_enabled: bool = False,
        serverless: bool = False,
        csfle_available: bool = False,
        libmongocrypt_version: str | None = None,
    ) -> ServerFacts:
        """Facts from the server's replies plus what the runner knows of its own configuration."""
        topology = topology_from_hello(hello, load_balanced=load_balanced)
        # Behind a load balancer the shards are replica sets (load balancing came with 5.0).
        replica_shards = topology == "load-balanced" or (
            topology == "sharded" and shards is not None and shards_use_replica_sets(shards)
        )
        return cls(
            version=server_version(build_info),
            topology=topology,
            shards_are_replica_sets=replica_shards,
            serverless=serverless,
            auth_enabled=auth_enabled,
            server_parameters=parameters,
            csfle_available=csfle_available,
            libmongocrypt_version=None
            if libmongocrypt_version is None
            else parse_version(libmongocrypt_version),
        )

    def matches_topology(self, name: str) -> bool:
        if name == "sharded":
            return self.topology == "sharded"  # any sharded cluster, whatever backs its shards
        if name == "sharded-replicaset":
            return self.topology == "sharded" and self.shards_are_replica_sets
        return self.topology == name


def unmet_requirement(requirement: Mapping[str, Any], facts: ServerFacts) -> str | None:
    """``None`` when the one ``runOnRequirement`` is satisfied, else a reason naming what is not, with the
    server's fact."""
    have = format_version(facts.version)
    minimum = requirement.get("minServerVersion")
    if minimum is not None and facts.version < parse_version(minimum):
        return f"minServerVersion {minimum} (server is {have})"
    maximum = requirement.get("maxServerVersion")
    if maximum is not None and facts.version > parse_version(maximum):
        return f"maxServerVersion {maximum} (server is {have})"
    topologies = requirement.get("topologies")
    if topologies is not None and not any(facts.matches_topology(t) for t in topologies):
        shown = facts.topology
        if facts.topology == "sharded" and not facts.shards_are_replica_sets:
            shown += " (shards are not all replica sets)"
        return f"topologies {list(topologies)} (server is {shown})"
    serverless = requirement.get("serverless", "allow")
    if serverless == "require" and not facts.serverless:
        return "serverless: require (not running against serverless)"
    if serverless == "forbid" and facts.serverless:
        return "serverless: forbid (running against serverless)"
    auth = requirement.get("auth")
    if auth is not None and bool(auth) != facts.auth_enabled:
        state = "enabled" if facts.auth_enabled else "disabled"
        return f"auth: {str(auth).lower()} (authentication is {state})"
    mechanism = requirement.get("authMechanism")
    if mechanism is not None:
        reason = _unmet_auth_mechanism(str(mechanism), facts)
        if reason is not None:
            return reason
    parameters = requirement.get("serverParameters")
    if parameters:
        reason = _unmet_parameters(parameters, facts)
        if reason is not None:
            return reason
    csfle = requirement.get("csfle")
    if csfle is not None and csfle is not False:
        reason = _unmet_csfle(csfle, facts)
        if reason is not None:
            return reason
    if csfle is False and _csfle_supported(facts):
        return "csfle: false (client-side encryption is available)"
    return None


def unmet_requirements(requirements: Sequence[Mapping[str, Any]] | None, facts: ServerFacts) -> str | None:
    """``None`` when there are no requirements or one of them is satisfied; else every reason, joined."""
    if not requirements:
        return None
    reasons = []
    for requirement in requirements:
        reason = unmet_requirement(requirement, facts)
        if reason is None:
            return None
        reasons.append(reason)
    if len(reasons) == 1:
        return f"runOnRequirement not met: {reasons[0]}"
    return "no runOnRequirement met: " + "; ".join(reasons)


def _unmet_auth_mechanism(mechanism: str, facts: ServerFacts) -> str | None:
    parameters = facts.server_parameters or {}
    offered = parameters.get("authenticationMechanisms")
    if isinstance(offered, str):
        offered = offered.split(",")
    if not isinstance(offered, list | tuple):
        return f"authMechanism {mechanism} (server does not report authenticationMechanisms)"
    if mechanism.casefold() not in {str(m).casefold() for m in offered}:
        return f"authMechanism {mechanism} (server offers {list(offered)})"
    return None


def _unmet_parameters(wanted: Mapping[str, Any], facts: ServerFacts) -> str | None:
    if facts.server_parameters is None:
        return f"serverParameters {dict(wanted)} (server parameters could not be read)"
    for name, value in wanted.items():
        if name not in facts.server_parameters:
            return f"serverParameters {name}={value!r} (server has no such parameter)"
        actual = facts.server_parameters[name]
        if not values_equal(value, actual):
            return f"serverParameters {name}={value!r} (server has {actual!r})"
    return None


def _csfle_supported(facts: ServerFacts) -> bool:
    return facts.csfle_available and facts.version >= (4, 2, 0)


def _unmet_csfle(csfle: Any, facts: ServerFacts) -> str | None:
    if not facts.csfle_available:
        return "csfle (no libmongocrypt: the mongio[encryption] extra, pymongocrypt, is not installed)"
    if facts.version < (4, 2, 0):
        return f"csfle (needs server 4.2.0, server is {format_version(facts.version)})"
    if isinstance(csfle, Mapping) and "minLibmongocryptVersion" in csfle:
        minimum = parse_version(csfle["minLibmongocryptVersion"])
        have = facts.libmongocrypt_version
        if have is None or have < minimum:
            shown = "unknown" if have is None else format_version(have)
            return f"csfle.minLibmongocryptVersion {format_version(minimum)} (libmongocrypt is {shown})"
    return None
