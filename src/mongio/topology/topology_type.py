"""The kinds of deployment the Server Discovery and Monitoring specification distinguishes."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["SRV_POLLING_TOPOLOGIES", "TOPOLOGY_TYPE", "TopologyType"]


class TopologyType(IntEnum):
    """The client's view of the deployment as a whole. The values match PyMongo's ``TOPOLOGY_TYPE``."""

    Single = 0
    ReplicaSetNoPrimary = 1
    ReplicaSetWithPrimary = 2
    Sharded = 3
    Unknown = 4
    LoadBalanced = 5


TOPOLOGY_TYPE = TopologyType  # the PyMongo spelling

# SRV records are polled for new mongoses only while the deployment may still turn out to be sharded.
SRV_POLLING_TOPOLOGIES = frozenset({TopologyType.Unknown, TopologyType.Sharded})
