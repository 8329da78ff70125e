"""Legacy-format files (client-side-encryption/tests/legacy) rewritten as unified files: each part of the legacy
README's procedure lands where the unified runner does the same step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spec_runner.model import specs_root
from spec_runner.unified.legacy import is_legacy_file, legacy_cases, load_legacy, to_unified

LEGACY_DIR = specs_root() / "client-side-encryption" / "tests" / "legacy"
KEY = {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "04"}}
SCHEMA = {"properties": {"s": {"encrypt": {"keyId": [KEY], "algorithm": "x"}}}, "bsonType": "object"}

LEGACY: dict[str, Any] = {
    "runOn": [{"minServerVersion": "4.1.10", "topology": ["replicaset"]}],
    "database_name": "default",
    "collection_name": "default",
    "data": [{"_id": 1}],
    "json_schema": SCHEMA,
    "key_vault_data": [{"_id": KEY, "masterKey": {"provider": "aws"}}],
    "tests": [
        {
            "description": "insert then find",
            "clientOptions": {"autoEncryptOpts": {"kmsProviders": {"aws": {}, "local": {"key": "k"}}}, "timeoutMS": 50},
            "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}},
            "operations": [
                {"name": "insertOne", "arguments": {"document": {"_id": 2}}, "result": {"insertedId": 2}},
                {"name": "insertMany", "arguments": {"documents": [{"_id": 3}], "options": {"ordered": False}}},
                {"name": "find", "arguments": {"filter": {}}, "result": {"errorContains": "boom"}},
                {"name": "runCommand", "object": "database", "command_name": "ping", "arguments": {"command": {"ping": 1}}},
                {"name": "aggregate", "collectionOptions": {"readConcern": {"level": "majority"}}, "arguments": {"pipeline": []}},
                {"name": "assertCollectionExists", "object": "testRunner", "arguments": {"database": "d", "collection": "c"}},
                {"name": "deleteOne", "arguments": {"filter": {}}, "error": True},
            ],
            "expectations": [
                {"command_started_event": {"command": {"insert": "default", "x": None}, "command_name": "insert", "database_name": "default"}}
            ],
            "outcome": {"collection": {"data": [{"_id": 1}]}},
        }
    ],
}  # fmt: skip


def test_file_level_keys_become_requirements_and_initial_data() -> None:
    unified = to_unified(LEGACY, "sample")
    assert unified["description"] == "sample" and "schemaVersion" in unified
    assert unified["runOnRequirements"] == [{"csfle": True, "minServerVersion": "4.1.10", "topologies": ["replicaset"]}]
    key_vault, collection = unified["initialData"]
    assert key_vault == {"databaseName": "keyvault", "collectionName": "datakeys", "documents": LEGACY["key_vault_data"]}
    assert collection == {
        "databaseName": "default",
        "collectionName": "default",
        "documents": [{"_id": 1}],
        "createOptions": {"validator": {"$jsonSchema": SCHEMA}},
    }


def test_client_options_become_a_client_entity_made_by_the_test() -> None:
    test = to_unified(LEGACY, "sample")["tests"][0]
    create, fail_point = test["operations"][:2]
    assert create["name"] == "createEntities" and create["object"] == "testRunner"
    client = create["arguments"]["entities"][0]["client"]
    assert client["id"] == "client0" and client["uriOptions"] == {"timeoutMS": 50}
    options = client["autoEncryptOpts"]
    assert options["keyVaultNamespace"] == "keyvault.datakeys", "the README's default"
    placeholder = {"$$placeholder": 1}
    assert options["kmsProviders"] == {
        "aws": {"accessKeyId": placeholder, "secretAccessKey": placeholder},
        "local": {"key": "k"},
    }
    ids = [next(iter(entity.values()))["id"] for entity in create["arguments"]["entities"]]
    assert ids == ["client0", "database", "collection", "failPointClient", "collection4"]
    assert fail_point["arguments"]["client"] == "failPointClient", "an encrypting client refuses configureFailPoint"


def test_operations_results_events_and_outcome_are_rewritten() -> None:
    test = to_unified(LEGACY, "sample")["tests"][0]
    insert, many, find, command, aggregate, assertion, delete = test["operations"][2:]
    assert insert == {"name": "insertOne", "object": "collection", "arguments": {"document": {"_id": 2}}, "expectResult": {"insertedId": 2}}
    assert many["arguments"] == {"documents": [{"_id": 3}], "ordered": False}
    assert find["expectError"] == {"errorContains": "boom"}
    assert command["object"] == "database" and command["arguments"]["commandName"] == "ping"
    assert aggregate["object"] == "collection4"
    assert assertion["arguments"] == {"databaseName": "d", "collectionName": "c"}
    assert delete["expectError"] == {"isError": True}
    event = test["expectEvents"][0]["events"][0]["commandStartedEvent"]
    assert test["expectEvents"][0]["client"] == "client0"
    assert event == {"command": {"insert": "default", "x": {"$$exists": False}}, "commandName": "insert", "databaseName": "default"}
    assert test["outcome"] == [{"collectionName": "default", "databaseName": "default", "documents": [{"_id": 1}]}]


def test_only_legacy_files_are_taken_for_legacy() -> None:
    assert is_legacy_file(LEGACY)
    assert not is_legacy_file({**LEGACY, "schemaVersion": "1.0"})
    assert not is_legacy_file({"description": "no tests"})


@pytest.mark.skipif(not LEGACY_DIR.is_dir(), reason="no specifications checkout")
def test_every_legacy_file_of_the_checkout_loads_as_a_unified_file() -> None:
    paths = sorted(LEGACY_DIR.glob("*.json"))
    assert paths
    for path in paths:
        loaded = load_legacy(path)
        assert loaded.tests, path
    cases = list(legacy_cases("client-side-encryption", LEGACY_DIR, _never_run))
    assert {case.file for case in cases} == {f"legacy/{path.name}" for path in paths}
    assert all(case.source is not None and Path(case.source.path).parent == LEGACY_DIR for case in cases)


async def _never_run(*_: Any) -> None:
    raise AssertionError("collecting runs nothing")
