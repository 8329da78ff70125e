"""The cloud KMS providers (``aws``, ``azure``, ``gcp``, and named ones) against a fake KMS on loopback
(tests/support/fake_kms.py), with the client-side encryption prose tests it can stand behind (README of
client-side-encryption/tests, by number):

2 (data keys from Azure and GCP master keys), 7 (custom endpoints: cases 1, 4, 6, 7 and 8 on loopback), 11
(KMS TLS options: cases 1, 2, 3, 5 and 6), 15 (on-demand AWS credentials: the failure case and the EC2
instance metadata case), 16 case 1 (rewrap between every pair of providers), 17 and 18 (on-demand GCP and
Azure credentials, through a ``ClientEncryption``) and 24 (KMS retries, for Azure and GCP).

Where the README names a cloud host (``kms.us-east-1.amazonaws.com``, ``doesnotexist.invalid``), the test
uses the fake's loopback address or a loopback port nobody listens on: tests send nothing off the machine.
The rest covers timeouts (``timeoutMS`` and ``mongio.timeout()`` bound KMS exchanges, their backoff
included) and credentials a KMS refuses.
"""

from __future__ import annotations

import socket
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from mongio import MongoClient, backend, timeout
from mongio.bson.binary import Binary
from mongio.encryption import Algorithm, ClientEncryption, crypt_io, libmongocrypt
from mongio.encryption.cloud_credentials import AZURE_ENDPOINT_VARIABLE
from mongio.errors import ConfigurationError, EncryptionError, MongioError
from tests.support.fake_aws import FakeAwsEndpoints
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, kms_credentials, kms_master_key
from tests.support.fake_metadata import TOKEN, FakeMetadataServer

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL_KEY = bytes(range(96))
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
CLOUDS = ("aws", "azure", "gcp")


def closed_port() -> str:
    """``127.0.0.1:port`` where nothing listens (the README's unreachable hosts, kept on loopback)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def encryption_for(
    key_client: MongoClient,
    namespace: str,
    providers: dict[str, Any],
    tls: dict[str, dict[str, Any]] | None = None,
) -> ClientEncryption:
    return ClientEncryption(providers, namespace, key_client, None, kms_tls_options=tls)


def all_providers(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates
) -> ClientEncryption:
    """A ClientEncryption with ``local`` and the three clouds, every cloud on the fake KMS."""
    return encryption_for(
        key_client,
        namespace,
        {name: kms_credentials(name, kms.endpoint) for name in ("local", *CLOUDS)},
        {name: {"tlsCAFile": certificates.ca_file} for name in CLOUDS},
    )


def on_demand_encryption(
    key_client: MongoClient, namespace: str, provider: str, certificates: KmsCertificates
) -> ClientEncryption:
    """A ``ClientEncryption`` that fetches ``provider``'s credentials on demand (its options left empty) and
    trusts the fake KMS's certificate authority."""
    return encryption_for(
        key_client, namespace, {provider: {}}, {provider: {"tlsCAFile": certificates.ca_file}}
    )


async def assert_data_key_round_trip(encryption: ClientEncryption, provider: str, kms: FakeCloudKms) -> None:
    """A data key made under ``provider``'s master key on the fake KMS encrypts a value that decrypts back."""
    key_id = await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))
    assert await encryption.decrypt(await encryption.encrypt("test", RANDOM, key_id=key_id)) == "test"


# --- 2: data keys from cloud master keys --------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["azure", "gcp"])
async def test_prose_2_data_key_and_double_encryption_with_a_cloud_kms_master_key(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates, provider: str
) -> None:
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        key_id = await encryption.create_data_key(
            provider, kms_master_key(provider, kms.endpoint), key_alt_names=[f"{provider}_altname"]
        )
        key = await encryption.get_key(key_id)
        assert key is not None and key["masterKey"]["provider"] == provider
        by_id = await encryption.encrypt(f"hello {provider}", DETERMINISTIC, key_id=key_id)
        by_name = await encryption.encrypt(
            f"hello {provider}", DETERMINISTIC, key_alt_name=f"{provider}_altname"
        )
        assert by_id == by_name
    async with all_providers(key_client, namespace, kms, certificates) as fresh:  # the KMS unwraps the key
        assert await fresh.decrypt(by_id) == f"hello {provider}"
    verbs = [target.partition("?")[0].rsplit("/", 1)[-1].rpartition(":")[2] for target in kms.targets()]
    wrap, unwrap = ("wrapkey", "unwrapkey") if provider == "azure" else ("encrypt", "decrypt")
    assert verbs[:2] == ["token", wrap]  # the identity endpoint's token, then the master key wraps the key
    assert verbs[-2:] == ["token", unwrap]  # a new ClientEncryption: a new token, then the unwrap


