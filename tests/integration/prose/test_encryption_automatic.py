"""Automatic encryption and decryption against the test server, with a local master key, a schema map given
client-side and markings from the stand-in mongocryptd on loopback (tests/support/query_analyser.py; the
server refuses the ``encrypt`` schema keyword, so the schema never goes to it). Queryable Encryption's
client ``bulkWrite``, which the stand-in does not analyse, is answered by tests/support/fake_mongocryptd.py,
which sends every command back unmarked.

What is shown: an insert is encrypted before it is sent and a find decrypts (the stored values are
ciphertext, read back by a plain client); command monitoring sees the encrypted command and the encrypted
reply; ``bypass_auto_encryption`` decrypts every reply, cursor getMores and change streams included; client
``bulkWrite`` batches are cut at 2 MiB before encryption (the collection's own write batches, prose test 4,
are in test_encryption_automatic_prose.py, with test 5, the view);
mongocryptd is asked for markings only when something needs them, and is spawned again and asked once more
after a failed server selection; ``crypt_shared_lib_required`` without crypt_shared fails clearly;
libmongocrypt's refusal of an unsupported command comes back as ``EncryptionError``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mongio import CursorType, InsertOne, MongoClient
from mongio.bson import decode_all
from mongio.bson.binary import Binary
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, libmongocrypt, mongocryptd
from mongio.errors import EncryptionError, ServerSelectionTimeoutError
from tests.support.fake_mongocryptd import FakeMongocryptd
from tests.support.key_vault import own_databases
from tests.support.query_analyser import QueryAnalyser
from tests.support.recorders import CommandRecorder

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL_KEY = os.urandom(96)
KMS = {"local": {"key": LOCAL_KEY}}
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
TWO_MIB = 2_097_152


def schema_for(key_id: Binary, algorithm: str = DETERMINISTIC) -> dict[str, Any]:
    return {
        "bsonType": "object",
        "properties": {
            "ssn": {"encrypt": {"bsonType": "string", "algorithm": str(algorithm), "keyId": [key_id]}}
        },
    }


@pytest.fixture
async def plain(server_uri: str) -> AsyncIterator[MongoClient]:
    async with MongoClient(server_uri) as client:
        yield client


@pytest.fixture
async def names(plain: MongoClient) -> AsyncIterator[tuple[str, str]]:
    """A key vault namespace and a database of the test's own."""
    async with own_databases(plain, "autoenc") as owned:
        yield owned


@pytest.fixture
async def key_id(plain: MongoClient, names: tuple[str, str]) -> Binary:
    async with ClientEncryption(KMS, names[0], plain, plain.codec_options) as client_encryption:
        return await client_encryption.create_data_key("local")


@pytest.fixture
async def echoing_analyser() -> AsyncIterator[FakeMongocryptd]:
    """A mongocryptd that sends back what it is asked unmarked: for Queryable Encryption's commands, which the
    stand-in query analyser does not analyse."""
    async with FakeMongocryptd() as peer:
        yield peer


def auto_opts(
    names: tuple[str, str], key_id: Binary, analyser: QueryAnalyser | FakeMongocryptd, **extra: Any
) -> AutoEncryptionOpts:
    options: dict[str, Any] = {
        "schema_map": {f"{names[1]}.people": schema_for(key_id)},
        "mongocryptd_uri": analyser.uri,
        "mongocryptd_bypass_spawn": True,
    }
    options.update(extra)
    return AutoEncryptionOpts(KMS, names[0], **options)


async def test_insert_encrypts_and_find_decrypts(
    server_uri: str, plain: MongoClient, names: tuple[str, str], key_id: Binary, analyser: QueryAnalyser
) -> None:
    recorder = CommandRecorder()
    opts = auto_opts(names, key_id, analyser)
    async with MongoClient(server_uri, auto_encryption_opts=opts, event_listeners=[recorder]) as client:
        people = client[names[1]].people
        await people.insert_one({"_id": 1, "name": "Ada", "ssn": "123-45-6789"})
        found = await people.find_one({"ssn": "123-45-6789"})
    assert found == {"_id": 1, "name": "Ada", "ssn": "123-45-6789"}
    stored = await plain[names[1]].people.find_one({"_id": 1})
    assert stored is not None and isinstance(stored["ssn"], Binary) and stored["ssn"].subtype == 6
    assert stored["name"] == "Ada"
    # Monitoring saw ciphertext only: the inserted document and the find filter as sent, the reply as received.
    (insert,) = recorder.commands("insert")
    assert insert["documents"][0]["ssn"].subtype == 6
    # The key vault's find (by the internal client, which has the same listeners) comes first.
    key_find, find = recorder.commands("find")
    assert key_find["find"] == "datakeys"
    assert (
        find["filter"]["ssn"]["$eq"].subtype == 6
    )  # the analyser writes equality as $eq, as mongocryptd does
    reply = recorder.replies("find")[-1]
    assert reply["cursor"]["firstBatch"][0]["ssn"].subtype == 6
    assert "123-45-6789" not in repr([event.command for event in recorder.started_events])
    assert [command["insert"] for command in analyser.analysed if "insert" in command] == ["people"]


