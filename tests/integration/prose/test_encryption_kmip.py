"""KMIP master keys against a KMIP server on loopback (PyKMIP's): data keys made with the ``kmip`` provider,
plain (a secret registered on the server) and ``delegated`` (the server encrypts), a named ``kmip:name1``
provider whose TLS options are its own, and a client without its certificate refused (prose tests 2 and 11
for KMIP)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mongio import MongoClient
from mongio.encryption import Algorithm, ClientEncryption, libmongocrypt
from mongio.errors import EncryptionError

pytest.importorskip("kmip", reason="needs PyKMIP for the KMIP server")

from tests.support.kmip_server import KmipServerProcess

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random


@pytest.fixture(scope="module")
def kmip_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KmipServerProcess]:
    server = KmipServerProcess(Path(tmp_path_factory.mktemp("kmip"))).start()
    yield server
    server.stop()


@pytest.fixture
async def key_client(server_uri: str) -> AsyncIterator[MongoClient]:
    async with MongoClient(server_uri) as client:
        yield client
        await client.drop_database("keyvault_kmip")


def kmip_encryption(client: MongoClient, server: KmipServerProcess, name: str = "kmip") -> ClientEncryption:
    return ClientEncryption(
        {name: {"endpoint": server.endpoint}},
        "keyvault_kmip.datakeys",
        client,
        None,
        kms_tls_options={name: {"tlsCAFile": server.ca_file, "tlsCertificateKeyFile": server.client_file}},
    )


@pytest.mark.parametrize("master_key", [None, {"delegated": True}])
async def test_a_kmip_data_key_encrypts_and_decrypts(
    key_client: MongoClient, kmip_server: KmipServerProcess, master_key: dict[str, bool] | None
) -> None:
    async with kmip_encryption(key_client, kmip_server) as encryption:
        key_id = await encryption.create_data_key("kmip", master_key, key_alt_names=[uuid.uuid4().hex])
        key = await encryption.get_key(key_id)
        assert key is not None and key["masterKey"]["provider"] == "kmip"
        assert bool(key["masterKey"].get("delegated")) == bool(master_key)
        encrypted = await encryption.encrypt("kmip value", RANDOM, key_id=key_id)
    async with kmip_encryption(key_client, kmip_server) as fresh:  # no cached data key: the KMS again
        assert await fresh.decrypt(encrypted) == "kmip value"


async def test_a_named_kmip_provider_uses_its_own_tls_options(
    key_client: MongoClient, kmip_server: KmipServerProcess
) -> None:
    async with kmip_encryption(key_client, kmip_server, "kmip:name1") as encryption:
        key_id = await encryption.create_data_key("kmip:name1")
        assert await encryption.decrypt(await encryption.encrypt(1, RANDOM, key_id=key_id)) == 1


async def test_without_its_client_certificate_the_kmip_server_refuses_the_handshake(
    key_client: MongoClient, kmip_server: KmipServerProcess
) -> None:
    async with ClientEncryption(
        {"kmip": {"endpoint": kmip_server.endpoint}},
        "keyvault_kmip.datakeys",
        key_client,
        None,
        kms_tls_options={"kmip": {"tlsCAFile": kmip_server.ca_file}},
    ) as encryption:
        with pytest.raises(EncryptionError, match="handshake failure"):
            await encryption.create_data_key("kmip")


async def test_a_kmip_server_the_client_does_not_trust_is_refused(
    key_client: MongoClient, kmip_server: KmipServerProcess
) -> None:
    async with ClientEncryption(
        {"kmip": {"endpoint": kmip_server.endpoint}}, "keyvault_kmip.datakeys", key_client, None
    ) as encryption:
        with pytest.raises(EncryptionError, match="certificate"):
            await encryption.create_data_key("kmip")


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


async def test_prose_7_cases_4_and_10_to_12_kmip_endpoints(
    key_client: MongoClient, kmip_server: KmipServerProcess
) -> None:
    """The README's ``keyId: "1"`` is a secret its KMIP server holds; here the secret registered for a first
    key stands in for it. Unreachable endpoints are loopback ports nobody listens on."""
    async with kmip_encryption(key_client, kmip_server) as encryption:
        first = await encryption.get_key(await encryption.create_data_key("kmip"))
        assert first is not None
        secret = {"keyId": first["masterKey"]["keyId"]}
        key_id = await encryption.create_data_key("kmip", secret)  # case 10: the provider's endpoint
        assert await encryption.decrypt(await encryption.encrypt("test", RANDOM, key_id=key_id)) == "test"
        key_id = await encryption.create_data_key("kmip", {**secret, "endpoint": kmip_server.endpoint})  # 11
        assert await encryption.decrypt(await encryption.encrypt("test", RANDOM, key_id=key_id)) == "test"
        for _ in range(2):  # cases 4 and 12
            unreachable = _closed_port()
            with pytest.raises(EncryptionError, match=f"KMS {unreachable}: ConnectionRefusedError"):
                await encryption.create_data_key("kmip", {**secret, "endpoint": unreachable})
    unreachable = _closed_port()  # case 10's client_encryption_invalid: its provider endpoint is unreachable
    async with ClientEncryption(
        {"kmip": {"endpoint": unreachable}},
        "keyvault_kmip.datakeys",
        key_client,
        None,
        kms_tls_options={
            "kmip": {"tlsCAFile": kmip_server.ca_file, "tlsCertificateKeyFile": kmip_server.client_file}
        },
    ) as invalid:
        with pytest.raises(EncryptionError, match=f"KMS {unreachable}: ConnectionRefusedError"):
            await invalid.create_data_key("kmip", secret)


async def test_prose_11_case_4_and_case_6_kmip_tls_options(
    key_client: MongoClient, kmip_server: KmipServerProcess
) -> None:
    """Without its client certificate the handshake fails; with it the key is made; the named providers
    ``kmip:no_client_cert`` and ``kmip:with_tls`` each apply their own options. (The expired and wrong-host
    certificate cases run against the fake cloud KMS, through the same TLS code.)"""
    tls = {"tlsCAFile": kmip_server.ca_file, "tlsCertificateKeyFile": kmip_server.client_file}
    async with ClientEncryption(
        {
            "kmip": {"endpoint": kmip_server.endpoint},
            "kmip:no_client_cert": {"endpoint": kmip_server.endpoint},
            "kmip:with_tls": {"endpoint": kmip_server.endpoint},
        },
        "keyvault_kmip.datakeys",
        key_client,
        None,
        kms_tls_options={
            "kmip": tls,
            "kmip:no_client_cert": {"tlsCAFile": kmip_server.ca_file},
            "kmip:with_tls": tls,
        },
    ) as encryption:
        assert await encryption.create_data_key("kmip", {}) is not None
        with pytest.raises(EncryptionError, match=r"handshake failure|requires a client certificate"):
            await encryption.create_data_key("kmip:no_client_cert", {})
        key_id = await encryption.create_data_key("kmip:with_tls", {})
        key = await encryption.get_key(key_id)
        assert key is not None and key["masterKey"]["provider"] == "kmip:with_tls"
