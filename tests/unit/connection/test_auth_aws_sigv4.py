"""SigV4 signing against AWS's published examples, the STS host checks and the region rule of auth.md.

The expected signatures are the ones AWS documents for its examples (the IAM ``ListUsers`` request of the
Signature Version 4 guide, which auth.md quotes too, and the S3 ``GET Object`` example of the S3 API
reference); the GetCallerIdentity signature is checked against the tests' own independent recomputation.
"""

from __future__ import annotations

import base64
import hashlib

import pytest

from mongio.connection.auth.sigv4 import (
    canonical_request,
    check_sts_host,
    region_from_host,
    sign_get_caller_identity,
    signature,
)
from tests.support.fake_aws import KeyStore, verify_get_caller_identity

EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def test_iam_list_users_example_signature() -> None:
    # AWS General Reference, "Signature Version 4 signing process" example: GET https://iam.amazonaws.com/
    # ?Action=ListUsers&Version=2010-05-08 at 20150830T123600Z; the documented signature ends the quote.
    headers = {
        "content-type": "application/x-www-form-urlencoded; charset=utf-8",
        "host": "iam.amazonaws.com",
        "x-amz-date": "20150830T123600Z",
    }
    canonical = canonical_request(
        "GET", "/", "Action=ListUsers&Version=2010-05-08", headers, sorted(headers), b""
    )
    assert (
        signature(EXAMPLE_SECRET, "20150830T123600Z", "us-east-1", "iam", canonical)
        == "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    )


def test_s3_get_object_example_signature() -> None:
    # Amazon S3 API reference, "Signature Calculations for the Authorization Header", example GET Object.
    empty_hash = hashlib.sha256(b"").hexdigest()
    headers = {
        "host": "examplebucket.s3.amazonaws.com",
        "range": "bytes=0-9",
        "x-amz-content-sha256": empty_hash,
        "x-amz-date": "20130524T000000Z",
    }
    canonical = canonical_request("GET", "/test.txt", "", headers, sorted(headers), b"")
    assert (
        signature(
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524T000000Z", "us-east-1", "s3", canonical
        )
        == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_a_changed_header_changes_the_signature() -> None:
    headers = {"host": "iam.amazonaws.com", "x-amz-date": "20150830T123600Z"}
    first = canonical_request("GET", "/", "", headers, sorted(headers), b"")
    second = canonical_request("GET", "/", "", {**headers, "host": "iam.amazonaws.co"}, sorted(headers), b"")
    assert signature(EXAMPLE_SECRET, "20150830T123600Z", "us-east-1", "iam", first) != signature(
        EXAMPLE_SECRET, "20150830T123600Z", "us-east-1", "iam", second
    )


@pytest.mark.parametrize(
    ("host", "region"),
    [
        ("sts.amazonaws.com", "us-east-1"),
        ("sts.us-west-2.amazonaws.com", "us-west-2"),
        ("sts.us-west-2.amazonaws.com.ch", "us-west-2"),
        ("example.com", "com"),
        ("localhost", "us-east-1"),
    ],
)
def test_region_from_host_follows_the_specification_table(host: str, region: str) -> None:
    assert region_from_host(host) == region


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("sts..com", "empty label"),
        (".amazonaws.com", "starts with a period"),
        ("sts.amazonaws.", "ends with a period"),
        ("", "empty"),
        ("a" * 256, "256 bytes"),
        ("é" * 128, "256 bytes"),  # 128 characters, 256 bytes: the limit counts bytes
    ],
)
def test_invalid_sts_hosts_are_refused_naming_why(host: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_sts_host(host)
    with pytest.raises(ValueError, match=problem):
        region_from_host(host)


def test_a_host_of_255_bytes_is_accepted() -> None:
    check_sts_host("a" * 255)


@pytest.mark.parametrize("token", [None, "session-token"])
@pytest.mark.parametrize("host", ["sts.amazonaws.com", "sts.eu-west-3.amazonaws.com", "localhost"])
def test_get_caller_identity_signature_is_what_sts_recomputes(token: str | None, host: str) -> None:
    keys = KeyStore()
    keys.add("AKIDEXAMPLE", EXAMPLE_SECRET, token)
    nonce = bytes(range(64))
    signed = sign_get_caller_identity(
        "AKIDEXAMPLE", EXAMPLE_SECRET, token, host, base64.b64encode(nonce).decode(), "20191107T002607Z"
    )
    assert signed.authorization.startswith(
        f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20191107/{region_from_host(host)}/sts/aws4_request, "
    )
    assert ("x-amz-security-token" in signed.authorization) is (token is not None)
    assert verify_get_caller_identity(keys, signed.authorization, signed.amz_date, token, host, nonce) is None
    # The same request signed with another secret, or for another nonce, is refused.
    keys.add("AKIDEXAMPLE", EXAMPLE_SECRET + "x", token)
    assert (
        verify_get_caller_identity(keys, signed.authorization, signed.amz_date, token, host, nonce)
        is not None
    )
    keys.add("AKIDEXAMPLE", EXAMPLE_SECRET, token)
    assert (
        verify_get_caller_identity(keys, signed.authorization, signed.amz_date, token, host, nonce[::-1])
        is not None
    )
