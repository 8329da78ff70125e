"""runOnRequirements against server facts."""

from __future__ import annotations

from typing import Any

import pytest
from spec_runner.unified.requirements import (
    ServerFacts,
    parse_version,
    server_version,
    shards_use_replica_sets,
    topology_from_hello,
    unmet_requirement,
    unmet_requirements,
)

from mongio.bson.int64 import Int64

REPLICA_SET = ServerFacts(
    version=(7, 0, 2),
    topology="replicaset",
    server_parameters={
        "enableTestCommands": True,
        "transactionLifetimeLimitSeconds": 60,
        "authenticationMechanisms": ["SCRAM-SHA-1", "SCRAM-SHA-256"],
    },
)


@pytest.mark.parametrize(
    ("text", "version"),
    [("4.0.10", (4, 0, 10)), ("4.2", (4, 2, 0)), ("5", (5, 0, 0)), ("4.9.0-alpha4-271-g7d5cf02", (4, 9, 0))],
)
def test_parse_version(text: str, version: tuple[int, int, int]) -> None:
    assert parse_version(text) == version


def test_versions_compare_numerically() -> None:
    assert parse_version("4.0.10") > parse_version("4.0.9")
    assert parse_version("4.0.10") < parse_version("4.2.0")


def test_server_version_uses_version_array() -> None:
    assert server_version({"version": "7.0.2-rc1", "versionArray": [7, 0, 2, -50]}) == (7, 0, 2)
    assert server_version({"version": "6.0.1"}) == (6, 0, 1)


@pytest.mark.parametrize(
    ("hello", "load_balanced", "topology"),
    [
        ({"isWritablePrimary": True}, False, "single"),
        ({"isWritablePrimary": True, "setName": "rs0"}, False, "replicaset"),
        ({"msg": "isdbgrid"}, False, "sharded"),
        ({"msg": "isdbgrid"}, True, "load-balanced"),
    ],
)
def test_topology_from_hello(hello: dict[str, Any], load_balanced: bool, topology: str) -> None:
    assert topology_from_hello(hello, load_balanced=load_balanced) == topology


def test_shards_use_replica_sets() -> None:
    assert shards_use_replica_sets([{"host": "rs0/a:1,b:2"}, {"host": "rs1/c:3"}])
    assert not shards_use_replica_sets([{"host": "rs0/a:1"}, {"host": "c:3"}])


def test_empty_requirements_are_met() -> None:
    assert unmet_requirements(None, REPLICA_SET) is None
    assert unmet_requirements([], REPLICA_SET) is None


@pytest.mark.parametrize(
    ("requirement", "reason"),
    [
        ({"minServerVersion": "7.0.2"}, None),
        ({"minServerVersion": "7.0.3"}, "minServerVersion 7.0.3 (server is 7.0.2)"),
        ({"maxServerVersion": "7.0"}, "maxServerVersion 7.0 (server is 7.0.2)"),
        ({"maxServerVersion": "7.0.2"}, None),
        ({"minServerVersion": "4.4", "maxServerVersion": "8.0.99"}, None),
        ({"topologies": ["single", "replicaset"]}, None),
        (
            {"topologies": ["sharded", "load-balanced"]},
            "topologies ['sharded', 'load-balanced'] (server is replicaset)",
        ),
        ({"serverless": "forbid"}, None),
        ({"serverless": "allow"}, None),
        ({"serverless": "require"}, "serverless: require (not running against serverless)"),
        ({"auth": False}, None),
        ({"auth": True}, "auth: true (authentication is disabled)"),
        ({"authMechanism": "scram-sha-256"}, None),
        (
            {"authMechanism": "MONGODB-X509"},
            "authMechanism MONGODB-X509 (server offers ['SCRAM-SHA-1', 'SCRAM-SHA-256'])",
        ),
        ({"serverParameters": {"enableTestCommands": True}}, None),
        (
            {"serverParameters": {"enableTestCommands": False}},
            "serverParameters enableTestCommands=False (server has True)",
        ),
        (
            {"serverParameters": {"enableTestCommands": 1}},
            "serverParameters enableTestCommands=1 (server has True)",
        ),
        ({"serverParameters": {"transactionLifetimeLimitSeconds": 60.0}}, None),
        ({"serverParameters": {"transactionLifetimeLimitSeconds": Int64(60)}}, None),
        (
            {"serverParameters": {"transactionLifetimeLimitSeconds": 61}},
            "serverParameters transactionLifetimeLimitSeconds=61 (server has 60)",
        ),
        (
            {"serverParameters": {"noSuchParameter": 1}},
            "serverParameters noSuchParameter=1 (server has no such parameter)",
        ),
        ({"csfle": False}, None),
        ({"csfle": True}, "csfle (no libmongocrypt: the mongio[encryption] extra, pymongocrypt, is not installed)"),
    ],
)
def test_single_requirement(requirement: dict[str, Any], reason: str | None) -> None:
    assert unmet_requirement(requirement, REPLICA_SET) == reason


