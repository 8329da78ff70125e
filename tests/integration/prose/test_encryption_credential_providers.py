"""Custom AWS credential providers (``credential_providers={"aws": provider}``) against the fake cloud KMS on
loopback: prose test 26 (README of client-side-encryption/tests), its four cases, with a provider returning
made-up credentials in place of the secrets manager's.

Every KMS request is checked to be signed (SigV4, recomputed here) with the provider's secret key, while the
AWS credential chain has credentials of its own to offer (the environment in case 4; the chain's endpoints,
faked on loopback, otherwise), so a provider that were ignored would show. Then the same through an
encrypted client (``AutoEncryptionOpts``), plain and coroutine providers and where each runs, and the
provider's failures, which are ``EncryptionError`` naming the provider.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable
from typing import Any

import pytest

from mongio import MongoClient
from mongio.bson.binary import Binary
from mongio.connection.auth.aws_credentials import AwsCredentials
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, libmongocrypt
from mongio.errors import ConfigurationError, EncryptionError
from tests.support.fake_aws import FakeAwsEndpoints
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, SeenRequest, kms_credentials, kms_master_key

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
PROVIDER_KEY = AwsCredentials("AKIAPROVIDER", "provider-secret-key", "provider-session-token")
ENVIRONMENT_KEY = ("AKIAENVIRONMENT", "environment-secret-key")


class CountingProvider:
    """A plain-function provider returning :data:`PROVIDER_KEY`, counting its calls and their threads."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __call__(self) -> AwsCredentials:
        self.threads.append(threading.get_ident())
        return PROVIDER_KEY


def coroutine_provider(threads: list[int]) -> Callable[[], Any]:
    async def provider() -> AwsCredentials:
        threads.append(threading.get_ident())
        return PROVIDER_KEY

    return provider


def signing_key_id(request: SeenRequest) -> str:
    """The access key id of a SigV4 ``Authorization`` header."""
    credential = request.headers["authorization"].split("Credential=", 1)[1]
    return credential.split("/", 1)[0]


def signed_with(request: SeenRequest, secret_key: str) -> bool:
    """Whether ``request``'s SigV4 signature is the one ``secret_key`` makes (recomputed independently)."""
    authorization = request.headers["authorization"]
    fields = dict(part.strip().split("=", 1) for part in authorization.split(" ", 1)[1].split(","))
    _, date, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"]
    path, _, query = request.target.partition("?")
    canonical_headers = "".join(f"{name}:{request.headers[name]}\n" for name in signed.split(";"))
    canonical = "\n".join(
        [request.method, path, query, canonical_headers, signed, hashlib.sha256(request.body).hexdigest()]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            request.headers["x-amz-date"],
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = ("AWS4" + secret_key).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.compare_digest(
        hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), fields["Signature"]
    )


def assert_signed_by_the_provider(kms: FakeCloudKms) -> None:
    assert kms.seen, "the KMS was asked"
    for request in kms.seen:
        assert signing_key_id(request) == PROVIDER_KEY.access_key
        assert signed_with(request, PROVIDER_KEY.secret_key)
        assert request.headers["x-amz-security-token"] == PROVIDER_KEY.token


def with_provider(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, provider: Callable[[], Any]
) -> ClientEncryption:
    return ClientEncryption(
        {"aws": {}},
        namespace,
        key_client,
        None,
        kms_tls_options={"aws": {"tlsCAFile": certificates.ca_file}},
        credential_providers={"aws": provider},
    )


# --- 26, case 1: a provider with credentials already in kms_providers ---------------------------------------


async def test_prose_26_case_1_client_encryption_refuses_a_provider_with_aws_credentials_given(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms
) -> None:
    given = kms_credentials("aws", kms.endpoint)
    with pytest.raises(
        ConfigurationError, match=r"credential_providers\['aws'\].*kms_providers\['aws'\]"
    ) as raised:
        ClientEncryption(
            {"aws": given}, namespace, key_client, None, credential_providers={"aws": CountingProvider()}
        )
    assert given["secretAccessKey"] not in str(raised.value)


# --- 26, case 2: the provider's credentials make the data key -----------------------------------------------


