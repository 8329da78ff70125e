"""The client-side operations timeout prose test 4 ("Background Connection Pooling"): connections the pool
opens for ``minPoolSize`` use the client's ``timeoutMS`` for each authentication command of their handshake,
refreshed for every one (their hello keeps ``connectTimeoutMS``).

It needs SCRAM (the saslContinue the fail points block), so it runs against its own server started with
``--auth`` and test commands, provisioned as test_auth_server.py does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote_plus

import anyio
import pytest
from spec_runner.raw_wire import command_once

from mongio.client import MongoClient
from mongio.events.cmap import ConnectionClosedEvent, ConnectionCreatedEvent, ConnectionReadyEvent
from mongio.events.listeners import ConnectionPoolListener
from tests.support.persistent_server import PersistentServer

pytestmark = pytest.mark.server

USER = "csot"
PASSWORD = "csot-password"


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server requiring SCRAM-SHA-256, with fail points; yields its URI with the user's credentials."""
    storage = tmp_path_factory.mktemp("secantus-csot-auth")
    setup = PersistentServer(storage)
    with setup:
        reply = command_once(
            setup.host,
            setup.port,
            {"createUser": USER, "pwd": PASSWORD, "roles": [{"role": "root", "db": "admin"}], "$db": "admin"},
            timeout=10.0,
        )
        assert reply.get("ok") == 1, reply
    with PersistentServer(storage, "--auth", "--enable-test-commands", port=setup.port) as server:
        yield f"mongodb://{quote_plus(USER)}:{quote_plus(PASSWORD)}@{server.host}:{server.port}/?authSource=admin"


class PoolEvents(ConnectionPoolListener):
    """Counts CMAP events by class and wakes waiters, so a test awaits events instead of polling."""

    def __init__(self) -> None:
        self.counts: dict[type[Any], int] = {}
        self._changed: anyio.Event | None = None

    def _record(self, event: Any) -> None:
        self.counts[type(event)] = self.counts.get(type(event), 0) + 1
        if self._changed is not None:
            self._changed.set()

    def connection_created(self, event: ConnectionCreatedEvent) -> None:
        self._record(event)

    def connection_ready(self, event: ConnectionReadyEvent) -> None:
        self._record(event)

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        self._record(event)

    async def wait_for(self, *kinds: type[Any], within: float = 10.0) -> None:
        with anyio.fail_after(within):
            while not all(self.counts.get(kind, 0) for kind in kinds):
                self._changed = changed = anyio.Event()
                await changed.wait()


async def set_fail_point(uri: str, mode: Any, data: dict[str, Any]) -> None:
    async with MongoClient(uri) as internal:
        await internal.admin.command({"configureFailPoint": "failCommand", "mode": mode, "data": data})


async def fail_point_off(uri: str) -> None:
    async with MongoClient(uri) as internal:
        await internal.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


async def test_4_timeout_ms_used_for_handshake_commands(auth_server: str) -> None:
    app = "timeoutBackgroundPoolTest"
    await set_fail_point(
        auth_server,
        {"times": 1},
        {"failCommands": ["saslContinue"], "blockConnection": True, "blockTimeMS": 15, "appName": app},
    )
    events = PoolEvents()
    try:
        async with MongoClient(
            auth_server, minPoolSize=1, timeoutMS=10, appName=app, event_listeners=[events]
        ) as client:
            await client.aconnect()
            # The pool's first connection fails its handshake on the 10 ms timeout and is closed.
            await events.wait_for(ConnectionCreatedEvent, ConnectionClosedEvent)
    finally:
        await fail_point_off(auth_server)


async def test_4_timeout_ms_is_refreshed_for_each_handshake_command(auth_server: str) -> None:
    app = "refreshTimeoutBackgroundPoolTest"
    await set_fail_point(
        auth_server,
        "alwaysOn",
        {
            "failCommands": ["hello", "isMaster", "saslContinue"],
            "blockConnection": True,
            "blockTimeMS": 15,
            "appName": app,
        },
    )
    events = PoolEvents()
    try:
        async with MongoClient(
            auth_server, minPoolSize=1, timeoutMS=20, appName=app, event_listeners=[events]
        ) as client:
            await client.aconnect()
            # Each command of the handshake takes 15 ms of its own 20: the connection becomes ready.
            await events.wait_for(ConnectionCreatedEvent, ConnectionReadyEvent)
    finally:
        await fail_point_off(auth_server)
