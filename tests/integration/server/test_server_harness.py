"""The harness itself: the test server answers hello and ping sent with mongio's BSON over a plain socket."""

from __future__ import annotations

import socket

import pytest
from spec_runner.raw_wire import decode_op_msg, encode_op_msg, run_command

pytestmark = pytest.mark.server


def test_hello_and_ping_over_a_plain_socket(server_address: tuple[str, int]) -> None:
    with socket.create_connection(server_address, timeout=10) as sock:
        hello = run_command(sock, {"hello": 1, "$db": "admin"})
        assert hello["ok"] == 1
        assert hello["isWritablePrimary"] is True
        assert isinstance(hello["maxWireVersion"], int) and hello["maxWireVersion"] >= 6
        assert hello["maxBsonObjectSize"] > 0
        ping = run_command(sock, {"ping": 1, "$db": "admin"})
        assert ping["ok"] == 1
        unknown = run_command(sock, {"noSuchCommandHere": 1, "$db": "admin"})
        assert unknown["ok"] == 0
        assert unknown["code"] == 59  # CommandNotFound


def test_op_msg_framing_round_trips() -> None:
    message = encode_op_msg({"ping": 1, "$db": "admin"}, request_id=7)
    assert int.from_bytes(message[:4], "little") == len(message)
    assert int.from_bytes(message[12:16], "little") == 2013
    # A reply is framed the same way; reuse the request's bytes with responseTo set.
    reply = message[:8] + (7).to_bytes(4, "little") + message[12:]
    response_to, document = decode_op_msg(reply)
    assert response_to == 7
    assert document == {"ping": 1, "$db": "admin"}
