"""Which spec cases only a harness topology can run: those whose ``runOnRequirements`` leave out both
``single`` and ``replicaset`` (what the one test server presents), so the default run skips them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from spec_runner.model import SpecCase

SERVER_TOPOLOGIES = frozenset({"single", "replicaset"})


def _allowed(requirements: Sequence[Mapping[str, Any]] | None) -> set[str] | None:
    """The topologies some requirement allows (``None``: any)."""
    if not requirements:
        return None
    allowed: set[str] = set()
    for requirement in requirements:
        topologies = requirement.get("topologies")
        if topologies is None:
            return None
        allowed.update(str(t) for t in topologies)
    return allowed


@cache
def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def case_topologies(case: SpecCase, root: Path) -> set[str] | None:
    """The topologies a unified case may run on (``None``: any, or not a unified file)."""
    path = root / case.suite / "tests" / case.file
    if path.suffix != ".json" or not path.is_file():
        return None
    document = _load(path)
    allowed = _allowed(document.get("runOnRequirements"))
    name = case.name.rsplit(" [", 1)[0] if case.name.endswith("]") else case.name
    for test in document.get("tests", ()):
        if test.get("description") == name:
            own = _allowed(test.get("runOnRequirements"))
            if own is not None:
                allowed = own if allowed is None else allowed & own
            break
    if allowed is not None and "sharded-replicaset" in allowed:
        allowed.add("sharded")
    return allowed


def gated_on(topology: str, cases: Iterable[SpecCase], root: Path) -> list[SpecCase]:
    """The cases that can run on ``topology`` and on neither ``single`` nor ``replicaset``."""
    chosen = []
    for case in cases:
        allowed = case_topologies(case, root)
        if allowed is not None and topology in allowed and not allowed & SERVER_TOPOLOGIES:
            chosen.append(case)
    return chosen
