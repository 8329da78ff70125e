"""The OCSP support specification's integration tests: the permutation table of its ``tests/README.md``.

Each column of the table (a server certificate valid or revoked, an OCSP responder or none, a server that
staples or not, with a Must-Staple certificate or not) crossed with each row (the URI options) is a case,
run as the README's test procedure says: RSA and ECDSA certificates, and for columns with a responder, a
responder signing with the issuing CA and one signing with a delegate certificate. Each case makes its own
CA, responder and server certificate (tests/support/ocsp_pki.py), starts the test server with TLS and that
certificate, and pings it: the ping must succeed for "OK" and fail, on the certificate's revocation, for
"FAIL". The test server cannot staple, and mongio could not read a staple (Python's ``ssl`` module cannot):
the columns of a server that staples are in the skip list.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from spec_runner.model import CaseBody, CaseSkipped, RunContext, SpecCase, Suite
from spec_runner.server import external_uri

NAME = "ocsp-support"
README = "README.md"
SELECTION_TIMEOUT_MS = 3000


@dataclass(frozen=True)
class Column:
    """One column of the table: what the server presents and what the responder says."""

    title: str

    @property
    def responder(self) -> str | None:
        """``"good"``, ``"revoked"`` or None (no responder)."""
        if "No OCSP Responder" in self.title:
            return None
        return "revoked" if "Revoked cert" in self.title else "good"

    @property
    def staples(self) -> bool:
        return "that staples" in self.title

    @property
    def must_staple(self) -> bool:
        # The README's configurations: servers that staple have a Must-Staple certificate too.
        return self.staples or "Must" in self.title


def _cells(line: str) -> list[str]:
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    return [re.sub(r"\s+", " ", cell.replace("**", "").replace("<br>", " ")).strip() for cell in cells]


def read_table(readme: Path) -> tuple[list[Column], list[tuple[str, list[str]]]]:
    """The README's permutation table: its columns, and each row's URI options with its expected results."""
    lines = [line for line in readme.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    header, _rule, *rows = lines
    columns = [Column(title) for title in _cells(header)[1:]]
    table: list[tuple[str, list[str]]] = []
    for row in rows:
        options, *results = _cells(row)
        table.append(
            (re.sub(r"[`\s]", "", options), [result.replace("\\", "").rstrip("*") for result in results])
        )
    return columns, table


def _variants(column: Column) -> list[tuple[str, str | None]]:
    kinds = ("rsa", "ecdsa")
    if column.responder is None:
        return [(kind, None) for kind in kinds]
    return [(kind, signer) for kind in kinds for signer in ("ca", "delegate")]


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    readme = tests_dir / README
    if not readme.is_file():
        return
    columns, table = read_table(readme)
    for column_index, column in enumerate(columns):
        for query, results in table:
            for kind, signer in _variants(column):
                name = " / ".join(part for part in (column.title, query, kind, signer) if part)
                expected_ok = results[column_index] == "OK"
                yield SpecCase(
                    suite=NAME,
                    file=README,
                    name=name,
                    run=_case(column, query, kind, signer, expected_ok),
                    needs_server=True,
                )


def _case(column: Column, query: str, kind: str, signer: str | None, expected_ok: bool) -> CaseBody:
    async def run(context: RunContext) -> None:
        if external_uri() is not None:
            raise CaseSkipped(
                "MONGODB_URI names an external deployment: these cases start a TLS server of their own"
            )
        await _run_permutation(column, query, kind, signer, expected_ok)

    return run


async def _run_permutation(
    column: Column, query: str, kind: str, signer: str | None, expected_ok: bool
) -> None:
    from contextlib import AsyncExitStack

    from tests.support.ocsp_pki import (
        Answer,
        Authority,
        Responder,
        tls_test_server,
        unreachable_url,
        write_server_files,
    )

    from mongio import MongoClient
    from mongio.errors import ServerSelectionTimeoutError

    authority = Authority(kind)
    async with AsyncExitStack() as stack:
        responder: Responder | None = None
        if column.responder is not None:
            answer = Answer.GOOD if column.responder == "good" else Answer.REVOKED
            delegate = authority.issue_delegate() if signer == "delegate" else None
            responder = await stack.enter_async_context(Responder(authority, answer=answer, signer=delegate))
        url = responder.url if responder is not None else unreachable_url()
        server = authority.issue_server([url], must_staple=column.must_staple)
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ocsp-")))
        files = write_server_files(directory, server, authority)
        port = await stack.enter_async_context(tls_test_server(files))
        uri = (
            f"mongodb://localhost:{port}/?{query}&tlsCAFile={quote(str(files.ca))}"
            f"&serverSelectionTimeoutMS={SELECTION_TIMEOUT_MS}"
        )
        client = MongoClient(uri)
        try:
            if expected_ok:
                reply = await client.admin.command("ping")
                assert reply["ok"] == 1
            else:
                try:
                    await client.admin.command("ping")
                except ServerSelectionTimeoutError as error:
                    assert re.search(r"revoked|Must-Staple", str(error)), (
                        f"failed for another reason: {error}"
                    )
                else:
                    raise AssertionError("the ping succeeded; the README expects it to fail")
        finally:
            await client.close()
        checks = query == "tls=true"  # tlsInsecure and tlsAllowInvalidCertificates turn OCSP off
        if responder is not None:
            asked = responder.requests > 0
            assert asked == checks, f"the responder was {'' if asked else 'not '}asked with {query}"


SUITE = Suite(name=NAME, collect=collect, needs_server=True)
