"""The OCSP pieces without a network: the options, the cache's validity rules, the judging of responses, and
how a responder is asked (the HTTP client itself: test_http.py)."""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import warnings
from typing import Any

import pytest

from mongio import MongoClient
from mongio.connection.http import HttpError
from mongio.connection.ocsp import MAX_RESPONSE_BYTES, OCSPCache, ask_responder, unusable_responder
from mongio.connection.ocsp_response import (
    CertificateStatus,
    InvalidResponse,
    StatusAnswer,
    build_request,
    cert_id,
    judge_response,
    must_staple,
    responder_urls,
)
from mongio.connection.tls import create_revocation_checker, create_ssl_context
from mongio.errors import ConfigurationError
from mongio.options.client_options import ClientOptions
from mongio.options.uri_options import ConfigurationWarning
from tests.support.ocsp_pki import Answer, Authority, Responder

NOW = datetime.datetime(2026, 6, 1, 12, 0, tzinfo=datetime.UTC)
HOUR = datetime.timedelta(hours=1)


def tls_of(uri: str, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigurationWarning)
        return ClientOptions.from_uri(uri, **kwargs).tls


@pytest.mark.parametrize(
    ("uri", "kwargs", "checked"),
    [
        ("mongodb://h/?tls=true", {}, True),
        ("mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=false", {}, True),
        ("mongodb://h/?tls=true&tlsDisableCertificateRevocationCheck=false", {}, True),
        ("mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=true", {}, False),
        ("mongodb://h/?tls=true&tlsDisableCertificateRevocationCheck=true", {}, False),
        ("mongodb://h/?tls=true", {"tlsDisableOCSPEndpointCheck": True}, False),
        ("mongodb://h/?tls=true", {"tlsDisableCertificateRevocationCheck": True}, False),
        ("mongodb://h/?tls=true&tlsInsecure=true", {}, False),
        ("mongodb://h/?tls=true&tlsAllowInvalidCertificates=true", {}, False),
        ("mongodb://h/?tls=true&tlsAllowInvalidHostnames=true", {}, True),
    ],
)
def test_the_options_decide_whether_the_responder_is_asked(
    uri: str, kwargs: dict[str, Any], checked: bool
) -> None:
    assert tls_of(uri, **kwargs).checks_ocsp_endpoint is checked


def test_an_ocsp_option_alone_turns_tls_on_like_any_tls_option() -> None:
    assert tls_of("mongodb://h/?tlsDisableOCSPEndpointCheck=false") is not None
    with pytest.raises(ConfigurationError, match="tls=false, yet TLS options are given"):
        tls_of("mongodb://h/?tls=false&tlsDisableOCSPEndpointCheck=true")


def test_a_crl_file_with_revocation_checking_off_is_a_contradiction() -> None:
    with pytest.raises(ConfigurationError, match="tlsCRLFile and tlsDisableCertificateRevocationCheck=true"):
        tls_of("mongodb://h/?tls=true&tlsCRLFile=/x.pem&tlsDisableCertificateRevocationCheck=true")
    assert (
        tls_of("mongodb://h/?tls=true&tlsCRLFile=/x.pem&tlsDisableCertificateRevocationCheck=false")
        is not None
    )


def test_without_cryptography_an_explicit_check_is_refused_and_the_default_one_is_said_to_be_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "cryptography" else real_find_spec(name, *a),
    )
    explicit = tls_of("mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=false")
    with pytest.raises(ConfigurationError, match=r"mongio\[ocsp\]"):
        create_revocation_checker(explicit, create_ssl_context(explicit))
    default = tls_of("mongodb://h/?tls=true")
    with pytest.warns(ConfigurationWarning, match=r"revocation is not checked.*mongio\[ocsp\]"):
        assert create_revocation_checker(default, create_ssl_context(default)) is None
    off = tls_of("mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=true")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert create_revocation_checker(off, create_ssl_context(off)) is None
    with pytest.raises(ConfigurationError, match=r"mongio\[ocsp\]"):
        MongoClient("mongodb://h/?tls=true&tlsDisableCertificateRevocationCheck=false", connect=False)


def test_a_checker_is_made_only_where_the_responder_is_asked() -> None:
    for uri, made in [
        ("mongodb://h/?tls=true", True),
        ("mongodb://h/?tls=true&tlsInsecure=true", False),
        ("mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=true", False),
    ]:
        tls = tls_of(uri)
        assert (create_revocation_checker(tls, create_ssl_context(tls)) is not None) is made, uri


def answer(
    status: CertificateStatus, this: datetime.datetime, next_: datetime.datetime | None
) -> StatusAnswer:
    return StatusAnswer(status, this, next_)


KEY = ("sha1", b"n", b"k", 7)


def test_the_cache_keeps_a_conclusive_answer_from_this_update_until_next_update() -> None:
    cache = OCSPCache()
    good = answer(CertificateStatus.GOOD, NOW - HOUR, NOW + HOUR)
    assert cache.put(KEY, good, NOW)
    assert cache.get(KEY, NOW) is good
    assert cache.get(KEY, NOW + HOUR - datetime.timedelta(seconds=1)) is good
    assert cache.get(KEY, NOW + HOUR) is None  # nextUpdate itself is excluded
    assert len(cache) == 0  # and the expired answer is gone
    assert cache.get(("sha1", b"n", b"k", 8), NOW) is None


