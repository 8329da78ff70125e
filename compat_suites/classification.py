"""The classification of tests whose outcome differs between the native driver and mongio.

``classification.yaml`` maps each suite to a list of entries; an entry names a class, says why, and lists the
tests it covers as ``fnmatch`` patterns over test ids (``module.Class::name``). A ``declared-difference`` entry
also names the id of its entry in ``src/mongio/compat/differences.yaml``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CLASSIFICATION = HERE / "classification.yaml"
DIFFERENCES = HERE.parent / "src" / "mongio" / "compat" / "differences.yaml"
CLASSES = ("mongio-defect", "declared-difference", "motor-only-api", "pymongo-internal", "server-limitation")


@dataclass(frozen=True)
class Entry:
    """One reason, shared by the tests its patterns match."""

    kind: str
    why: str
    patterns: tuple[str, ...]
    difference: str | None = None

    def covers(self, test_id: str) -> bool:
        return any(fnmatch.fnmatchcase(test_id, pattern) for pattern in self.patterns)


def declared_difference_ids(path: Path = DIFFERENCES) -> set[str]:
    loaded: dict[str, list[dict[str, Any]]] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {entry["id"] for section in loaded.values() for entry in section}


def load(suite: str, path: Path = CLASSIFICATION) -> list[Entry]:
    """The entries for ``suite``; a malformed entry or an unknown difference id is an error naming it."""
    loaded: dict[str, list[dict[str, Any]]] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    known = declared_difference_ids()
    entries = []
    for raw in loaded.get(suite) or []:
        entry = Entry(
            kind=raw["class"],
            why=raw["why"],
            patterns=tuple(raw["tests"]),
            difference=raw.get("difference"),
        )
        if entry.kind not in CLASSES:
            raise ValueError(f"{path}: {suite}: unknown class {entry.kind!r} (one of {', '.join(CLASSES)})")
        if entry.kind == "declared-difference" and entry.difference not in known:
            raise ValueError(
                f"{path}: {suite}: declared-difference {entry.difference!r} is not an id in {DIFFERENCES.name}"
            )
        entries.append(entry)
    return entries


def classify(test_id: str, entries: list[Entry]) -> Entry | None:
    """The first entry covering ``test_id``, or None when it is unclassified."""
    return next((entry for entry in entries if entry.covers(test_id)), None)
