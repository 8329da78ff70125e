"""The client's view of the whole deployment and the Server Discovery and Monitoring update rules.

Everything here is a pure function of immutable values: :func:`updated_topology_description` takes the
current :class:`TopologyDescription` and one new :class:`ServerDescription` and returns the next description
(or the same object when the update must be ignored). The ``Topology`` that owns the current description
compares the two to learn which servers to start or stop monitoring and which events to publish.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson.objectid import ObjectId
from mongio.errors import ConfigurationError, NotPrimaryError
from mongio.topology.server_description import Address, ServerDescription, format_address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_type import TopologyType

if TYPE_CHECKING:
    from mongio.topology.selection import ReadPreferenceLike

__all__ = [
    "MAX_REMOVAL_REASONS",
    "MAX_SUPPORTED_WIRE_VERSION",
    "MIN_SUPPORTED_WIRE_VERSION",
    "TopologyDescription",
    "compare_topology_version",
    "initial_topology_description",
    "is_stale_server_description",
    "updated_topology_description",
    "updated_topology_description_srv_polling",
    "wire_version_problem",
]

# MongoDB 4.2 through 8.2.
MIN_SUPPORTED_WIRE_VERSION = 8
MAX_SUPPORTED_WIRE_VERSION = 27

# The oldest MongoDB release speaking each wire version, for the "too old" message.
_WIRE_VERSION_RELEASES = {
    8: "4.2",
    9: "4.4",
    13: "5.0",
    14: "5.1",
    17: "6.0",
    21: "7.0",
    25: "8.0",
    26: "8.1",
    27: "8.2",
}

_DRIVER_NAME = "mongio"

# The wire version from which the (electionId, setVersion) tuple is compared electionId first.
_ELECTION_ID_FIRST_WIRE_VERSION = 17

_RS_MEMBER_TYPES = frozenset({ServerType.RSSecondary, ServerType.RSArbiter, ServerType.RSOther})

_TOPOLOGY_FOR_SERVER_TYPE = {
    ServerType.Mongos: TopologyType.Sharded,
    ServerType.RSPrimary: TopologyType.ReplicaSetWithPrimary,
    ServerType.RSSecondary: TopologyType.ReplicaSetNoPrimary,
    ServerType.RSArbiter: TopologyType.ReplicaSetNoPrimary,
    ServerType.RSOther: TopologyType.ReplicaSetNoPrimary,
}

# How many removed addresses a description remembers the reason for (the most recent ones): enough for any
# seed list a person types, and a bound on what a hostile host list can make the client keep.
MAX_REMOVAL_REASONS = 32


class TopologyDescription:
    """An immutable snapshot of the deployment: its type, its servers and what the primaries reported.

    ``server_descriptions()`` maps each address the client monitors to that server's description. The
    ``max_set_version`` / ``max_election_id`` pair is the greatest ``(electionId, setVersion)`` a primary
    has reported, used to recognise stale primaries. ``removed_servers`` says why recently removed
    addresses left, so that a selection error can explain an empty topology.
    """

    __slots__ = (
        "_incompatible_err",
        "_ls_timeout_minutes",
        "_max_election_id",
        "_max_set_version",
        "_removed",
        "_replica_set_name",
        "_server_descriptions",
        "_topology_settings",
        "_topology_type",
    )

    def __init__(
        self,
        topology_type: TopologyType,
        server_descriptions: Mapping[Address, ServerDescription],
        replica_set_name: str | None,
        max_set_version: int | None,
        max_election_id: ObjectId | None,
        topology_settings: TopologySettings,
        removed: Mapping[Address, str] | None = None,
    ) -> None:
        self._topology_type = topology_type
        self._server_descriptions = dict(server_descriptions)
        self._replica_set_name = replica_set_name
        self._max_set_version = max_set_version
        self._max_election_id = max_election_id
        self._topology_settings = topology_settings
        self._removed: Mapping[Address, str] = removed if removed is not None else {}
        self._incompatible_err = self._compatibility_error()
        self._ls_timeout_minutes = self._session_timeout()

    def _compatibility_error(self) -> str | None:
        if self._topology_type == TopologyType.LoadBalanced:
            # A load balancer is never checked, so it has no wire versions to compare.
            return None
        for sd in self._server_descriptions.values():
            problem = wire_version_problem(sd)
            if problem is not None:
                return f"Server at {format_address(sd.address)} {problem}."
        return None

    def _session_timeout(self) -> int | None:
        timeouts = [
            sd.logical_session_timeout_minutes
            for sd in self._server_descriptions.values()
            if sd.is_data_bearing
        ]
        if not timeouts or any(t is None for t in timeouts):
            return None
        return min(t for t in timeouts if t is not None)

    @property
    def topology_type(self) -> TopologyType:
        """The kind of deployment the client believes it talks to."""
        return self._topology_type

    @property
    def topology_type_name(self) -> str:
        """The topology type's name, e.g. ``"ReplicaSetWithPrimary"``."""
        return self._topology_type.name

    @property
    def replica_set_name(self) -> str | None:
        """The replica set name, given or discovered; ``None`` outside replica sets."""
        return self._replica_set_name

    @property
    def max_set_version(self) -> int | None:
        """The setVersion of the most recent trusted primary."""
        return self._max_set_version

    @property
    def max_election_id(self) -> ObjectId | None:
        """The electionId of the most recent trusted primary."""
        return self._max_election_id

    @property
    def removed_servers(self) -> dict[Address, str]:
        """Why each recently removed address left the topology (a new dict; at most the last
        ``MAX_REMOVAL_REASONS``). An address that rejoins is forgotten."""
        return dict(self._removed)

    @property
    def topology_settings(self) -> TopologySettings:
        """The settings this description was made with."""
        return self._topology_settings

    @property
    def heartbeat_frequency(self) -> float:
        """Seconds between checks of each server."""
        return self._topology_settings.heartbeat_frequency

    @property
    def logical_session_timeout_minutes(self) -> int | None:
        """The least ``logicalSessionTimeoutMinutes`` of the data-bearing servers; ``None`` when any lacks it."""
        return self._ls_timeout_minutes

    @property
    def knows_a_data_bearing_server(self) -> bool:
        """Whether any known server is data-bearing; when none is, ``logical_session_timeout_minutes`` says
        nothing about session support (the sessions specification's "How to Check Whether a Deployment
        Supports Sessions")."""
        return any(sd.is_data_bearing for sd in self._server_descriptions.values())

    @property
    def compatible(self) -> bool:
        """False when some server's wire version range does not overlap the driver's."""
        return self._incompatible_err is None

    @property
    def compatibility_error(self) -> str | None:
        """Why the deployment is incompatible, or ``None``."""
        return self._incompatible_err

    def check_compatible(self) -> None:
        """Raise :class:`~mongio.errors.ConfigurationError` when some server's wire versions are unsupported."""
        if self._incompatible_err is not None:
            raise ConfigurationError(self._incompatible_err)

    def server_descriptions(self) -> dict[Address, ServerDescription]:
        """A new dict mapping each monitored address to its :class:`ServerDescription`."""
        return dict(self._server_descriptions)

    def has_server(self, address: Address) -> bool:
        """Whether ``address`` is one of the monitored servers."""
        return address in self._server_descriptions

    def get(self, address: Address) -> ServerDescription | None:
        """The description of the server at ``address``, or ``None``."""
        return self._server_descriptions.get(address)

    @property
    def known_servers(self) -> list[ServerDescription]:
        """The servers whose type is known."""
        return [sd for sd in self._server_descriptions.values() if sd.is_server_type_known]

    @property
    def has_known_servers(self) -> bool:
        """Whether any server's type is known."""
        return any(sd.is_server_type_known for sd in self._server_descriptions.values())

    @property
    def readable_servers(self) -> list[ServerDescription]:
        """The servers reads could go to, ignoring read preferences."""
        return [sd for sd in self._server_descriptions.values() if sd.is_readable]

    @property
    def common_wire_version(self) -> int | None:
        """The least ``maxWireVersion`` among the known servers, or ``None`` when none is known."""
        versions = [sd.max_wire_version for sd in self.known_servers]
        return min(versions) if versions else None

    def has_readable_server(self, read_preference: ReadPreferenceLike | None = None) -> bool:
        """Whether a read with ``read_preference`` (primary when ``None``) could find a server now."""
        from mongio.topology.selection import has_readable_server

        return has_readable_server(self, read_preference)

    def has_writable_server(self) -> bool:
        """Whether a write could find a server now."""
        from mongio.topology.selection import has_writable_server

        return has_writable_server(self)

    def reset_server(self, address: Address) -> TopologyDescription:
        """The description with the server at ``address`` made Unknown, through the normal update rules."""
        current = self._server_descriptions.get(address)
        if current is None:
            return self
        return updated_topology_description(self, current.to_unknown())

    def reset(self) -> TopologyDescription:
        """Every server made Unknown; a replica set with a primary becomes one without."""
        topology_type = self._topology_type
        if topology_type == TopologyType.ReplicaSetWithPrimary:
            topology_type = TopologyType.ReplicaSetNoPrimary
        servers = {address: ServerDescription(address) for address in self._server_descriptions}
        return TopologyDescription(
            topology_type,
            servers,
            self._replica_set_name,
            self._max_set_version,
            self._max_election_id,
            self._topology_settings,
            self._removed,
        )

    def _comparison_key(self) -> tuple[Any, ...]:
        return (
            self._topology_type,
            self._replica_set_name,
            self._max_set_version,
            self._max_election_id,
            self._incompatible_err,
            self._ls_timeout_minutes,
            self._server_descriptions,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopologyDescription):
            return NotImplemented
        return self._comparison_key() == other._comparison_key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        servers = sorted(self._server_descriptions.values(), key=lambda sd: format_address(sd.address))
        return (
            f"<TopologyDescription id: {self._topology_type.name}, "
            f"replica_set_name: {self._replica_set_name!r}, servers: {servers!r}>"
        )


