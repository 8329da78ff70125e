"""The repository's one skip list (``spec_runner/skips.yaml``): every skipped spec test and its reason."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from spec_runner.model import SpecCase

SKIPS_FILE = Path(__file__).with_name("skips.yaml")


@dataclass(frozen=True)
class SkipEntry:
    suite: str
    file: str
    test: str
    reason: str

    def matches(self, case: SpecCase) -> bool:
        return (
            self.suite == case.suite
            and fnmatchcase(case.file, self.file)
            and fnmatchcase(case.name, self.test)
        )


@cache
def load_skips(path: Path = SKIPS_FILE) -> tuple[SkipEntry, ...]:
    raw: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    entries = []
    for item in raw:
        reason = str(item.get("reason", "")).strip()
        if not reason:
            raise ValueError(f"{path}: skip entry {item!r} has no reason")
        entries.append(
            SkipEntry(
                suite=str(item["suite"]),
                file=str(item.get("file", "*")),
                test=str(item.get("test", "*")),
                reason=reason,
            )
        )
    return tuple(entries)


def skip_reason(case: SpecCase) -> str | None:
    for entry in load_skips():
        if entry.matches(case):
            return entry.reason
    return None
