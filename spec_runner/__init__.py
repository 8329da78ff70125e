"""mongio's conformance runner: drives the MongoDB specifications' own test files.

Run from the repository root: ``python -m spec_runner [--specs ROOT] [--uri URI] [--json FILE] [SUITE ...]``.
Suites live in :mod:`spec_runner.suites`, one module per specification directory, each exposing ``SUITE``.
"""

from spec_runner.model import CaseSkipped, RunContext, SpecCase, Suite, SuiteMissing

__all__ = ["CaseSkipped", "RunContext", "SpecCase", "Suite", "SuiteMissing"]
