"""Data encrypted by PyMongo decrypts under mongio and the other way round, on one key vault with one local
master key; the deterministic algorithm gives both drivers the same ciphertext, byte for byte, and data keys
made by either driver serve the other, cloud master keys (on the fake KMS) and rewraps included.

PyMongo's side is its synchronous API, each call in a worker thread: the tests then run on any backend (PyMongo's
async driver runs only on asyncio), and what they compare, the bytes each driver writes and reads, is the same
whichever of PyMongo's APIs makes them."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from mongio import MongoClient
from mongio.bson import Decimal128, ObjectId, encode
from mongio.encryption import Algorithm, ClientEncryption, libmongocrypt
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, kms_credentials, kms_master_key

pymongo_encryption = pytest.importorskip("pymongo.encryption")
pymongo = pytest.importorskip("pymongo")
bson = pytest.importorskip("bson")

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL_KEY = os.urandom(96)
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
VALUES: list[Any] = ["text", 7, 2**40, True, ObjectId(), Decimal128("1.25"), {"a": [1, "b"]}]


async def in_thread(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """PyMongo's blocking call, in a worker thread, so the test's loop (and the fake KMS on it) keeps running."""
    return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))


@pytest.fixture
async def both(server_uri: str) -> AsyncIterator[tuple[Any, ClientEncryption]]:
    namespace = f"keyvault_interop_{uuid.uuid4().hex[:8]}.datakeys"
    providers = {"local": {"key": LOCAL_KEY}}
    pymongo_client: Any = pymongo.MongoClient(server_uri)
    async with MongoClient(server_uri) as mongio_client:
        theirs = pymongo_encryption.ClientEncryption(
            providers, namespace, pymongo_client, bson.codec_options.CodecOptions()
        )
        async with ClientEncryption(providers, namespace, mongio_client, None) as ours:
            yield theirs, ours
        await in_thread(theirs.close)
        await mongio_client.drop_database(namespace.partition(".")[0])
    await in_thread(pymongo_client.close)


def as_pymongo(value: Any) -> Any:
    """The value with mongio's BSON classes swapped for PyMongo's (through BSON), for PyMongo's encoder."""
    return bson.decode(bytes(encode({"v": value})))["v"]


async def test_pymongo_ciphertext_decrypts_under_mongio(both: tuple[Any, ClientEncryption]) -> None:
    theirs, ours = both
    key_id = await in_thread(theirs.create_data_key, "local", key_alt_names=["by-pymongo"])
    for value in VALUES:
        for algorithm in (DETERMINISTIC, RANDOM):
            if algorithm is DETERMINISTIC and isinstance(value, dict | bool | Decimal128):
                continue  # deterministic encryption refuses documents, booleans and decimals
            encrypted = await in_thread(theirs.encrypt, as_pymongo(value), algorithm, key_id=key_id)
            assert await ours.decrypt(encrypted) == value


async def test_mongio_ciphertext_decrypts_under_pymongo(both: tuple[Any, ClientEncryption]) -> None:
    theirs, ours = both
    key_id = await ours.create_data_key("local", key_alt_names=["by-mongio"])
    for value in VALUES:
        encrypted = await ours.encrypt(value, RANDOM, key_alt_name="by-mongio")
        assert await in_thread(theirs.decrypt, as_pymongo(encrypted)) == as_pymongo(value)
    assert await in_thread(theirs.get_key_by_alt_name, "by-mongio") is not None
    assert bytes((await in_thread(theirs.get_key, as_pymongo(key_id)))["_id"]) == bytes(key_id)


async def test_deterministic_ciphertexts_are_the_same_bytes(both: tuple[Any, ClientEncryption]) -> None:
    theirs, ours = both
    key_id = await ours.create_data_key("local")
    for value in ("text", 7, ObjectId()):
        mine = await ours.encrypt(value, DETERMINISTIC, key_id=key_id)
        theirs_ciphertext = await in_thread(
            theirs.encrypt, as_pymongo(value), DETERMINISTIC, key_id=as_pymongo(key_id)
        )
        assert bytes(mine) == bytes(theirs_ciphertext)


@pytest.mark.parametrize("provider", ["aws", "azure", "gcp"])
async def test_cloud_data_keys_serve_both_drivers(server_uri: str, tmp_path: Path, provider: str) -> None:
    """A data key PyMongo makes under a cloud master key (the fake KMS) decrypts under mongio; mongio rewraps
    it to another cloud and PyMongo still decrypts the value."""
    certificates = KmsCertificates.make(str(tmp_path))
    namespace = f"keyvault_interop_{uuid.uuid4().hex[:8]}.datakeys"
    async with FakeCloudKms(certificates) as kms, MongoClient(server_uri) as mongio_client:
        providers = {name: kms_credentials(name, kms.endpoint) for name in ("aws", "azure", "gcp")}
        tls = {name: {"tlsCAFile": certificates.ca_file} for name in providers}
        pymongo_client: Any = pymongo.MongoClient(server_uri)
        theirs = pymongo_encryption.ClientEncryption(
            providers, namespace, pymongo_client, bson.codec_options.CodecOptions(), kms_tls_options=tls
        )
        try:
            key_id = await in_thread(theirs.create_data_key, provider, kms_master_key(provider, kms.endpoint))
            encrypted = await in_thread(theirs.encrypt, "cloud value", RANDOM, key_id=key_id)
            async with ClientEncryption(
                providers, namespace, mongio_client, None, kms_tls_options=tls
            ) as ours:
                assert await ours.decrypt(encrypted) == "cloud value"
                other = "gcp" if provider != "gcp" else "azure"
                result = await ours.rewrap_many_data_key({}, other, kms_master_key(other, kms.endpoint))
                assert result.bulk_write_result is not None and result.bulk_write_result.modified_count == 1
            fresh = pymongo_encryption.ClientEncryption(
                providers, namespace, pymongo_client, bson.codec_options.CodecOptions(), kms_tls_options=tls
            )
            assert await in_thread(fresh.decrypt, encrypted) == "cloud value"
            assert (await in_thread(fresh.get_key, key_id))["masterKey"]["provider"] == other
            await in_thread(fresh.close)
        finally:
            await in_thread(theirs.close)
            await mongio_client.drop_database(namespace.partition(".")[0])
            await in_thread(pymongo_client.close)