# --- 7: custom endpoints ------------------------------------------------------------------------------------


async def test_prose_7_cases_1_and_6_aws_endpoints(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates
) -> None:
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        await assert_data_key_round_trip(encryption, "aws", kms)
        unreachable = closed_port()
        with pytest.raises(EncryptionError, match=f"KMS {unreachable}: ConnectionRefusedError"):
            await encryption.create_data_key("aws", kms_master_key("aws", unreachable))


@pytest.mark.parametrize("provider", ["azure", "gcp"])
async def test_prose_7_cases_7_and_8_azure_and_gcp_endpoints(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates, provider: str
) -> None:
    tls = {provider: {"tlsCAFile": certificates.ca_file}}
    async with encryption_for(
        key_client, namespace, {provider: kms_credentials(provider, kms.endpoint)}, tls
    ) as encryption:
        await assert_data_key_round_trip(encryption, provider, kms)
    unreachable = closed_port()  # client_encryption_invalid: its identity endpoint is unreachable
    async with encryption_for(
        key_client, namespace, {provider: kms_credentials(provider, unreachable)}, tls
    ) as invalid:
        with pytest.raises(EncryptionError, match=f"KMS {unreachable}: ConnectionRefusedError"):
            await invalid.create_data_key(provider, kms_master_key(provider, kms.endpoint))


# --- 11: KMS TLS options ------------------------------------------------------------------------------------


class TlsServers:
    """The README's three KMS servers, one certificate authority: an expired certificate, a certificate for
    another host name, and a valid certificate with a demand for a client certificate."""

    def __init__(self, directory: Path) -> None:
        authority = trustme.CA()
        made = {}
        for name, options in (
            ("expired", {"expired": True}),
            ("wrong_host", {"names": ("kms.wrong-host.invalid",)}),
            ("client_cert", {"require_client_certificate": True}),
        ):
            (directory / name).mkdir()
            made[name] = KmsCertificates.make(str(directory / name), authority=authority, **options)
        self.certificates = made
        self.ca_file = made["client_cert"].ca_file
        self.client_file = made["client_cert"].client_file


@pytest.fixture
async def tls_servers(tmp_path: Path) -> AsyncIterator[dict[str, FakeCloudKms]]:
    servers = TlsServers(tmp_path)
    async with (
        FakeCloudKms(servers.certificates["expired"]) as expired,
        FakeCloudKms(servers.certificates["wrong_host"]) as wrong_host,
        FakeCloudKms(servers.certificates["client_cert"]) as client_cert,
    ):
        yield {
            "expired": expired,
            "wrong_host": wrong_host,
            "client_cert": client_cert,
            "ca_file": servers.ca_file,  # type: ignore[dict-item]
            "client_file": servers.client_file,  # type: ignore[dict-item]
        }


@pytest.mark.parametrize("provider", CLOUDS)
async def test_prose_11_cases_1_to_3_kms_tls_options(
    key_client: MongoClient, namespace: str, tls_servers: dict[str, Any], provider: str
) -> None:
    ca_file, client_file = tls_servers["ca_file"], tls_servers["client_file"]

    def attempt(server: str, tls: dict[str, Any]) -> Any:
        endpoint = tls_servers[server].endpoint
        encryption = encryption_for(
            key_client, namespace, {provider: kms_credentials(provider, endpoint)}, {provider: tls}
        )
        return encryption, kms_master_key(provider, endpoint)

    no_client_cert, key = attempt("client_cert", {"tlsCAFile": ca_file})
    async with no_client_cert:
        with pytest.raises(
            EncryptionError, match=r"certificate required|handshake failure|requires a client certificate"
        ):
            await no_client_cert.create_data_key(provider, key)
    with_tls, key = attempt("client_cert", {"tlsCAFile": ca_file, "tlsCertificateKeyFile": client_file})
    async with with_tls:  # the handshake succeeds: the fake answers as the cloud would
        key_id = await with_tls.create_data_key(provider, key)
        assert await with_tls.decrypt(await with_tls.encrypt("tls", RANDOM, key_id=key_id)) == "tls"
    expired, key = attempt("expired", {"tlsCAFile": ca_file, "tlsCertificateKeyFile": client_file})
    async with expired:
        with pytest.raises(EncryptionError, match="certificate has expired"):
            await expired.create_data_key(provider, key)
    invalid_hostname, key = attempt(
        "wrong_host", {"tlsCAFile": ca_file, "tlsCertificateKeyFile": client_file}
    )
    async with invalid_hostname:
        with pytest.raises(EncryptionError, match="IP address mismatch"):
            await invalid_hostname.create_data_key(provider, key)
    assert tls_servers["expired"].requests == tls_servers["wrong_host"].requests == 0