@pytest.mark.parametrize("kind", ["function", "coroutine function"])
async def test_prose_26_case_2_the_provider_supplies_the_credentials(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    aws_endpoints: FakeAwsEndpoints,
    kind: str,
) -> None:
    threads: list[int] = []
    plain = CountingProvider()
    provider = plain if kind == "function" else coroutine_provider(threads)
    async with with_provider(key_client, namespace, certificates, provider) as encryption:
        key_id = await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
        assert isinstance(key_id, Binary) and key_id.subtype == 4
        assert await encryption.get_key(key_id) is not None
        assert await encryption.decrypt(await encryption.encrypt("value", RANDOM, key_id=key_id)) == "value"
    calls = plain.threads if kind == "function" else threads
    assert calls, "the provider was called"
    in_worker_thread = all(thread != threading.get_ident() for thread in calls)
    assert in_worker_thread is (kind == "function"), (
        "a plain function runs in a worker thread, a coroutine here"
    )
    assert_signed_by_the_provider(kms)
    assert sum(aws_endpoints.hits.values()) == 0, "the AWS credential chain was not asked"


# --- 26, case 3: AutoEncryptionOpts with a provider and credentials already in kms_providers -----------------


async def test_prose_26_case_3_an_encrypted_client_refuses_a_provider_with_aws_credentials_given(
    server_uri: str, namespace: str, kms: FakeCloudKms
) -> None:
    opts = AutoEncryptionOpts(
        {"aws": kms_credentials("aws", kms.endpoint)},
        namespace,
        credential_providers={"aws": CountingProvider()},
    )
    with pytest.raises(ConfigurationError, match=r"credential_providers\['aws'\].*kms_providers\['aws'\]"):
        MongoClient(server_uri, auto_encryption_opts=opts)


# --- 26, case 4: the provider wins over AWS credentials in the environment ---------------------------------


async def test_prose_26_case_4_the_provider_is_used_instead_of_the_environment(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    aws_endpoints: FakeAwsEndpoints,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ENVIRONMENT_KEY[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ENVIRONMENT_KEY[1])
    provider = CountingProvider()
    async with with_provider(key_client, namespace, certificates, provider) as encryption:
        key_id = await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
        assert await encryption.get_key(key_id) is not None
    assert provider.threads, "the provider was called"
    assert_signed_by_the_provider(kms)


async def test_without_a_provider_the_same_environment_signs(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    aws_endpoints: FakeAwsEndpoints,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Case 4's counterpart: the environment's credentials are there to be used when no provider is given."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ENVIRONMENT_KEY[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ENVIRONMENT_KEY[1])
    tls = {"aws": {"tlsCAFile": certificates.ca_file}}
    async with ClientEncryption({"aws": {}}, namespace, key_client, None, kms_tls_options=tls) as encryption:
        await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert [signing_key_id(request) for request in kms.seen] == [ENVIRONMENT_KEY[0]]
    assert signed_with(kms.seen[0], ENVIRONMENT_KEY[1])
    assert not signed_with(kms.seen[0], PROVIDER_KEY.secret_key)  # the check tells the secrets apart


# --- the provider behind automatic decryption ---------------------------------------------------------------


async def test_an_encrypted_client_fetches_its_aws_credentials_from_the_provider(
    server_uri: str,
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    aws_endpoints: FakeAwsEndpoints,
) -> None:
    tls = {"aws": {"tlsCAFile": certificates.ca_file}}
    given = {"aws": kms_credentials("aws", kms.endpoint)}
    async with ClientEncryption(given, namespace, key_client, None, kms_tls_options=tls) as encryption:
        key_id = await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
        encrypted = await encryption.encrypt("secret value", RANDOM, key_id=key_id)
    database = namespace.partition(".")[0]
    await key_client[database].values.insert_one({"_id": 1, "v": encrypted})
    kms.seen.clear()
    provider = CountingProvider()
    opts = AutoEncryptionOpts(
        {"aws": {}},
        namespace,
        bypass_auto_encryption=True,
        kms_tls_options=tls,
        credential_providers={"aws": provider},
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        document = await client[database].values.find_one({"_id": 1})
    assert document is not None and document["v"] == "secret value"
    assert provider.threads, "the provider was called"
    assert_signed_by_the_provider(kms)
    assert sum(aws_endpoints.hits.values()) == 0


# --- the provider's failures --------------------------------------------------------------------------------


class NotCredentials:
    access_key = "AKIAPROVIDER"


def raising() -> AwsCredentials:
    raise RuntimeError("the profile is missing")


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (raising, r"credential_providers\['aws'\] raised RuntimeError"),
        (lambda: {"accessKeyId": "AKIAPROVIDER", "secretAccessKey": "s"}, r"returned dict, not credentials"),
        (NotCredentials, r"returned NotCredentials, not credentials"),
        (lambda: AwsCredentials("", "s"), "without an access key or secret key"),
    ],
)
async def test_a_failing_provider_is_an_encryption_error_naming_it(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    provider: Callable[[], Any],
    message: str,
) -> None:
    async with with_provider(key_client, namespace, certificates, provider) as encryption:
        with pytest.raises(EncryptionError, match=message):
            await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert kms.requests == 0
