"""Every test of the specifications checkout, as the spec runner collects them: for the checks that the skip
list, the fresh-server entries and the timed entries each name a test that exists."""

from __future__ import annotations

from spec_runner.model import SpecCase, specs_root
from spec_runner.runner import Report, collect


def every_spec_case() -> list[SpecCase]:
    """Every test of the specifications checkout the runner reads (a missing suite is an error)."""
    report = Report()
    cases = collect([], specs_root(), report)
    assert not report.errors, report.errors
    return cases
