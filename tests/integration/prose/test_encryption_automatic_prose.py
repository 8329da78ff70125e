"""The client-side encryption prose tests that need automatic encryption (README of client-side-encryption/tests,
by number), run with the stand-in mongocryptd (tests/support/query_analyser.py) marking what the schema names:

2 (the auto-encrypted client's part: an explicitly encrypted value inserted and found through it, and the
refusal to encrypt an encrypted value again, for ``local``, ``aws``, ``azure``, ``gcp`` on the fake cloud KMS
and ``kmip`` on the local KMIP server), 3 (external key vault, with and without a client that cannot
authenticate), 4 (BSON size limits and batch splitting, cases 1 to 6; case 7, client ``bulkWrite`` on a
Queryable Encryption collection, is in test_encryption_automatic.py), 5 (views are prohibited), 8 (bypass
spawning mongocryptd: via ``mongocryptd_bypass_spawn``, ``bypass_auto_encryption`` and
``bypass_query_analysis``; via crypt_shared when ``CRYPT_SHARED_LIB_PATH`` names one), 9 (deadlock tests,
cases 1 to 8), 14 (decryption events), 20 (no mongocryptd client once crypt_shared is loaded, when
``CRYPT_SHARED_LIB_PATH`` names one) and 25 case 9 (``$lookup`` with a query analyser older than 8.1).

The README's fixture files are not in this checkout: the key of ``external/external-key.json`` is made here
(a ``local`` data key under LOCAL_MASTERKEY, stored with the id ``LOCALAAAAAAAAAAAAAAAAA==`` and the alt name
``local``), and the schemas are written out. SecantusDB refuses the ``encrypt`` schema keyword, so a schema the
README puts in a collection's validator is given in the ``schema_map`` instead: the ``listCollections`` that
would fetch a remote schema is then not sent, and test 9's expected events leave it out (and its clients
are counted as made, the internal one whether or not it opened a connection).
"""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mongio import InsertOne, MongoClient
from mongio.bson.binary import Binary
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, libmongocrypt
from mongio.errors import (
    AuthenticationFailed,
    EncryptionError,
    MongioError,
    OperationFailure,
    ServerSelectionTimeoutError,
)
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, kms_credentials, kms_master_key
from tests.support.key_vault import own_databases
from tests.support.query_analyser import QueryAnalyser
from tests.support.recorders import CommandRecorder

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL_MASTERKEY = base64.b64decode(
    "Mng0NCt4ZHVUYUJCa1kxNkVyNUR1QURhZ2h2UzR2d2RrZzh0cFBwM3R6NmdWMDFBMUN3YkQ5aXRRMkhGRGdQV09wOGVNYUMx"
    "T2k3NjZKelhaQmRCZGJkTXVyZG9uSjFk"
)
LOCAL = {"local": {"key": LOCAL_MASTERKEY}}
EXTERNAL_KEY_ID = Binary(base64.b64decode("LOCALAAAAAAAAAAAAAAAAA=="), 4)
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
TWO_MIB = 2_097_152
SIXTEEN_MIB = 16_777_216
CRYPT_SHARED = os.environ.get("CRYPT_SHARED_LIB_PATH")
needs_crypt_shared = pytest.mark.skipif(
    not CRYPT_SHARED, reason="needs crypt_shared (set CRYPT_SHARED_LIB_PATH to mongo_crypt_v1)"
)