def wire_version_problem(server: ServerDescription) -> str | None:
    """Why the driver cannot talk to a known ``server`` (its wire versions are out of range), or ``None``."""
    if not server.is_server_type_known:
        return None
    if server.min_wire_version > MAX_SUPPORTED_WIRE_VERSION:
        return (
            f"requires wire version {server.min_wire_version}, but "
            f"this version of {_DRIVER_NAME} only supports up to {MAX_SUPPORTED_WIRE_VERSION}"
        )
    if server.max_wire_version < MIN_SUPPORTED_WIRE_VERSION:
        release = _WIRE_VERSION_RELEASES[MIN_SUPPORTED_WIRE_VERSION]
        return (
            f"reports wire version {server.max_wire_version}, but "
            f"this version of {_DRIVER_NAME} requires at least {MIN_SUPPORTED_WIRE_VERSION} "
            f"(MongoDB {release})"
        )
    return None


def _remembered_removals(
    previous: Mapping[Address, str], kept: Mapping[Address, Any], reasons: Mapping[Address, str]
) -> Mapping[Address, str]:
    """The removal reasons the next description keeps: the previous ones for addresses still absent, then
    this update's ``reasons``, the oldest dropped beyond ``MAX_REMOVAL_REASONS``."""
    if not reasons and not any(address in kept for address in previous):
        return previous
    merged = {
        address: why for address, why in previous.items() if address not in kept and address not in reasons
    }
    merged.update(reasons)
    if len(merged) > MAX_REMOVAL_REASONS:
        merged = dict(list(merged.items())[-MAX_REMOVAL_REASONS:])
    return merged


