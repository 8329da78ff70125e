"""``client.options.pool_options``: the settings each connection pool of a client is made with, read-only,
under the names PyMongo's ``PoolOptions`` gives them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mongio.connection.handshake import ClientMetadata
    from mongio.options.client_options import ClientOptions

__all__ = ["ClientPoolOptions"]

# The defaults a pool option is compared with to tell whether it was changed (non_default_options).
_DEFAULT_MAX_POOL_SIZE = 100
_DEFAULT_MAX_CONNECTING = 2


class ClientPoolOptions:
    """A view of a client's options as its connection pools use them. Times are in seconds (None: no limit),
    as PyMongo gives them. ``metadata`` is the ``client`` document of the handshakes the pools' new
    connections send, :meth:`MongoClient.append_metadata <mongio.client.MongoClient.append_metadata>`
    included."""

    __slots__ = ("_metadata", "_options")

    def __init__(self, options: ClientOptions, metadata: ClientMetadata) -> None:
        self._options = options
        self._metadata = metadata

    @property
    def max_pool_size(self) -> float:
        """Connections a pool holds at most (``float("inf")`` for ``maxPoolSize=0``: no limit)."""
        size = self._options.max_pool_size
        return float("inf") if size is None else size

    @property
    def min_pool_size(self) -> int:
        return self._options.min_pool_size

    @property
    def max_connecting(self) -> int:
        return self._options.max_connecting

    @property
    def max_idle_time_seconds(self) -> float | None:
        return self._options.max_idle_time

    @property
    def connect_timeout(self) -> float | None:
        return self._options.connect_timeout

    @property
    def socket_timeout(self) -> float | None:
        return self._options.socket_timeout

    @property
    def wait_queue_timeout(self) -> float | None:
        return self._options.wait_queue_timeout

    @property
    def tls_allow_invalid_hostnames(self) -> bool:
        tls = self._options.tls
        return tls is not None and tls.allow_invalid_hostnames

    @property
    def appname(self) -> str | None:
        return self._options.appname

    @property
    def driver(self) -> Any:
        """The ``driver`` (DriverInfo) the client was made with, or None."""
        return self._options.extras.get("driver")

    @property
    def server_api(self) -> Any:
        return self._options.extras.get("server_api")

    @property
    def load_balanced(self) -> bool:
        return self._options.load_balanced

    @property
    def metadata(self) -> dict[str, Any]:
        """The handshake's ``client`` document (a copy)."""
        return self._metadata.document

    @property
    def non_default_options(self) -> dict[str, Any]:
        """The pool options given other values than their defaults, under their connection string names."""
        options = self._options
        changed: dict[str, Any] = {}
        if options.max_pool_size != _DEFAULT_MAX_POOL_SIZE:
            changed["maxPoolSize"] = options.max_pool_size or 0
        if options.min_pool_size:
            changed["minPoolSize"] = options.min_pool_size
        if options.max_idle_time is not None:
            changed["maxIdleTimeMS"] = options.max_idle_time * 1000
        if options.wait_queue_timeout is not None:
            changed["waitQueueTimeoutMS"] = options.wait_queue_timeout * 1000
        if options.max_connecting != _DEFAULT_MAX_CONNECTING:
            changed["maxConnecting"] = options.max_connecting
        return changed

    def __repr__(self) -> str:
        return (
            f"ClientPoolOptions(max_pool_size={self.max_pool_size}, min_pool_size={self.min_pool_size}, "
            f"max_idle_time_seconds={self.max_idle_time_seconds}, connect_timeout={self.connect_timeout}, "
            f"socket_timeout={self.socket_timeout}, wait_queue_timeout={self.wait_queue_timeout})"
        )
