"""The driver's own monitoring connection factory, wrapped to count the connections it opens."""

from __future__ import annotations

from mongio.connection.establish import ConnectionSettings
from mongio.topology.monitor import monitor_connection_factory
from mongio.topology.rtt_monitor import MonitorConnection, MonitorConnectionFactory, OpenedCallback
from mongio.topology.server_description import Address


class CountingFactory:
    """Opens monitoring connections with ``monitor_connection_factory`` (``settings``, or just
    ``connect_timeout``) and keeps them, to count how many are open (``open_to``; ``most_open``: the most to
    one address at once). With ``loopback`` every host name is dialled on 127.0.0.1 (fake servers known by
    name)."""

    def __init__(
        self, settings: ConnectionSettings | None = None, *, connect_timeout: float = 5.0, loopback: bool = False
    ) -> None:
        self._factory: MonitorConnectionFactory = monitor_connection_factory(
            settings if settings is not None else ConnectionSettings(connect_timeout=connect_timeout)
        )
        self._loopback = loopback
        self.opened: list[tuple[Address, MonitorConnection]] = []
        self.most_open = 0

    async def __call__(self, address: Address, opened: OpenedCallback | None = None) -> MonitorConnection:
        target = ("127.0.0.1", address[1]) if self._loopback else address
        connection = await self._factory(target, opened)
        self.opened.append((address, connection))
        self.most_open = max(self.most_open, self.open_to(address))
        return connection

    def open_to(self, address: Address) -> int:
        return sum(1 for where, conn in self.opened if where == address and not conn.closed)