def _set_name_mismatch(expected: str | None, server: ServerDescription) -> str:
    found = server.replica_set_name
    reported = "no replica set name" if found is None else f"replica set name {found!r}"
    return f"it reports {reported}, but the client's replicaSet option asks for {expected!r}"


def initial_topology_description(settings: TopologySettings) -> TopologyDescription:
    """The description a new client starts from: one Unknown server per seed."""
    servers = {address: ServerDescription(address) for address in settings.seeds}
    return TopologyDescription(
        settings.initial_topology_type(), servers, settings.replica_set_name, None, None, settings
    )


def compare_topology_version(current: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> int:
    """-1, 0 or 1 as ``current`` is older than, as new as, or newer than ``new``.

    Missing versions and different ``processId`` values make ``new`` count as newer: the server restarted or
    does not report a version, so nothing proves the new information stale.
    """
    if current is None or new is None:
        return -1
    if current.get("processId") != new.get("processId"):
        return -1
    current_counter = int(current.get("counter", 0))
    new_counter = int(new.get("counter", 0))
    if current_counter == new_counter:
        return 0
    return -1 if current_counter < new_counter else 1


def is_stale_server_description(topology_description: TopologyDescription, server: ServerDescription) -> bool:
    """True when the topology already holds newer information (a greater topologyVersion) for the server."""
    current = topology_description.get(server.address)
    if current is None:
        return False
    return compare_topology_version(current.topology_version, server.topology_version) > 0


def updated_topology_description(
    topology_description: TopologyDescription, server_description: ServerDescription
) -> TopologyDescription:
    """The topology after processing one new description of a server, per the specification's table.

    Returns ``topology_description`` itself when the update must be ignored: the server is no longer
    monitored, or the new description is older (by topologyVersion) than the one held.
    """
    td = topology_description
    address = server_description.address
    if not td.has_server(address) or is_stale_server_description(td, server_description):
        return td

    settings = td.topology_settings
    topology_type = td.topology_type
    set_name = td.replica_set_name
    max_set_version = td.max_set_version
    max_election_id = td.max_election_id
    server_type = server_description.server_type

    sds = td.server_descriptions()
    sds[address] = server_description
    # Why each server this update removes had to go, for the selection error's explanation.
    removed: dict[Address, str] = {}

    if topology_type == TopologyType.Single:
        expected = settings.replica_set_name
        if expected is not None and expected != server_description.replica_set_name:
            found = server_description.replica_set_name
            error = ConfigurationError(
                f"client is configured for replica set {expected!r} but the server reports "
                f"{'no replica set' if found is None else repr(found)}"
            )
            sds[address] = server_description.to_unknown(error)
        return TopologyDescription(
            topology_type, sds, set_name, max_set_version, max_election_id, settings, td.removed_servers
        )

    if topology_type == TopologyType.LoadBalanced:
        return TopologyDescription(
            topology_type, sds, set_name, max_set_version, max_election_id, settings, td.removed_servers
        )

    if topology_type == TopologyType.Unknown:
        if server_type == ServerType.Standalone:
            if len(settings.seeds) == 1:
                topology_type = TopologyType.Single
            else:
                # A seed brought up as a standalone while the others still form the set the user meant.
                del sds[address]
                removed[address] = (
                    "it is a standalone server, and a seed list of several servers must name "
                    "members of one replica set or mongos routers"
                )
        elif server_type in _TOPOLOGY_FOR_SERVER_TYPE:
            topology_type = _TOPOLOGY_FOR_SERVER_TYPE[server_type]

    if topology_type == TopologyType.Sharded:
        if server_type not in (ServerType.Mongos, ServerType.Unknown):
            del sds[address]
            removed[address] = (
                f"it is a {server_type.name}, but the topology is a sharded cluster of mongos routers"
            )

    elif topology_type == TopologyType.ReplicaSetNoPrimary:
        if server_type in (ServerType.Standalone, ServerType.Mongos):
            del sds[address]
            removed[address] = _not_a_member(server_type)
        elif server_type == ServerType.RSPrimary:
            topology_type, set_name, max_set_version, max_election_id = _update_rs_from_primary(
                sds, removed, set_name, server_description, max_set_version, max_election_id
            )
        elif server_type in _RS_MEMBER_TYPES:
            topology_type, set_name = _update_rs_without_primary(sds, removed, set_name, server_description)

    elif topology_type == TopologyType.ReplicaSetWithPrimary:
        if server_type in (ServerType.Standalone, ServerType.Mongos):
            del sds[address]
            removed[address] = _not_a_member(server_type)
            topology_type = _check_has_primary(sds)
        elif server_type == ServerType.RSPrimary:
            topology_type, set_name, max_set_version, max_election_id = _update_rs_from_primary(
                sds, removed, set_name, server_description, max_set_version, max_election_id
            )
        elif server_type in _RS_MEMBER_TYPES:
            topology_type = _update_rs_with_primary_from_member(sds, removed, set_name, server_description)
        else:
            # Unknown or RSGhost: perhaps the primary just went away.
            topology_type = _check_has_primary(sds)

    remembered = _remembered_removals(td.removed_servers, sds, removed)
    return TopologyDescription(
        topology_type, sds, set_name, max_set_version, max_election_id, settings, remembered
    )


def _not_a_member(server_type: ServerType) -> str:
    return f"it is a {server_type.name} server, not a replica set member"


def _check_has_primary(sds: Mapping[Address, ServerDescription]) -> TopologyType:
    if any(sd.server_type == ServerType.RSPrimary for sd in sds.values()):
        return TopologyType.ReplicaSetWithPrimary
    return TopologyType.ReplicaSetNoPrimary


def _oid_key(value: ObjectId) -> bytes:
    # electionIds compare as 12-byte sequences.
    return value.binary


def _nullable_compare(left: Any, right: Any, key: Callable[[Any], Any]) -> int:
    """Three-way comparison in which ``None`` is less than any value and equal to itself."""
    if left is None or right is None:
        return (left is not None) - (right is not None)
    lk, rk = key(left), key(right)
    return int(lk > rk) - int(lk < rk)


def _tuple_text(election_id: ObjectId | None, set_version: int | None) -> str:
    return f"({election_id}, {set_version})"


def _update_rs_from_primary(
    sds: dict[Address, ServerDescription],
    removed: dict[Address, str],
    replica_set_name: str | None,
    server_description: ServerDescription,
    max_set_version: int | None,
    max_election_id: ObjectId | None,
) -> tuple[TopologyType, str | None, int | None, ObjectId | None]:
    """updateRSFromPrimary: trust a primary that is not stale, and make its host list the set's members."""
    address = server_description.address
    if replica_set_name is None:
        replica_set_name = server_description.replica_set_name
    elif replica_set_name != server_description.replica_set_name:
        # A primary of some other set: not one of ours.
        del sds[address]
        removed[address] = _set_name_mismatch(replica_set_name, server_description)
        return _check_has_primary(sds), replica_set_name, max_set_version, max_election_id

    election_id = server_description.election_id
    set_version = server_description.set_version
    if server_description.max_wire_version >= _ELECTION_ID_FIRST_WIRE_VERSION:
        by_election = _nullable_compare(election_id, max_election_id, _oid_key)
        by_version = _nullable_compare(set_version, max_set_version, int)
        if by_election > 0 or (by_election == 0 and by_version >= 0):
            max_election_id, max_set_version = election_id, set_version
        else:
            sds[address] = server_description.to_unknown(
                NotPrimaryError(
                    "primary marked stale due to electionId/setVersion mismatch, "
                    f"{_tuple_text(election_id, set_version)} is stale compared to "
                    f"{_tuple_text(max_election_id, max_set_version)}"
                )
            )
            return _check_has_primary(sds), replica_set_name, max_set_version, max_election_id
    else:
        # Before MongoDB 6.0 drivers ordered the tuple setVersion first; kept for those servers.
        if set_version is not None and election_id is not None:
            if (
                max_set_version is not None
                and max_election_id is not None
                and (
                    max_set_version > set_version
                    or (max_set_version == set_version and _oid_key(max_election_id) > _oid_key(election_id))
                )
            ):
                sds[address] = server_description.to_unknown(
                    NotPrimaryError(
                        "primary marked stale due to electionId/setVersion mismatch, "
                        f"{_tuple_text(election_id, set_version)} is stale compared to "
                        f"{_tuple_text(max_election_id, max_set_version)}"
                    )
                )
                return _check_has_primary(sds), replica_set_name, max_set_version, max_election_id
            max_election_id = election_id
        if set_version is not None and (max_set_version is None or set_version > max_set_version):
            max_set_version = set_version

    for other, sd in list(sds.items()):
        if other != address and sd.server_type == ServerType.RSPrimary:
            # The old primary's pool is left alone; the monitor re-checks it soon.
            sds[other] = sd.to_unknown(
                NotPrimaryError("primary marked stale due to discovery of newer primary")
            )

    members = server_description.all_hosts
    for member in sorted(members - sds.keys(), key=format_address):
        sds[member] = ServerDescription(member)
    for other in list(sds):
        if other not in members:
            del sds[other]
            removed[other] = f"the primary {format_address(address)} does not list it among the set's hosts"

    return _check_has_primary(sds), replica_set_name, max_set_version, max_election_id


def _update_rs_without_primary(
    sds: dict[Address, ServerDescription],
    removed: dict[Address, str],
    replica_set_name: str | None,
    server_description: ServerDescription,
) -> tuple[TopologyType, str | None]:
    """updateRSWithoutPrimary: learn members from a non-primary, never removing any but the reporter."""
    address = server_description.address
    topology_type = TopologyType.ReplicaSetNoPrimary
    if replica_set_name is None:
        replica_set_name = server_description.replica_set_name
    elif replica_set_name != server_description.replica_set_name:
        del sds[address]
        removed[address] = _set_name_mismatch(replica_set_name, server_description)
        return topology_type, replica_set_name

    for member in sorted(server_description.all_hosts - sds.keys(), key=format_address):
        sds[member] = ServerDescription(member)

    # The reported primary would become PossiblePrimary, which asynchronous drivers treat as Unknown; the
    # monitors check every member concurrently, so there is no scan order to change.
    me = server_description.me
    if me is not None and me != address:
        del sds[address]
        removed[address] = _known_as(me)
    return topology_type, replica_set_name


def _update_rs_with_primary_from_member(
    sds: dict[Address, ServerDescription],
    removed: dict[Address, str],
    replica_set_name: str | None,
    server_description: ServerDescription,
) -> TopologyType:
    """updateRSWithPrimaryFromMember: drop a member of another set or one known by another name."""
    address = server_description.address
    me = server_description.me
    if replica_set_name != server_description.replica_set_name:
        del sds[address]
        removed[address] = _set_name_mismatch(replica_set_name, server_description)
    elif me is not None and me != address:
        del sds[address]
        removed[address] = _known_as(me)
    return _check_has_primary(sds)


def _known_as(me: Address) -> str:
    return f"it calls itself {format_address(me)} (the 'me' field of its hello reply), the address it is known by"


def updated_topology_description_srv_polling(
    topology_description: TopologyDescription,
    seedlist: Iterable[Address],
    rng: random.Random | None = None,
) -> TopologyDescription:
    """The topology after an SRV rescan found ``seedlist``: hosts gone from DNS are removed, the others kept
    as they are, and new hosts added as Unknown (a random choice of them when ``srvMaxHosts`` caps the count).
    """
    td = topology_description
    seeds = list(dict.fromkeys(seedlist))
    if not seeds:
        # No verified hosts: the specification forbids changing the topology.
        return td
    sds = td.server_descriptions()
    if set(sds) == set(seeds):
        return td
    wanted = set(seeds)
    removed: dict[Address, str] = {}
    for address in list(sds):
        if address not in wanted:
            del sds[address]
            removed[address] = "its host is no longer in the SRV records"
    new_hosts = [address for address in seeds if address not in sds]
    max_hosts = td.topology_settings.srv_max_hosts
    if max_hosts and len(sds) + len(new_hosts) > max_hosts:
        chooser = rng if rng is not None else random.Random()
        new_hosts = chooser.sample(new_hosts, max(0, max_hosts - len(sds)))
    for address in new_hosts:
        sds[address] = ServerDescription(address)
    return TopologyDescription(
        td.topology_type,
        sds,
        td.replica_set_name,
        td.max_set_version,
        td.max_election_id,
        td.topology_settings,
        _remembered_removals(td.removed_servers, sds, removed),
    )
