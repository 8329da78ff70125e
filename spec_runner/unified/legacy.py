"""Legacy-format test files (the transactions specification's legacy format, as the client-side encryption
tests extend it: ``tests/legacy`` of client-side-encryption) rewritten as unified test files, so that one runner
runs both.

The rewrite follows the legacy README step by step: ``key_vault_data`` and ``data`` become ``initialData``
(the test collection created with ``json_schema`` as its ``$jsonSchema`` validator, or with
``encrypted_fields``); each test's ``clientOptions`` become a client entity ``client0`` (``autoEncryptOpts``
with ``keyVaultNamespace`` defaulting to ``keyvault.datakeys`` and the empty cloud providers as placeholders;
the other options as URI options) created by a ``createEntities`` operation with the ``database`` and
``collection`` entities; ``failPoint`` goes through a client of its own (an encrypting client refuses
``configureFailPoint``); operations keep their names and arguments, ``result`` becomes ``expectResult`` or
``expectError``; ``expectations`` become ``expectEvents`` of ``client0``; ``outcome.collection.data`` becomes
``outcome``. Works on plain JSON (Extended JSON left as it is); the result is checked and loaded like any
unified file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from spec_runner.model import SpecCase, relative_file
from spec_runner.unified import ejson
from spec_runner.unified.collect import RunOne, file_cases
from spec_runner.unified.errors import InvalidTestFile, UnifiedTestError
from spec_runner.unified.loader import (
    SUPPORTED_SCHEMA_VERSION,
    UnifiedTestFile,
    check_schema_version,
    file_test_descriptions,
    parse,
    read_plain,
)
from spec_runner.unified.schema import validate

__all__ = ["is_legacy_file", "legacy_cases", "load_legacy", "to_unified", "unified_plain"]

SCHEMA_VERSION = "1.25"
"""The format version the rewritten files state (the placeholders of kmsProviders, createEntities)."""
CLIENT = "client0"
FAIL_POINT_CLIENT = "failPointClient"
DATABASE = "database"
COLLECTION = "collection"
DEFAULT_KEY_VAULT = "keyvault.datakeys"

# The providers a legacy file names with an empty document, and the credential fields the unified format
# gives as placeholders for them (the runner fills those it can stand behind).
_PLACEHOLDER = {"$$placeholder": 1}
_PROVIDER_FIELDS = {
    "aws": ("aws", ("accessKeyId", "secretAccessKey")),
    "awsTemporary": ("aws", ("accessKeyId", "secretAccessKey", "sessionToken")),
    "awsTemporaryNoSessionToken": ("aws", ("accessKeyId", "secretAccessKey")),
    "azure": ("azure", ("tenantId", "clientId", "clientSecret")),
    "gcp": ("gcp", ("email", "privateKey")),
    "kmip": ("kmip", ("endpoint",)),
}
_ERROR_FIELDS = ("errorContains", "errorCodeName", "errorLabelsContain", "errorLabelsOmit", "isTimeoutError")
# testRunner operations whose arguments were renamed by the unified format.
_RUNNER_ARGUMENTS = {"database": "databaseName", "collection": "collectionName", "index": "indexName"}


def is_legacy_file(plain: Any) -> bool:
    """Whether a test file's plain JSON is in the legacy format (tests, and no schemaVersion)."""
    return isinstance(plain, Mapping) and "schemaVersion" not in plain and isinstance(plain.get("tests"), list)


def to_unified(legacy: Mapping[str, Any], description: str) -> dict[str, Any]:
    """The unified test file (plain JSON) that runs what the legacy file ``legacy`` describes."""
    database, collection = legacy["database_name"], legacy["collection_name"]
    return {
        "description": description,
        "schemaVersion": SCHEMA_VERSION,
        "runOnRequirements": _requirements(legacy.get("runOn")),
        "initialData": _initial_data(legacy, database, collection),
        "tests": [_test(test, database, collection) for test in legacy["tests"]],
    }


