"""Mechanism negotiation, speculative authentication, PLAIN and MONGODB-X509, run against scripted
``run_command`` answers."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest

from mongio.connection.auth import Authenticator, authenticate
from mongio.connection.auth.base import AuthenticationFailed
from mongio.connection.auth.negotiation import (
    negotiate_mechanism,
    sasl_supported_mechs_request,
    speculative_mechanism,
)
from mongio.connection.auth.plain import plain_payload
from mongio.connection.auth.scram import ScramKeyCache
from mongio.connection.handshake import HelloResponse
from mongio.errors import ConfigurationError
from mongio.options.credentials import MongoCredential

SHA256_NONCE = "rOprNGfwEbeRWgbNEkqO"
SHA256_SERVER_FIRST = base64.b64decode(
    "cj1yT3ByTkdmd0ViZVJXZ2JORWtxTyVodllEcFdVYTJSYVRDQWZ1eEZJbGopaE5sRiRrMCxzPVcyMlphSjBTTlk3c29Fc1VFamI2Z1E9PSxp"
    "PTQwOTY="
)
SHA256_SERVER_FINAL = base64.b64decode("dj02cnJpVFJCaTIzV3BSUi93dHVwK21NaFVaVW4vZEI1bkxUSlJzamw5NUc0PQ==")


def cred(
    mechanism: str = "DEFAULT", user: str | None = "user", password: str | None = "pencil", source: str = "admin"
) -> MongoCredential:
    return MongoCredential(mechanism=mechanism, source=source, username=user, password=password)


class Recorder:
    def __init__(self, *replies: Mapping[str, Any]) -> None:
        self.replies = list(replies)
        self.commands: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, db: str, command: dict[str, Any]) -> Mapping[str, Any]:
        self.commands.append((db, command))
        return self.replies.pop(0)


def hello(**fields: Any) -> HelloResponse:
    return HelloResponse.from_document({"isWritablePrimary": True, "maxWireVersion": 25, "ok": 1, **fields})


# -- negotiation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechs", "expected"),
    [
        (["SCRAM-SHA-1", "SCRAM-SHA-256"], "SCRAM-SHA-256"),
        (["SCRAM-SHA-256"], "SCRAM-SHA-256"),
        (["SCRAM-SHA-1"], "SCRAM-SHA-1"),
        ([], "SCRAM-SHA-1"),
        (None, "SCRAM-SHA-1"),
        (["PLAIN", "GSSAPI"], "SCRAM-SHA-1"),  # never anything but SCRAM as the default
        (["NOT-A-MECHANISM", "SCRAM-SHA-256"], "SCRAM-SHA-256"),  # unknown names are no error
    ],
)
def test_default_mechanism_negotiation(mechs: list[str] | None, expected: str) -> None:
    assert negotiate_mechanism(cred(), mechs) == expected


def test_named_mechanism_is_honoured_whatever_the_server_lists() -> None:
    assert negotiate_mechanism(cred("SCRAM-SHA-1"), ["SCRAM-SHA-256"]) == "SCRAM-SHA-1"
    assert negotiate_mechanism(cred("PLAIN", source="$external"), ["SCRAM-SHA-256"]) == "PLAIN"


def test_sasl_supported_mechs_only_for_default_and_with_the_raw_username() -> None:
    assert sasl_supported_mechs_request(cred(user="\u2168", source="db")) == "db.\u2168"
    assert sasl_supported_mechs_request(cred("SCRAM-SHA-256")) is None
    assert speculative_mechanism(cred()) == "SCRAM-SHA-256"
    assert speculative_mechanism(cred("SCRAM-SHA-1")) == "SCRAM-SHA-1"


def test_handshake_fields_by_mechanism() -> None:
    fields = Authenticator(cred(), nonce=SHA256_NONCE).handshake_fields()
    assert fields["saslSupportedMechs"] == "admin.user"
    speculative = fields["speculativeAuthenticate"]
    assert speculative["saslStart"] == 1 and speculative["mechanism"] == "SCRAM-SHA-256"
    assert speculative["db"] == "admin"
    assert speculative["payload"] == f"n,,n=user,r={SHA256_NONCE}".encode()

    x509 = Authenticator(cred("MONGODB-X509", user=None, password=None, source="$external")).handshake_fields()
    assert x509 == {
        "speculativeAuthenticate": {"authenticate": 1, "mechanism": "MONGODB-X509", "db": "$external"}
    }
    assert Authenticator(cred("PLAIN", source="$external")).handshake_fields() == {}


async def test_password_sasl_prep_refuses_does_not_stop_negotiation() -> None:
    # SCRAM-SHA-256 cannot use this password, SCRAM-SHA-1 (which does not SASLprep) can.
    credential = cred(password="bell\u0007")
    authenticator = Authenticator(credential)
    assert authenticator.handshake_fields() == {"saslSupportedMechs": "admin.user"}
    server = Recorder({"ok": 0, "errmsg": "Authentication failed.", "code": 18})
    with pytest.raises(AuthenticationFailed):
        await authenticator.authenticate(server, hello(saslSupportedMechs=["SCRAM-SHA-1"]))
    assert server.commands[0][1]["mechanism"] == "SCRAM-SHA-1"
    with pytest.raises(ConfigurationError, match="SCRAM-SHA-256"):
        Authenticator(cred("SCRAM-SHA-256", password="bell\u0007")).handshake_fields()


async def test_speculative_scram_needs_one_round_trip() -> None:
    authenticator = Authenticator(cred(), nonce=SHA256_NONCE, cache=ScramKeyCache())
    authenticator.handshake_fields()
    reply = hello(
        saslSupportedMechs=["SCRAM-SHA-256", "SCRAM-SHA-1"],
        speculativeAuthenticate={"conversationId": 1, "payload": SHA256_SERVER_FIRST, "done": False},
    )
    server = Recorder({"conversationId": 1, "payload": SHA256_SERVER_FINAL, "done": True, "ok": 1})
    await authenticator.authenticate(server, reply)
    assert authenticator.used_speculative and authenticator.mechanism == "SCRAM-SHA-256"
    assert server.commands[0][1].keys() == {"saslContinue", "conversationId", "payload"}
    assert len(server.commands) == 1


async def test_speculative_reply_ignored_when_negotiation_picks_another_mechanism() -> None:
    authenticator = Authenticator(cred(), nonce="clientnonce", cache=ScramKeyCache())
    authenticator.handshake_fields()
    reply = hello(
        saslSupportedMechs=["SCRAM-SHA-1"],
        speculativeAuthenticate={"conversationId": 1, "payload": b"r=clientnonceX,s=c2FsdA==,i=4096"},
    )
    server = Recorder({"ok": 0, "errmsg": "Authentication failed.", "code": 18})
    with pytest.raises(AuthenticationFailed):
        await authenticator.authenticate(server, reply)
    assert not authenticator.used_speculative
    assert server.commands[0][1]["saslStart"] == 1
    assert server.commands[0][1]["mechanism"] == "SCRAM-SHA-1"


async def test_authenticate_without_authenticator_starts_from_the_beginning() -> None:
    reply = hello(speculativeAuthenticate={"conversationId": 1, "payload": SHA256_SERVER_FIRST})
    server = Recorder({"ok": 0, "errmsg": "Authentication failed.", "code": 18})
    with pytest.raises(AuthenticationFailed):
        await authenticate(cred("SCRAM-SHA-256"), server, reply)
    assert "saslStart" in server.commands[0][1]


async def test_arbitrary_sasl_supported_mechs_raise_nothing() -> None:
    # Handshake prose test 2, below the socket: an unknown mechanism in the list is ignored.
    reply = hello(saslSupportedMechs=["ARBITRARY-MECHANISM"])
    server = Recorder({"ok": 0, "errmsg": "Authentication failed.", "code": 18})
    with pytest.raises(AuthenticationFailed):  # the credential is refused, not the list
        await authenticate(cred(), server, reply)
    assert server.commands[0][1]["mechanism"] == "SCRAM-SHA-1"


# -- PLAIN ----------------------------------------------------------------------------------------------------


async def test_plain_conversation_matches_the_spec() -> None:
    assert base64.b64encode(plain_payload("user", "pencil")) == b"AHVzZXIAcGVuY2ls"
    server = Recorder({"conversationId": 1, "payload": b"", "done": True, "ok": 1})
    await authenticate(cred("PLAIN", source="$external"), server, hello())
    db, command = server.commands[0]
    assert db == "$external"
    assert command == {
        "saslStart": 1,
        "mechanism": "PLAIN",
        "payload": base64.b64decode("AHVzZXIAcGVuY2ls"),
        "autoAuthorize": 1,
    }


async def test_plain_unfinished_conversation_is_an_error() -> None:
    server = Recorder({"conversationId": 1, "payload": b"", "done": False, "ok": 1})
    with pytest.raises(AuthenticationFailed, match="did not end"):
        await authenticate(cred("PLAIN", source="ldap"), server, hello())
    assert server.commands[0][0] == "ldap"


# -- MONGODB-X509 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", [None, "C=IS,ST=Reykjavik,L=Reykjavik,O=MongoDB,OU=Drivers,CN=client"])
async def test_x509_command(user: str | None) -> None:
    server = Recorder({"dbname": "$external", "user": user or "CN=client", "ok": 1})
    await authenticate(cred("MONGODB-X509", user=user, password=None, source="$external"), server, hello())
    db, command = server.commands[0]
    assert db == "$external"
    expected: dict[str, Any] = {"authenticate": 1, "mechanism": "MONGODB-X509"}
    if user:
        expected["user"] = user
    assert command == expected


async def test_x509_speculative_reply_needs_no_round_trip() -> None:
    credential = cred("MONGODB-X509", user=None, password=None, source="$external")
    authenticator = Authenticator(credential)
    authenticator.handshake_fields()
    server = Recorder()
    await authenticator.authenticate(
        server, hello(speculativeAuthenticate={"dbname": "$external", "user": "CN=client"})
    )
    assert server.commands == [] and authenticator.used_speculative


async def test_x509_refused() -> None:
    server = Recorder({"ok": 0, "errmsg": "No verified subject name available from client", "code": 11})
    with pytest.raises(AuthenticationFailed, match="No verified subject") as info:
        await authenticate(cred("MONGODB-X509", user=None, password=None, source="$external"), server, hello())
    assert info.value.code == 11


@pytest.mark.parametrize("mechanism", ["MONGODB-OIDC"])
async def test_mechanisms_not_implemented_say_so(mechanism: str) -> None:
    server = Recorder()
    with pytest.raises(ConfigurationError, match=mechanism):
        await authenticate(cred(mechanism, source="$external"), server, hello())
    assert server.commands == []
