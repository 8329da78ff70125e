"""The OCSP check of a client, against a TLS loopback peer whose certificate names our own OCSP responder.

The permutation table of the OCSP test README runs against the test server in the spec runner's
``ocsp-support`` suite; these tests cover what the table does not: the responder's other answers (unknown,
an OCSP error, malformed, silent, signed by whom it must not be), the cache, the two options, Must-Staple
with an unconfirmed status, and where the issuer comes from on each Python version.
"""

from __future__ import annotations

import logging
import ssl
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from mongio import MongoClient
from mongio.errors import ServerSelectionTimeoutError
from tests.support.loopback_peer import LoopbackPeer
from tests.support.ocsp_pki import (
    Answer,
    Authority,
    Issued,
    Responder,
    ServerFiles,
    unreachable_url,
    write_server_files,
)

SOFT_FAIL = "mongio.ocsp"


def peer_context(files: ServerFiles) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(files.cert_chain), str(files.key))
    return context


async def ping(files: ServerFiles, query: str = "", **kwargs: Any) -> None:
    """Ping a TLS loopback peer presenting ``files``' certificate; selection gives up after 2 s."""
    async with LoopbackPeer(ssl=peer_context(files)) as peer:
        client = MongoClient(
            f"{peer.uri}?tls=true&tlsCAFile={quote(str(files.ca))}&serverSelectionTimeoutMS=2000&{query}",
            **kwargs,
        )
        try:
            await client.admin.command("ping")
        finally:
            await client.close()


def server_files(tmp_path: Path, authority: Authority, server: Issued, **kwargs: Any) -> ServerFiles:
    return write_server_files(tmp_path, server, authority, **kwargs)


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority("ecdsa")


async def test_a_revoked_certificate_fails_the_connection_naming_it(
    authority: Authority, tmp_path: Path
) -> None:
    async with Responder(authority, answer=Answer.REVOKED) as responder:
        server = authority.issue_server([responder.url])
        with pytest.raises(
            ServerSelectionTimeoutError, match=r"CN=localhost.*serial number .* is revoked.*keyCompromise"
        ):
            await ping(server_files(tmp_path, authority, server))


@pytest.mark.parametrize(
    "query",
    ["tlsDisableOCSPEndpointCheck=true", "tlsDisableCertificateRevocationCheck=true"],
)
async def test_the_options_turn_the_responder_check_off(
    authority: Authority, tmp_path: Path, query: str
) -> None:
    async with Responder(authority, answer=Answer.REVOKED) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        await ping(files, query)  # the revoked certificate is accepted: nobody asked
        assert responder.requests == 0
        false_query = query.replace("true", "false")
        with pytest.raises(ServerSelectionTimeoutError, match="revoked"):
            await ping(files, false_query)
        assert responder.requests >= 1


async def test_keyword_options_are_the_same_options(authority: Authority, tmp_path: Path) -> None:
    async with Responder(authority, answer=Answer.REVOKED) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        await ping(files, tlsDisableOCSPEndpointCheck=True)
        assert responder.requests == 0


async def test_a_good_answer_is_cached_until_its_next_update(authority: Authority, tmp_path: Path) -> None:
    async with Responder(authority, answer=Answer.GOOD) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        await ping(
            files
        )  # the monitor's connection and the pool's: the second one is answered from the cache
        assert responder.requests == 1


async def test_an_answer_without_next_update_is_not_cached(authority: Authority, tmp_path: Path) -> None:
    async with Responder(authority, answer=Answer.GOOD, next_update=None) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        await ping(files)
        assert responder.requests >= 2


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        (Answer.UNKNOWN, "status unknown"),
        (Answer.MALFORMED, "malformed OCSP response"),
        (Answer.TRY_LATER, "TRY_LATER"),
    ],
)
async def test_inconclusive_answers_let_the_connection_proceed(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: Answer, logged: str
) -> None:
    async with Responder(authority, answer=answer) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        with caplog.at_level(logging.WARNING, SOFT_FAIL):
            await ping(files)
        assert responder.requests >= 2  # nothing inconclusive is cached: each connection asks again
    assert logged in caplog.text