async def test_prose_11_case_5_tls_disable_ocsp_endpoint_check_is_permitted(key_client: MongoClient) -> None:
    encryption = ClientEncryption(
        {"aws": {"accessKeyId": "foo", "secretAccessKey": "bar"}},
        "keyvault.datakeys",
        key_client,
        None,
        kms_tls_options={"aws": {"tlsDisableOCSPEndpointCheck": True}},
    )
    assert "keyvault.datakeys" in repr(encryption)


@pytest.mark.parametrize("provider", CLOUDS)
async def test_prose_11_case_6_named_kms_providers_apply_their_tls_options(
    key_client: MongoClient, namespace: str, tls_servers: dict[str, Any], provider: str
) -> None:
    server = tls_servers["client_cert"]
    without, with_tls = f"{provider}:no_client_cert", f"{provider}:with_tls"
    async with encryption_for(
        key_client,
        namespace,
        {
            without: kms_credentials(provider, server.endpoint),
            with_tls: kms_credentials(provider, server.endpoint),
        },
        {
            without: {"tlsCAFile": tls_servers["ca_file"]},
            with_tls: {
                "tlsCAFile": tls_servers["ca_file"],
                "tlsCertificateKeyFile": tls_servers["client_file"],
            },
        },
    ) as encryption:
        with pytest.raises(
            EncryptionError, match=r"certificate required|handshake failure|requires a client certificate"
        ):
            await encryption.create_data_key(without, kms_master_key(provider, server.endpoint))
        key_id = await encryption.create_data_key(with_tls, kms_master_key(provider, server.endpoint))
        key = await encryption.get_key(key_id)
        assert key is not None and key["masterKey"]["provider"] == with_tls


async def test_a_kms_ca_file_that_cannot_be_read_is_refused_when_made(
    key_client: MongoClient, tmp_path: Path
) -> None:
    not_a_certificate = tmp_path / "ca.pem"
    not_a_certificate.write_text("not a certificate\n")
    for path in (str(not_a_certificate), str(tmp_path / "missing.pem")):
        with pytest.raises(ConfigurationError, match=f"tlsCAFile '{path}' cannot be loaded"):
            ClientEncryption(
                {"azure": {}},
                "keyvault.datakeys",
                key_client,
                None,
                kms_tls_options={"azure": {"tlsCAFile": path}},
            )


@pytest.mark.parametrize("provider", CLOUDS)
async def test_a_kms_certificate_from_another_authority_fails_naming_the_kms(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, tmp_path: Path, provider: str
) -> None:
    (tmp_path / "other").mkdir()
    other = KmsCertificates.make(str(tmp_path / "other"))
    async with encryption_for(
        key_client,
        namespace,
        {provider: kms_credentials(provider, kms.endpoint)},
        {provider: {"tlsCAFile": other.ca_file}},
    ) as encryption:
        with pytest.raises(
            EncryptionError, match=f"KMS {kms.endpoint}: unable to get local issuer certificate"
        ):
            await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))
    assert kms.requests == 0


# --- 16 case 1: rewrap between providers --------------------------------------------------------------------


@pytest.mark.parametrize("destination", ["local", *CLOUDS])
@pytest.mark.parametrize("source", ["local", *CLOUDS])
async def test_prose_16_case_1_rewrap_with_a_separate_client_encryption(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    source: str,
    destination: str,
) -> None:
    async with (
        all_providers(key_client, namespace, kms, certificates) as first,
        all_providers(key_client, namespace, kms, certificates) as second,
    ):
        key_id = await first.create_data_key(source, kms_master_key(source, kms.endpoint))
        ciphertext = await first.encrypt("test", DETERMINISTIC, key_id=key_id)
        result = await second.rewrap_many_data_key({}, destination, kms_master_key(destination, kms.endpoint))
        assert result.bulk_write_result is not None and result.bulk_write_result.modified_count == 1
        key = await second.get_key(key_id)
        assert key is not None and key["masterKey"]["provider"] == destination
        assert await first.decrypt(ciphertext) == "test"
        assert await second.decrypt(ciphertext) == "test"
    async with all_providers(
        key_client, namespace, kms, certificates
    ) as fresh:  # the rewrapped key, unwrapped
        assert await fresh.decrypt(ciphertext) == "test"


# --- 15, 17, 18: on-demand credentials through a ClientEncryption -------------------------------------------


