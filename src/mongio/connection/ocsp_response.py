"""OCSP with ``cryptography``: the request for a certificate, and the verdict on a responder's answer.

A response is believed only when it is valid per RFC 6960 section 3.2: it covers the certificate asked about
(same CertID), its signature verifies with the key of the certificate's issuer or of a responder the issuer
delegated to (a certificate issued by the issuer, with the OCSP signing extended key usage, inside its
validity period), its ``thisUpdate`` is not in the future and its ``nextUpdate``, when present, is not past.
Anything else raises :class:`InvalidResponse`.

Imported only when a client checks certificate revocation (``cryptography`` is the ``mongio[ocsp]`` extra).
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, padding, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID

__all__ = [
    "CertID",
    "CertificateStatus",
    "InvalidResponse",
    "StatusAnswer",
    "build_request",
    "cert_id",
    "is_issued_by",
    "judge_response",
    "must_staple",
    "responder_urls",
]

CLOCK_SKEW = datetime.timedelta(minutes=5)
"""How far in the future a fresh response's ``thisUpdate`` may be (the responder's clock runs ahead of
ours). ``nextUpdate`` gets no tolerance, as the OCSP specification says."""

CertID = tuple[str, bytes, bytes, int]
"""RFC 6960's CertID: hash algorithm name, issuer name hash, issuer key hash, serial number."""


class InvalidResponse(Exception):
    """The responder's answer cannot be believed (malformed, unsigned by whom it must be, stale, off-topic)."""


class CertificateStatus(enum.Enum):
    GOOD = "good"
    REVOKED = "revoked"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class StatusAnswer:
    """A verified answer about one certificate."""

    status: CertificateStatus
    this_update: datetime.datetime
    next_update: datetime.datetime | None
    revocation_time: datetime.datetime | None = None
    revocation_reason: str | None = None

    @property
    def conclusive(self) -> bool:
        """Good or revoked; "unknown" says nothing and is never cached."""
        return self.status is not CertificateStatus.UNKNOWN

    def valid_at(self, now: datetime.datetime) -> bool:
        """``thisUpdate <= now < nextUpdate``; without a ``nextUpdate`` an answer is valid only when received."""
        return self.next_update is not None and self.this_update <= now < self.next_update


def responder_urls(cert: x509.Certificate) -> list[str]:
    """The OCSP responder URLs of the certificate's Authority Information Access extension, in order."""
    try:
        access = cert.extensions.get_extension_for_class(x509.AuthorityInformationAccess).value
    except x509.ExtensionNotFound:
        return []
    return [
        description.access_location.value
        for description in access
        if description.access_method == AuthorityInformationAccessOID.OCSP
        and isinstance(description.access_location, x509.UniformResourceIdentifier)
    ]


def must_staple(cert: x509.Certificate) -> bool:
    """True for a certificate with the TLS Feature extension asking for ``status_request`` (RFC 7633)."""
    try:
        features = cert.extensions.get_extension_for_class(x509.TLSFeature).value
    except x509.ExtensionNotFound:
        return False
    return x509.TLSFeatureType.status_request in features


def is_issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """True when ``issuer``'s subject is ``cert``'s issuer and its key verifies ``cert``'s signature."""
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def _request_for(
    cert: x509.Certificate, issuer: x509.Certificate, algorithm: hashes.HashAlgorithm
) -> ocsp.OCSPRequest:
    return ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, algorithm).build()


def cert_id(
    cert: x509.Certificate, issuer: x509.Certificate, algorithm: hashes.HashAlgorithm | None = None
) -> CertID:
    """The CertID of ``cert`` (SHA-1 hashes unless ``algorithm`` says otherwise), the OCSP cache's key."""
    request = _request_for(cert, issuer, algorithm or hashes.SHA1())
    return (
        request.hash_algorithm.name,
        request.issuer_name_hash,
        request.issuer_key_hash,
        request.serial_number,
    )


def build_request(cert: x509.Certificate, issuer: x509.Certificate) -> bytes:
    """The DER OCSP request for ``cert`` (SHA-1 CertID, as responders universally accept; no nonce)."""
    return _request_for(cert, issuer, hashes.SHA1()).public_bytes(serialization.Encoding.DER)