def _requirements(run_on: Any) -> list[dict[str, Any]]:
    """``runOn`` as runOnRequirements, each needing client-side encryption (the README's first condition)."""
    requirements = []
    for item in run_on or [{}]:
        requirement: dict[str, Any] = {"csfle": True}
        for key in ("minServerVersion", "maxServerVersion", "serverless"):
            if key in item:
                requirement[key] = item[key]
        if "topology" in item:
            requirement["topologies"] = item["topology"]
        requirements.append(requirement)
    return requirements


def _initial_data(legacy: Mapping[str, Any], database: str, collection: str) -> list[dict[str, Any]]:
    initial = []
    if "key_vault_data" in legacy:
        initial.append({"databaseName": "keyvault", "collectionName": "datakeys", "documents": legacy["key_vault_data"]})
    data: dict[str, Any] = {"databaseName": database, "collectionName": collection, "documents": legacy.get("data") or []}
    options: dict[str, Any] = {}
    if "json_schema" in legacy:
        options["validator"] = {"$jsonSchema": legacy["json_schema"]}
    if "encrypted_fields" in legacy:
        options["encryptedFields"] = legacy["encrypted_fields"]
    if options:
        data["createOptions"] = options
    initial.append(data)
    return initial


def _test(test: Mapping[str, Any], database: str, collection: str) -> dict[str, Any]:
    unified: dict[str, Any] = {"description": test["description"]}
    if "skipReason" in test:
        unified["skipReason"] = test["skipReason"]
    entities = _entities(test, database, collection)
    operations: list[dict[str, Any]] = [
        {"name": "createEntities", "object": "testRunner", "arguments": {"entities": entities}}
    ]
    if "failPoint" in test:
        operations.append(
            {"name": "failPoint", "object": "testRunner", "arguments": {"client": FAIL_POINT_CLIENT, "failPoint": test["failPoint"]}}
        )
    for position, operation in enumerate(test["operations"]):
        converted, extra_entities = _operation(operation, position, database, collection)
        entities.extend(extra_entities)
        operations.append(converted)
    unified["operations"] = operations
    if "expectations" in test:
        unified["expectEvents"] = [{"client": CLIENT, "events": [_event(item) for item in test["expectations"]]}]
    outcome = (test.get("outcome") or {}).get("collection")
    if outcome is not None:
        unified["outcome"] = [
            {"collectionName": outcome.get("name", collection), "databaseName": database, "documents": outcome["data"]}
        ]
    return unified


def _entities(test: Mapping[str, Any], database: str, collection: str) -> list[dict[str, Any]]:
    client_options = dict(test.get("clientOptions") or {})
    client: dict[str, Any] = {"id": CLIENT, "observeEvents": ["commandStartedEvent"]}
    if "autoEncryptOpts" in client_options:
        client["autoEncryptOpts"] = _auto_encrypt_opts(client_options.pop("autoEncryptOpts"))
    if client_options:
        client["uriOptions"] = client_options
    if test.get("useMultipleMongoses"):
        client["useMultipleMongoses"] = True
    entities: list[dict[str, Any]] = [
        {"client": client},
        {"database": {"id": DATABASE, "client": CLIENT, "databaseName": database}},
        {"collection": {"id": COLLECTION, "database": DATABASE, "collectionName": collection}},
    ]
    if "failPoint" in test:
        entities.append({"client": {"id": FAIL_POINT_CLIENT}})
    return entities


def _auto_encrypt_opts(options: Mapping[str, Any]) -> dict[str, Any]:
    converted = dict(options)
    converted.setdefault("keyVaultNamespace", DEFAULT_KEY_VAULT)
    converted["kmsProviders"] = _kms_providers(options.get("kmsProviders") or {})
    return converted


