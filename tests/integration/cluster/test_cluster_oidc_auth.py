"""MONGODB-OIDC through the loopback cluster harness: the deployment registers its identity provider as the
members' answer on ``$external`` (``accept_external_auth``, the hook every mechanism the members answer goes
through), so conversations, a hello's speculative authentication and ``getParameter`` come from the proxy's
one SASL path. Spoken on the raw wire to see exactly what a member answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spec_runner.cluster import Deployment, replica_set
from spec_runner.cluster.aws_sasl import AwsSaslServer, KeyStore
from spec_runner.raw_wire import run_command

from mongio.bson import decode, encode

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def rs() -> Iterator[Deployment]:
    with replica_set(1) as deployment:
        yield deployment


def _connection(rs: Deployment) -> socket.socket:
    return socket.create_connection(("127.0.0.1", rs.members[0].port), timeout=10)


def _speculative(token: str) -> dict[str, Any]:
    payload = encode({"jwt": token})
    return {"saslStart": 1, "mechanism": "MONGODB-OIDC", "payload": payload, "db": "$external"}


def _token(rs: Deployment) -> str:
    assert rs.oidc is not None
    return Path(rs.oidc.token_file).read_text()


def test_a_valid_speculative_token_is_answered_in_the_hello(rs: Deployment) -> None:
    with _connection(rs) as sock:
        reply = run_command(
            sock, {"hello": 1, "speculativeAuthenticate": _speculative(_token(rs)), "$db": "admin"}
        )
    assert reply["ok"] == 1 and reply["speculativeAuthenticate"]["done"] is True


def test_a_refused_speculative_token_is_answered_with_nothing(rs: Deployment) -> None:
    with _connection(rs) as sock:
        reply = run_command(
            sock, {"hello": 1, "speculativeAuthenticate": _speculative("a.b.c"), "$db": "admin"}
        )
    assert reply["ok"] == 1 and "speculativeAuthenticate" not in reply


def test_the_two_step_conversation_goes_through_the_members(rs: Deployment) -> None:
    with _connection(rs) as sock:
        start = {
            "saslStart": 1,
            "mechanism": "MONGODB-OIDC",
            "payload": encode({"n": "u"}),
            "$db": "$external",
        }
        first = run_command(sock, start)
        assert first["ok"] == 1 and first["done"] is False and "issuer" in decode(first["payload"])
        token = encode({"jwt": _token(rs)})
        done = run_command(
            sock, {"saslContinue": 1, "conversationId": 1, "payload": token, "$db": "$external"}
        )
    assert done["ok"] == 1 and done["done"] is True


def test_get_parameter_offers_every_mechanism_the_members_answer(rs: Deployment) -> None:
    with _connection(rs) as sock:
        before = run_command(sock, {"getParameter": "*", "$db": "admin"})["authenticationMechanisms"]
        rs.accept_external_auth("MONGODB-AWS", AwsSaslServer(KeyStore()))
        try:
            during = run_command(sock, {"getParameter": "*", "$db": "admin"})["authenticationMechanisms"]
        finally:
            rs.accept_external_auth("MONGODB-AWS", None)
    assert "MONGODB-OIDC" in before and "MONGODB-AWS" not in before
    assert "MONGODB-OIDC" in during and "MONGODB-AWS" in during
