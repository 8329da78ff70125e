"""AWS Signature Version 4, with hashlib and hmac only: the general steps (canonical request, string to
sign, signing key, signature) and the one request MONGODB-AWS signs, ``sts:GetCallerIdentity``.

The STS host comes from the server, so it is checked first (RFC 1035 length, no empty label) and the
region is derived from it as the authentication specification says.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ALGORITHM",
    "GET_CALLER_IDENTITY_BODY",
    "SignedRequest",
    "authorization_header",
    "canonical_request",
    "check_sts_host",
    "region_from_host",
    "sign_get_caller_identity",
    "signature",
    "signing_key",
    "string_to_sign",
]

ALGORITHM = "AWS4-HMAC-SHA256"
GET_CALLER_IDENTITY_BODY = "Action=GetCallerIdentity&Version=2011-06-15"
_DEFAULT_REGION = "us-east-1"
_SERVICE = "sts"
_MAX_HOST = 255


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def canonical_request(
    method: str, path: str, query: str, headers: Mapping[str, str], signed_headers: Sequence[str], body: bytes
) -> str:
    """The canonical request: ``headers`` keyed by lower-case name, ``signed_headers`` sorted lower-case names;
    ``path`` and ``query`` already in canonical (encoded, sorted) form."""
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed_headers)
    return "\n".join([method, path, query, canonical_headers, ";".join(signed_headers), _sha256_hex(body)])


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    return "\n".join([ALGORITHM, amz_date, scope, _sha256_hex(canonical.encode("utf-8"))])


def signing_key(secret_key: str, date_stamp: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), date_stamp)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def signature(secret_key: str, amz_date: str, region: str, service: str, canonical: str) -> str:
    """The hex signature of ``canonical`` made at ``amz_date`` (``YYYYMMDDTHHMMSSZ``)."""
    date_stamp = amz_date[:8]
    scope = f"{date_stamp}/{region}/{service}/aws4_request"
    key = signing_key(secret_key, date_stamp, region, service)
    return hmac.new(
        key, string_to_sign(amz_date, scope, canonical).encode("utf-8"), hashlib.sha256
    ).hexdigest()


def authorization_header(
    access_key_id: str,
    amz_date: str,
    region: str,
    service: str,
    signed_headers: Sequence[str],
    signature_hex: str,
) -> str:
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    return (
        f"{ALGORITHM} Credential={access_key_id}/{scope}, SignedHeaders={';'.join(signed_headers)}, "
        f"Signature={signature_hex}"
    )


def check_sts_host(host: str) -> None:
    """Raise ``ValueError`` naming why ``host`` cannot be an STS host (empty, over 255 bytes, empty label)."""
    size = len(host.encode("utf-8"))
    if size == 0:
        raise ValueError("the server sent an empty STS host")
    if size > _MAX_HOST:
        raise ValueError(f"the server sent an STS host of {size} bytes, more than {_MAX_HOST}")
    if host.startswith("."):
        raise ValueError(f"the server's STS host {host!r} starts with a period")
    if host.endswith("."):
        raise ValueError(f"the server's STS host {host!r} ends with a period")
    if ".." in host:
        raise ValueError(f"the server's STS host {host!r} has an empty label")


def region_from_host(host: str) -> str:
    """The region of the STS host: its second label, ``us-east-1`` for ``sts.amazonaws.com`` or one label."""
    check_sts_host(host)
    if host == "sts.amazonaws.com" or "." not in host:
        return _DEFAULT_REGION
    return host.split(".")[1]


@dataclass(frozen=True)
class SignedRequest:
    """The client's second MONGODB-AWS message: the ``Authorization`` header and the ``X-Amz-Date`` it signed."""

    authorization: str
    amz_date: str


def sign_get_caller_identity(
    access_key_id: str,
    secret_key: str,
    session_token: str | None,
    host: str,
    server_nonce_b64: str,
    amz_date: str,
) -> SignedRequest:
    """Sign ``POST /`` to ``host`` with the GetCallerIdentity body and the headers the specification lists."""
    region = region_from_host(host)
    headers = {
        "content-length": str(len(GET_CALLER_IDENTITY_BODY)),
        "content-type": "application/x-www-form-urlencoded",
        "host": host,
        "x-amz-date": amz_date,
        "x-mongodb-gs2-cb-flag": "n",
        "x-mongodb-server-nonce": server_nonce_b64,
    }
    if session_token is not None:
        headers["x-amz-security-token"] = session_token
    signed = sorted(headers)
    canonical = canonical_request("POST", "/", "", headers, signed, GET_CALLER_IDENTITY_BODY.encode())
    signature_hex = signature(secret_key, amz_date, region, _SERVICE, canonical)
    return SignedRequest(
        authorization_header(access_key_id, amz_date, region, _SERVICE, signed, signature_hex), amz_date
    )
