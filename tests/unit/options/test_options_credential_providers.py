"""``credential_providers`` of ``ClientEncryption`` and ``AutoEncryptionOpts`` without a server: what is refused
when the ``ClientEncryption`` or the encrypted client is made (a provider while ``kms_providers["aws"]`` holds
credentials or is missing, a provider name other than ``aws``, something not callable), and what the on-demand
credentials make of a provider's answer."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mongio import MongoClient
from mongio.connection.auth.aws_credentials import AwsCredentials
from mongio.encryption import AutoEncryptionOpts, libmongocrypt
from mongio.encryption.cloud_credentials import OnDemandCredentials, aws_credential_provider
from mongio.errors import ConfigurationError, EncryptionError

needs_extra = pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]")
SECRET = "kms-secret-access-key"
ON_DEMAND: dict[str, Any] = {"aws": {}}


def provider() -> AwsCredentials:
    return AwsCredentials("AKIAPROVIDER", "provider-secret", "provider-token")


REFUSED = [
    (
        {"aws": provider},
        {"aws": {"accessKeyId": "AKIAGIVEN", "secretAccessKey": SECRET}},
        r"credential_providers\['aws'\] needs kms_providers\['aws'\] to be the empty map .* is not the empty map",
    ),
    (
        {"aws": provider},
        {"local": {"key": b"k" * 96}},
        r"credential_providers\['aws'\] needs kms_providers\['aws'\] .* is not given",
    ),
    ({"aws": provider, "gcp": provider}, ON_DEMAND, "credential_providers has no provider named 'gcp'"),
    ({"aws:named": provider}, {"aws:named": {}}, "credential_providers has no provider named 'aws:named'"),
    ({"aws": "AKIAPROVIDER"}, ON_DEMAND, r"credential_providers\['aws'\] must be a function .* not str"),
    ({"aws": None}, ON_DEMAND, r"credential_providers\['aws'\] must be a function .* not NoneType"),
    ([("aws", provider)], ON_DEMAND, "credential_providers must be a mapping .* not list"),
]


@pytest.mark.parametrize(("credential_providers", "kms_providers", "message"), REFUSED)
def test_refused_credential_providers_are_named(
    credential_providers: Any, kms_providers: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        aws_credential_provider(credential_providers, kms_providers)
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize("credential_providers", [None, {}])
def test_no_provider_leaves_the_credential_chain(credential_providers: Any) -> None:
    assert (
        aws_credential_provider(credential_providers, {"aws": {"accessKeyId": "a", "secretAccessKey": "s"}})
        is None
    )


def test_a_provider_with_on_demand_aws_is_taken() -> None:
    assert aws_credential_provider({"aws": provider}, {"aws": {}, "local": {"key": b"k" * 96}}) is provider


@needs_extra
@pytest.mark.parametrize(("credential_providers", "kms_providers", "message"), REFUSED)
def test_a_client_encryption_refuses_them_when_made(
    credential_providers: Any, kms_providers: dict[str, Any], message: str
) -> None:
    from mongio.encryption import ClientEncryption

    client: MongoClient = MongoClient("mongodb://h")
    with pytest.raises(ConfigurationError, match=message):
        ClientEncryption(
            kms_providers, "keyvault.datakeys", client, None, credential_providers=credential_providers
        )


@needs_extra
@pytest.mark.parametrize(("credential_providers", "kms_providers", "message"), REFUSED)
def test_an_encrypted_client_refuses_them_when_made(
    credential_providers: Any, kms_providers: dict[str, Any], message: str
) -> None:
    opts = AutoEncryptionOpts(kms_providers, "keyvault.datakeys", credential_providers=credential_providers)
    with pytest.raises(ConfigurationError, match=message):
        MongoClient("mongodb://h", auto_encryption_opts=opts)


def test_the_options_keep_the_provider_out_of_their_repr() -> None:
    opts = AutoEncryptionOpts(ON_DEMAND, "keyvault.datakeys", credential_providers={"aws": provider})
    assert opts.credential_providers == {"aws": provider}
    assert "provider" not in repr(opts)
    assert AutoEncryptionOpts(ON_DEMAND, "keyvault.datakeys").credential_providers is None


# --- what the on-demand credentials make of the provider's answer -------------------------------------------


async def test_a_plain_provider_runs_in_a_worker_thread_and_its_answer_becomes_the_aws_options() -> None:
    threads: list[int] = []

    def counting() -> AwsCredentials:
        threads.append(threading.get_ident())
        return provider()

    fetched = await OnDemandCredentials(aws_provider=counting).fetch({"aws": {}, "local": {"key": b"k" * 96}})
    assert fetched == {
        "aws": {
            "accessKeyId": "AKIAPROVIDER",
            "secretAccessKey": "provider-secret",
            "sessionToken": "provider-token",
        }
    }
    assert len(threads) == 1 and threads[0] != threading.get_ident()


async def test_a_coroutine_provider_is_awaited_and_permanent_credentials_have_no_session_token() -> None:
    async def permanent() -> AwsCredentials:
        return AwsCredentials("AKIAPERMANENT", "permanent-secret")

    assert await OnDemandCredentials(aws_provider=permanent).aws() == {
        "accessKeyId": "AKIAPERMANENT",
        "secretAccessKey": "permanent-secret",
    }


async def test_a_provider_failure_is_an_encryption_error_without_the_exception_text() -> None:
    def failing() -> AwsCredentials:
        raise PermissionError(f"cannot read {SECRET}")

    with pytest.raises(
        EncryptionError, match=r"credential_providers\['aws'\] raised PermissionError"
    ) as raised:
        await OnDemandCredentials(aws_provider=failing).aws()
    assert SECRET not in str(raised.value)


async def test_a_provider_answering_a_mapping_is_named() -> None:
    def mapping() -> Any:
        return {"accessKeyId": "AKIA", "secretAccessKey": SECRET}

    with pytest.raises(EncryptionError, match="returned dict, not credentials with access_key") as raised:
        await OnDemandCredentials(aws_provider=mapping).aws()
    assert SECRET not in str(raised.value) and SECRET not in repr(raised.value)