async def test_an_unreachable_responder_lets_the_connection_proceed(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = unreachable_url()
    files = server_files(tmp_path, authority, authority.issue_server([url]))
    with caplog.at_level(logging.WARNING, SOFT_FAIL):
        await ping(files)
    assert f"the OCSP responder {url} failed: cannot connect" in caplog.text


@pytest.mark.slow
async def test_a_silent_responder_is_given_up_on_after_five_seconds(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Responder(authority, answer=Answer.SILENT) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        with caplog.at_level(logging.WARNING, SOFT_FAIL):
            await ping(files, serverSelectionTimeoutMS=30000)
        assert responder.requests >= 1
    assert "no OCSP answer within 5s" in caplog.text


async def test_the_first_conclusive_responder_of_several_is_believed(
    authority: Authority, tmp_path: Path
) -> None:
    async with (
        Responder(authority, answer=Answer.UNKNOWN) as unknown,
        Responder(authority, answer=Answer.REVOKED) as revoked,
    ):
        server = authority.issue_server([unreachable_url(), unknown.url, revoked.url])
        with pytest.raises(ServerSelectionTimeoutError, match="revoked"):
            await ping(server_files(tmp_path, authority, server))
        assert unknown.requests >= 1 and revoked.requests >= 1


@pytest.mark.parametrize("kind", ["rsa", "ecdsa"])
async def test_a_delegated_responder_is_believed(kind: str, tmp_path: Path) -> None:
    issuing = Authority(kind)
    async with Responder(issuing, answer=Answer.REVOKED, signer=issuing.issue_delegate()) as responder:
        with pytest.raises(ServerSelectionTimeoutError, match="revoked"):
            await ping(server_files(tmp_path, issuing, issuing.issue_server([responder.url])))


@pytest.mark.parametrize(
    ("signer", "logged"),
    [
        ("delegate-without-usage", "lacks the OCSP signing key usage"),
        ("stranger", "did not issue"),
    ],
)
async def test_an_answer_signed_by_whom_it_must_not_be_is_not_believed(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture, signer: str, logged: str
) -> None:
    key_holder = (
        authority.issue_delegate(ocsp_signing=False) if signer != "stranger" else Authority().issue_delegate()
    )
    async with Responder(authority, answer=Answer.REVOKED, signer=key_holder) as responder:
        files = server_files(tmp_path, authority, authority.issue_server([responder.url]))
        with caplog.at_level(logging.WARNING, SOFT_FAIL):
            await ping(files)  # "revoked", but unproven: soft fail
        assert responder.requests >= 1
    assert logged in caplog.text


async def test_a_must_staple_certificate_needs_a_confirmed_good_status(
    authority: Authority, tmp_path: Path
) -> None:
    async with Responder(authority, answer=Answer.UNKNOWN) as unknown:
        files = server_files(tmp_path, authority, authority.issue_server([unknown.url], must_staple=True))
        with pytest.raises(ServerSelectionTimeoutError, match=r"Must-Staple.*status unknown"):
            await ping(files)
        await ping(files, "tlsDisableOCSPEndpointCheck=true")  # no check wanted: nothing is enforced
    async with Responder(authority, answer=Answer.GOOD) as good:
        await ping(server_files(tmp_path, authority, authority.issue_server([good.url], must_staple=True)))
        assert good.requests == 1


async def test_a_certificate_without_responder_is_accepted_unchecked(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, SOFT_FAIL):
        await ping(server_files(tmp_path, authority, authority.issue_server([])))
    assert "names no OCSP responder" in caplog.text
    assert all(record.levelno == logging.INFO for record in caplog.records)  # nothing failed: no warning


async def test_an_intermediate_issuer_is_found_in_the_verified_chain_from_python_3_13(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    intermediate = Authority("ecdsa", name="mongio OCSP test intermediate", parent=authority)
    async with Responder(intermediate, answer=Answer.REVOKED) as responder:
        server = intermediate.issue_server([responder.url])
        root_only = server_files(tmp_path, intermediate, server)
        if sys.version_info >= (3, 13):
            with pytest.raises(ServerSelectionTimeoutError, match="revoked"):
                await ping(root_only)
        else:
            with caplog.at_level(logging.INFO, SOFT_FAIL):
                await ping(root_only)  # only the leaf is public before 3.13: the issuer is not known
            assert responder.requests == 0
            assert "issuer is not among the trusted CA certificates" in caplog.text
        both = server_files(tmp_path, intermediate, server, ca_file_holds=[authority, intermediate])
        with pytest.raises(ServerSelectionTimeoutError, match="revoked"):
            await ping(both)
