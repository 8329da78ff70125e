"""Queryable Encryption's create and drop collection helpers (client-side encryption specification, "Queryable
Encryption Create and Drop Collection Helpers"), by the commands they send.

SecantusDB refuses ``create`` with ``encryptedFields`` (code 40415), and the stand-in query analyser does not
analyse Queryable Encryption's commands, so the whole sequence (state collections, the collection, the
``__safeContent__`` index) is checked against a loopback peer that accepts every command, and against the
test server with automatic encryption up to the collection's own create; dropping runs against the test
server whole, including the ``listCollections`` a client with automatic encryption sends to find a
collection's ``encryptedFields``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio import MongoClient
from mongio.bson.binary import Binary
from mongio.encryption import AutoEncryptionOpts, libmongocrypt
from mongio.errors import ConfigurationError, EncryptionError, MongioError, OperationFailure
from tests.support.loopback_peer import LoopbackPeer, Request, default_reply
from tests.support.query_analyser import UNSUPPORTED_PREFIX, QueryAnalyser
from tests.support.recorders import CommandRecorder

KEY_ID = Binary(bytes(16), 4)
ENCRYPTED_FIELDS = {"fields": [{"path": "firstName", "bsonType": "string", "keyId": KEY_ID}]}
CLUSTERED = {"key": {"_id": 1}, "unique": True}
SAFE_CONTENT = {"name": "__safeContent___1", "key": {"__safeContent__": 1}}


class AcceptingServer:
    """A loopback standalone that accepts every command (``listCollections`` finds ``collections``); the
    commands named in ``refuse`` fail. ``sent`` lists the commands other than the handshake's."""

    def __init__(self, max_wire_version: int = 21, refuse: tuple[str, ...] = ()) -> None:
        self.peer = LoopbackPeer(self._answer, max_wire_version=max_wire_version)
        self.refuse = refuse
        self.collections: list[dict[str, Any]] = []

    def _answer(self, request: Request) -> dict[str, Any]:
        name = request.command_name
        if name.lower() in ("hello", "ismaster") or name in ("endSessions", "ping"):
            return default_reply(request, self.peer)
        if name in self.refuse:
            return {"ok": 0, "errmsg": f"{name} refused", "code": 2, "codeName": "BadValue"}
        if name == "listCollections":
            ns = f"{request.document['$db']}.$cmd.listCollections"
            return {"ok": 1, "cursor": {"id": 0, "ns": ns, "firstBatch": self.collections}}
        return {"ok": 1}

    @property
    def sent(self) -> list[dict[str, Any]]:
        return [
            {
                key: value
                for key, value in request.document.items()
                if key not in ("$db", "lsid", "$readPreference")
            }
            for request in self.peer.requests
            if request.command_name.lower() not in ("hello", "ismaster", "endsessions")
        ]


@pytest.fixture
async def accepting() -> AsyncIterator[AcceptingServer]:
    server = AcceptingServer()
    async with server.peer:
        yield server


async def test_create_makes_the_state_collections_then_the_collection_then_the_index(
    accepting: AcceptingServer,
) -> None:
    async with MongoClient(accepting.peer.uri) as client:
        collection = await client.db.create_collection(
            "enc", encrypted_fields=ENCRYPTED_FIELDS, check_exists=False
        )
    assert collection.name == "enc"
    assert accepting.sent == [
        {"create": "enxcol_.enc.esc", "clusteredIndex": CLUSTERED},
        {"create": "enxcol_.enc.ecoc", "clusteredIndex": CLUSTERED},
        {"create": "enc", "encryptedFields": ENCRYPTED_FIELDS},
        {"createIndexes": "enc", "indexes": [SAFE_CONTENT]},
    ]


async def test_the_state_collections_names_come_from_the_encrypted_fields(accepting: AcceptingServer) -> None:
    fields = {**ENCRYPTED_FIELDS, "escCollection": "my_esc", "ecocCollection": "my_ecoc"}
    async with MongoClient(accepting.peer.uri) as client:
        await client.db.create_collection("enc", encryptedFields=fields, check_exists=False)
        await client.db.enc.drop(encrypted_fields=fields)
    assert [(next(iter(command)), next(iter(command.values()))) for command in accepting.sent] == [
        ("create", "my_esc"),
        ("create", "my_ecoc"),
        ("create", "enc"),
        ("createIndexes", "enc"),
        ("drop", "my_esc"),
        ("drop", "my_ecoc"),
        ("drop", "enc"),
    ]


async def test_a_plain_create_and_drop_send_one_command_each(accepting: AcceptingServer) -> None:
    async with MongoClient(accepting.peer.uri) as client:
        await client.db.create_collection("plain", check_exists=False)
        await client.db.drop_collection("plain")
    assert accepting.sent == [{"create": "plain"}, {"drop": "plain"}]


async def test_a_server_before_7_0_is_refused_before_anything_is_sent() -> None:
    old = AcceptingServer(max_wire_version=20)
    async with old.peer, MongoClient(old.peer.uri) as client:
        with pytest.raises(
            ConfigurationError, match="Driver support of Queryable Encryption is incompatible"
        ):
            await client.db.create_collection("enc", encrypted_fields=ENCRYPTED_FIELDS, check_exists=False)
    assert old.sent == []


async def test_a_failed_step_stops_the_rest() -> None:
    refusing = AcceptingServer(refuse=("create",))
    async with refusing.peer, MongoClient(refusing.peer.uri) as client:
        with pytest.raises(OperationFailure, match="create refused"):
            await client.db.create_collection("enc", encrypted_fields=ENCRYPTED_FIELDS, check_exists=False)
    assert refusing.sent == [{"create": "enxcol_.enc.esc", "clusteredIndex": CLUSTERED}]


