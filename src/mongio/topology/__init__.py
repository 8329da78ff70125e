"""Server discovery and monitoring, and server selection.

The descriptions, their update rules and selection are pure code (no I/O) so they can be driven straight
from the specifications' test files; the monitors and the ``Topology`` that owns the current description
build on them.
"""

from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import SERVER_TYPE, ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import TopologyDescription, updated_topology_description
from mongio.topology.topology_type import TOPOLOGY_TYPE, TopologyType

__all__ = [
    "SERVER_TYPE",
    "TOPOLOGY_TYPE",
    "Address",
    "ServerDescription",
    "ServerType",
    "TopologyDescription",
    "TopologySettings",
    "TopologyType",
    "updated_topology_description",
]
