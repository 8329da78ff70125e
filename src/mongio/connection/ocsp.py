"""Certificate revocation checking with OCSP after the TLS handshake (the OCSP support specification).

Python's ``ssl`` module can neither ask for a stapled OCSP response nor read one, so mongio does what the
specification allows without stapling, on public APIs only (docs/ocsp.md says what is and is not checked):

1. The server's (leaf) certificate and its issuer are found: the issuer is the second certificate of the
   verified chain on Python 3.13+ (``SSLObject.get_verified_chain()``); before 3.13 only the leaf is public,
   so the issuer is looked for among the trusted CA certificates the client loaded (``tlsCAFile``, else the
   system's), matched by subject and by the signature on the leaf.
2. The client's cache is consulted, keyed by the CertID: a conclusive answer (good or revoked) is used while
   ``thisUpdate <= now < nextUpdate``.
3. Otherwise an OCSP request goes to every ``http://`` responder of the certificate's Authority Information
   Access extension at once; the first valid conclusive answer wins. The exchange is bounded by five seconds
   or by what is left of ``connectTimeoutMS``, whichever is less.
4. A revoked certificate fails the connection. Anything inconclusive (no issuer, no responder, a responder
   unreachable, slow, or answering "unknown" or something invalid) lets the connection proceed ("soft fail"),
   logged on the ``mongio.ocsp`` logger, except for a certificate with the Must-Staple (TLS Feature
   ``status_request``) extension: mongio cannot see whether the server stapled, so such a certificate must be
   confirmed good, or the connection fails.

Intermediate certificates are not checked (the specification advises against it). Imported only by clients
that check revocation; it needs ``cryptography`` (the ``mongio[ocsp]`` extra).
"""

from __future__ import annotations

import datetime
import logging
import ssl
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography import x509

from mongio.backend import as_completed, gather, running_loop, timeout
from mongio.connection.http import HttpError, http_request
from mongio.connection.ocsp_response import (
    CertID,
    CertificateStatus,
    InvalidResponse,
    StatusAnswer,
    build_request,
    cert_id,
    is_issued_by,
    judge_response,
    must_staple,
    responder_urls,
)

__all__ = ["REQUEST_TIMEOUT", "CertificateRejected", "OCSPCache", "RevocationChecker", "RevocationOutcome"]

_log = logging.getLogger("mongio.ocsp")

REQUEST_TIMEOUT = 5.0
"""The OCSP specification's default limit on the responder requests, in seconds."""

CACHE_SIZE = 1024
"""The most answers one client's cache keeps (one per distinct server certificate it met)."""

OCSP_REQUEST_TYPE = "application/ocsp-request"
MAX_RESPONSE_BYTES = 256 * 1024
"""The most body an OCSP answer may hold; real ones are a few kilobytes."""


class CertificateRejected(Exception):
    """The server's certificate is revoked, or is a Must-Staple certificate whose status stayed unconfirmed."""


@dataclass(frozen=True)
class RevocationOutcome:
    """What the check found: ``status`` (None when no conclusive answer was had) and how, in ``detail``;
    ``asked`` is true when responders were asked (a soft failure then means they failed)."""

    status: CertificateStatus | None
    detail: str
    from_cache: bool = False
    asked: bool = False

    @property
    def log_level(self) -> int:
        """DEBUG for a good certificate, WARNING when the responders failed, INFO when none could be asked."""
        if self.status is CertificateStatus.GOOD:
            return logging.DEBUG
        return logging.WARNING if self.asked else logging.INFO


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class OCSPCache:
    """Conclusive OCSP answers by CertID, each kept while ``thisUpdate <= now < nextUpdate``.

    An answer without ``nextUpdate`` is never kept (it is valid only when received); an answer with a later
    ``nextUpdate`` replaces the one kept. At most ``max_entries`` are kept: expired ones go first, then the
    oldest stored.
    """

    def __init__(self, max_entries: int = CACHE_SIZE) -> None:
        self._max_entries = max_entries
        self._answers: dict[CertID, StatusAnswer] = {}

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: CertID, now: datetime.datetime) -> StatusAnswer | None:
        answer = self._answers.get(key)
        if answer is None:
            return None
        if not answer.valid_at(now):
            if answer.next_update is not None and answer.next_update <= now:
                del self._answers[key]  # expired for good; a not-yet-valid answer may become valid
            return None
        return answer

    def put(self, key: CertID, answer: StatusAnswer, now: datetime.datetime) -> bool:
        """Keep ``answer`` if it is conclusive and valid at ``now``; True when it was kept."""
        if not answer.conclusive or not answer.valid_at(now):
            return False
        held = self._answers.get(key)
        if held is not None and _fresher(held, answer):
            return False
        self._answers.pop(key, None)
        self._answers[key] = answer
        if len(self._answers) > self._max_entries:
            self._evict(now)
        return True

    def _evict(self, now: datetime.datetime) -> None:
        for key in [key for key, held in self._answers.items() if not held.valid_at(now)]:
            del self._answers[key]
        while len(self._answers) > self._max_entries:
            del self._answers[next(iter(self._answers))]


