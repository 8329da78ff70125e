"""Finds every suite module under :mod:`spec_runner.suites` (each defines ``SUITE`` or ``SUITES``)."""

from __future__ import annotations

import importlib
import pkgutil

from spec_runner import suites as suites_package
from spec_runner.model import Suite


def known_suites() -> dict[str, Suite]:
    found: dict[str, Suite] = {}
    for info in pkgutil.iter_modules(suites_package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{suites_package.__name__}.{info.name}")
        declared = list(getattr(module, "SUITES", ())) or [getattr(module, "SUITE", None)]
        for suite in declared:
            if isinstance(suite, Suite):
                if suite.name in found:
                    raise RuntimeError(f"suite {suite.name!r} is declared twice")
                found[suite.name] = suite
    return dict(sorted(found.items()))


def split_selector(selector: str) -> tuple[str, str | None]:
    """``server-discovery-and-monitoring/rs`` -> (``server-discovery-and-monitoring``, ``rs``)."""
    name, _, sub_path = selector.strip("/").partition("/")
    return name, sub_path or None
