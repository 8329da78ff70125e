"""The skip list's capability rules: each matches the tests that need what the test server cannot do, and not
their runnable neighbours; and every rule and entry skips a test of the specifications checkout (one that
skips nothing is stale)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from spec_runner.__main__ import format_skip_matches
from spec_runner.capabilities import CapabilityRule, TestProfile, runs_on_test_server
from spec_runner.fresh_server import fresh_server_matches, needs_fresh_server
from spec_runner.model import CaseSource, SpecCase
from spec_runner.skiplist import SkipEntry, load_skip_list, parse_skips, skip_matches, skip_reason

from tests.support.spec_cases import every_spec_case

CLIENT = {"client": {"id": "client0"}}


def fail_point(name: str = "failCommand", mode: Any = None, **data: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"configureFailPoint": name, "mode": mode or {"times": 1}}
    if data:
        document["data"] = data
    return {
        "name": "failPoint",
        "object": "testRunner",
        "arguments": {"client": "client0", "failPoint": document},
    }


def profile(*operations: Any, entities: Any = (CLIENT,), requirements: Any = None) -> TestProfile:
    test: dict[str, Any] = {"description": "t", "operations": list(operations)}
    if requirements is not None:
        test["runOnRequirements"] = requirements
    return TestProfile.of({"createEntities": list(entities), "tests": [test]}, test)


def real_rule(rule_id: str) -> CapabilityRule:
    """A rule as configured in spec_runner/skips.yaml."""
    for item in load_skip_list().rules:
        if item.rule.id == rule_id:
            return item.rule
    raise AssertionError(f"skips.yaml has no rule {rule_id!r}")


INSERT = {"name": "insertOne", "object": "collection0", "arguments": {"document": {"_id": 1}}}


def test_on_primary_transactional_write() -> None:
    rule = real_rule("on-primary-transactional-write")
    assert rule.matches(profile(fail_point("onPrimaryTransactionalWrite"), INSERT))
    # Nested in a transaction callback it still counts.
    callback = {
        "name": "withTransaction",
        "object": "session0",
        "arguments": {"callback": [fail_point("onPrimaryTransactionalWrite")]},
    }
    assert rule.matches(profile(callback))
    assert not rule.matches(
        profile(fail_point("failCommand", failCommands=["insert"], closeConnection=True), INSERT)
    )
    assert not rule.matches(profile(fail_point("failGetMoreAfterCursorCheckout"), INSERT))


def test_lowercase_ismaster_fail_point() -> None:
    rule = real_rule("lowercase-ismaster-fail-point")
    lowercase = fail_point(mode="alwaysOn", failCommands=["hello", "ismaster"], closeConnection=True)
    assert rule.matches(profile(lowercase))
    # The canonical spelling fires on SecantusDB; hello alone is what a monitor sends.
    assert not rule.matches(profile(fail_point(mode="alwaysOn", failCommands=["hello", "isMaster"])))
    assert not rule.matches(profile(fail_point(mode="alwaysOn", failCommands=["hello"])))
    # A client with serverApi handshakes with hello: the listing does not matter to it.
    api_client = {"client": {"id": "client0", "serverApi": {"version": "1"}}}
    assert not rule.matches(profile(lowercase, entities=[api_client]))
    # A runCommand sending ismaster is no fail point.
    command = {
        "name": "runCommand",
        "object": "db",
        "arguments": {"commandName": "ismaster", "command": {"ismaster": 1}},
    }
    assert not rule.matches(profile(command))


def test_write_concern_error_on_retried_write() -> None:
    rule = real_rule("write-concern-error-on-retried-write")
    wce = {"code": 91, "errmsg": "Replication is being shut down"}
    assert rule.matches(
        profile(fail_point(mode={"times": 2}, failCommands=["insert"], writeConcernError=wce), INSERT)
    )
    assert rule.matches(profile(fail_point(mode="alwaysOn", failCommands=["update"], writeConcernError=wce)))
    # Once only: the retry is not meant to see it.
    assert not rule.matches(
        profile(fail_point(mode={"times": 1}, failCommands=["insert"], writeConcernError=wce))
    )
    # commitTransaction retries are not covered by the limitation.
    assert not rule.matches(
        profile(fail_point(mode={"times": 2}, failCommands=["commitTransaction"], writeConcernError=wce))
    )
    # A non-retryable write concern error, or labels that leave RetryableWriteError out, cause no retry.
    assert not rule.matches(
        profile(fail_point(mode={"times": 2}, failCommands=["insert"], writeConcernError={"code": 100}))
    )
    assert not rule.matches(
        profile(
            fail_point(
                mode={"times": 2}, failCommands=["insert"], writeConcernError={**wce, "errorLabels": []}
            )
        )
    )
    # A client that does not retry writes.
    no_retry = {"client": {"id": "client0", "uriOptions": {"retryWrites": False}}}
    times_two = fail_point(mode={"times": 2}, failCommands=["insert"], writeConcernError=wce)
    assert not rule.matches(profile(times_two, entities=[no_retry]))


def bulk(*models: str, client: str = "client0") -> dict[str, Any]:
    return {
        "name": "clientBulkWrite",
        "object": client,
        "arguments": {"models": [{model: {"namespace": "db.coll"}} for model in models]},
    }


def test_retried_client_bulk_write() -> None:
    rule = real_rule("retried-client-bulk-write")
    wce = fail_point(failCommands=["bulkWrite"], writeConcernError={"code": 91, "errmsg": "shutting down"})
    assert rule.matches(profile(wce, bulk("insertOne", "updateOne", "deleteOne")))
    # A bulk write with a multi: true model is not retried.
    assert not rule.matches(profile(wce, bulk("updateMany", "deleteMany")))
    # retryWrites=false, or a fail point without a write concern error.
    no_retry = {"client": {"id": "client0", "uriOptions": {"retryWrites": False}}}
    assert not rule.matches(profile(wce, bulk("insertOne"), entities=[no_retry]))
    assert not rule.matches(profile(fail_point(failCommands=["bulkWrite"], errorCode=91), bulk("insertOne")))


def test_raw_data_rejected() -> None:
    rule = real_rule("raw-data-rejected")
    for name in ("distinct", "findOneAndDelete", "findOneAndReplace", "findOneAndUpdate", "clientBulkWrite"):
        assert rule.matches(profile({"name": name, "object": "x", "arguments": {"rawData": True}})), name
    # Commands that accept it, and rawData false.
    for name in ("find", "insertOne", "aggregate", "bulkWrite", "countDocuments", "listIndexes"):
        assert not rule.matches(profile({"name": name, "object": "x", "arguments": {"rawData": True}})), name
    assert not rule.matches(profile({"name": "distinct", "object": "x", "arguments": {"rawData": False}}))


def wait_for(count: int, event: str = "topologyDescriptionChangedEvent") -> dict[str, Any]:
    return {
        "name": "waitForEvent",
        "object": "testRunner",
        "arguments": {"client": "c", "event": {event: {}}, "count": count},
    }


def test_multi_member_discovery() -> None:
    rule = real_rule("multi-member-discovery")
    assert rule.matches(profile(wait_for(4)))
    assert rule.matches(
        profile(
            {"name": "createEntities", "object": "testRunner", "arguments": {"entities": []}}, wait_for(3)
        )
    )
    assert not rule.matches(profile(wait_for(2)))
    assert not rule.matches(profile(wait_for(4, "serverDescriptionChangedEvent")))
    # Three heartbeats at once are three servers; one server gives more only when heartbeats are frequent.
    assert rule.matches(profile(wait_for(3, "serverHeartbeatSucceededEvent")))
    assert not rule.matches(profile(wait_for(1, "serverHeartbeatSucceededEvent")))
    frequent = {"client": {"id": "client0", "uriOptions": {"heartbeatFrequencyMS": 500}}}
    assert not rule.matches(profile(wait_for(3, "serverHeartbeatSucceededEvent"), entities=[frequent]))
    assert rule.matches(profile(wait_for(4), entities=[frequent]))
    # After a fail point or a command the topology changes for other reasons than discovery.
    assert not rule.matches(profile(fail_point(failCommands=["hello"]), wait_for(4)))
    assert not rule.matches(profile({"name": "close", "object": "client0"}, wait_for(4)))


def test_server_side_javascript() -> None:
    rule = real_rule("server-side-javascript")
    where = {"name": "find", "object": "c", "arguments": {"filter": {"$where": "sleep(2000) || true"}}}
    assert rule.matches(profile(where))
    map_reduce = {
        "name": "mapReduce",
        "object": "c",
        "arguments": {"map": "f", "reduce": "g", "out": {"inline": 1}},
    }
    assert rule.matches(profile({**map_reduce, "expectResult": [{"_id": 0, "value": 6}]}))
    # A mapReduce expected to fail (retryability) runs; so does a filter mentioning "where" as a field.
    assert not rule.matches(profile({**map_reduce, "expectError": {"isError": True}}))
    assert not rule.matches(profile({"name": "find", "object": "c", "arguments": {"filter": {"where": 1}}}))


AUTO_CLIENT = {"client": {"id": "c", "autoEncryptOpts": {"keyVaultNamespace": "k.v", "kmsProviders": {"local": {}}}}}


def file_profile(initial_data: Any, test: dict[str, Any], entities: Any = (AUTO_CLIENT,)) -> TestProfile:
    document = {"createEntities": list(entities), "initialData": initial_data, "tests": [test]}
    return TestProfile.of(document, test)


def ejson_binary(data: bytes, subtype: str) -> dict[str, Any]:
    return {"$binary": {"base64": base64.b64encode(data).decode(), "subType": subtype}}


def test_server_side_queryable_encryption() -> None:
    rule = real_rule("server-side-queryable-encryption")
    created = [{"databaseName": "db", "collectionName": "c", "documents": [], "createOptions": {"encryptedFields": {}}}]
    assert rule.matches(file_profile(created, {"description": "t", "operations": []}))
    mapped = {"client": {"id": "c", "autoEncryptOpts": {"encryptedFieldsMap": {"db.c": {}}}}}
    assert rule.matches(profile(entities=[mapped]))
    drop = {"name": "dropCollection", "object": "db", "arguments": {"collection": "c", "encryptedFields": {}}}
    assert rule.matches(profile(drop))
    # A JSON schema (FLE1) and explicit encryption are not Queryable Encryption.
    assert not rule.matches(profile(entities=[AUTO_CLIENT]))
    assert not rule.matches(profile({"name": "dropCollection", "object": "db", "arguments": {"collection": "c"}}))


def test_remote_encryption_schema() -> None:
    rule = real_rule("remote-encryption-schema")
    schema = {"properties": {"ssn": {"encrypt": {"keyId": "/a", "algorithm": "x"}}}, "bsonType": "object"}
    remote = [{"databaseName": "db", "collectionName": "c", "createOptions": {"validator": {"$jsonSchema": schema}}}]
    assert rule.matches(file_profile(remote, {"description": "t", "operations": []}))
    # A validator without encryption, or the same schema given locally (schemaMap), runs.
    plain = [{"databaseName": "db", "collectionName": "c", "createOptions": {"validator": {"$jsonSchema": {}}}}]
    assert not rule.matches(file_profile(plain, {"description": "t", "operations": []}))
    local = {"client": {"id": "c", "autoEncryptOpts": {"schemaMap": {"db.c": schema}}}}
    assert not rule.matches(profile(entities=[local]))


def test_automatic_encryption_with_cloud_keys() -> None:
    rule = real_rule("automatic-encryption-with-cloud-keys")
    aws_id, local_id = bytes(16), bytes([1] * 16)
    keys = [
        {"_id": ejson_binary(aws_id, "04"), "masterKey": {"provider": "aws", "key": "arn"}},
        {"_id": ejson_binary(local_id, "04"), "masterKey": {"provider": "local"}},
    ]
    initial = [{"databaseName": "keyvault", "collectionName": "datakeys", "documents": keys}]

    def expecting(key_id: bytes, kind: int = 1) -> dict[str, Any]:
        ciphertext = ejson_binary(bytes([kind]) + key_id + b"\x02" + bytes(32), "06")
        event = {"commandStartedEvent": {"command": {"insert": "c", "documents": [{"ssn": ciphertext}]}}}
        return {"description": "t", "operations": [], "expectEvents": [{"client": "c", "events": [event]}]}

    assert rule.matches(file_profile(initial, expecting(aws_id)))
    # A local key's ciphertext, a malformed value naming no key of the vault, a subtype-6 marking (byte 0),
    # or no automatic encryption at all: the test does not need the cloud KMS.
    assert not rule.matches(file_profile(initial, expecting(local_id)))
    assert not rule.matches(file_profile(initial, expecting(bytes([9] * 16))))
    assert not rule.matches(file_profile(initial, expecting(aws_id, kind=0)))
    assert not rule.matches(file_profile(initial, expecting(aws_id), entities=[CLIENT]))


def create_data_key(provider: str, master_key: dict[str, Any] | None = None) -> dict[str, Any]:
    opts = {} if master_key is None else {"masterKey": master_key}
    return {"name": "createDataKey", "object": "ce", "arguments": {"kmsProvider": provider, "opts": opts}}


def rewrap(query: Any, provider: str = "local", master_key: dict[str, Any] | None = None) -> dict[str, Any]:
    opts: dict[str, Any] = {"provider": provider}
    if master_key is not None:
        opts["masterKey"] = master_key
    return {"name": "rewrapManyDataKey", "object": "ce", "arguments": {"filter": query, "opts": opts}}


def test_kms_host_off_loopback() -> None:
    rule = real_rule("kms-host-off-loopback")
    aws = {"key": "arn:aws:kms:us-east-1:1:key/k", "region": "us-east-1"}
    # Hosts the master key names, or the provider's default host (AWS by region, GCP's cloudkms).
    assert rule.matches(profile(create_data_key("aws", aws)))
    assert rule.matches(profile(create_data_key("aws:name1", {**aws, "region": "invalid"})))
    assert rule.matches(profile(create_data_key("azure", {"keyVaultEndpoint": "v.vault.azure.net", "keyName": "k"})))
    assert rule.matches(profile(create_data_key("gcp", {"projectId": "p", "keyRing": "r", "keyName": "k"})))
    assert rule.matches(profile(create_data_key("kmip", {"endpoint": "kmip.example.com:5696"})))
    assert rule.matches(profile(rewrap({}, "aws", aws)))
    # Loopback endpoints, a master key naming no host (refused before any request), KMIP on the provider's
    # endpoint (the runner's), the local provider.
    assert not rule.matches(profile(create_data_key("aws", {**aws, "endpoint": "127.0.0.1:8000"})))
    assert not rule.matches(profile(create_data_key("gcp", {"keyName": "k", "endpoint": "localhost:9"})))
    assert not rule.matches(profile(create_data_key("kmip", {"endpoint": "[::1]:5698"})))
    assert not rule.matches(profile(create_data_key("aws", {})))
    assert not rule.matches(profile(create_data_key("kmip"), create_data_key("kmip:name1", {"delegated": True})))
    assert not rule.matches(profile(create_data_key("local:name2"), rewrap({})))


def test_data_keys_wrapped_by_real_kms() -> None:
    rule = real_rule("data-keys-wrapped-by-real-kms")
    keys = [
        {"_id": 1, "keyAltNames": ["aws_key"], "masterKey": {"provider": "aws", "key": "arn"}},
        {"_id": 2, "keyAltNames": ["local_key"], "masterKey": {"provider": "local"}},
    ]
    initial = [{"databaseName": "keyvault", "collectionName": "datakeys", "documents": keys}]

    def running(*operations: Any, data: Any = initial) -> TestProfile:
        return file_profile(data, {"description": "t", "operations": list(operations)})

    # A rewrap unwraps the keys its filter selects: equality (in an array), $ne, and anything else as all.
    assert rule.matches(running(rewrap({})))
    assert rule.matches(running(rewrap({"keyAltNames": {"$ne": "local_key"}})))
    assert rule.matches(running(rewrap({"keyAltNames": "aws_key"})))
    assert rule.matches(running(rewrap({"keyAltNames": {"$in": ["local_key"]}})))
    assert not rule.matches(running(rewrap({"keyAltNames": "local_key"})))
    assert not rule.matches(running(rewrap({"keyAltNames": {"$ne": "aws_key"}})))
    assert not rule.matches(running(rewrap({"keyAltNames": "no_matching_keys"}, "aws")))
    # Explicit encryption or decryption with such keys in the vault; reading keys unwraps nothing.
    assert rule.matches(running({"name": "decrypt", "object": "ce", "arguments": {"value": 1}}))
    assert not rule.matches(running({"name": "getKey", "object": "ce", "arguments": {"id": 1}}))
    local_only = [{**initial[0], "documents": keys[1:]}]
    assert not rule.matches(running({"name": "encrypt", "object": "ce", "arguments": {}}, data=local_only))


def test_missing_server_parameter() -> None:
    rule = real_rule("missing-server-parameter")
    needs = {"serverParameters": {"enableTestCommands": True, "acceptApiVersion2": True}}
    assert rule.matches(profile(requirements=[needs]))
    assert rule.matches(profile(requirements=[{"serverParameters": {"requireApiVersion": False}}]))
    # Parameters SecantusDB has, or an alternative that needs none of the missing ones.
    assert not rule.matches(profile(requirements=[{"serverParameters": {"enableTestCommands": True}}]))
    assert not rule.matches(profile(requirements=[needs, {"minServerVersion": "5.0"}]))
    assert not rule.matches(profile())


def test_requirements_the_test_server_cannot_meet_keep_their_own_reason() -> None:
    test = {"description": "t", "operations": []}
    assert runs_on_test_server({}, test)
    assert runs_on_test_server({"runOnRequirements": [{"topologies": ["single", "replicaset"]}]}, test)
    assert not runs_on_test_server({"runOnRequirements": [{"topologies": ["sharded"]}]}, test)
    assert not runs_on_test_server({}, {**test, "runOnRequirements": [{"maxServerVersion": "8.1.99"}]})
    assert not runs_on_test_server({}, {**test, "runOnRequirements": [{"minServerVersion": "9.0"}]})
    assert not runs_on_test_server({}, {**test, "runOnRequirements": [{"serverless": "require"}]})
    assert not runs_on_test_server({}, {**test, "skipReason": "DRIVERS-2280"})
    # One satisfiable alternative is enough.
    assert runs_on_test_server(
        {"runOnRequirements": [{"topologies": ["sharded"]}, {"minServerVersion": "4.4"}]}, test
    )


def write_case(tmp_path: Path, suite: str, tests: list[dict[str, Any]], **top: Any) -> list[SpecCase]:
    path = tmp_path / f"{suite}-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({"schemaVersion": "1.0", "createEntities": [CLIENT], **top, "tests": tests}))
    return [
        SpecCase(
            suite=suite,
            file=path.name,
            name=test["description"],
            run=lambda c: None,
            source=CaseSource(path, i),
        )
        for i, test in enumerate(tests)
    ]


RULES_YAML = [
    {
        "rule": "opw",
        "kind": "fail-point-named",
        "names": ["onPrimaryTransactionalWrite"],
        "reason": "ignored",
        "suites": ["retryable-*"],
    },
    {"suite": "retryable-writes", "file": "*", "test": "named", "reason": "named entry"},
]


def test_skip_list_applies_named_entries_first_then_rules_within_their_suites(tmp_path: Path) -> None:
    skips = parse_skips(RULES_YAML)
    tests = [
        {"description": "named", "operations": [fail_point("onPrimaryTransactionalWrite")]},
        {"description": "by rule", "operations": [fail_point("onPrimaryTransactionalWrite")]},
        {"description": "runs", "operations": [fail_point("failCommand", failCommands=["insert"])]},
    ]
    named, by_rule, runs = write_case(tmp_path, "retryable-writes", tests)
    assert isinstance(skips.first_match(named), SkipEntry)
    match = skips.first_match(by_rule)
    assert match is not None and match.reason == "ignored"
    assert skips.first_match(runs) is None
    # Another suite than the rule's, and a test its requirements keep off the server anyway.
    (elsewhere,) = write_case(tmp_path, "crud", tests[1:2])
    assert skips.first_match(elsewhere) is None
    (sharded,) = write_case(
        tmp_path, "retryable-writes", tests[1:2], runOnRequirements=[{"topologies": ["sharded"]}]
    )
    assert skips.first_match(sharded) is None
    # A case without a unified source (another format) is never taken by a rule.
    assert (
        skips.first_match(SpecCase(suite="retryable-writes", file="x", name="by rule", run=lambda c: None))
        is None
    )
    shown = skip_matches([named, by_rule, runs], skips)
    assert [case.name for case in shown.by_entry["rule opw (fail-point-named)"]] == ["by rule"]


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"rule": "r", "kind": "no-such-kind", "reason": "x"}, "unknown kind"),
        ({"rule": "r", "kind": "fail-point-named", "reason": "x"}, r"takes parameters \['names'\]"),
        (
            {"rule": "r", "kind": "fail-point-named", "names": ["a"], "extra": 1, "reason": "x"},
            "takes parameters",
        ),
        ({"rule": "r", "kind": "fail-point-named", "names": ["a"]}, "has no reason"),
        (
            {"rule": "r", "kind": "fail-point-named", "names": ["a"], "suites": "crud", "reason": "x"},
            "list of globs",
        ),
    ],
)
def test_malformed_rules_are_refused(item: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_skips([item])


def test_rule_ids_are_unique() -> None:
    item = {"rule": "r", "kind": "retried-client-bulk-write", "reason": "x"}
    with pytest.raises(ValueError, match="used twice"):
        parse_skips([item, item])


def test_every_rule_and_entry_skips_a_test_of_the_specifications() -> None:
    unmatched = skip_matches(every_spec_case()).unmatched
    assert not unmatched, f"skip-list items matching no spec test (stale: remove them): {unmatched}"


def test_every_fresh_server_entry_takes_a_test_of_the_specifications() -> None:
    stale = [label for label, cases in fresh_server_matches(every_spec_case()).items() if not cases]
    assert not stale, f"fresh-server entries matching no spec test: {stale}"


def test_a_fresh_server_test_is_not_skipped() -> None:
    cases = every_spec_case()
    fresh = [case for cases in fresh_server_matches(cases).values() for case in cases]
    assert fresh and all(needs_fresh_server(case) for case in fresh)
    assert [case.id for case in fresh if skip_reason(case) is not None] == []


def test_a_stale_item_is_reported_unmatched(tmp_path: Path) -> None:
    """The check above can fail: an entry naming a file that is not there, and a rule of a suite with no test
    it matches, are reported; the item that matches is not."""
    skips = parse_skips(
        [
            *RULES_YAML,
            {"suite": "retryable-writes", "file": "gone.json", "reason": "a file no longer in the checkout"},
            {"rule": "js", "kind": "server-side-javascript", "reason": "no test needs it"},
        ]
    )
    tests = [{"description": "named", "operations": [fail_point("onPrimaryTransactionalWrite")]}]
    cases = write_case(tmp_path, "retryable-writes", tests)
    assert skip_matches(cases, skips).unmatched == [
        "rule opw (fail-point-named)",
        "rule js (server-side-javascript)",
        "retryable-writes/gone.json :: *",
    ]
    output = format_skip_matches(skip_matches(cases, skips))
    assert "3 rule(s) and entries skip no test of the selected suites:" in output
    assert "    retryable-writes/gone.json :: *" in output
