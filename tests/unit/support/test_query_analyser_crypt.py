"""The stand-in query analyser behind libmongocrypt itself: mongio's ``Crypt.encrypt_command`` asks it for
markings over the wire (a mongio client connected to it, as mongocryptd would be), with a local master key,
and the command comes back with ciphertext where the schema says, which ``decrypt_reply`` turns back into the
plaintext. No server: the key vault is a list in the test."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from mongio import MongoClient
from mongio.bson import decode, encode
from mongio.bson.binary import Binary
from mongio.bson.codec_options import CodecOptions
from mongio.bson.raw_bson import RawBSONDocument
from mongio.encryption import libmongocrypt
from mongio.encryption.libmongocrypt import Crypt, CryptOptions, KmsRequest
from mongio.errors import EncryptionError, OperationFailure
from tests.support.query_analyser import DETERMINISTIC, RANDOM, AnalyserThread, QueryAnalyser

pytestmark = pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]")

LOCAL_KEY = os.urandom(96)
NAMESPACE = "db.people"
_RAW = CodecOptions(document_class=RawBSONDocument)


class AnalyserIO:
    """libmongocrypt's requests answered from a key list and the analyser (local KMS only: no KMS I/O)."""

    def __init__(self, analyser_client: MongoClient[Any]) -> None:
        self.analyser_client = analyser_client
        self.keys: list[bytes] = []

    async def kms_exchange(self, request: KmsRequest) -> None:
        raise AssertionError(f"a local key needs no KMS, yet {request.endpoint} was asked")

    async def collection_info(self, database: str, filter_bson: bytes) -> list[bytes]:
        raise AssertionError("the schema map names the collection: no listCollections is needed")

    async def mark_command(self, database: str, command_bson: bytes) -> bytes:
        reply: Any = await self.analyser_client[database].command(decode(command_bson), codec_options=_RAW)
        assert isinstance(reply, RawBSONDocument)
        return bytes(reply.raw)

    async def fetch_keys(self, filter_bson: bytes) -> AsyncIterator[bytes]:
        wanted = _KeyFilter(decode(filter_bson))
        for key in self.keys:
            if wanted.matches(decode(key)):
                yield key

    async def kms_credentials(self, providers: Mapping[str, Any]) -> dict[str, Any]:
        return {}


class _KeyFilter:
    """libmongocrypt's key query: ``{$or: [{_id: {$in: ids}}, {keyAltNames: {$in: names}}]}``."""

    def __init__(self, query: Mapping[str, Any]) -> None:
        clauses = query["$or"]
        self.ids = {bytes(value) for clause in clauses for value in clause.get("_id", {}).get("$in", ())}
        self.names = {name for clause in clauses for name in clause.get("keyAltNames", {}).get("$in", ())}

    def matches(self, key: Mapping[str, Any]) -> bool:
        return bytes(key["_id"]) in self.ids or bool(self.names & set(key.get("keyAltNames", ())))


@pytest.fixture
async def analyser() -> AsyncIterator[QueryAnalyser]:
    async with QueryAnalyser() as serving:
        yield serving


@pytest.fixture
async def analyser_client(analyser: QueryAnalyser) -> AsyncIterator[MongoClient[Any]]:
    async with MongoClient(analyser.uri, directConnection=True, serverSelectionTimeoutMS=5000) as client:
        yield client


async def make_key(io: AnalyserIO) -> Binary:
    """A data key made by libmongocrypt with the local master key (alt name ``ada-key``), in the key list."""
    maker = Crypt(CryptOptions(kms_providers={"local": {"key": LOCAL_KEY}}), io)
    try:
        key = await maker.create_data_key("local", None, ["ada-key"], None)
    finally:
        maker.close()
    io.keys.append(key)
    key_id = decode(key)["_id"]
    assert isinstance(key_id, Binary)
    return key_id


def auto_crypt(io: AnalyserIO, schema: Mapping[str, Any]) -> Crypt:
    """A Crypt for automatic encryption, with ``schema`` for ``db.people`` as its schema map."""
    options = CryptOptions(
        kms_providers={"local": {"key": LOCAL_KEY}},
        schema_map=bytes(encode({NAMESPACE: schema})),
        bypass_encryption=False,
    )
    return Crypt(options, io)


