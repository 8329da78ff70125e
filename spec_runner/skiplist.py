"""The repository's one skip list (``spec_runner/skips.yaml``): every skipped spec test and its reason.

Two kinds of entries: a named entry (``suite``, ``file`` glob, ``test`` glob) skips the tests it names; a
capability rule (``rule: ID``, ``kind``, the kind's parameters, optional ``suites`` globs) skips every unified
test, in any file, whose own content shows it needs what the rule's kind describes (see
:mod:`spec_runner.capabilities`). Named entries are looked at first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from spec_runner.capabilities import CapabilityRule, profile_of
from spec_runner.model import SpecCase

SKIPS_FILE = Path(__file__).with_name("skips.yaml")


@dataclass(frozen=True)
class SkipEntry:
    suite: str
    file: str
    test: str
    reason: str

    @property
    def label(self) -> str:
        return f"{self.suite}/{self.file} :: {self.test}"

    def matches(self, case: SpecCase) -> bool:
        return (
            self.suite == case.suite
            and fnmatchcase(case.file, self.file)
            and fnmatchcase(case.name, self.test)
        )


@dataclass(frozen=True)
class SkipRule:
    """A capability rule of the skip list, applied to the unified tests of the suites it covers."""

    rule: CapabilityRule

    @property
    def label(self) -> str:
        return f"rule {self.rule.id} ({self.rule.kind})"

    @property
    def reason(self) -> str:
        return self.rule.reason

    def matches(self, case: SpecCase) -> bool:
        if case.source is None or not any(fnmatchcase(case.suite, glob) for glob in self.rule.suites):
            return False
        profile = profile_of(case.source.path, case.source.index)
        return profile is not None and self.rule.matches(profile)


@dataclass(frozen=True)
class SkipList:
    entries: tuple[SkipEntry, ...] = ()
    rules: tuple[SkipRule, ...] = ()

    def first_match(self, case: SpecCase) -> SkipEntry | SkipRule | None:
        for entry in self.entries:
            if entry.matches(case):
                return entry
        for rule in self.rules:
            if rule.matches(case):
                return rule
        return None


_RULE_KEYS = frozenset({"rule", "kind", "suites", "reason"})


def _rule(item: dict[str, Any], reason: str) -> SkipRule:
    suites = item.get("suites", ["*"])
    if isinstance(suites, str) or not isinstance(suites, list):
        raise ValueError(f"skip rule {item['rule']!r}: suites must be a list of globs")
    parameters = {key.replace("-", "_"): value for key, value in item.items() if key not in _RULE_KEYS}
    return SkipRule(
        CapabilityRule(
            id=str(item["rule"]),
            kind=str(item["kind"]),
            parameters=parameters,
            reason=reason,
            suites=tuple(str(glob) for glob in suites),
        )
    )


def parse_skips(raw: Any, origin: str = "skips") -> SkipList:
    entries: list[SkipEntry] = []
    rules: list[SkipRule] = []
    for item in raw or []:
        reason = str(item.get("reason", "")).strip()
        if not reason:
            raise ValueError(f"{origin}: skip entry {item!r} has no reason")
        if "rule" in item:
            rules.append(_rule(item, reason))
            continue
        entries.append(
            SkipEntry(
                suite=str(item["suite"]),
                file=str(item.get("file", "*")),
                test=str(item.get("test", "*")),
                reason=reason,
            )
        )
    ids = [rule.rule.id for rule in rules]
    duplicated = sorted({rule_id for rule_id in ids if ids.count(rule_id) > 1})
    if duplicated:
        raise ValueError(f"{origin}: skip rule id(s) {duplicated} used twice")
    return SkipList(tuple(entries), tuple(rules))


@cache
def load_skip_list(path: Path = SKIPS_FILE) -> SkipList:
    return parse_skips(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def load_skips(path: Path = SKIPS_FILE) -> tuple[SkipEntry, ...]:
    """The named entries only (the capability rules are in ``load_skip_list().rules``)."""
    return load_skip_list(path).entries


def skip_reason(case: SpecCase) -> str | None:
    found = load_skip_list().first_match(case)
    return None if found is None else found.reason


@dataclass
class SkipMatches:
    """For ``--show-skips``: the cases each entry and rule skips (a case counts for the first that matches)."""

    by_entry: dict[str, list[SpecCase]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def unmatched(self) -> list[str]:
        """The rules and entries that skip none of the cases: stale, when the cases are every spec test."""
        return [label for label, cases in self.by_entry.items() if not cases]


def skip_matches(cases: Iterable[SpecCase], skip_list: SkipList | None = None) -> SkipMatches:
    skip_list = skip_list or load_skip_list()
    found = SkipMatches()
    items: list[SkipEntry | SkipRule] = [*skip_list.rules, *skip_list.entries]
    for item in items:
        found.by_entry[item.label] = []
        found.reasons[item.label] = item.reason
    for case in cases:
        match = skip_list.first_match(case)
        if match is not None:
            found.by_entry[match.label].append(case)
    return found