def _fresher(held: StatusAnswer, answer: StatusAnswer) -> bool:
    """True when the answer ``held`` has the later ``nextUpdate`` (both kept ones have one)."""
    return (
        held.next_update is not None
        and answer.next_update is not None
        and held.next_update > answer.next_update
    )


class RevocationChecker:
    """One client's OCSP check of its servers' certificates, with its cache.

    ``trusted`` are the DER certificates the client's ``SSLContext`` trusts (``get_ca_certs(binary_form=True)``):
    where the issuer is looked for before Python 3.13.
    """

    def __init__(self, trusted: Sequence[bytes]) -> None:
        self._trusted_der = tuple(trusted)
        self._trusted: list[x509.Certificate] | None = None
        self._cache = OCSPCache()

    async def check(self, ssl_object: ssl.SSLObject, deadline: float | None = None) -> RevocationOutcome:
        """Check the certificate ``ssl_object``'s peer presented; raises ``CertificateRejected``.

        ``deadline`` (``loop.time()`` terms) bounds the responder requests together with ``REQUEST_TIMEOUT``.
        """
        leaf_der = ssl_object.getpeercert(binary_form=True)
        if leaf_der is None:
            return RevocationOutcome(None, "the server presented no certificate")
        leaf = x509.load_der_x509_certificate(leaf_der)
        outcome = await self._status_of(leaf, ssl_object, deadline)
        if outcome.status is CertificateStatus.REVOKED:
            raise CertificateRejected(f"{_describe(leaf)} is revoked: {outcome.detail}")
        if outcome.status is not CertificateStatus.GOOD and must_staple(leaf):
            raise CertificateRejected(
                f"{_describe(leaf)} has the Must-Staple extension, and mongio cannot read a stapled OCSP "
                f"response (Python's ssl module cannot), so it needs the responder to confirm the "
                f"certificate is good; it could not: {outcome.detail}"
            )
        _log.log(outcome.log_level, "OCSP check of %s: %s", _describe(leaf), outcome.detail)
        return outcome

    async def _status_of(
        self, leaf: x509.Certificate, ssl_object: ssl.SSLObject, deadline: float | None
    ) -> RevocationOutcome:
        issuer = self._issuer_of(leaf, ssl_object)
        if issuer is None:
            return RevocationOutcome(None, _NO_ISSUER)
        key = cert_id(leaf, issuer)
        cached = self._cache.get(key, _utc_now())
        if cached is not None:
            return RevocationOutcome(
                cached.status, _describe_answer(cached, "a cached OCSP answer"), from_cache=True
            )
        urls = responder_urls(leaf)
        if not urls:
            return RevocationOutcome(None, "the certificate names no OCSP responder; its status is unchecked")
        timeout = REQUEST_TIMEOUT
        if deadline is not None:
            timeout = min(timeout, deadline - running_loop().time())
        if timeout <= 0:
            return RevocationOutcome(None, "connectTimeoutMS left no time to ask the OCSP responder")
        answer, source, problems = await _ask_responders(
            urls, build_request(leaf, issuer), leaf, issuer, timeout
        )
        if answer is None:
            return RevocationOutcome(
                None, "no conclusive OCSP answer (" + "; ".join(problems) + ")", asked=True
            )
        self._cache.put(key, answer, _utc_now())
        return RevocationOutcome(answer.status, _describe_answer(answer, source), asked=True)

    def _issuer_of(self, leaf: x509.Certificate, ssl_object: ssl.SSLObject) -> x509.Certificate | None:
        if sys.version_info >= (3, 13):
            chain = ssl_object.get_verified_chain()
            return x509.load_der_x509_certificate(chain[1]) if len(chain) > 1 else None
        for candidate in self._trusted_certificates():
            if candidate.subject == leaf.issuer and is_issued_by(leaf, candidate):
                return candidate
        return None

    def _trusted_certificates(self) -> list[x509.Certificate]:
        if self._trusted is None:
            self._trusted = [x509.load_der_x509_certificate(der) for der in self._trusted_der]
        return self._trusted