def _kms_providers(providers: Mapping[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {}
    for name, value in providers.items():
        if name in _PROVIDER_FIELDS and not value:
            kind, fields = _PROVIDER_FIELDS[name]
            converted[kind] = dict.fromkeys(fields, _PLACEHOLDER)
        else:
            converted[name] = value
    return converted


def _operation(
    operation: Mapping[str, Any], position: int, database: str, collection: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The unified operation, and the entities it needs (a collection with its own options)."""
    target = operation.get("object", "collection")
    arguments = dict(operation.get("arguments") or {})
    extra: list[dict[str, Any]] = []
    if target == "collection" and ("collectionOptions" in operation or "databaseOptions" in operation):
        if "databaseOptions" in operation:
            raise UnifiedTestError(f"operation {operation['name']!r}: databaseOptions are not supported here")
        target = f"{COLLECTION}{position}"
        extra.append(
            {"collection": {"id": target, "database": DATABASE, "collectionName": collection,
                            "collectionOptions": operation["collectionOptions"]}}
        )  # fmt: skip
    elif target == "collection":
        target = COLLECTION
    elif target == "database":
        target = DATABASE
    name = operation["name"]
    if target == "testRunner":
        arguments = {_RUNNER_ARGUMENTS.get(key, key): value for key, value in arguments.items()}
    else:
        arguments = _arguments(name, arguments, operation)
    converted: dict[str, Any] = {"name": name, "object": target}
    if arguments:
        converted["arguments"] = arguments
    if operation.get("error") is True:
        converted["expectError"] = {"isError": True}
    if "result" in operation:
        converted.update(_expectation(operation["result"]))
    return converted, extra


def _arguments(name: str, arguments: dict[str, Any], operation: Mapping[str, Any]) -> dict[str, Any]:
    options = arguments.pop("options", None)
    if isinstance(options, Mapping):
        arguments.update(options)
    if name == "runCommand":
        arguments["commandName"] = operation.get("command_name") or next(iter(arguments["command"]))
    if name == "bulkWrite":
        arguments["requests"] = [{request["name"]: request["arguments"]} for request in arguments["requests"]]
    return arguments


def _expectation(result: Any) -> dict[str, Any]:
    if isinstance(result, Mapping) and result and set(result) <= set(_ERROR_FIELDS):
        return {"expectError": dict(result)}
    return {"expectResult": result}


def _event(item: Mapping[str, Any]) -> dict[str, Any]:
    started = item["command_started_event"]
    event: dict[str, Any] = {"command": _absent_as_missing(started["command"]), "commandName": started["command_name"]}
    if "database_name" in started:
        event["databaseName"] = started["database_name"]
    return {"commandStartedEvent": event}


def _absent_as_missing(value: Any) -> Any:
    """The legacy command monitoring rule: a null in an expected command means the field is absent."""
    if isinstance(value, Mapping):
        return {key: {"$$exists": False} if child is None else _absent_as_missing(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_absent_as_missing(child) for child in value]
    return value


def unified_plain(path: Path) -> dict[str, Any]:
    """The plain JSON of the legacy file at ``path`` rewritten as a unified file."""
    return to_unified(read_plain(path), path.stem)


def load_legacy(path: Path) -> UnifiedTestFile:
    """Load a legacy file as the unified file it becomes (checked like any unified file)."""
    plain = unified_plain(path)
    version = check_schema_version(plain["schemaVersion"], SUPPORTED_SCHEMA_VERSION)
    problems = validate(plain)
    if problems:
        raise InvalidTestFile(str(path), problems)
    return parse(ejson.loads(json.dumps(plain)), path=path, version=version)


def legacy_cases(suite: str, tests_dir: Path, run_one: RunOne) -> Iterator[SpecCase]:
    """One case per test of every legacy ``.json`` file under ``tests_dir`` (``.yml`` twins ignored), run as
    the unified file it becomes; the case's file is its path under the suite's ``tests`` directory."""
    for path in sorted(tests_dir.glob("*.json")):
        if not is_legacy_file(read_plain(path)):
            continue
        file = relative_file(tests_dir.parent, path)
        yield from file_cases(suite, path, file, file_test_descriptions(path), load_legacy, run_one)