def test_sharded_and_sharded_replicaset() -> None:
    plain_shards = ServerFacts(version=(7, 0, 0), topology="sharded")
    replica_shards = ServerFacts(version=(7, 0, 0), topology="sharded", shards_are_replica_sets=True)
    assert unmet_requirement({"topologies": ["sharded"]}, plain_shards) is None
    reason = unmet_requirement({"topologies": ["sharded-replicaset"]}, plain_shards)
    assert reason is not None and "shards are not all replica sets" in reason
    assert unmet_requirement({"topologies": ["sharded-replicaset"]}, replica_shards) is None
    assert unmet_requirement({"topologies": ["sharded"]}, replica_shards) is None


def test_serverless_forbid_when_serverless() -> None:
    facts = ServerFacts(version=(7, 0, 0), topology="load-balanced", serverless=True)
    assert (
        unmet_requirement({"serverless": "forbid"}, facts)
        == "serverless: forbid (running against serverless)"
    )
    assert unmet_requirement({"serverless": "require"}, facts) is None


def test_auth_true_with_auth_enabled() -> None:
    facts = ServerFacts(version=(7, 0, 0), topology="single", auth_enabled=True)
    assert unmet_requirement({"auth": True}, facts) is None
    assert unmet_requirement({"auth": False}, facts) == "auth: false (authentication is enabled)"


def test_unreadable_server_parameters() -> None:
    facts = ServerFacts(version=(7, 0, 0), topology="single", server_parameters=None)
    reason = unmet_requirement({"serverParameters": {"x": 1}}, facts)
    assert reason is not None and "could not be read" in reason
    reason = unmet_requirement({"authMechanism": "PLAIN"}, facts)
    assert reason is not None and "does not report" in reason


def test_csfle_requirements() -> None:
    facts = ServerFacts(
        version=(7, 0, 0), topology="single", csfle_available=True, libmongocrypt_version=(1, 8, 0)
    )
    assert unmet_requirement({"csfle": True}, facts) is None
    assert unmet_requirement({"csfle": {"minLibmongocryptVersion": "1.8"}}, facts) is None
    assert (
        unmet_requirement({"csfle": {"minLibmongocryptVersion": "1.9.0"}}, facts)
        == "csfle.minLibmongocryptVersion 1.9.0 (libmongocrypt is 1.8.0)"
    )
    assert unmet_requirement({"csfle": False}, facts) == "csfle: false (client-side encryption is available)"
    old_server = ServerFacts(version=(4, 0, 0), topology="single", csfle_available=True)
    assert unmet_requirement({"csfle": True}, old_server) == "csfle (needs server 4.2.0, server is 4.0.0)"
    assert unmet_requirement({"csfle": False}, old_server) is None


def test_any_satisfied_requirement_is_enough() -> None:
    requirements: list[dict[str, Any]] = [{"minServerVersion": "8.0"}, {"topologies": ["replicaset"]}]
    assert unmet_requirements(requirements, REPLICA_SET) is None


def test_reasons_of_all_unmet_requirements() -> None:
    requirements: list[dict[str, Any]] = [{"minServerVersion": "8.0"}, {"topologies": ["single"]}]
    assert unmet_requirements(requirements, REPLICA_SET) == (
        "no runOnRequirement met: minServerVersion 8.0 (server is 7.0.2); "
        "topologies ['single'] (server is replicaset)"
    )
    assert unmet_requirements(requirements[:1], REPLICA_SET) == (
        "runOnRequirement not met: minServerVersion 8.0 (server is 7.0.2)"
    )


def test_facts_from_replies() -> None:
    facts = ServerFacts.from_replies(
        hello={"msg": "isdbgrid"},
        build_info={"version": "8.0.1", "versionArray": [8, 0, 1, 0]},
        parameters={"authenticationMechanisms": ["SCRAM-SHA-256"]},
        shards=[{"_id": "s0", "host": "s0/a:1"}],
        libmongocrypt_version="1.11.0",
    )
    assert facts.version == (8, 0, 1)
    assert facts.topology == "sharded"
    assert facts.shards_are_replica_sets
    assert facts.libmongocrypt_version == (1, 11, 0)
    assert (
        unmet_requirement({"topologies": ["sharded-replicaset"], "authMechanism": "SCRAM-SHA-256"}, facts)
        is None
    )
    load_balanced = ServerFacts.from_replies(
        hello={"msg": "isdbgrid"}, build_info={"version": "8.0.1"}, load_balanced=True
    )
    assert load_balanced.topology == "load-balanced"
    assert unmet_requirement({"topologies": ["load-balanced"]}, load_balanced) is None
    assert unmet_requirement({"topologies": ["sharded"]}, load_balanced) is not None