async def test_bypass_auto_encryption_decrypts_cursors_and_change_streams(
    server_uri: str, plain: MongoClient, names: tuple[str, str], key_id: Binary
) -> None:
    async with ClientEncryption(KMS, names[0], plain, plain.codec_options) as client_encryption:
        secrets = [await client_encryption.encrypt(f"secret {n}", RANDOM, key_id=key_id) for n in range(5)]
    opts = AutoEncryptionOpts(KMS, names[0], bypass_auto_encryption=True)
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        coll = client[names[1]].vault
        assert client._encrypter is not None and client._encrypter.mongocryptd is None
        async with await coll.watch() as stream:
            await coll.insert_many([{"_id": n, "secret": secret} for n, secret in enumerate(secrets)])
            change = await stream.next()
        assert change["fullDocument"]["secret"] == "secret 0"
        cursor = coll.find({}, batch_size=2).sort("_id")
        documents = await cursor.to_list()
    assert [document["secret"] for document in documents] == [f"secret {n}" for n in range(5)]


async def test_client_bulk_write_splits_at_two_mib(
    server_uri: str, names: tuple[str, str], key_id: Binary, echoing_analyser: QueryAnalyser
) -> None:
    recorder = CommandRecorder()
    namespace = f"{names[1]}.plain"
    # Queryable Encryption's map (libmongocrypt encrypts client bulkWrite for it), with no field encrypted.
    opts = auto_opts(
        names, key_id, echoing_analyser, schema_map=None, encrypted_fields_map={namespace: {"fields": []}}
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts, event_listeners=[recorder]) as client:
        await client.bulk_write(
            [
                InsertOne({"_id": n, "unencrypted": "a" * (TWO_MIB - 1500)}, namespace=namespace)
                for n in (3, 4)
            ]
        )
        await client.bulk_write([InsertOne({"_id": n}, namespace=namespace) for n in range(10, 20)])
    commands = recorder.commands("bulkWrite")
    assert [len(command["ops"]) for command in commands] == [1, 1, 10]
    # Auto encryption sends one document: the operations are in the command, not in document sequences.
    assert all("nsInfo" in command for command in commands)


async def test_bypass_query_analysis_never_asks_for_markings(
    server_uri: str, plain: MongoClient, names: tuple[str, str], key_id: Binary, analyser: QueryAnalyser
) -> None:
    async with ClientEncryption(KMS, names[0], plain, plain.codec_options) as client_encryption:
        secret = await client_encryption.encrypt("explicit", DETERMINISTIC, key_id=key_id)
    opts = auto_opts(names, key_id, analyser, bypass_query_analysis=True)
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        assert client._encrypter is not None and client._encrypter.mongocryptd is None
        coll = client[names[1]].people
        await coll.insert_one({"_id": 1, "ssn": secret})
        assert await coll.find_one({"_id": 1}) == {"_id": 1, "ssn": "explicit"}
    assert not analyser.analysed


async def test_unsupported_command_is_refused(
    server_uri: str, names: tuple[str, str], key_id: Binary, analyser: QueryAnalyser
) -> None:
    async with MongoClient(server_uri, auto_encryption_opts=auto_opts(names, key_id, analyser)) as client:
        with pytest.raises(EncryptionError, match="command not supported for auto encryption: killOp"):
            await client[names[1]].command({"killOp": 1, "op": 1234})
        # Commands on libmongocrypt's bypass list go as they are.
        assert (await client[names[1]].command("ping"))["ok"] == 1


async def test_mongocryptd_unreachable_without_spawn_raises_selection_error(
    server_uri: str, names: tuple[str, str], key_id: Binary, analyser: QueryAnalyser
) -> None:
    uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"
    opts = auto_opts(names, key_id, analyser, mongocryptd_uri=uri)
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        with pytest.raises(ServerSelectionTimeoutError):
            await client[names[1]].people.insert_one({"ssn": "1"})


