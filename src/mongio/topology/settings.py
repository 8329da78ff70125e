"""The client settings the topology description and server selection depend on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mongio.errors import ConfigurationError
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.topology_type import TopologyType

__all__ = [
    "DEFAULT_HEARTBEAT_FREQUENCY",
    "DEFAULT_LOCAL_THRESHOLD_MS",
    "DEFAULT_SERVER_SELECTION_TIMEOUT",
    "MIN_HEARTBEAT_FREQUENCY",
    "TopologySettings",
]

DEFAULT_HEARTBEAT_FREQUENCY = 10.0  # seconds, for asynchronous drivers
MIN_HEARTBEAT_FREQUENCY = 0.5  # seconds; the specification forbids configuring less
DEFAULT_LOCAL_THRESHOLD_MS = 15.0
DEFAULT_SERVER_SELECTION_TIMEOUT = 30.0  # seconds


@dataclass(frozen=True)
class TopologySettings:
    """The options that shape discovery and selection. Times are seconds except ``local_threshold_ms``.

    ``direct_connection=None`` means the option was not given, which behaves as ``False``. The options layer
    enforces the user-facing minimums (``heartbeatFrequencyMS`` >= 500); these settings only reject what
    cannot work, so tests may run monitors faster.
    """

    seeds: tuple[Address, ...]
    replica_set_name: str | None = None
    direct_connection: bool | None = None
    load_balanced: bool = False
    heartbeat_frequency: float = DEFAULT_HEARTBEAT_FREQUENCY
    local_threshold_ms: float = DEFAULT_LOCAL_THRESHOLD_MS
    server_selection_timeout: float = DEFAULT_SERVER_SELECTION_TIMEOUT
    srv_max_hosts: int = 0
    server_selector: Callable[[list[ServerDescription]], list[ServerDescription]] | None = None
    """The ``server_selector`` keyword: filters the suitable servers of every selection, before the latency
    window (as PyMongo applies it)."""

    def __post_init__(self) -> None:
        if self.direct_connection and len(self.seeds) > 1:
            raise ConfigurationError("directConnection=true cannot be used with multiple seeds")
        if self.load_balanced:
            if self.direct_connection:
                raise ConfigurationError("loadBalanced=true cannot be used with directConnection=true")
            if self.replica_set_name is not None:
                raise ConfigurationError("loadBalanced=true cannot be used with replicaSet")
        if self.heartbeat_frequency <= 0:
            raise ConfigurationError(f"heartbeat_frequency must be positive, not {self.heartbeat_frequency!r}")
        if self.srv_max_hosts < 0:
            raise ConfigurationError(f"srvMaxHosts must be zero or positive, not {self.srv_max_hosts}")

    @property
    def direct(self) -> bool:
        """Whether the client talks to its one seed alone, whatever that server turns out to be."""
        return bool(self.direct_connection)

    def initial_topology_type(self) -> TopologyType:
        """The starting topology type, from ``loadBalanced``, ``directConnection`` and ``replicaSet``."""
        if self.load_balanced:
            return TopologyType.LoadBalanced
        if self.direct:
            return TopologyType.Single
        if self.replica_set_name is not None:
            return TopologyType.ReplicaSetNoPrimary
        return TopologyType.Unknown