async def test_prose_15_case_1_without_aws_credentials_creating_a_key_fails(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    aws_endpoints: FakeAwsEndpoints,
) -> None:
    aws_endpoints.fail_status = 404  # no instance role: the chain's last source has nothing
    async with on_demand_encryption(key_client, namespace, "aws", certificates) as encryption:
        with pytest.raises(EncryptionError, match=r"instance metadata|EC2|404"):
            await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert kms.requests == 0


async def test_prose_15_on_demand_aws_credentials_from_the_instance_metadata_service(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    aws_endpoints: FakeAwsEndpoints,
) -> None:
    async with on_demand_encryption(key_client, namespace, "aws", certificates) as encryption:
        await assert_data_key_round_trip(encryption, "aws", kms)
    issued = aws_endpoints.issued[0]
    assert all(issued.access_key in request.headers["authorization"] for request in kms.seen)
    assert all(request.headers["x-amz-security-token"] == issued.token for request in kms.seen)


async def test_prose_17_on_demand_gcp_credentials_through_a_client_encryption(
    key_client: MongoClient,
    namespace: str,
    certificates: KmsCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeMetadataServer() as metadata, FakeCloudKms(certificates, bearer_tokens=(TOKEN,)) as kms:
        monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
        async with on_demand_encryption(key_client, namespace, "gcp", certificates) as encryption:
            await assert_data_key_round_trip(encryption, "gcp", kms)
    assert metadata.requests and all(
        headers["metadata-flavor"] == "Google" for _, headers in metadata.requests
    )
    assert "/token" not in kms.targets()  # the metadata server's token, not a signed JWT exchanged for one


async def test_prose_17_case_1_gcp_metadata_failure_through_a_client_encryption(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeMetadataServer(case="404") as metadata:
        monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
        async with encryption_for(key_client, namespace, {"gcp": {}}) as encryption:
            with pytest.raises(EncryptionError, match="GCE metadata server answered HTTP 404"):
                await encryption.create_data_key("gcp", kms_master_key("gcp", kms.endpoint))
    assert kms.requests == 0


async def test_prose_18_on_demand_azure_credentials_through_a_client_encryption(
    key_client: MongoClient,
    namespace: str,
    certificates: KmsCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeMetadataServer() as metadata, FakeCloudKms(certificates, bearer_tokens=(TOKEN,)) as kms:
        monkeypatch.setenv(AZURE_ENDPOINT_VARIABLE, f"http://{metadata.host}")
        async with on_demand_encryption(key_client, namespace, "azure", certificates) as encryption:
            await assert_data_key_round_trip(encryption, "azure", kms)
    assert len(metadata.requests) == 1  # the token is cached across the two exchanges
    assert metadata.requests[0][0].startswith("/metadata/identity/oauth2/token?api-version=2018-02-01")
    assert all(request.headers["authorization"] == f"Bearer {TOKEN}" for request in kms.seen)


# --- 24 and retries -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("drops", "errors"), [(1, 0), (0, 1)], ids=["case_1_tcp", "case_2_http"])
@pytest.mark.parametrize("provider", ["azure", "gcp"])
async def test_prose_24_kms_retries_for_azure_and_gcp(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    provider: str,
    drops: int,
    errors: int,
) -> None:
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        kms.drop_connections, kms.server_errors = drops, errors
        key_id = await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))
        kms.drop_connections, kms.server_errors = drops, errors
        assert await encryption.decrypt(await encryption.encrypt("x", RANDOM, key_id=key_id)) == "x"
    assert kms.drop_connections == 0 and kms.server_errors == 0


@pytest.mark.parametrize("provider", CLOUDS)
async def test_prose_24_case_3_create_data_key_fails_after_too_many_retries(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates, provider: str
) -> None:
    kms.drop_connections = 4
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        with pytest.raises(EncryptionError, match="last attempt failed"):
            await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))
    assert kms.requests == 0


async def test_a_kms_that_resets_the_connection_before_answering_is_reported_as_unanswered(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates
) -> None:
    """A reset before any answer reads as a close before any answer: what a KMS demanding a client certificate
    under TLS 1.3 does, with either ending depending on timing, so the error gives the same hint."""
    kms.reset_connections = 4
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        with pytest.raises(
            EncryptionError, match=r"last attempt failed .*: ConnectionError: the KMS closed the connection without"
        ):
            await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert kms.reset_connections == 0 and kms.requests == 0