async def test_mongocryptd_spawned_then_again_after_failed_selection(
    server_uri: str,
    names: tuple[str, str],
    key_id: Binary,
    analyser: QueryAnalyser,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first marking spawns mongocryptd; a failed server selection spawns it again and the command is
    tried once more; the second failure is the caller's."""
    spawned: list[list[str]] = []
    monkeypatch.setattr(mongocryptd, "_spawn", lambda command: spawned.append(list(command)))
    opts = auto_opts(
        names,
        key_id,
        analyser,
        mongocryptd_bypass_spawn=False,
        mongocryptd_spawn_path="/opt/mongodb/bin/mongocryptd",
        mongocryptd_spawn_args=["--port=1"],
        mongocryptd_uri="mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100",
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        with pytest.raises(ServerSelectionTimeoutError):
            await client[names[1]].people.insert_one({"ssn": "1"})
    assert spawned == [["/opt/mongodb/bin/mongocryptd", "--port=1", "--idleShutdownTimeoutSecs=60"]] * 2


async def test_mongocryptd_spawned_after_failed_selection_answers(
    server_uri: str,
    names: tuple[str, str],
    key_id: Binary,
    analyser: QueryAnalyser,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing listens until the spawn after the failed selection "starts" mongocryptd (the client is
    pointed at the stand-in then): the retry gets its markings and the insert is encrypted."""
    spawned: list[list[str]] = []
    opts = auto_opts(
        names,
        key_id,
        analyser,
        mongocryptd_bypass_spawn=False,
        mongocryptd_uri="mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100",
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        encrypter = client._encrypter
        assert encrypter is not None and encrypter.mongocryptd is not None
        reachable = MongoClient(analyser.uri)

        def start(command: list[str]) -> None:
            spawned.append(command)
            if len(spawned) == 2:
                monkeypatch.setattr(encrypter.mongocryptd, "_client", reachable)

        monkeypatch.setattr(mongocryptd, "_spawn", start)
        await client[names[1]].people.insert_one({"_id": 1, "ssn": "1"})
        await reachable.close()
    assert len(spawned) == 2 and len(analyser.analysed) == 1


async def test_mongocryptd_spawn_failure_names_the_command(
    server_uri: str, names: tuple[str, str], key_id: Binary, analyser: QueryAnalyser, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-mongocryptd")
    opts = auto_opts(names, key_id, analyser, mongocryptd_bypass_spawn=False, mongocryptd_spawn_path=missing)
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        with pytest.raises(EncryptionError, match="could not spawn mongocryptd") as raised:
            await client[names[1]].people.insert_one({"ssn": "1"})
    assert missing in str(raised.value)


async def test_crypt_shared_required_but_missing(server_uri: str, names: tuple[str, str]) -> None:
    opts = AutoEncryptionOpts(KMS, names[0], crypt_shared_lib_required=True)
    with pytest.raises(EncryptionError, match="crypt_shared"):
        MongoClient(server_uri, auto_encryption_opts=opts)
    missing = AutoEncryptionOpts(KMS, names[0], crypt_shared_lib_path="/nonexistent/mongo_crypt_v1.so")
    with pytest.raises(EncryptionError, match="mongo_crypt_v1"):
        MongoClient(server_uri, auto_encryption_opts=missing)


async def test_key_vault_and_internal_clients(
    server_uri: str, plain: MongoClient, names: tuple[str, str]
) -> None:
    opts = AutoEncryptionOpts(KMS, names[0], mongocryptd_bypass_spawn=True)
    async with MongoClient(server_uri, auto_encryption_opts=opts, minPoolSize=3) as client:
        encrypter = client._encrypter
        assert encrypter is not None and encrypter.internal_client is not None
        assert encrypter.internal_client.options.min_pool_size == 0
        assert encrypter.internal_client.options.extras.get("auto_encryption_opts") is None
    with_key_vault = AutoEncryptionOpts(KMS, names[0], key_vault_client=plain, bypass_auto_encryption=True)
    async with MongoClient(server_uri, auto_encryption_opts=with_key_vault) as client:
        assert client._encrypter is not None and client._encrypter.internal_client is None
    async with MongoClient(server_uri, auto_encryption_opts=opts, maxPoolSize=0) as client:
        assert client._encrypter is not None and client._encrypter.internal_client is None


async def test_exhaust_cursors_and_raw_batches_decrypt(
    server_uri: str, plain: MongoClient, names: tuple[str, str], key_id: Binary
) -> None:
    """What PyMongo refuses under automatic encryption works here: every reply is decrypted where it is
    received, an exhaust stream's and a raw batch's alike."""
    async with ClientEncryption(KMS, names[0], plain, plain.codec_options) as client_encryption:
        secrets = [await client_encryption.encrypt(f"secret {n}", RANDOM, key_id=key_id) for n in range(6)]
    await plain[names[1]].vault.insert_many(
        [{"_id": n, "secret": secret} for n, secret in enumerate(secrets)]
    )
    opts = AutoEncryptionOpts(KMS, names[0], bypass_auto_encryption=True)
    expected = [f"secret {n}" for n in range(6)]
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client:
        coll = client[names[1]].vault
        streamed = await coll.find({}, batch_size=2, cursor_type=CursorType.EXHAUST).sort("_id").to_list()
        assert [document["secret"] for document in streamed] == expected
        raw = [
            document
            async for batch in coll.find_raw_batches({}, batch_size=2).sort("_id")
            for document in decode_all(batch)
        ]
        assert [document["secret"] for document in raw] == expected
        aggregated = [
            document
            async for batch in await coll.aggregate_raw_batches([{"$sort": {"_id": 1}}], batchSize=2)
            for document in decode_all(batch)
        ]
        assert [document["secret"] for document in aggregated] == expected
