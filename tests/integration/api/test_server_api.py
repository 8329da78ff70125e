"""A declared stable API version over real sockets: every command the client sends carries it (the
monitors' hello commands after the handshake, authentication and endSessions included), and no legacy hello
is ever sent."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mongio import MongoClient
from mongio.server_api import ServerApi
from tests.support.loopback_peer import LoopbackPeer, Request, default_reply


async def test_every_command_carries_the_declared_api_version() -> None:
    peer = LoopbackPeer()

    def handler(request: Request) -> Any:
        if request.command_name == "saslStart":
            return {"conversationId": 1, "payload": b"", "done": True, "ok": 1}
        reply = default_reply(request, peer)
        if request.command_name == "hello":
            reply["logicalSessionTimeoutMinutes"] = 30  # so the client uses sessions and ends them on close
        return reply

    peer.handler = handler
    async with peer:
        host, port = peer.address
        uri = f"mongodb://user:pencil@{host}:{port}/?authMechanism=PLAIN&authSource=%24external"
        client = MongoClient(uri, server_api=ServerApi("1", strict=True), heartbeatFrequencyMS=500)
        try:
            await client.admin.command("ping")
            await client.db.coll.insert_one({"x": 1})
            with anyio.fail_after(10):
                # The first monitor's connection: its handshake, then at least one heartbeat on it.
                while len([r for r in peer.requests if r.connection.index == 0]) < 2:
                    await peer.wait_for_requests(len(peer.requests) + 1)
        finally:
            await client.close()
    names = {request.command_name for request in peer.requests}
    assert {"hello", "saslStart", "ping", "insert", "endSessions"} <= names
    assert not {"isMaster", "ismaster"} & names
    for request in peer.requests:
        assert request.document.get("apiVersion") == "1", request.document
        assert request.document.get("apiStrict") is True, request.document
        assert "apiDeprecationErrors" not in request.document


async def test_no_api_fields_without_a_declaration() -> None:
    async with LoopbackPeer() as peer:
        client = MongoClient(peer.uri)
        try:
            await client.admin.command("ping")
        finally:
            await client.close()
    assert peer.commands("ping")
    assert all("apiVersion" not in request.document for request in peer.requests)


def test_an_unknown_version_fails_before_a_client_exists() -> None:
    with pytest.raises(ValueError, match="Unknown ServerApi version"):
        MongoClient("mongodb://localhost", server_api=ServerApi("2"))
