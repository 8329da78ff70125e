"""The client-side encryption specification's tests, against the server: the unified files (``tests/unified``)
and the legacy ones (``tests/legacy``, rewritten as unified files by :mod:`spec_runner.unified.legacy`).

Explicit encryption and key management run with the ``mongio[encryption]`` extra, the ``local`` KMS
provider and ``kmip`` against the local KMIP server of ``tests/support/kmip_server.py`` (started once per
run, when a test first names a KMIP provider). Automatic encryption asks the stand-in query analyser of
``tests/support/query_analyser.py`` for its markings (as ``mongocryptdURI``, started once per run), so the
tests whose local schemas (``schemaMap``) it can mark run. The skip list names what the rest needs: a cloud
KMS at a real host, data keys wrapped by the drivers' real cloud KMS keys or KMIP server (the prose tests
run the same requests against the fakes of ``tests/support``), a server that stores encryption schemas or
Queryable Encryption's collections, or crypt_shared/mongocryptd's full query analysis."""

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