def test_the_cache_refuses_unknown_answers_and_answers_without_next_update() -> None:
    cache = OCSPCache()
    assert not cache.put(KEY, answer(CertificateStatus.UNKNOWN, NOW - HOUR, NOW + HOUR), NOW)
    assert not cache.put(KEY, answer(CertificateStatus.GOOD, NOW - HOUR, None), NOW)
    assert not cache.put(KEY, answer(CertificateStatus.GOOD, NOW - 2 * HOUR, NOW - HOUR), NOW)
    assert len(cache) == 0
    assert cache.put(KEY, answer(CertificateStatus.REVOKED, NOW - HOUR, NOW + HOUR), NOW)


def test_a_fresher_answer_replaces_the_one_held_and_an_older_one_does_not() -> None:
    cache = OCSPCache()
    first = answer(CertificateStatus.GOOD, NOW - HOUR, NOW + HOUR)
    fresher = answer(CertificateStatus.GOOD, NOW - HOUR, NOW + 2 * HOUR)
    assert cache.put(KEY, first, NOW)
    assert cache.put(KEY, fresher, NOW)
    assert not cache.put(KEY, first, NOW)
    assert cache.get(KEY, NOW) is fresher


def test_the_cache_is_bounded_dropping_the_oldest() -> None:
    cache = OCSPCache(max_entries=2)
    for serial in range(3):
        cache.put(("sha1", b"n", b"k", serial), answer(CertificateStatus.GOOD, NOW - HOUR, NOW + HOUR), NOW)
    assert len(cache) == 2
    assert cache.get(("sha1", b"n", b"k", 0), NOW) is None
    assert cache.get(("sha1", b"n", b"k", 2), NOW) is not None


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority("ecdsa")


def test_the_certificate_extensions_are_read(authority: Authority) -> None:
    plain = authority.issue_server(["http://127.0.0.1:1/a", "http://127.0.0.1:2/b"]).cert
    stapled = authority.issue_server([], must_staple=True).cert
    assert responder_urls(plain) == ["http://127.0.0.1:1/a", "http://127.0.0.1:2/b"]
    assert responder_urls(stapled) == []
    assert must_staple(stapled) and not must_staple(plain)


def test_a_response_is_judged_against_the_certificate_asked_about(authority: Authority) -> None:
    responder = Responder(authority, answer=Answer.REVOKED)
    server = authority.issue_server([]).cert
    other = authority.issue_server([]).cert
    now = datetime.datetime.now(datetime.UTC)
    data = responder.respond_to(build_request(server, authority.cert))
    verdict = judge_response(data, server, authority.cert, now)
    assert verdict.status is CertificateStatus.REVOKED and verdict.revocation_reason == "keyCompromise"
    with pytest.raises(InvalidResponse, match="does not cover"):
        judge_response(data, other, authority.cert, now)
    with pytest.raises(InvalidResponse, match="expired"):
        judge_response(data, server, authority.cert, now + 2 * HOUR)
    with pytest.raises(InvalidResponse, match="in the future"):
        judge_response(data, server, authority.cert, now - HOUR)
    with pytest.raises(InvalidResponse, match="does not cover"):
        judge_response(data, server, Authority("ecdsa").cert, now)  # same issuer name, another key
    assert cert_id(server, authority.cert) != cert_id(other, authority.cert)


def test_a_tampered_signature_is_refused(authority: Authority) -> None:
    server = authority.issue_server([]).cert
    data = bytearray(Responder(authority).respond_to(build_request(server, authority.cert)))
    data[-5] ^= 0xFF  # inside the signature
    with pytest.raises(InvalidResponse):
        judge_response(bytes(data), server, authority.cert, datetime.datetime.now(datetime.UTC))


def test_responder_urls_other_than_plain_http_are_refused() -> None:
    assert unusable_responder("http://ocsp.example.com/x?y=1") is None
    assert unusable_responder("http://[::1]:8080") is None
    for url in ("https://ocsp.example.com/", "ldap://x", "http:///nohost", "http://h:99999/", "http://h:0/"):
        assert unusable_responder(url) is not None, url


async def test_a_responder_answering_another_status_is_named() -> None:
    async def failing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(failing, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    try:
        with pytest.raises(HttpError, match=f"the OCSP responder {url} answered HTTP 500"):
            await ask_responder(url, b"req")
    finally:
        server.close()
        await server.wait_closed()


async def test_an_answer_larger_than_the_bound_is_refused_as_it_arrives() -> None:

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        chunk = b"x" * 65536
        try:
            for _ in range(64):  # 4 MiB, far past the bound, without a Content-Length
                writer.write(chunk)
                await writer.drain()
        except OSError:
            pass  # the client hung up, as it should
        writer.close()

    server = await asyncio.start_server(flood, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(HttpError, match=f"larger than {MAX_RESPONSE_BYTES} bytes"):
            await ask_responder(f"http://127.0.0.1:{port}/", b"req")
    finally:
        server.close()
        await server.wait_closed()