def schema_for(key_id: Binary) -> dict[str, Any]:
    return {
        "bsonType": "object",
        "properties": {
            "ssn": {"encrypt": {"keyId": [key_id], "bsonType": "string", "algorithm": DETERMINISTIC}},
            "notes": {"encrypt": {"keyId": "/owner", "algorithm": RANDOM}},
            "address": {
                "bsonType": "object",
                "encryptMetadata": {"keyId": [key_id], "algorithm": RANDOM},
                "properties": {"street": {"encrypt": {"bsonType": "string"}}},
            },
        },
    }


def ciphertext_of(value: Any, algorithm_byte: int, key_id: Binary) -> bytes:
    """Checks ``value`` is a subtype-6 ciphertext of the algorithm under the key (BSON binary encrypted spec:
    byte 0 is 1 deterministic / 2 random, then the key's UUID)."""
    assert isinstance(value, Binary) and value.subtype == 6, value
    data = bytes(value)
    assert data[0] == algorithm_byte and data[1:17] == bytes(key_id)
    return data


async def test_an_insert_is_encrypted_where_the_schema_says_and_decrypts_back(
    analyser: QueryAnalyser, analyser_client: MongoClient[Any]
) -> None:
    io = AnalyserIO(analyser_client)
    key_id = await make_key(io)
    crypt = auto_crypt(io, schema_for(key_id))
    try:
        document = {
            "_id": 1,
            "ssn": "457-55-5642",
            "owner": "ada-key",
            "notes": {"allergies": ["penicillin"]},
            "address": {"street": "1 Main St", "city": "Springfield"},
        }
        command = {"insert": "people", "documents": [document], "ordered": True}
        encrypted = decode(await crypt.encrypt_command("db", bytes(encode(command))))
        stored = encrypted["documents"][0]
        ciphertext_of(stored["ssn"], 1, key_id)
        ciphertext_of(stored["notes"], 2, key_id)  # its key found by the alt name the pointer names
        ciphertext_of(stored["address"]["street"], 2, key_id)
        assert stored["owner"] == "ada-key" and stored["address"]["city"] == "Springfield"
        assert "jsonSchema" not in encrypted and encrypted["insert"] == "people"

        decrypted = decode(await crypt.decrypt_reply(bytes(encode({"cursor": {"firstBatch": [stored]}, "ok": 1}))))
        assert decrypted["cursor"]["firstBatch"][0] == document

        query = {"find": "people", "filter": {"ssn": {"$in": ["457-55-5642", "000-00-0000"]}}}
        found = decode(await crypt.encrypt_command("db", bytes(encode(query))))
        first, second = found["filter"]["ssn"]["$in"]
        assert ciphertext_of(first, 1, key_id) == bytes(stored["ssn"]), "deterministic: the same ciphertext"
        assert ciphertext_of(second, 1, key_id) != bytes(stored["ssn"])
    finally:
        crypt.close()
    marked = [command for command in analyser.analysed if "insert" in command]
    assert marked and marked[-1]["isRemoteSchema"] is False, "libmongocrypt sent the local schema with the command"


async def test_an_analysis_error_reaches_the_caller_with_its_message(analyser_client: MongoClient[Any]) -> None:
    io = AnalyserIO(analyser_client)
    key_id = await make_key(io)
    crypt = auto_crypt(io, {"properties": {"score": {"encrypt": {"keyId": [key_id], "algorithm": DETERMINISTIC}}}})
    try:
        command = {"insert": "people", "documents": [{"score": 1.5}]}
        with pytest.raises((OperationFailure, EncryptionError), match="deterministic encryption for element of type: double"):
            await crypt.encrypt_command("db", bytes(encode(command)))
    finally:
        crypt.close()


async def test_the_analyser_answers_hello_as_mongocryptd(analyser_client: MongoClient[Any]) -> None:
    reply = await analyser_client.admin.command("hello")
    assert reply["iscryptd"] is True and reply["isWritablePrimary"] is True
    assert "logicalSessionTimeoutMinutes" not in reply, "mongocryptd has no sessions"


def test_the_thread_analyser_serves_clients_of_other_loops_and_stops() -> None:
    serving = AnalyserThread()
    uri = serving.start()
    try:
        for _ in range(2):  # two loops in turn, as two tests under pytest

            async def ping() -> Any:
                async with MongoClient(uri, directConnection=True, serverSelectionTimeoutMS=5000) as client:
                    return await client.admin.command("isMaster")

            assert asyncio.run(ping())["iscryptd"] is True
    finally:
        serving.stop()
    assert not serving.running
