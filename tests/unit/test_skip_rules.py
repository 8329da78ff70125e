"""The skip list's capability rules: each matches the tests that need what the test server cannot do, and not
their runnable neighbours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spec_runner.capabilities import CapabilityRule, TestProfile, runs_on_test_server
from spec_runner.model import CaseSource, SpecCase
from spec_runner.skiplist import SkipEntry, load_skip_list, parse_skips, skip_matches

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


def test_client_side_encryption() -> None:
    rule = real_rule("client-side-encryption")
    assert rule.matches(
        profile(entities=[{"client": {"id": "c", "autoEncryptOpts": {"keyVaultNamespace": "k.v"}}}])
    )
    assert rule.matches(
        profile(entities=[CLIENT, {"clientEncryption": {"id": "ce", "clientEncryptionOpts": {}}}])
    )
    # Declared by a createEntities operation.
    created = {
        "name": "createEntities",
        "object": "testRunner",
        "arguments": {"entities": [{"clientEncryption": {"id": "ce"}}]},
    }
    assert rule.matches(profile(created))
    assert not rule.matches(profile(entities=[CLIENT]))


def test_needs_a_secondary() -> None:
    rule = real_rule("needs-a-secondary")
    secondary = {"mode": "secondary"}
    freeze: dict[str, Any] = {
        "name": "runCommand",
        "object": "adminDatabase",
        "arguments": {
            "command": {"replSetFreeze": 0},
            "commandName": "replSetFreeze",
            "readPreference": secondary,
        },
    }
    assert rule.matches(profile(freeze))
    # Modes the primary can serve, a read expected to fail, a read in a session, a session's own options.
    for mode in ("primary", "primaryPreferred", "secondaryPreferred", "nearest"):
        assert not rule.matches(
            profile({**freeze, "arguments": {**freeze["arguments"], "readPreference": {"mode": mode}}})
        )
    assert not rule.matches(profile({**freeze, "expectError": {"isError": True}}))
    in_session = {
        "name": "find",
        "object": "collection0",
        "arguments": {"session": "session0", "readPreference": secondary},
    }
    assert not rule.matches(profile(in_session))
    session = {"session": {"id": "session0", "client": "client0"}}
    start = {"name": "startTransaction", "object": "session0", "arguments": {"readPreference": secondary}}
    assert not rule.matches(profile(start, entities=[CLIENT, session]))


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
    item = {"rule": "r", "kind": "client-side-encryption", "reason": "x"}
    with pytest.raises(ValueError, match="used twice"):
        parse_skips([item, item])
