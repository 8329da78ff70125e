"""SCRAM-SHA-256 against the test server started with ``--auth``: the right password, a wrong one,
speculative authentication, and mechanism negotiation.

The server is provisioned here: started without ``--auth`` on a persistent storage path, given a user and a
document, stopped, and started again with ``--auth`` on the same path.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from spec_runner.raw_wire import command_once

from mongio.connection import Connection
from mongio.connection.auth import AuthenticationFailed
from mongio.connection.auth.scram import ScramConversation, ScramKeyCache
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.handshake import ClientMetadata
from mongio.errors import OperationFailure
from mongio.options.credentials import MongoCredential
from tests.support.persistent_server import PersistentServer

pytestmark = pytest.mark.server

USER = "alice"
PASSWORD = "correct horse \u2163"  # non-ASCII: SASLprep maps U+2163 to "IV" on both sides


# The authentication spec's test plan, step 4: users whose names and passwords SASLprep changes.
SASLPREP_USERS = (("IX", "IX"), ("\u2168", "\u2163"))


def _admin(host: str, port: int, command: dict[str, Any]) -> Mapping[str, Any]:
    reply = command_once(host, port, {**command, "$db": "admin"}, timeout=10.0)
    assert reply.get("ok") == 1, f"{next(iter(command))} failed: {reply}"
    return reply


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    storage = tmp_path_factory.mktemp("secantus-auth")
    setup = PersistentServer(storage)
    with setup:
        for user, password in ((USER, PASSWORD), *SASLPREP_USERS):
            _admin(setup.host, setup.port, {"createUser": user, "pwd": password, "roles": [{"role": "root", "db": "admin"}]})
        reply = command_once(setup.host, setup.port, {"insert": "things", "documents": [{"_id": 1, "kind": "widget"}], "$db": "authdb"})
        assert reply.get("ok") == 1, reply
    with PersistentServer(storage, "--auth", port=setup.port) as server:
        yield server.host, server.port


def credential(password: str = PASSWORD, mechanism: str = "DEFAULT", user: str = USER) -> MongoCredential:
    return MongoCredential(mechanism=mechanism, source="admin", username=user, password=password)


def settings(cred: MongoCredential | None) -> ConnectionSettings:
    return ConnectionSettings(
        metadata=ClientMetadata(appname="mongio-auth-tests"), credential=cred, scram_cache=ScramKeyCache()
    )


class CommandLog:
    """Records the name of every command connections send (by wrapping ``Connection.command``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        self.replies: list[Mapping[str, Any]] = []
        original = Connection.command

        async def recording(conn: Connection, db: str, command: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
            self.names.append(next(iter(command)))
            reply = await original(conn, db, command, **kwargs)
            self.replies.append(reply)
            return reply

        monkeypatch.setattr(Connection, "command", recording)


async def test_right_password_authenticates_and_reads(auth_server: tuple[str, int]) -> None:
    conn = await establish(auth_server, settings(credential()))
    try:
        assert conn.ready
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
        found = await conn.command("authdb", {"find": "things", "filter": {}})
        assert found["cursor"]["firstBatch"] == [{"_id": 1, "kind": "widget"}]
        status = await conn.command("admin", {"connectionStatus": 1})
        users = status["authInfo"]["authenticatedUsers"]
        assert {"user": USER, "db": "admin"} in [{"user": u["user"], "db": u["db"]} for u in users]
    finally:
        conn.close()


async def test_sasl_prepped_password_forms_are_equivalent(auth_server: tuple[str, int]) -> None:
    # "\u00ad" (soft hyphen) maps to nothing and "IV" is what U+2163 normalizes to.
    for form in ("correct horse IV", "correct\u00ad horse \u2163"):
        conn = await establish(auth_server, settings(credential(form, mechanism="SCRAM-SHA-256")))
        conn.close()


@pytest.mark.parametrize(
    ("user", "password"),
    [("IX", "IX"), ("IX", "I\u00adX"), ("\u2168", "IV"), ("\u2168", "I\u00adV")],
)
async def test_spec_saslprep_users(auth_server: tuple[str, int], user: str, password: str) -> None:
    for mechanism in ("DEFAULT", "SCRAM-SHA-256"):
        conn = await establish(auth_server, settings(credential(password, mechanism=mechanism, user=user)))
        try:
            status = await conn.command("admin", {"connectionStatus": 1})
            assert [u["user"] for u in status["authInfo"]["authenticatedUsers"]] == [user]
        finally:
            conn.close()


async def test_unauthenticated_connection_cannot_read(auth_server: tuple[str, int]) -> None:
    conn = await establish(auth_server, settings(None))
    try:
        with pytest.raises(OperationFailure) as info:
            await conn.command("authdb", {"find": "things", "filter": {}})
        assert info.value.code == 13  # Unauthorized
    finally:
        conn.close()


async def test_wrong_password_is_an_authentication_error_without_secrets(
    auth_server: tuple[str, int], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    proofs: list[str] = []
    client_final = ScramConversation.client_final

    def spy(self: ScramConversation, keys: Any) -> bytes:
        message = client_final(self, keys)
        proofs.append(message.split(b",p=")[1].decode())
        return message

    monkeypatch.setattr(ScramConversation, "client_final", spy)
    wrong = "wrong-password-123"
    with pytest.raises(AuthenticationFailed) as info:
        await establish(auth_server, settings(credential(wrong)))
    assert proofs, "the conversation never reached the proof"
    error = info.value
    text = f"{error} {error!r} {error.details!r}"
    assert "authentication failed" in text.lower()
    assert wrong not in text and PASSWORD not in text
    assert all(proof not in text for proof in proofs)
    logged = " ".join(f"{record.getMessage()} {record.exc_text or ''}" for record in caplog.records)
    assert wrong not in logged and all(proof not in logged for proof in proofs)


async def test_unknown_user_fails_like_a_wrong_password(auth_server: tuple[str, int]) -> None:
    with pytest.raises(AuthenticationFailed):
        await establish(auth_server, settings(credential(user="nobody")))


async def test_negotiation_and_speculative_authentication(
    auth_server: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = CommandLog(monkeypatch)
    conn = await establish(auth_server, settings(credential()))
    conn.close()
    hello = log.replies[0]
    assert "SCRAM-SHA-256" in hello.get("saslSupportedMechs", [])
    # Servers since 4.4 answer the speculative saslStart the hello carried: only the proof round trip remains.
    assert "speculativeAuthenticate" in hello
    assert log.names == ["isMaster", "saslContinue"]


def _recorder(base: type, sink: list[str]) -> Any:
    """A listener of class ``base`` that describes every event it gets into ``sink``."""

    def describe(self: Any, event: object) -> None:
        fields = {name: getattr(event, name) for name in dir(event) if not name.startswith("_")}
        sink.append(f"{event!r} {({name: value for name, value in fields.items() if not callable(value)})!r}")

    methods = {name: describe for name in vars(base) if not name.startswith("_") and callable(vars(base)[name])}
    return type(f"Recording{base.__name__}", (base,), methods)()


def _chained(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is not None and all(current is not item for item in found):
            found.append(current)
            pending += [current.__cause__, current.__context__]
    return found


async def test_a_wrong_password_in_the_connection_string_shows_nowhere(
    auth_server: tuple[str, int], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through MongoClient: the failed SCRAM conversation's error, its chain, every command, pool, server,
    heartbeat and topology event, every log record at DEBUG and every span leave out the password (as
    written and decoded) and the client proof derived from it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from mongio import MongoClient
    from mongio.events.command import CommandListener
    from mongio.monitoring import (
        ConnectionPoolListener,
        ServerHeartbeatListener,
        ServerListener,
        TopologyListener,
    )
    from mongio.tracing import ENABLED_VARIABLE

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ENABLED_VARIABLE, "true")
    proofs: list[str] = []
    client_final = ScramConversation.client_final

    def spy(self: ScramConversation, keys: Any) -> bytes:
        message = client_final(self, keys)
        proofs.append(message.split(b",p=")[1].decode())
        return message

    monkeypatch.setattr(ScramConversation, "client_final", spy)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    written, decoded = "Wr0ngS3cr3t%21", "Wr0ngS3cr3t!"
    host, port = auth_server
    sink: list[str] = []
    listeners = [
        _recorder(base, sink)
        for base in (CommandListener, ConnectionPoolListener, ServerHeartbeatListener, ServerListener, TopologyListener)
    ]
    uri = f"mongodb://{USER}:{written}@{host}:{port}/?serverSelectionTimeoutMS=5000"
    tracing = {"enabled": True, "tracer_provider": provider, "query_text_max_length": 10000}
    async with MongoClient(uri, event_listeners=listeners, tracing=tracing) as client:
        with pytest.raises(AuthenticationFailed) as info:
            await client.authdb.things.find_one({})
    provider.shutdown()
    assert proofs, "the conversation never reached the proof"
    assert sink and exporter.get_finished_spans() and caplog.records
    shown = ["".join(traceback.format_exception(info.value))]
    shown += [f"{item} {item!r} {item.args!r} {getattr(item, 'details', None)!r}" for item in _chained(info.value)]
    shown += sink
    shown += [f"{record.getMessage()} {record.args!r} {record.exc_text or ''} {vars(record)!r}" for record in caplog.records]
    for span in exporter.get_finished_spans():
        shown.append(f"{span.name} {dict(span.attributes or {})!r} {span.status!r}")
        shown += [f"{event.name} {dict(event.attributes or {})!r}" for event in span.events]
    for text in shown:
        assert written not in text and decoded not in text, text
        assert all(proof not in text for proof in proofs), text
