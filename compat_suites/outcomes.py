"""Test outcomes from a JUnit report, and their tallies."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped")
_TAGS = {"failure": "failed", "error": "error", "skipped": "skipped"}


def read_report(report: Path) -> dict[str, str]:
    """Test id (``module.Class::name``) -> passed / failed / error / skipped."""
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            # A test failing and then erring in its teardown is reported twice; the error is what differs.
            if child.tag in _TAGS and outcome != "error":
                outcome = _TAGS[child.tag]
        results[test_id] = outcome
    return results


def module_of(test_id: str) -> str:
    """The test file's module: ``test.asynchronous.test_cursor`` for ``test.asynchronous.test_cursor.X::y``."""
    classname = test_id.split("::", 1)[0]
    parts = classname.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            return ".".join(parts[: index + 1])
    return classname


def tally(results: dict[str, str]) -> Counter[str]:
    return Counter(results.values())


def format_tally(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[name]} {name}" for name in OUTCOMES)