_NO_ISSUER = (
    "the certificate's issuer is not among the trusted CA certificates (before Python 3.13 the ssl module "
    "shows only the server's own certificate, so an intermediate issuer must be in tlsCAFile); its status "
    "is unchecked"
)


async def _ask_responders(
    urls: list[str],
    request: bytes,
    leaf: x509.Certificate,
    issuer: x509.Certificate,
    seconds: float,
) -> tuple[StatusAnswer | None, str, list[str]]:
    """The first valid conclusive answer of the responders, all asked at once, and which one gave it; with
    none, what went wrong with each."""
    problems: list[str] = []
    responders: list[str] = []
    for url in urls:
        problem = unusable_responder(url)
        if problem is None:
            responders.append(url)
        else:
            problems.append(problem)

    async def ask(responder: str) -> tuple[StatusAnswer, str]:
        data = await ask_responder(responder, request)
        return judge_response(data, leaf, issuer, _utc_now()), responder

    loop = running_loop()
    tasks = [loop.create_task(ask(responder)) for responder in responders]
    try:
        async with timeout(seconds):
            async for finished in as_completed(tasks):
                try:
                    answer, source = await finished
                except (HttpError, InvalidResponse) as exc:
                    problems.append(str(exc))
                    continue
                except Exception as exc:  # a hostile answer breaking the parser is as inconclusive as any
                    problems.append(f"unreadable OCSP answer ({type(exc).__name__}: {exc})")
                    continue
                if answer.conclusive:
                    return answer, f"the OCSP responder {source}", problems
                problems.append(f"the OCSP responder {source} does not know the certificate (status unknown)")
    except TimeoutError:
        problems.append(f"no OCSP answer within {seconds:.3g}s")
    finally:
        for task in tasks:
            task.cancel()
        await gather(*tasks)
    return None, "", problems


def unusable_responder(url: str) -> str | None:
    """Why the responder ``url`` (from a certificate) cannot be asked, or ``None``: responders are asked in plain
    HTTP (RFC 6960, appendix A.1), so only an ``http://`` URL with a host and a valid port is."""
    try:
        parts = urlsplit(url)
        port = parts.port  # refuses a port that is not a number in range
    except ValueError as exc:
        return f"invalid OCSP responder URL {url!r}: {exc}"
    if parts.scheme.lower() != "http" or not parts.hostname or port == 0:
        return f"OCSP responder URL {url!r} is not an http:// URL with a host"
    return None


async def ask_responder(url: str, request: bytes) -> bytes:
    """The body of the responder's ``200`` answer to the DER ``request``; ``HttpError`` naming the responder for
    a failure, another status or a malformed or oversized answer. No time limit of its own: the caller bounds
    all responders together."""
    try:
        response = await http_request(
            "POST",
            url,
            headers={"Content-Type": OCSP_REQUEST_TYPE},
            body=request,
            time_limit=None,
            max_body=MAX_RESPONSE_BYTES,
        )
    except HttpError as exc:
        raise HttpError(f"the OCSP responder {url} failed: {exc}") from None
    if response.status != 200:
        raise HttpError(f"the OCSP responder {url} answered HTTP {response.status}")
    return response.body


def _describe(cert: x509.Certificate) -> str:
    return f"the server certificate {cert.subject.rfc4514_string()!r} (serial number {cert.serial_number:x})"


def _describe_answer(answer: StatusAnswer, source: str) -> str:
    if answer.status is CertificateStatus.REVOKED:
        when = answer.revocation_time.isoformat() if answer.revocation_time is not None else "an unknown time"
        reason = f", reason {answer.revocation_reason}" if answer.revocation_reason else ""
        return f"{source} reports it revoked at {when}{reason}"
    return f"{source} reports it {answer.status.value}"
