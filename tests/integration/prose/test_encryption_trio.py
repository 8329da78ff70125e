"""Client-side encryption on trio: explicit encryption with a local master key and with a cloud master key
(the fake cloud KMS of tests/support/fake_kms.py, an asyncio server that a trio run serves from a thread of
its own, reached over TLS through the backend seam), automatic decryption by an encrypted client, and
on-demand Azure credentials (the fake metadata service, in a thread too).

Each test drives its own trio run (the suite's asyncio plugin runs ``async def`` tests on asyncio).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from mongio import MongoClient
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, libmongocrypt
from mongio.encryption.cloud_credentials import OnDemandCredentials
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, kms_credentials, kms_master_key
from tests.support.fake_metadata import TOKEN, FakeMetadataServer

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL = {"local": {"key": os.urandom(96)}}
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic


def _namespace() -> str:
    return f"keyvault_trio_{uuid.uuid4().hex[:10]}.datakeys"


@pytest.mark.parametrize("provider", ["aws", "azure", "gcp"])
def test_explicit_encryption_with_a_cloud_kms_on_trio(server_uri: str, tmp_path: Path, provider: str) -> None:
    certificates = KmsCertificates.make(str(tmp_path))

    async def body() -> tuple[dict[str, Any], int]:
        async with FakeCloudKms(certificates) as kms:
            return await explicit_encryption(kms), kms.requests

    async def explicit_encryption(kms: FakeCloudKms) -> dict[str, Any]:
        namespace = _namespace()
        providers = {provider: kms_credentials(provider, kms.endpoint)}
        tls = {provider: {"tlsCAFile": certificates.ca_file}}
        async with MongoClient(server_uri) as key_client:
            async with ClientEncryption(
                providers, namespace, key_client, None, kms_tls_options=tls
            ) as encryption:
                key_id = await encryption.create_data_key(provider, kms_master_key(provider, kms.endpoint))
                key = await encryption.get_key(key_id)
                encrypted = await encryption.encrypt("on trio", DETERMINISTIC, key_id=key_id)
            # A new ClientEncryption has no key cached: the KMS unwraps the data key.
            async with ClientEncryption(providers, namespace, key_client, None, kms_tls_options=tls) as fresh:
                decrypted = await fresh.decrypt(encrypted)
            await key_client.drop_database(namespace.partition(".")[0])
        assert key is not None
        return {
            "provider": key["masterKey"]["provider"],
            "subtype": encrypted.subtype,
            "decrypted": decrypted,
        }

    result, answered = trio.run(body)
    assert result == {"provider": provider, "subtype": 6, "decrypted": "on trio"}
    assert answered >= 2  # the wrap and the unwrap (and Azure's and GCP's tokens) went to the fake KMS


def test_explicit_encryption_and_automatic_decryption_with_a_local_key_on_trio(server_uri: str) -> None:
    async def body() -> dict[str, Any]:
        namespace = _namespace()
        data = f"trio_{uuid.uuid4().hex[:10]}"
        async with MongoClient(server_uri) as plain:
            async with ClientEncryption(LOCAL, namespace, plain, plain.codec_options) as encryption:
                key_id = await encryption.create_data_key("local", key_alt_names=["trio"])
                secrets = [
                    await encryption.encrypt(f"secret {n}", RANDOM, key_alt_name="trio") for n in range(3)
                ]
                round_trip = await encryption.decrypt(secrets[0])
            await plain[data].vault.insert_many([{"_id": n, "secret": s} for n, s in enumerate(secrets)])
            stored = await plain[data].vault.find_one({"_id": 0})
            opts = AutoEncryptionOpts(LOCAL, namespace, bypass_auto_encryption=True)
            async with MongoClient(server_uri, auto_encryption_opts=opts) as encrypted_client:
                read = await encrypted_client[data].vault.find({}, batch_size=2).sort("_id").to_list()
            await plain.drop_database(data)
            await plain.drop_database(namespace.partition(".")[0])
        assert stored is not None
        return {
            "key_subtype": key_id.subtype,
            "stored_subtype": stored["secret"].subtype,
            "round_trip": round_trip,
            "read": [document["secret"] for document in read],
        }

    assert trio.run(body) == {
        "key_subtype": 4,
        "stored_subtype": 6,
        "round_trip": "secret 0",
        "read": ["secret 0", "secret 1", "secret 2"],
    }


def test_concurrent_on_demand_azure_credentials_share_one_token_on_trio() -> None:
    async def body() -> tuple[list[dict[str, str]], int]:
        async with FakeMetadataServer() as metadata:
            imds_url = f"http://{metadata.host}/metadata/identity/oauth2/token"
            credentials = OnDemandCredentials(azure_imds_url=imds_url)
            tokens: list[dict[str, str]] = []

            async def fetch() -> None:
                tokens.append(await credentials.azure())

            async with trio.open_nursery() as nursery:  # the second fetch waits on the first one's lock
                nursery.start_soon(fetch)
                nursery.start_soon(fetch)
            return tokens, len(metadata.requests)

    tokens, requests = trio.run(body)
    assert tokens == [{"accessToken": TOKEN}] * 2
    assert requests == 1  # the second fetch found the first one's token cached