@pytest.mark.parametrize("via", ["database", "collection"])
async def test_drop_drops_the_state_collections_first_and_never_sends_the_fields(
    accepting: AcceptingServer, via: str
) -> None:
    async with MongoClient(accepting.peer.uri) as client:
        if via == "database":
            await client.db.drop_collection("enc", encrypted_fields=ENCRYPTED_FIELDS)
        else:
            await client.db.enc.drop(encrypted_fields=ENCRYPTED_FIELDS)
    assert accepting.sent == [{"drop": "enxcol_.enc.esc"}, {"drop": "enxcol_.enc.ecoc"}, {"drop": "enc"}]


async def test_encrypted_fields_are_a_mapping(accepting: AcceptingServer) -> None:
    async with MongoClient(accepting.peer.uri) as client:
        with pytest.raises(TypeError, match="encrypted_fields must be a mapping"):
            await client.db.create_collection("enc", encrypted_fields=["firstName"], check_exists=False)
        with pytest.raises(TypeError, match="encrypted_fields must be a mapping"):
            await client.db.drop_collection("enc", encrypted_fields=["firstName"])  # type: ignore[arg-type]
    assert accepting.sent == []


# --- against the test server, with automatic encryption ------------------------------------------------------

needs_extra = pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]")
LOCAL = {"local": {"key": os.urandom(96)}}


@pytest.fixture
async def database_name(server_uri: str) -> AsyncIterator[str]:
    name = f"qe_helpers_{uuid.uuid4().hex[:10]}"
    yield name
    async with MongoClient(server_uri) as plain:
        await plain.drop_database(name)
        await plain.drop_database(f"keyvault_{name}")


async def encrypting_client(
    server_uri: str,
    database_name: str,
    analyser: QueryAnalyser,
    fields_map: dict[str, Any],
    recorder: CommandRecorder,
) -> MongoClient:
    opts = AutoEncryptionOpts(
        LOCAL,
        f"keyvault_{database_name}.datakeys",
        encrypted_fields_map=fields_map,
        mongocryptd_uri=analyser.uri,
        mongocryptd_bypass_spawn=True,
    )
    return MongoClient(server_uri, auto_encryption_opts=opts, event_listeners=[recorder])


def commands_on(recorder: CommandRecorder, database: str) -> list[tuple[str, Any]]:
    return [
        (event.command_name, event.command.get(event.command_name))
        for event in recorder.started_events
        if event.database_name == database
    ]


@needs_extra
@pytest.mark.server
async def test_an_encrypting_client_asks_the_server_for_encrypted_fields_before_a_drop(
    server_uri: str, database_name: str
) -> None:
    """The specification's fle2v2-CreateCollection "CreateCollection without encryptedFields": with an empty
    map, the drop looks the collection up first; a collection without encryptedFields is dropped alone."""
    recorder = CommandRecorder()
    async with QueryAnalyser() as analyser:
        client = await encrypting_client(server_uri, database_name, analyser, {}, recorder)
        async with client:
            await client[database_name].create_collection("plaintextCollection", check_exists=False)
            recorder.clear()
            await client[database_name].drop_collection("plaintextCollection")
    assert commands_on(recorder, database_name) == [
        ("listCollections", 1),
        ("drop", "plaintextCollection"),
    ]
    (listing,) = recorder.commands("listCollections")
    assert listing["filter"] == {"name": "plaintextCollection"}


@needs_extra
@pytest.mark.server
async def test_the_map_names_the_state_collections_to_create_and_drop(
    server_uri: str, database_name: str
) -> None:
    """fle2v2-CreateCollection "CreateCollection from encryptedFieldsMap" up to the collection's own create
    (the state collections are made), then "DropCollection from encryptedFieldsMap"."""
    recorder = CommandRecorder()
    fields_map = {f"{database_name}.encryptedCollection": ENCRYPTED_FIELDS}
    async with QueryAnalyser() as analyser:
        client = await encrypting_client(server_uri, database_name, analyser, fields_map, recorder)
        async with client:
            db = client[database_name]
            with pytest.raises(MongioError) as refused:
                await db.create_collection("encryptedCollection", check_exists=False)
            creating = commands_on(recorder, database_name)
            made = set(await db.list_collection_names())
            recorder.clear()
            await db.drop_collection("encryptedCollection")
            left = set(await db.list_collection_names())
    assert creating == [
        ("create", "enxcol_.encryptedCollection.esc"),
        ("create", "enxcol_.encryptedCollection.ecoc"),
    ]
    assert {"enxcol_.encryptedCollection.esc", "enxcol_.encryptedCollection.ecoc"} <= made
    assert "encryptedCollection" not in made
    # The collection's own create is Queryable Encryption's, which libmongocrypt has analysed: the stand-in
    # does not analyse it (a real mongocryptd would, and SecantusDB would then refuse encryptedFields).
    assert isinstance(refused.value, EncryptionError) and UNSUPPORTED_PREFIX in str(refused.value)
    assert commands_on(recorder, database_name)[:3] == [
        ("drop", "enxcol_.encryptedCollection.esc"),
        ("drop", "enxcol_.encryptedCollection.ecoc"),
        ("drop", "encryptedCollection"),
    ]
    assert not left & {"enxcol_.encryptedCollection.esc", "enxcol_.encryptedCollection.ecoc"}