def external_schema(key_id: Binary = EXTERNAL_KEY_ID) -> dict[str, Any]:
    """external/external-schema.json: ``encrypted``, a string, deterministic, with the external key."""
    return {
        "bsonType": "object",
        "properties": {
            "encrypted": {
                "encrypt": {"keyId": [key_id], "bsonType": "string", "algorithm": str(DETERMINISTIC)}
            }
        },
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def client(server_uri: str) -> AsyncIterator[MongoClient]:
    """The README's ``client``, without encryption."""
    async with MongoClient(server_uri) as plain:
        yield plain


@pytest.fixture
async def names(client: MongoClient) -> AsyncIterator[tuple[str, str]]:
    """The key vault namespace and the database (the README's ``keyvault.datakeys`` and ``db``), the test's own."""
    async with own_databases(client, "db") as owned:
        yield owned


@pytest.fixture
async def external_key(client: MongoClient, names: tuple[str, str]) -> Binary:
    """external/external-key.json's key: a ``local`` key under LOCAL_MASTERKEY, id LOCALAAAAAAAAAAAAAAAAA==."""
    database, _, collection = names[0].partition(".")
    async with ClientEncryption(LOCAL, names[0], client, None) as encryption:
        made = await encryption.create_data_key("local")
        key = await encryption.get_key(made)
    assert key is not None
    keys = client[database][collection]
    await keys.delete_one({"_id": made})
    await keys.insert_one({**key, "_id": EXTERNAL_KEY_ID, "keyAltNames": ["local"]})
    return EXTERNAL_KEY_ID


def analysed_by(analyser: QueryAnalyser, **extra: Any) -> dict[str, Any]:
    """The options that send marking requests to the stand-in mongocryptd."""
    return {"mongocryptd_uri": analyser.uri, "mongocryptd_bypass_spawn": True, **extra}


# --- 2: data key and double encryption, the auto-encrypted client's part ------------------------------------


@pytest.fixture(scope="module")
def kmip_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("kmip", reason="needs PyKMIP for the KMIP server")
    from tests.support.kmip_server import KmipServerProcess

    server = KmipServerProcess(Path(tmp_path_factory.mktemp("kmip"))).start()
    yield server
    server.stop()


@pytest.fixture
def providers(
    request: pytest.FixtureRequest, kms: FakeCloudKms, certificates: KmsCertificates
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """(KMS providers, their TLS options, the master key) for the test's provider: the clouds on the fake KMS,
    ``kmip`` on the KMIP server."""
    name: str = request.param
    if name == "kmip":
        server = request.getfixturevalue("kmip_server")
        tls = {"tlsCAFile": server.ca_file, "tlsCertificateKeyFile": server.client_file}
        return {"kmip": {"endpoint": server.endpoint}}, {"kmip": tls}, {}
    if name == "local":
        return dict(LOCAL), {}, None
    credentials = {name: kms_credentials(name, kms.endpoint)}
    return credentials, {name: {"tlsCAFile": certificates.ca_file}}, kms_master_key(name, kms.endpoint)


@pytest.mark.parametrize("providers", ["local", "aws", "azure", "gcp", "kmip"], indirect=True)
async def test_prose_2_data_key_and_double_encryption(
    server_uri: str,
    client: MongoClient,
    names: tuple[str, str],
    analyser: QueryAnalyser,
    providers: tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None],
) -> None:
    kms_providers, tls, master_key = providers
    (provider,) = kms_providers
    key_database, _, key_collection = names[0].partition(".")
    recorder = CommandRecorder()
    async with MongoClient(server_uri, event_listeners=[recorder]) as monitored:
        schema_map = {
            f"{names[1]}.coll": {
                "bsonType": "object",
                "properties": {
                    "encrypted_placeholder": {
                        "encrypt": {"keyId": "/placeholder", "bsonType": "string", "algorithm": str(RANDOM)}
                    }
                },
            }
        }
        opts = AutoEncryptionOpts(
            kms_providers, names[0], schema_map=schema_map, kms_tls_options=tls, **analysed_by(analyser)
        )
        async with (
            MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted,
            ClientEncryption(
                kms_providers, names[0], monitored, None, kms_tls_options=tls
            ) as client_encryption,
        ):
            datakey_id = await client_encryption.create_data_key(
                provider, master_key, key_alt_names=[f"{provider}_altname"]
            )
            assert isinstance(datakey_id, Binary) and datakey_id.subtype == 4
            keys = await client[key_database][key_collection].find({"_id": datakey_id}).to_list()
            assert [key["masterKey"]["provider"] for key in keys] == [provider]
            (insert,) = recorder.commands("insert")
            assert insert["writeConcern"] == {"w": "majority"}

            encrypted = await client_encryption.encrypt(f"hello {provider}", DETERMINISTIC, key_id=datakey_id)
            assert encrypted.subtype == 6
            coll = client_encrypted[names[1]].coll
            await coll.insert_one({"_id": provider, "value": encrypted})
            assert await coll.find_one({"_id": provider}) == {"_id": provider, "value": f"hello {provider}"}
            by_name = await client_encryption.encrypt(
                f"hello {provider}", DETERMINISTIC, key_alt_name=f"{provider}_altname"
            )
            assert by_name == encrypted

            with pytest.raises(EncryptionError):
                await coll.insert_one({"encrypted_placeholder": encrypted})
    assert analyser.refused, "the stand-in refused to encrypt an encrypted value"


# --- 3: external key vault ------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_external_key_vault", [False, True])
async def test_prose_3_external_key_vault(
    server_uri: str,
    client: MongoClient,
    names: tuple[str, str],
    analyser: QueryAnalyser,
    external_key: Binary,
    with_external_key_vault: bool,
) -> None:
    host = server_uri.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    external = MongoClient(f"mongodb://fake-user:fake-pwd@{host}/") if with_external_key_vault else None
    opts = AutoEncryptionOpts(
        LOCAL,
        names[0],
        key_vault_client=external,
        schema_map={f"{names[1]}.coll": external_schema()},
        **analysed_by(analyser),
    )
    try:
        async with (
            MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted,
            ClientEncryption(LOCAL, names[0], external or client, None) as client_encryption,
        ):
            insert = client_encrypted[names[1]].coll.insert_one({"encrypted": "test"})
            encrypt = client_encryption.encrypt("test", DETERMINISTIC, key_id=external_key)
            if with_external_key_vault:
                for attempt in (insert, encrypt):
                    with pytest.raises(MongioError) as raised:
                        await attempt
                    assert authentication_failure(raised.value)
            else:
                await insert
                assert (await encrypt).subtype == 6
                stored = await client[names[1]].coll.find_one()
                assert stored is not None and stored["encrypted"].subtype == 6
    finally:
        if external is not None:
            await external.close()


def authentication_failure(error: BaseException) -> bool:
    """Whether ``error`` is, or was caused by, a failed authentication."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, AuthenticationFailed):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# --- 4: BSON size limits and batch splitting -------------------------------------------------------------------

LIMITS_FIELDS = [f"{n:02d}" for n in range(100)]


@pytest.fixture
async def limits_client(
    server_uri: str, names: tuple[str, str], analyser: QueryAnalyser, external_key: Binary
) -> AsyncIterator[tuple[MongoClient, CommandRecorder]]:
    """The README's ``client_encrypted`` of test 4, with limits/limits-schema.json in the schema map: a
    hundred short strings, encrypted (the README's limits-doc.json grows from about 1 kB to about 10 kB)."""
    schema = {
        "bsonType": "object",
        "properties": {
            name: {
                "encrypt": {"keyId": [external_key], "bsonType": "string", "algorithm": str(DETERMINISTIC)}
            }
            for name in LIMITS_FIELDS
        },
    }
    recorder = CommandRecorder()
    opts = AutoEncryptionOpts(
        LOCAL, names[0], schema_map={f"{names[1]}.coll": schema}, **analysed_by(analyser)
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts, event_listeners=[recorder]) as encrypted:
        yield encrypted, recorder


def limits_doc() -> dict[str, str]:
    """limits-doc.json's shape: a small document whose encryption makes it about ten times larger."""
    return {name: "x" for name in LIMITS_FIELDS}


async def test_prose_4_cases_1_to_4_bson_size_limits_and_batch_splitting(
    client: MongoClient, limits_client: tuple[MongoClient, CommandRecorder], names: tuple[str, str]
) -> None:
    encrypted, recorder = limits_client
    coll = encrypted[names[1]].coll
    await coll.insert_one({"_id": "over_2mib_under_16mib", "unencrypted": "a" * TWO_MIB})
    await coll.insert_one(
        {**limits_doc(), "_id": "encryption_exceeds_2mib", "unencrypted": "a" * (TWO_MIB - 2000)}
    )
    recorder.clear()
    await coll.bulk_write(
        [InsertOne({"_id": f"over_2mib_{n}", "unencrypted": "a" * TWO_MIB}) for n in (1, 2)]
    )
    await coll.bulk_write(
        [
            InsertOne(
                {**limits_doc(), "_id": f"encryption_exceeds_2mib_{n}", "unencrypted": "a" * (TWO_MIB - 2000)}
            )
            for n in (1, 2)
        ]
    )
    assert [len(command["documents"]) for command in recorder.commands("insert")] == [1, 1, 1, 1]
    recorder.clear()
    await coll.insert_many([{"_id": f"small_{n}", "00": str(n)} for n in range(10)])
    assert [len(command["documents"]) for command in recorder.commands("insert")] == [10]
    # Counted by the plain client: the stand-in does not analyse count_documents' $group.
    assert await client[names[1]].coll.count_documents({}) == 16


async def test_prose_4_cases_5_and_6_the_16_mib_limit_applies_to_the_encrypted_document(
    client: MongoClient, limits_client: tuple[MongoClient, CommandRecorder], names: tuple[str, str]
) -> None:
    encrypted, _ = limits_client
    coll = encrypted[names[1]].coll
    await coll.insert_one({"_id": "under_16mib", "unencrypted": "a" * (SIXTEEN_MIB - 2000)})
    with pytest.raises(MongioError) as raised:
        await coll.insert_one(
            {**limits_doc(), "_id": "encryption_exceeds_16mib", "unencrypted": "a" * (SIXTEEN_MIB - 2000)}
        )
    # Under 16 MiB as given, so it is encrypted and sent; the server refuses the encrypted document.
    error = raised.value
    assert isinstance(error, OperationFailure) and not isinstance(error, EncryptionError)
    assert error.code in (2, 10334)
    assert await client[names[1]].coll.count_documents({"_id": "encryption_exceeds_16mib"}) == 0


# --- 5: views are prohibited -----------------------------------------------------------------------------------


async def test_prose_5_views_are_prohibited(
    server_uri: str, client: MongoClient, names: tuple[str, str], analyser: QueryAnalyser
) -> None:
    await client[names[1]].create_collection("view", viewOn="coll", pipeline=[])
    opts = AutoEncryptionOpts(LOCAL, names[0], **analysed_by(analyser))
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted:
        with pytest.raises(EncryptionError, match="cannot auto encrypt a view"):
            await client_encrypted[names[1]].view.insert_one({"_id": 1})
    assert not analyser.analysed, "refused before any marking was asked for"


# --- 8: bypass spawning mongocryptd -----------------------------------------------------------------------------


async def nothing_listens_on(port: int) -> None:
    """The README's check that mongocryptd was not spawned: a handshake to its port times out."""
    async with MongoClient(f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=1000") as probe:
        with pytest.raises(ServerSelectionTimeoutError):
            await probe.admin.command("ping")


async def test_prose_8_via_mongocryptd_bypass_spawn(
    server_uri: str, names: tuple[str, str], external_key: Binary
) -> None:
    port = free_port()
    opts = AutoEncryptionOpts(
        LOCAL,
        names[0],
        schema_map={f"{names[1]}.coll": external_schema()},
        mongocryptd_bypass_spawn=True,
        mongocryptd_uri=f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=1000",
        mongocryptd_spawn_args=[f"--pidfilepath=bypass-spawning-mongocryptd-{port}.pid", f"--port={port}"],
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted:
        # A spawn attempt would fail differently: there is no mongocryptd to start on this machine.
        with pytest.raises(ServerSelectionTimeoutError):
            await client_encrypted[names[1]].coll.insert_one({"encrypted": "test"})


@pytest.mark.parametrize("bypass", ["bypass_auto_encryption", "bypass_query_analysis"])
async def test_prose_8_via_bypass_auto_encryption_and_bypass_query_analysis(
    server_uri: str, client: MongoClient, names: tuple[str, str], bypass: str
) -> None:
    port = free_port()
    bypassed: dict[str, Any] = {bypass: True}
    opts = AutoEncryptionOpts(
        LOCAL,
        names[0],
        mongocryptd_spawn_args=[f"--pidfilepath=bypass-spawning-mongocryptd-{port}.pid", f"--port={port}"],
        **bypassed,
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted:
        await client_encrypted[names[1]].coll.insert_one({"unencrypted": "test"})
    assert (await client[names[1]].coll.find_one({}, {"_id": 0})) == {"unencrypted": "test"}
    await nothing_listens_on(port)


@needs_crypt_shared
async def test_prose_8_via_loading_crypt_shared(server_uri: str, names: tuple[str, str]) -> None:
    port = free_port()
    opts = AutoEncryptionOpts(
        LOCAL,
        names[0],
        schema_map={f"{names[1]}.coll": external_schema()},
        mongocryptd_uri=f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=1000",
        mongocryptd_spawn_args=[f"--pidfilepath=bypass-spawning-mongocryptd-{port}.pid", f"--port={port}"],
        crypt_shared_lib_path=CRYPT_SHARED,
        crypt_shared_lib_required=True,
    )
    async with MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted:
        await client_encrypted[names[1]].coll.insert_one({"unencrypted": "test"})
    await nothing_listens_on(port)


# --- 9: deadlock tests -------------------------------------------------------------------------------------------


DEADLOCK_CASES = {
    # case: (maxPoolSize, bypass_auto_encryption, a key vault client of its own,
    #        the encrypted client's commands, the key vault client's, the clients made: client_encrypted and
    #        the internal client, if any). The internal client has client_encrypted's listeners.
    1: (1, False, False, [("find", "keyvault"), ("insert", "db"), ("find", "db")], [], 2),
    2: (1, False, True, [("insert", "db"), ("find", "db")], [("find", "keyvault")], 2),
    3: (1, True, False, [("find", "db"), ("find", "keyvault")], [], 2),
    4: (1, True, True, [("find", "db")], [("find", "keyvault")], 1),
    5: (
        0,
        False,
        False,
        [("listCollections", "keyvault"), ("find", "keyvault"), ("insert", "db"), ("find", "db")],
        [],
        1,
    ),
    6: (0, False, True, [("insert", "db"), ("find", "db")], [("find", "keyvault")], 1),
    7: (0, True, False, [("find", "db"), ("find", "keyvault")], [], 1),
    8: (0, True, True, [("find", "db")], [("find", "keyvault")], 1),
}


def sent(recorder: CommandRecorder, names: tuple[str, str]) -> list[tuple[str, str]]:
    """(command, "db" or "keyvault") of what the recorder saw go to the test's two databases."""
    roles = {names[1]: "db", names[0].partition(".")[0]: "keyvault"}
    return [
        (event.command_name, roles[event.database_name])
        for event in recorder.started_events
        if event.database_name in roles
    ]


@pytest.mark.parametrize("case", sorted(DEADLOCK_CASES))
async def test_prose_9_deadlock(
    server_uri: str,
    client: MongoClient,
    names: tuple[str, str],
    analyser: QueryAnalyser,
    external_key: Binary,
    case: int,
) -> None:
    max_pool_size, bypass, own_key_vault, expected, expected_key_vault, clients = DEADLOCK_CASES[case]
    async with ClientEncryption(LOCAL, names[0], client, None) as client_encryption:
        ciphertext = await client_encryption.encrypt("string0", DETERMINISTIC, key_alt_name="local")
    key_vault_events = CommandRecorder()
    async with MongoClient(server_uri, maxPoolSize=1, event_listeners=[key_vault_events]) as client_keyvault:
        opts = AutoEncryptionOpts(
            LOCAL,
            names[0],
            key_vault_client=client_keyvault if own_key_vault else None,
            bypass_auto_encryption=bypass,
            schema_map={f"{names[1]}.coll": external_schema(external_key)},
            **analysed_by(analyser),
        )
        events = CommandRecorder()
        async with MongoClient(
            server_uri, auto_encryption_opts=opts, maxPoolSize=max_pool_size, event_listeners=[events]
        ) as client_encrypted:
            if bypass:
                await client[names[1]].coll.insert_one({"_id": 0, "encrypted": ciphertext})
            else:
                await client_encrypted[names[1]].coll.insert_one({"_id": 0, "encrypted": "string0"})
            found = await client_encrypted[names[1]].coll.find_one({"_id": 0})
            encrypter = client_encrypted._encrypter
            assert encrypter is not None
            made = 1 + (encrypter.internal_client is not None)
    assert found == {"_id": 0, "encrypted": "string0"}
    assert sent(events, names) == expected
    assert sent(key_vault_events, names) == expected_key_vault
    assert made == clients


# --- 14: decryption events -------------------------------------------------------------------------------------


@pytest.fixture
async def decryption_events(
    server_uri: str, client: MongoClient, names: tuple[str, str], analyser: QueryAnalyser
) -> AsyncIterator[tuple[MongoClient, CommandRecorder, Binary, Binary]]:
    """The setup of test 14: (encryptedClient, its recorder, ciphertext, malformedCiphertext)."""
    await client[names[1]].create_collection("decryption_events")
    async with ClientEncryption(LOCAL, names[0], client, None) as client_encryption:
        key_id = await client_encryption.create_data_key("local")
        ciphertext = await client_encryption.encrypt("hello", DETERMINISTIC, key_id=key_id)
    malformed = Binary(bytes(ciphertext)[:-1] + bytes([bytes(ciphertext)[-1] ^ 0xFF]), 6)
    recorder = CommandRecorder()
    opts = AutoEncryptionOpts(LOCAL, names[0], **analysed_by(analyser))
    async with MongoClient(
        server_uri, auto_encryption_opts=opts, retryReads=False, event_listeners=[recorder]
    ) as encrypted:
        yield encrypted, recorder, ciphertext, malformed


async def fail_aggregate_once(client: MongoClient, **data: Any) -> None:
    await client.admin.command(
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {"errorCode": 123, "failCommands": ["aggregate"], **data},
        }
    )


@pytest.mark.parametrize(
    "close_connection", [False, True], ids=["case_1_command_error", "case_2_network_error"]
)
async def test_prose_14_cases_1_and_2_a_failed_aggregate_is_a_failed_event(
    client: MongoClient,
    names: tuple[str, str],
    decryption_events: tuple[MongoClient, CommandRecorder, Binary, Binary],
    close_connection: bool,
) -> None:
    encrypted, recorder, _, _ = decryption_events
    await fail_aggregate_once(client, **({"closeConnection": True} if close_connection else {}))
    with pytest.raises(MongioError) as raised:
        await encrypted[names[1]].decryption_events.aggregate([])
    assert not isinstance(raised.value, EncryptionError)
    assert isinstance(raised.value, OperationFailure) is not close_connection
    assert len(recorder.failures("aggregate")) == 1 and recorder.replies("aggregate") == []


@pytest.mark.parametrize("malformed", [True, False], ids=["case_3_decrypt_error", "case_4_decrypt_success"])
async def test_prose_14_cases_3_and_4_the_succeeded_event_holds_the_encrypted_reply(
    names: tuple[str, str],
    decryption_events: tuple[MongoClient, CommandRecorder, Binary, Binary],
    malformed: bool,
) -> None:
    encrypted, recorder, ciphertext, malformed_ciphertext = decryption_events
    coll = encrypted[names[1]].decryption_events
    await coll.insert_one({"encrypted": malformed_ciphertext if malformed else ciphertext})
    if malformed:
        with pytest.raises(EncryptionError):
            await (await coll.aggregate([])).to_list()
    else:
        assert [document["encrypted"] for document in await (await coll.aggregate([])).to_list()] == ["hello"]
    (reply,) = recorder.replies("aggregate")
    value = reply["cursor"]["firstBatch"][0]["encrypted"]
    assert isinstance(value, Binary) and value.subtype == 6


# --- 20: no mongocryptd client once crypt_shared is loaded -----------------------------------------------------


@needs_crypt_shared
async def test_prose_20_no_mongocryptd_client_when_crypt_shared_is_loaded(
    server_uri: str, names: tuple[str, str]
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        opts = AutoEncryptionOpts(
            LOCAL,
            names[0],
            mongocryptd_uri=f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=1000",
            crypt_shared_lib_path=CRYPT_SHARED,
        )
        async with MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted:
            assert client_encrypted._encrypter is not None and client_encrypted._encrypter.mongocryptd is None
            await client_encrypted[names[1]].coll.insert_one({"unencrypted": "test"})
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected


# --- 25: $lookup ---------------------------------------------------------------------------------------------------


async def test_prose_25_case_9_lookup_needs_a_query_analyser_of_8_1(
    server_uri: str,
    client: MongoClient,
    names: tuple[str, str],
    analyser: QueryAnalyser,
    external_key: Binary,
) -> None:
    """The stand-in reports mongocryptd 8.0's wire version: libmongocrypt refuses a ``$lookup`` across
    collections and asks for an upgrade."""
    csfle_schema = {
        "bsonType": "object",
        "properties": {
            "csfle": {
                "encrypt": {"keyId": [external_key], "bsonType": "string", "algorithm": str(DETERMINISTIC)}
            }
        },
    }
    await client[names[1]].create_collection("no_schema")
    opts = AutoEncryptionOpts(
        LOCAL, names[0], schema_map={f"{names[1]}.csfle": csfle_schema}, **analysed_by(analyser)
    )
    pipeline: list[dict[str, Any]] = [
        {"$match": {"csfle": "csfle"}},
        {
            "$lookup": {
                "from": "no_schema",
                "as": "matched",
                "pipeline": [{"$match": {"no_schema": "no_schema"}}, {"$project": {"_id": 0}}],
            }
        },
        {"$project": {"_id": 0}},
    ]
    async with MongoClient(server_uri, auto_encryption_opts=opts) as encrypted:
        with pytest.raises(EncryptionError, match="Upgrade"):
            await encrypted[names[1]].csfle.aggregate(pipeline)
