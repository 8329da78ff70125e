"""The executor's automatic encryption hook (``command_crypt``) without a server, with a reversible stand-in
for libmongocrypt: the command is serialized whole (document sequences folded in) and encrypted before it is
sent and before its started event; the reply is decrypted after its succeeded event; with
``bypass_auto_encryption`` only replies are decrypted; write batches are cut at 2 MiB only when encrypting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.bson import RawBSONDocument, decode, encode
from mongio.bson.binary import Binary
from mongio.events.command import CommandPublisher
from mongio.execution.command_crypt import RAW_REPLY
from mongio.execution.executor import Executor
from mongio.execution.retry_policy import RetryOptions
from mongio.operations.base import EncryptedWriteLimits
from mongio.operations.bulk import BulkWrite
from mongio.operations.models import InsertOne
from mongio.operations.run_command import RunCommand
from mongio.topology.server_description import ServerDescription
from tests.support.recorders import CommandRecorder
from tests.support.scripted_executor import (
    ADDRESS,
    PRIMARY_HELLO,
    FakeClient,
    FakeConnection,
    FakePool,
    FakeServer,
    FakeTopology,
)

CIPHERTEXT = 6


def _transform(value: Any, change: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: change(key, _transform(item, change)) for key, item in value.items()}
    if isinstance(value, list):
        return [_transform(item, change) for item in value]
    return value


class ReversibleCrypt:
    """Encrypts every ``ssn`` string as a subtype 6 Binary of its bytes; decrypts every subtype 6 Binary."""

    def __init__(self, *, encrypts_commands: bool = True) -> None:
        self._encrypts = encrypts_commands
        self.commands: list[tuple[str, dict[str, Any]]] = []

    @property
    def encrypts_commands(self) -> bool:
        return self._encrypts

    async def encrypt_command(self, database: str, command: bytes) -> bytes:
        document = decode(command)
        self.commands.append((database, document))

        def change(key: str, value: Any) -> Any:
            return Binary(value.encode(), CIPHERTEXT) if key == "ssn" and isinstance(value, str) else value

        return bytes(encode(_transform(document, change)))

    async def decrypt_reply(self, reply: bytes) -> bytes:
        def change(key: str, value: Any) -> Any:
            return (
                value.decode()
                if isinstance(value, bytes) and getattr(value, "subtype", 0) == CIPHERTEXT
                else value
            )

        return bytes(encode(_transform(decode(reply), change)))


class RawConnection(FakeConnection):
    """Answers as a connection does: raw when asked with RAW_REPLY; records what was sent, sequences too."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.sequences: list[Any] = []
        self.contexts: list[Any] = []

    def send_nowait(self, db: str, body: Any, **kwargs: Any) -> int:
        self.sequences.append(kwargs.get("document_sequences"))
        return super().send_nowait(db, body, **kwargs)

    async def receive(self, **kwargs: Any) -> dict[str, Any]:
        reply = await super().receive(**kwargs)
        if kwargs.get("codec_options") is RAW_REPLY:
            return RawBSONDocument(bytes(encode(reply)))  # type: ignore[return-value]
        return reply


def make(
    replies: list[Any], crypt: ReversibleCrypt | None
) -> tuple[Executor, RawConnection, CommandRecorder]:
    conn = RawConnection(replies)
    topology = FakeTopology(FakeServer(FakePool(conn), ServerDescription(ADDRESS, PRIMARY_HELLO)))
    recorder = CommandRecorder()
    executor = Executor(
        FakeClient(topology),
        retry_options=RetryOptions(),
        publisher=CommandPublisher([recorder]),
        command_crypt=crypt,
    )
    executor.attach(topology)  # type: ignore[arg-type]
    return executor, conn, recorder


async def test_commands_are_encrypted_whole_before_the_started_event() -> None:
    crypt = ReversibleCrypt()
    executor, conn, recorder = make([{"ok": 1, "n": 2}], crypt)
    bulk = BulkWrite(
        "db", "people", [InsertOne({"_id": 1, "ssn": "111"}), InsertOne({"_id": 2, "ssn": "222"})]
    )
    batch = bulk.next_batch()
    assert batch is not None
    await executor.execute(batch)
    # One document reached libmongocrypt: the documents folded into the body, no sequence left.
    ((database, given),) = crypt.commands
    assert database == "db" and [d["ssn"] for d in given["documents"]] == ["111", "222"]
    assert conn.sequences == [None]
    (sent,) = conn.sent
    assert [d["ssn"] for d in sent["documents"]] == [Binary(b"111", CIPHERTEXT), Binary(b"222", CIPHERTEXT)]
    (shown,) = recorder.commands("insert")
    assert [d["ssn"].subtype for d in shown["documents"]] == [CIPHERTEXT, CIPHERTEXT]
    assert "lsid" in given and given["$db"] == "db"  # the command as the server gets it, fields and all


async def test_replies_are_decrypted_after_the_succeeded_event() -> None:
    crypt = ReversibleCrypt()
    reply = {"ok": 1, "value": {"_id": 1, "ssn": Binary(b"111", CIPHERTEXT)}}
    executor, _, recorder = make([reply], crypt)
    result = await executor.execute(RunCommand("db", {"findAndModify": "people", "query": {"_id": 1}}))
    assert result["value"] == {"_id": 1, "ssn": "111"}
    (observed,) = recorder.replies("findAndModify")
    assert observed["value"]["ssn"] == Binary(b"111", CIPHERTEXT)


async def test_without_observers_the_reply_is_still_decrypted() -> None:
    crypt = ReversibleCrypt()
    conn = RawConnection([{"ok": 1, "value": {"ssn": Binary(b"9", CIPHERTEXT)}}])
    topology = FakeTopology(FakeServer(FakePool(conn), ServerDescription(ADDRESS, PRIMARY_HELLO)))
    executor = Executor(
        FakeClient(topology), retry_options=RetryOptions(), publisher=CommandPublisher(), command_crypt=crypt
    )
    executor.attach(topology)  # type: ignore[arg-type]
    result = await executor.execute(RunCommand("db", {"findAndModify": "people", "query": {}}))
    assert result["value"] == {"ssn": "9"}


async def test_bypass_auto_encryption_only_decrypts() -> None:
    crypt = ReversibleCrypt(encrypts_commands=False)
    executor, conn, _ = make([{"ok": 1, "n": 1}, {"ok": 1, "v": Binary(b"x", CIPHERTEXT)}], crypt)
    batch = BulkWrite("db", "people", [InsertOne({"_id": 1, "ssn": "111"})]).next_batch()
    assert batch is not None
    await executor.execute(batch)
    assert crypt.commands == []
    assert conn.sequences[0] is not None  # sent as usual, with its document sequence
    assert (await executor.execute(RunCommand("db", "ping")))["v"] == "x"


async def test_write_batches_are_built_for_the_encrypted_limits_only_when_encrypting() -> None:
    built: list[Any] = []

    class Recording(RunCommand):
        def build(self, context: Any) -> Any:
            built.append(context)
            return super().build(context)

    for crypt, expected in (
        (ReversibleCrypt(), True),
        (ReversibleCrypt(encrypts_commands=False), False),
        (None, False),
    ):
        executor, _, _ = make([{"ok": 1}], crypt)
        await executor.execute(Recording("db", "ping"))
        assert isinstance(built[-1], EncryptedWriteLimits) is expected