async def test_retries_wait_the_backoff_libmongocrypt_asks_for(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def recording_sleep(seconds: float) -> None:
        waits.append(seconds)

    recording_backend = types.SimpleNamespace(**{**vars(backend), "sleep": recording_sleep})
    monkeypatch.setattr(crypt_io, "backend", recording_backend)
    kms.server_errors = 2
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert len(waits) == 2 and all(seconds > 0 for seconds in waits)
    assert kms.requests == 3


@pytest.mark.parametrize("provider", CLOUDS)
async def test_credentials_a_kms_refuses_are_an_encryption_error_naming_the_status(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates, provider: str
) -> None:
    kms.refuse_credentials = True
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        with pytest.raises(EncryptionError, match=r"HTTP status=40[01]"):
            await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))


@pytest.mark.parametrize("provider", CLOUDS)
async def test_a_key_the_kms_did_not_wrap_fails_to_unwrap(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates, provider: str
) -> None:
    """A key document whose master key names another KMS key (Azure, GCP), or whose wrapped material names
    one (AWS, whose Decrypt reads the key from the ciphertext): the KMS refuses to unwrap it."""
    vault = key_client[namespace.partition(".")[0]][namespace.partition(".")[2]]
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        key_id = await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))
    if provider == "aws":
        key = await vault.find_one({"_id": key_id})
        assert key is not None
        material = bytearray(key["keyMaterial"])
        material[2] ^= 1  # the first character of the key ARN the blob names
        await vault.update_one({"_id": key_id}, {"$set": {"keyMaterial": Binary(bytes(material), 0)}})
    else:
        await vault.update_one({"_id": key_id}, {"$set": {"masterKey.keyName": "another"}})
    async with all_providers(key_client, namespace, kms, certificates) as fresh:
        with pytest.raises(EncryptionError, match="HTTP status=400"):
            await fresh.encrypt("x", RANDOM, key_id=key_id)


# --- timeouts -----------------------------------------------------------------------------------------------


@pytest.fixture
def short_attempts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(crypt_io, "KMS_TIMEOUT", 1.0)  # room for a handshake on a loaded machine
    yield


async def test_a_stalled_kms_attempt_times_out_and_is_retried(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    short_attempts: None,
) -> None:
    kms.hang = True
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        with pytest.raises(EncryptionError, match=r"no complete answer .* within 1 s"):
            await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert kms.requests == 4  # the first attempt and libmongocrypt's three retries


async def test_mongio_timeout_bounds_a_kms_exchange(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates
) -> None:
    kms.hang = True
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        with pytest.raises(MongioError, match=r"timeout expired \(KMS 127\.0\.0\.1:\d+") as raised:
            async with timeout(1.0):
                await encryption.create_data_key("gcp", kms_master_key("gcp", kms.endpoint))
    assert raised.value.timeout and not isinstance(raised.value, EncryptionError)
    assert kms.requests <= 1  # no retry once the operation's time is up


async def test_the_key_vault_clients_timeout_ms_bounds_each_operation(
    server_uri: str, namespace: str, kms: FakeCloudKms, certificates: KmsCertificates
) -> None:
    async with MongoClient(server_uri, timeoutMS=5000) as bounded:
        async with all_providers(bounded, namespace, kms, certificates) as encryption:
            key_id = await encryption.create_data_key("azure", kms_master_key("azure", kms.endpoint))
            kms.hang = True
        async with all_providers(bounded, namespace, kms, certificates) as fresh:
            with pytest.raises(MongioError) as raised:
                await fresh.encrypt("x", RANDOM, key_id=key_id)
    assert raised.value.timeout


async def test_a_backoff_longer_than_the_time_left_fails_at_once(
    key_client: MongoClient,
    namespace: str,
    kms: FakeCloudKms,
    certificates: KmsCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    real_backoff = libmongocrypt.KmsRequest.backoff_seconds

    async def recording_sleep(seconds: float) -> None:
        slept.append(seconds)

    def long_backoff(request: libmongocrypt.KmsRequest) -> float:
        asked = real_backoff.__get__(request)
        return 30.0 if asked else 0.0

    recording_backend = types.SimpleNamespace(**{**vars(backend), "sleep": recording_sleep})
    monkeypatch.setattr(crypt_io, "backend", recording_backend)
    monkeypatch.setattr(libmongocrypt.KmsRequest, "backoff_seconds", property(long_backoff))
    kms.server_errors = 1
    async with all_providers(key_client, namespace, kms, certificates) as encryption:
        with pytest.raises(MongioError, match="waiting to retry KMS") as raised:
            async with timeout(5):
                await encryption.create_data_key("aws", kms_master_key("aws", kms.endpoint))
    assert raised.value.timeout and slept == [] and kms.requests == 1
