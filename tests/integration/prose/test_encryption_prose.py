"""Explicit encryption and key management against the test server, with the client-side encryption prose
tests a fake can stand behind (README of client-side-encryption/tests, by number):

1 (custom key material), 2 (data key and double encryption, with ``local`` and a fake AWS KMS), 7 (custom
endpoint, on the fake AWS KMS), 10 (KMS TLS: a certificate the client does not trust), 13 (unique index on
keyAltNames), 15 (on-demand AWS credentials, from the environment), 16 case 2 (rewrap needs a provider with
a master key) and 24 (KMS retries: dropped connections and HTTP 500). The rest of this file covers the
API's own contract: round trips per algorithm, the typed mode, closing, and the missing extra.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mongio import MongoClient
from mongio.bson import ObjectId, decode, encode
from mongio.bson.binary import Binary
from mongio.bson.codec_options import CodecOptions
from mongio.encryption import Algorithm, ClientEncryption, QueryType, RangeOpts, libmongocrypt
from mongio.encryption.crypt_io import ClientCryptIO
from mongio.encryption.libmongocrypt import Crypt, CryptOptions
from mongio.errors import (
    ConfigurationError,
    EncryptedCollectionError,
    EncryptionError,
    InvalidOperation,
    OperationFailure,
)
from tests.support.fake_kms import FakeCloudKms, KmsCertificates

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL_KEY = os.urandom(96)
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
AWS_MASTER_KEY = {"region": "us-east-1", "key": "arn:aws:kms:us-east-1:579766882180:key/fake-key"}


def present(document: Any) -> Any:
    """A key document the test expects to exist."""
    assert document is not None
    return document


def aws_encryption(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, **kwargs: Any
) -> ClientEncryption:
    return ClientEncryption(
        {"local": {"key": LOCAL_KEY}, "aws": {"accessKeyId": "AKIAFAKE", "secretAccessKey": "fake-secret"}},
        namespace,
        key_client,
        CodecOptions(),
        kms_tls_options={"aws": {"tlsCAFile": certificates.ca_file}},
        **kwargs,
    )


@pytest.fixture
async def local_encryption(key_client: MongoClient, namespace: str) -> AsyncIterator[ClientEncryption]:
    async with ClientEncryption({"local": {"key": LOCAL_KEY}}, namespace, key_client, CodecOptions()) as ce:
        yield ce


@pytest.mark.parametrize("value", ["text", 42, 2**40, 1.5, ObjectId(), {"nested": [1, 2]}, b"\x00\x01"])
async def test_a_value_decrypts_to_itself_with_either_algorithm(
    local_encryption: ClientEncryption, value: Any
) -> None:
    key_id = await local_encryption.create_data_key("local")
    for algorithm in (DETERMINISTIC, RANDOM):
        if algorithm is DETERMINISTIC and isinstance(value, dict | float):
            continue  # libmongocrypt refuses documents and doubles for the deterministic algorithm
        encrypted = await local_encryption.encrypt(value, algorithm, key_id=key_id)
        assert isinstance(encrypted, Binary) and encrypted.subtype == 6
        assert await local_encryption.decrypt(encrypted) == value


async def test_deterministic_repeats_its_ciphertext_and_random_does_not(
    local_encryption: ClientEncryption,
) -> None:
    await local_encryption.create_data_key("local", key_alt_names=["name"])
    first = await local_encryption.encrypt("same", DETERMINISTIC, key_alt_name="name")
    assert first == await local_encryption.encrypt("same", DETERMINISTIC, key_alt_name="name")
    assert await local_encryption.encrypt(
        "same", RANDOM, key_alt_name="name"
    ) != await local_encryption.encrypt("same", RANDOM, key_alt_name="name")


async def test_an_unknown_key_alt_name_is_an_encryption_error(local_encryption: ClientEncryption) -> None:
    with pytest.raises(EncryptionError, match="not all keys requested were satisfied"):
        await local_encryption.encrypt("x", RANDOM, key_alt_name="nobody")


async def test_key_management_adds_removes_and_finds_alt_names(local_encryption: ClientEncryption) -> None:
    key_id = await local_encryption.create_data_key("local")
    assert await local_encryption.add_key_alt_name(key_id, "a") is not None
    assert present(await local_encryption.get_key_by_alt_name("a"))["_id"] == key_id
    previous = await local_encryption.remove_key_alt_name(key_id, "a")
    assert list(present(previous)["keyAltNames"]) == ["a"]
    assert "keyAltNames" not in present(await local_encryption.get_key(key_id))
    assert [key["_id"] async for key in local_encryption.get_keys()] == [key_id]
    assert (await local_encryption.delete_key(key_id)).deleted_count == 1
    assert await local_encryption.get_key(key_id) is None


async def test_a_closed_client_encryption_refuses_work(key_client: MongoClient, namespace: str) -> None:
    encryption = ClientEncryption({"local": {"key": LOCAL_KEY}}, namespace, key_client, CodecOptions())
    await encryption.close()
    with pytest.raises(InvalidOperation, match="closed ClientEncryption"):
        await encryption.create_data_key("local")


async def test_values_come_back_as_pymongo_classes_in_the_typed_mode(server_uri: str, namespace: str) -> None:
    bson = pytest.importorskip("bson")
    async with (
        MongoClient(server_uri, pymongo_types=True) as typed_client,
        ClientEncryption({"local": {"key": LOCAL_KEY}}, namespace, typed_client, None) as encryption,
    ):
        key_id = await encryption.create_data_key("local")
        assert isinstance(key_id, bson.Binary)
        encrypted = await encryption.encrypt(bson.ObjectId(), RANDOM, key_id=key_id)
        assert isinstance(encrypted, bson.Binary) and encrypted.subtype == 6
        assert isinstance(await encryption.decrypt(encrypted), bson.ObjectId)


def test_without_pymongocrypt_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    libmongocrypt.load.cache_clear()
    monkeypatch.setitem(sys.modules, "pymongocrypt.asynchronous.state_machine", None)
    try:
        with pytest.raises(ConfigurationError, match=r"mongio\[encryption\]"):
            libmongocrypt.load()
    finally:
        monkeypatch.undo()
        libmongocrypt.load.cache_clear()


async def test_kms_tls_options_that_turn_verification_off_are_refused(
    key_client: MongoClient, namespace: str
) -> None:
    with pytest.raises(ConfigurationError, match="tlsInsecure"):
        ClientEncryption(
            {"local": {"key": LOCAL_KEY}},
            namespace,
            key_client,
            None,
            kms_tls_options={"aws": {"tlsInsecure": True}},
        )


# --- prose tests -------------------------------------------------------------------------------------------


async def test_prose_1_custom_key_material(
    local_encryption: ClientEncryption, key_client: MongoClient, namespace: str
) -> None:
    material = base64.b64decode(
        "xPTAjBRG5JiPm+d3fj6XLi2q5DMXUS/f1f+SMAlhhwkhDRL0kr8r9GDLIGTAGlvC+HVjSIgdL+RKwZCvpXSyxTICWSXTUYsWYPyu3IoHbuBZdmw2faM3WhcRIgbMReU5"
    )
    database, _, collection = namespace.partition(".")
    # The ciphertext below was made with the README's local master key.
    readme_key = base64.b64decode(
        "Mng0NCt4ZHVUYUJCa1kxNkVyNUR1QURhZ2h2UzR2d2RrZzh0cFBwM3R6NmdWMDFBMUN3YkQ5aXRRMkhGRGdQV09wOGVNYUMxT2k3NjZKelhaQmRCZGJkTXVyZG9uSjFk"
    )
    async with ClientEncryption({"local": {"key": readme_key}}, namespace, key_client, None) as encryption:
        key_id = await encryption.create_data_key("local", key_material=material)
        vault = key_client[database][collection]
        document = present(await vault.find_one({"_id": key_id}))
        await vault.delete_one({"_id": key_id})
        document["_id"] = Binary(bytes(16), 4)
        await vault.insert_one(document)
        encrypted = await encryption.encrypt("test", DETERMINISTIC, key_id=Binary(bytes(16), 4))
    assert base64.b64encode(encrypted).decode() == (
        "AQAAAAAAAAAAAAAAAAAAAAACz0ZOLuuhEYi807ZXTdhbqhLaS2/t9wLifJnnNYwiw79d75QYIZ6M/aYC1h9nCzCjZ7pGUpAuNnkUhnIXM3PjrA=="
    )


async def test_prose_2_data_key_and_double_encryption(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, kms: FakeCloudKms
) -> None:
    async with aws_encryption(key_client, namespace, certificates) as encryption:
        for provider, master_key in (
            ("local", None),
            ("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint}),
        ):
            key_id = await encryption.create_data_key(
                provider, master_key, key_alt_names=[f"{provider}_altname"]
            )
            key = present(await encryption.get_key(key_id))
            assert key["masterKey"]["provider"] == provider
            by_id = await encryption.encrypt(f"hello {provider}", DETERMINISTIC, key_id=key_id)
            by_name = await encryption.encrypt(
                f"hello {provider}", DETERMINISTIC, key_alt_name=f"{provider}_altname"
            )
            assert by_id == by_name
            assert await encryption.decrypt(by_id) == f"hello {provider}"
    assert kms.requests >= 2  # the AWS key's encryption, then its decryption


async def test_prose_7_custom_endpoint_with_and_without_port(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, kms: FakeCloudKms
) -> None:
    async with aws_encryption(key_client, namespace, certificates) as encryption:
        key_id = await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})
        assert await encryption.decrypt(await encryption.encrypt("test", RANDOM, key_id=key_id)) == "test"
        with pytest.raises(EncryptionError, match="port"):
            await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": "127.0.0.1:notaport"})


async def test_prose_10_a_kms_certificate_the_client_does_not_trust(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    other_authority = KmsCertificates.make(str(tmp_path / "other"))
    async with aws_encryption(key_client, namespace, other_authority) as encryption:
        with pytest.raises(EncryptionError, match=r"certificate verify failed|unable to get local issuer"):
            await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})
    assert kms.requests == 0


async def test_prose_13_unique_index_on_key_alt_names(
    local_encryption: ClientEncryption, key_client: MongoClient, namespace: str
) -> None:
    database, _, collection = namespace.partition(".")
    await key_client[database][collection].create_index(
        "keyAltNames", unique=True, partialFilterExpression={"keyAltNames": {"$exists": True}}
    )
    existing = await local_encryption.create_data_key("local", key_alt_names=["def"])
    await local_encryption.create_data_key("local", key_alt_names=["abc"])
    for name in ("abc", "def"):
        with pytest.raises(EncryptionError) as raised:
            await local_encryption.create_data_key("local", key_alt_names=[name])
        assert getattr(raised.value.cause, "code", None) == 11000
    key_id = await local_encryption.create_data_key("local")
    assert await local_encryption.add_key_alt_name(key_id, "abc2") is not None
    assert "abc2" in (await local_encryption.add_key_alt_name(key_id, "abc2"))["keyAltNames"]
    with pytest.raises(Exception) as duplicate:
        await local_encryption.add_key_alt_name(key_id, "def")
    assert getattr(duplicate.value, "code", None) == 11000
    assert "def" in (await local_encryption.add_key_alt_name(existing, "def"))["keyAltNames"]


async def test_prose_15_on_demand_aws_credentials_from_the_environment(
    key_client: MongoClient,
    namespace: str,
    certificates: KmsCertificates,
    kms: FakeCloudKms,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAONDEMAND")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "on-demand-secret")
    async with ClientEncryption(
        {"aws": {}}, namespace, key_client, None, kms_tls_options={"aws": {"tlsCAFile": certificates.ca_file}}
    ) as encryption:
        key_id = await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})
    assert isinstance(key_id, Binary) and kms.requests == 1


async def test_prose_16_case_2_a_master_key_needs_its_provider(local_encryption: ClientEncryption) -> None:
    with pytest.raises(ConfigurationError, match="provider"):
        await local_encryption.rewrap_many_data_key({}, master_key={})


async def test_rewrap_moves_keys_to_another_provider_and_their_data_still_decrypts(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, kms: FakeCloudKms
) -> None:
    async with aws_encryption(key_client, namespace, certificates) as encryption:
        key_id = await encryption.create_data_key("local")
        encrypted = await encryption.encrypt("kept", RANDOM, key_id=key_id)
        result = await encryption.rewrap_many_data_key(
            {}, "aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint}
        )
        assert result.bulk_write_result is not None and result.bulk_write_result.modified_count == 1
        assert present(await encryption.get_key(key_id))["masterKey"]["provider"] == "aws"
    async with aws_encryption(key_client, namespace, certificates) as fresh:  # no cached key
        assert await fresh.decrypt(encrypted) == "kept"


@pytest.mark.parametrize(("drops", "errors"), [(1, 0), (0, 1), (2, 1)])
async def test_prose_24_kms_requests_are_retried(
    key_client: MongoClient,
    namespace: str,
    certificates: KmsCertificates,
    kms: FakeCloudKms,
    drops: int,
    errors: int,
) -> None:
    kms.drop_connections, kms.server_errors = drops, errors
    async with aws_encryption(key_client, namespace, certificates) as encryption:
        key_id = await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})
        assert await encryption.decrypt(await encryption.encrypt("x", RANDOM, key_id=key_id)) == "x"
    assert kms.drop_connections == 0 and kms.server_errors == 0
    assert kms.requests == 2 + errors


async def test_prose_24_a_kms_that_keeps_failing_is_an_encryption_error(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, kms: FakeCloudKms
) -> None:
    kms.drop_connections = 100
    async with aws_encryption(key_client, namespace, certificates) as encryption:
        with pytest.raises(EncryptionError, match="last attempt failed"):
            await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})


async def test_queryable_encryption_payloads_are_made_with_their_options(
    local_encryption: ClientEncryption,
) -> None:
    key_id = await local_encryption.create_data_key("local")
    indexed = await local_encryption.encrypt(
        "v", Algorithm.INDEXED, key_id=key_id, contention_factor=2, query_type=QueryType.EQUALITY
    )
    unindexed = await local_encryption.encrypt("v", Algorithm.UNINDEXED, key_id=key_id)
    range_opts = RangeOpts(min=0, max=200, sparsity=1, trim_factor=1)
    ranged = await local_encryption.encrypt(
        6, Algorithm.RANGE, key_id=key_id, contention_factor=0, range_opts=range_opts
    )
    for payload in (indexed, unindexed, ranged):
        assert isinstance(payload, Binary) and payload.subtype == 6
    assert await local_encryption.decrypt(unindexed) == "v"
    expression = await local_encryption.encrypt_expression(
        {"$and": [{"age": {"$gte": 5}}, {"age": {"$lt": 10}}]},
        Algorithm.RANGE,
        key_id=key_id,
        query_type=QueryType.RANGE,
        contention_factor=0,
        range_opts=range_opts,
    )
    bounds = expression["$and"]
    assert bounds[0]["age"]["$gte"].subtype == 6
    with pytest.raises(EncryptionError, match="min"):  # libmongocrypt checks the value against the range
        await local_encryption.encrypt(
            500, Algorithm.RANGE, key_id=key_id, contention_factor=0, range_opts=range_opts
        )


async def test_the_crypt_decrypts_every_encrypted_value_of_a_reply(
    local_encryption: ClientEncryption, key_client: MongoClient, namespace: str
) -> None:
    """The step automatic decryption will run on each reply: libmongocrypt's decryption context, its keys
    read from the key vault through the same I/O as explicit encryption."""
    key_id = await local_encryption.create_data_key("local")
    ssn = await local_encryption.encrypt("123", DETERMINISTIC, key_id=key_id)
    note = await local_encryption.encrypt({"a": 1}, RANDOM, key_id=key_id)
    database, _, collection = namespace.partition(".")
    io = ClientCryptIO(key_client[database][collection], kms_tls_contexts={})
    crypt = Crypt(CryptOptions(kms_providers={"local": {"key": LOCAL_KEY}}), io)
    try:
        reply = {
            "cursor": {"firstBatch": [{"_id": 1, "ssn": ssn, "notes": [note, "plain"]}], "id": 0},
            "ok": 1,
        }
        decrypted = decode(await crypt.decrypt_reply(bytes(encode(reply))))
        with pytest.raises(
            EncryptionError, match="automatic encryption"
        ):  # no metadata client or analyzer here
            await crypt.encrypt_command(database, bytes(encode({"find": "c", "filter": {}})))
    finally:
        crypt.close()
    assert decrypted["cursor"]["firstBatch"] == [{"_id": 1, "ssn": "123", "notes": [{"a": 1}, "plain"]}]


async def test_create_encrypted_collection_makes_the_missing_keys_and_reports_them_on_failure(
    local_encryption: ClientEncryption, key_client: MongoClient, namespace: str
) -> None:
    database = key_client[namespace.partition(".")[0]]
    fields = {"fields": [{"path": "ssn", "bsonType": "string", "keyId": None}]}
    try:
        collection, made = await local_encryption.create_encrypted_collection(
            database, "patients", fields, "local"
        )
    except EncryptedCollectionError as exc:  # a server without Queryable Encryption refuses encryptedFields
        made = exc.encrypted_fields
        assert isinstance(exc.cause, OperationFailure)
    else:
        assert collection.name == "patients"
    key_id = made["fields"][0]["keyId"]
    assert isinstance(key_id, Binary) and key_id.subtype == 4
    assert await local_encryption.get_key(key_id) is not None
    assert fields["fields"][0]["keyId"] is None  # the caller's document is left as it was


async def test_prose_10_a_kms_certificate_for_another_host_name(
    key_client: MongoClient, namespace: str, tmp_path: Path
) -> None:
    wrong_name = KmsCertificates.make(str(tmp_path), names=("kms.wrong-host.invalid",))
    async with (
        FakeCloudKms(wrong_name) as kms,
        aws_encryption(key_client, namespace, wrong_name) as encryption,
    ):
        with pytest.raises(EncryptionError, match=r"IP address mismatch|Hostname mismatch"):
            await encryption.create_data_key("aws", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})
    assert kms.requests == 0


async def test_a_named_aws_provider_uses_its_credentials_and_tls_options(
    key_client: MongoClient, namespace: str, certificates: KmsCertificates, kms: FakeCloudKms
) -> None:
    async with ClientEncryption(
        {"aws:name1": {"accessKeyId": "AKIANAMED", "secretAccessKey": "named-secret"}},
        namespace,
        key_client,
        None,
        kms_tls_options={"aws:name1": {"tlsCAFile": certificates.ca_file}},
    ) as encryption:
        key_id = await encryption.create_data_key("aws:name1", {**AWS_MASTER_KEY, "endpoint": kms.endpoint})
        assert present(await encryption.get_key(key_id))["masterKey"]["provider"] == "aws:name1"
        assert await encryption.decrypt(await encryption.encrypt("n", RANDOM, key_id=key_id)) == "n"
    assert all("AKIANAMED" in request.headers["authorization"] for request in kms.seen)