def judge_response(
    data: bytes, cert: x509.Certificate, issuer: x509.Certificate, now: datetime.datetime
) -> StatusAnswer:
    """The verified status of ``cert`` in the DER OCSP response ``data``; raises ``InvalidResponse``."""
    try:
        response = ocsp.load_der_ocsp_response(data)
    except ValueError as exc:
        raise InvalidResponse(f"malformed OCSP response: {exc}") from None
    if response.response_status is not ocsp.OCSPResponseStatus.SUCCESSFUL:
        raise InvalidResponse(f"the responder answered {response.response_status.name}")
    single = _single_response_for(response, cert, issuer)
    signer = _signer(response, issuer, now)
    _verify_signature(signer, response)
    this_update = single.this_update_utc
    next_update = single.next_update_utc
    if this_update > now + CLOCK_SKEW:
        raise InvalidResponse(f"the response's thisUpdate {this_update.isoformat()} is in the future")
    if next_update is not None and next_update <= now:
        raise InvalidResponse(f"the response expired at its nextUpdate {next_update.isoformat()}")
    status = _STATUSES[single.certificate_status]
    revoked = status is CertificateStatus.REVOKED
    reason = single.revocation_reason
    return StatusAnswer(
        status,
        this_update,
        next_update,
        revocation_time=single.revocation_time_utc if revoked else None,
        revocation_reason=reason.value if revoked and reason is not None else None,
    )


_STATUSES = {
    ocsp.OCSPCertStatus.GOOD: CertificateStatus.GOOD,
    ocsp.OCSPCertStatus.REVOKED: CertificateStatus.REVOKED,
    ocsp.OCSPCertStatus.UNKNOWN: CertificateStatus.UNKNOWN,
}

_CERT_ID_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha1": hashes.SHA1,
    "sha224": hashes.SHA224,
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}


def _single_response_for(
    response: ocsp.OCSPResponse, cert: x509.Certificate, issuer: x509.Certificate
) -> ocsp.OCSPSingleResponse:
    """The response's entry whose CertID is ``cert``'s (computed with the entry's own hash algorithm)."""
    for single in response.responses:
        algorithm = _CERT_ID_HASHES.get(single.hash_algorithm.name)
        if algorithm is None:
            continue
        expected = cert_id(cert, issuer, algorithm())
        if (
            single.hash_algorithm.name,
            single.issuer_name_hash,
            single.issuer_key_hash,
            single.serial_number,
        ) == expected:
            return single
    raise InvalidResponse(
        f"the response does not cover the certificate with serial number {cert.serial_number:x}"
    )


def _key_hash(cert: x509.Certificate) -> bytes:
    """SHA-1 of the certificate's public key bits, as a ResponderID byKey holds it."""
    return x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest


def _is_responder(response: ocsp.OCSPResponse, cert: x509.Certificate) -> bool:
    if response.responder_name is not None:
        return response.responder_name == cert.subject
    return response.responder_key_hash == _key_hash(cert)


def _signer(
    response: ocsp.OCSPResponse, issuer: x509.Certificate, now: datetime.datetime
) -> x509.Certificate:
    """The issuer when it signed the response itself, else the delegated responder certificate it issued."""
    if _is_responder(response, issuer):
        return issuer
    for candidate in response.certificates:
        if not _is_responder(response, candidate):
            continue
        if not is_issued_by(candidate, issuer):
            raise InvalidResponse(
                "the response is signed by a responder the certificate's issuer did not issue"
            )
        try:
            usages = candidate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usages = x509.ExtendedKeyUsage([])
        if ExtendedKeyUsageOID.OCSP_SIGNING not in usages:
            raise InvalidResponse("the delegated responder's certificate lacks the OCSP signing key usage")
        if not candidate.not_valid_before_utc <= now <= candidate.not_valid_after_utc:
            raise InvalidResponse("the delegated responder's certificate is outside its validity period")
        return candidate
    raise InvalidResponse(
        "the response is signed neither by the certificate's issuer nor by a responder it named"
    )


def _verify_signature(signer: x509.Certificate, response: ocsp.OCSPResponse) -> None:
    key = signer.public_key()
    signature, data, algorithm = (
        response.signature,
        response.tbs_response_bytes,
        response.signature_hash_algorithm,
    )
    try:
        if isinstance(key, rsa.RSAPublicKey) and algorithm is not None:
            key.verify(signature, data, padding.PKCS1v15(), algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey) and algorithm is not None:
            key.verify(signature, data, ec.ECDSA(algorithm))
        elif isinstance(key, dsa.DSAPublicKey) and algorithm is not None:
            key.verify(signature, data, algorithm)
        elif isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
            key.verify(signature, data)
        else:
            raise InvalidResponse(
                f"the response's signature algorithm {response.signature_algorithm_oid.dotted_string} is not supported"
            )
    except InvalidSignature:
        raise InvalidResponse("the response's signature does not verify") from None
