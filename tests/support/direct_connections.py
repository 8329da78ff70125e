"""The driver's connection establishment used directly against the test server, below the client: a pool
connection factory that counts what it opened, and a one-off admin command."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.connection.connection import Connection
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.handshake import ClientMetadata


class CountingEstablisher:
    """The driver's establishment, counting the connections it opened that are still open."""

    def __init__(self, address: tuple[str, int], appname: str) -> None:
        self.address = address
        self.settings = ConnectionSettings(metadata=ClientMetadata(appname), connect_timeout=10)
        self.made: list[Connection] = []

    async def __call__(self, connection_id: int, generation: int) -> Connection:
        conn = await establish(self.address, self.settings, id=connection_id, generation=generation)
        self.made.append(conn)
        return conn

    @property
    def open(self) -> int:
        return sum(1 for conn in self.made if not conn.closed)


async def admin_command(address: tuple[str, int], command: Mapping[str, Any]) -> dict[str, Any]:
    conn = await establish(address, ConnectionSettings(connect_timeout=10))
    try:
        return await conn.command("admin", command)
    finally:
        conn.close()
