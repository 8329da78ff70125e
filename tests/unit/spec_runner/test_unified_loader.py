"""Loading unified test files: every real file in the specifications, the schema version rules, and the
format's own invalid files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spec_runner.model import specs_root
from spec_runner.unified.errors import InvalidTestFile, UnsupportedSchemaVersion
from spec_runner.unified.loader import (
    SUPPORTED_SCHEMA_VERSION,
    check_schema_version,
    file_test_descriptions,
    load,
    schema_file_versions,
    unified_files,
)
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.schema import validate

from mongio.bson.int64 import Int64

ROOT = specs_root()
FORMAT_TESTS = ROOT / "unified-test-format" / "tests"


def _unified_files() -> list[Path]:
    return list(unified_files(ROOT)) if ROOT.is_dir() else []


ALL_FILES = _unified_files()
INVALID = [p for p in ALL_FILES if p.parent == FORMAT_TESTS / "invalid"]
RUNNABLE = [
    p
    for p in ALL_FILES
    if p.parent != FORMAT_TESTS / "invalid" and p.name != "schemaVersion-unsupported.json"
]

needs_specs = pytest.mark.skipif(not ALL_FILES, reason=f"no unified test files under {ROOT}")


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@needs_specs
def test_the_specifications_hold_unified_files_of_every_kind() -> None:
    assert len(INVALID) > 100
    assert len(RUNNABLE) > 300
    assert any(p.parent == FORMAT_TESTS / "valid-pass" for p in RUNNABLE)


@needs_specs
@pytest.mark.parametrize("path", RUNNABLE, ids=_id)
def test_every_unified_file_loads(path: Path) -> None:
    loaded = load(path)
    plain = json.loads(path.read_text(encoding="utf-8"))
    parts = [int(part) for part in plain["schemaVersion"].split(".")]
    assert list(loaded.schema_version[: len(parts)]) == parts
    assert loaded.schema_version <= SUPPORTED_SCHEMA_VERSION
    assert [t.description for t in loaded.tests] == [t["description"] for t in plain["tests"]]
    assert len(loaded.create_entities) == len(plain.get("createEntities", []))
    assert "_yamlAnchors" not in loaded.raw


@needs_specs
@pytest.mark.parametrize("path", INVALID, ids=_id)
def test_invalid_files_are_rejected(path: Path) -> None:
    with pytest.raises((InvalidTestFile, UnsupportedSchemaVersion)):
        load(path)


@needs_specs
def test_unsupported_schema_version_file_is_rejected() -> None:
    path = FORMAT_TESTS / "valid-fail" / "schemaVersion-unsupported.json"
    if not path.exists():
        pytest.skip("file not present")
    with pytest.raises(UnsupportedSchemaVersion, match=r"0\.1"):
        load(path)
    assert file_test_descriptions(path) == ["foo"]


def test_supported_version_is_not_older_than_the_schema_files() -> None:
    versions = schema_file_versions(ROOT / "unified-test-format")
    if versions:
        assert max(v for v in versions if v[0] == SUPPORTED_SCHEMA_VERSION[0]) <= SUPPORTED_SCHEMA_VERSION
    assert schema_file_versions(Path("/nonexistent")) == []


@pytest.mark.parametrize("version", ["1.0", "1.28", "1.28.0", "1.5.1", "1"])
def test_compatible_versions(version: str) -> None:
    assert check_schema_version(version, (1, 28, 0))[0] == 1


@pytest.mark.parametrize("version", ["0.1", "2.0", "1.29", "1.28.1", "1.2.3.4", "x", 1])
def test_incompatible_versions(version: Any) -> None:
    with pytest.raises(UnsupportedSchemaVersion):
        check_schema_version(version, (1, 28, 0))


def _minimal(**extra: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "description": "d",
        "schemaVersion": "1.0",
        "tests": [{"description": "t", "operations": []}],
    }
    document.update(extra)
    return document


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "file.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_views_of_a_file(tmp_path: Path) -> None:
    document = _minimal(
        runOnRequirements=[{"minServerVersion": "4.4"}],
        createEntities=[{"client": {"id": "client0", "observeEvents": ["commandStartedEvent"]}}],
        initialData=[
            {"collectionName": "c", "databaseName": "d", "documents": [{"_id": 1, "n": {"$numberLong": "7"}}]}
        ],
        tests=[
            {
                "description": "t",
                "operations": [
                    {
                        "name": "find",
                        "object": "collection0",
                        "arguments": {"filter": {}},
                        "expectResult": [],
                    },
                    {"name": "insertOne", "object": "collection0", "arguments": {"document": {}}},
                ],
                "outcome": [{"collectionName": "c", "databaseName": "d", "documents": []}],
            }
        ],
        _yamlAnchors={"x": 1},
    )
    loaded = load(_write(tmp_path, document))
    assert loaded.run_on_requirements == [{"minServerVersion": "4.4"}]
    entity = loaded.create_entities[0]
    assert (entity.kind, entity.id, entity.options) == (
        "client",
        "client0",
        {"observeEvents": ["commandStartedEvent"]},
    )
    assert loaded.initial_data is not None
    number = loaded.initial_data[0].documents[0]["n"]
    assert number == 7 and isinstance(number, Int64)
    assert loaded.initial_data[0].namespace == "d.c"
    test = loaded.tests[0]
    assert test.operations[0].expect_result == []
    assert test.operations[1].expect_result is MISSING
    assert test.outcome is not None and test.outcome[0].documents == []


def test_structure_problems_name_their_path(tmp_path: Path) -> None:
    document = _minimal(tests=[{"description": "t", "operations": [{"name": "x", "object": 1}]}])
    with pytest.raises(InvalidTestFile) as info:
        load(_write(tmp_path, document))
    assert info.value.problems == ["tests[0].operations[0].object: expected string, got int 1"]


def test_extended_json_wrappers_are_objects_to_the_structure_check() -> None:
    document = _minimal(
        initialData=[{"collectionName": "c", "databaseName": "d", "documents": [{"$numberLong": "1"}]}]
    )
    assert validate(document) == []


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            {
                "createEntities": [
                    {"client": {"id": "c", "uriOptions": {}}, "session": {"id": "s", "client": "c"}}
                ]
            },
            "at most 1",
        ),
        ({"runOnRequirements": [{"csfle": {"minLibmongocryptVersion": "1.x"}}]}, "does not match"),
        ({"runOnRequirements": [{"topologies": ["cluster"]}]}, "not one of"),
        (
            {
                "initialData": [
                    {
                        "collectionName": "c",
                        "databaseName": "d",
                        "documents": [],
                        "createOptions": {"writeConcern": {}},
                    }
                ]
            },
            "not allowed",
        ),
    ],
)
def test_schema_rules(change: dict[str, Any], fragment: str) -> None:
    problems = validate(_minimal(**change))
    assert problems and fragment in problems[0]


def test_expected_events_must_fit_their_event_type() -> None:
    def with_events(event_type: str | None, event: dict[str, Any]) -> dict[str, Any]:
        expected: dict[str, Any] = {"client": "c", "events": [event]}
        if event_type:
            expected["eventType"] = event_type
        return _minimal(tests=[{"description": "t", "operations": [], "expectEvents": [expected]}])

    assert validate(with_events("cmap", {"poolClearedEvent": {"hasServiceId": True}})) == []
    assert validate(with_events(None, {"commandStartedEvent": {"commandName": "ping"}})) == []
    assert validate(with_events("sdam", {"topologyOpeningEvent": {}})) == []
    assert validate(with_events(None, {"poolClearedEvent": {}}))
    assert validate(with_events("command", {"topologyOpeningEvent": {}}))


def test_descriptions_of_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{", encoding="utf-8")
    assert file_test_descriptions(path) == []
