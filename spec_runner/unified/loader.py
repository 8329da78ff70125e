"""Loading a unified test file: its schema version, its structure, and typed views of its parts.

A file is read twice: as plain JSON, to check ``schemaVersion`` and the structure the way the format's JSON
schema does, then as Extended JSON, for the values the runner uses. A file of another major version, or of a
newer minor version than ``SUPPORTED_SCHEMA_VERSION``, raises ``UnsupportedSchemaVersion``; a file that breaks
the structure raises ``InvalidTestFile``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spec_runner.unified import ejson
from spec_runner.unified.errors import InvalidTestFile, UnsupportedSchemaVersion
from spec_runner.unified.matcher import MISSING
from spec_runner.unified.schema import validate

SUPPORTED_SCHEMA_VERSION: tuple[int, int, int] = (1, 28, 0)
"""The newest format version this runner implements (the spec's "Current Schema Version")."""

_SCHEMA_FILE = re.compile(r"^schema-(\d+)\.(\d+)(?:\.(\d+))?\.json$")
_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


def parse_schema_version(text: Any) -> tuple[int, int, int]:
    """``"1.5"`` -> ``(1, 5, 0)``; anything but a version string raises ``UnsupportedSchemaVersion``."""
    found = _VERSION.match(text) if isinstance(text, str) else None
    if found is None:
        raise UnsupportedSchemaVersion(f"schemaVersion {text!r} is not a version string")
    major, minor, patch = found.groups()
    return int(major), int(minor or 0), int(patch or 0)


def schema_file_versions(directory: Path) -> list[tuple[int, int, int]]:
    """The versions of the ``schema-X.Y.json`` files in the format's directory, oldest first."""
    versions = []
    if directory.is_dir():
        for path in directory.iterdir():
            found = _SCHEMA_FILE.match(path.name)
            if found:
                versions.append((int(found[1]), int(found[2]), int(found[3] or 0)))
    return sorted(versions)


def check_schema_version(
    text: Any, supported: tuple[int, int, int] = SUPPORTED_SCHEMA_VERSION
) -> tuple[int, int, int]:
    """The file's version if the runner can run it: same major version, not newer than ``supported``."""
    version = parse_schema_version(text)
    if version[0] != supported[0] or version > supported:
        have = ".".join(map(str, supported))
        raise UnsupportedSchemaVersion(
            f"schemaVersion {text} is not supported (this runner supports up to {have})"
        )
    return version


# --- views -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntityDescription:
    """One ``createEntities`` item: its kind (``client``, ``session``, ...), its id and its other options."""

    kind: str
    id: str
    options: Mapping[str, Any]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> EntityDescription:
        ((kind, body),) = raw.items()
        return cls(kind=kind, id=body["id"], options={k: v for k, v in body.items() if k != "id"})


@dataclass(frozen=True)
class CollectionData:
    """``initialData`` or ``outcome``: a collection and its documents."""

    database_name: str
    collection_name: str
    documents: Sequence[Mapping[str, Any]]
    create_options: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> CollectionData:
        return cls(
            database_name=raw["databaseName"],
            collection_name=raw["collectionName"],
            documents=list(raw["documents"]),
            create_options=raw.get("createOptions"),
        )

    @property
    def namespace(self) -> str:
        return f"{self.database_name}.{self.collection_name}"


@dataclass(frozen=True)
class Operation:
    """One operation; ``expect_result`` is ``MISSING`` when the test does not assert a result."""

    name: str
    object: str
    arguments: Mapping[str, Any]
    expect_error: Mapping[str, Any] | None = None
    expect_result: Any = MISSING
    save_result_as_entity: str | None = None
    ignore_result_and_error: bool = False

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Operation:
        return cls(
            name=raw["name"],
            object=raw["object"],
            arguments=dict(raw.get("arguments") or {}),
            expect_error=raw.get("expectError"),
            expect_result=raw.get("expectResult", MISSING),
            save_result_as_entity=raw.get("saveResultAsEntity"),
            ignore_result_and_error=bool(raw.get("ignoreResultAndError", False)),
        )


@dataclass(frozen=True)
class UnifiedTest:
    """One element of ``tests``."""

    description: str
    operations: Sequence[Operation]
    run_on_requirements: Sequence[Mapping[str, Any]] | None = None
    skip_reason: str | None = None
    expect_events: Sequence[Mapping[str, Any]] | None = None
    expect_log_messages: Sequence[Mapping[str, Any]] | None = None
    expect_tracing_messages: Any = None
    outcome: Sequence[CollectionData] | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> UnifiedTest:
        outcome = raw.get("outcome")
        return cls(
            description=raw["description"],
            operations=[Operation.parse(op) for op in raw["operations"]],
            run_on_requirements=raw.get("runOnRequirements"),
            skip_reason=raw.get("skipReason"),
            expect_events=raw.get("expectEvents"),
            expect_log_messages=raw.get("expectLogMessages"),
            expect_tracing_messages=raw.get("expectTracingMessages"),
            outcome=None if outcome is None else [CollectionData.parse(c) for c in outcome],
        )


@dataclass(frozen=True)
class UnifiedTestFile:
    """A loaded test file (``_yamlAnchors`` is dropped: it only serves YAML anchors)."""

    path: Path
    description: str
    schema_version: tuple[int, int, int]
    tests: Sequence[UnifiedTest]
    run_on_requirements: Sequence[Mapping[str, Any]] | None = None
    create_entities: Sequence[EntityDescription] = ()
    initial_data: Sequence[CollectionData] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def schema_version_text(self) -> str:
        return ".".join(map(str, self.schema_version))


# --- loading ---------------------------------------------------------------------------------------------


def read_plain(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load(path: Path, *, supported: tuple[int, int, int] = SUPPORTED_SCHEMA_VERSION) -> UnifiedTestFile:
    """Load and check a ``.json`` test file; raises ``UnsupportedSchemaVersion`` or ``InvalidTestFile``."""
    text = path.read_text(encoding="utf-8")
    plain = json.loads(text)
    if not isinstance(plain, Mapping):
        raise InvalidTestFile(str(path), ["the file is not a JSON object"])
    if "schemaVersion" not in plain:
        raise InvalidTestFile(str(path), ["missing required key 'schemaVersion'"])
    version = check_schema_version(plain["schemaVersion"], supported)
    problems = validate(plain)
    if problems:
        raise InvalidTestFile(str(path), problems)
    return parse(ejson.loads(text), path=path, version=version)


def parse(document: Mapping[str, Any], *, path: Path, version: tuple[int, int, int]) -> UnifiedTestFile:
    """The views of a checked, Extended-JSON-decoded test file."""
    initial = document.get("initialData")
    return UnifiedTestFile(
        path=path,
        description=document["description"],
        schema_version=version,
        tests=[UnifiedTest.parse(t) for t in document["tests"]],
        run_on_requirements=document.get("runOnRequirements"),
        create_entities=[EntityDescription.parse(e) for e in document.get("createEntities", ())],
        initial_data=None if initial is None else [CollectionData.parse(c) for c in initial],
        raw={k: v for k, v in document.items() if k != "_yamlAnchors"},
    )


def file_test_descriptions(path: Path) -> list[str]:
    """The tests' descriptions read without any checking, so an unloadable file can still report one
    failure per test."""
    try:
        plain = read_plain(path)
    except (OSError, ValueError):
        return []
    tests = plain.get("tests") if isinstance(plain, Mapping) else None
    if not isinstance(tests, list):
        return []
    return [
        t["description"] for t in tests if isinstance(t, Mapping) and isinstance(t.get("description"), str)
    ]


def is_unified_file(path: Path) -> bool:
    """Whether a ``.json`` file under a spec's tests is a unified test file (it states a schemaVersion)."""
    try:
        plain = read_plain(path)
    except (OSError, ValueError):
        return False
    return isinstance(plain, Mapping) and "schemaVersion" in plain


def unified_files(root: Path) -> Iterator[Path]:
    """Every unified ``.json`` test file under ``root`` (``.yml`` twins ignored), sorted."""
    for path in sorted(root.rglob("*.json")):
        if "tests" in path.relative_to(root).parts and is_unified_file(path):
            yield path
