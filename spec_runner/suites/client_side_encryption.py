"""The client-side encryption specification's tests, against the server: the unified files (``tests/unified``)
and the legacy ones (``tests/legacy``, rewritten as unified files by :mod:`spec_runner.unified.legacy`).

Explicit encryption and key management run with the ``mongio[encryption]`` extra. Automatic encryption asks
the stand-in query analyser of ``tests/support/query_analyser.py`` for its markings (as ``mongocryptdURI``,
started once per run), so the tests whose schemas it can mark run; what needs a cloud KMS or KMIP server,
crypt_shared or mongocryptd's full query analysis, or server-side Queryable Encryption, is skipped by the skip
list, which names what it needs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

from spec_runner.model import SpecCase, Suite
from spec_runner.suites._unified_support import run_unified, unified_collector
from spec_runner.unified.legacy import legacy_cases

NAME = "client-side-encryption"
_unified = unified_collector(NAME, directories=["unified"])


def _collect(tests_dir: Path) -> Iterator[SpecCase]:
    yield from _unified(tests_dir)
    legacy = tests_dir / "legacy"
    if legacy.is_dir():
        yield from legacy_cases(NAME, legacy, functools.partial(run_unified))


SUITE = Suite(name=NAME, collect=_collect, needs_server=True)
