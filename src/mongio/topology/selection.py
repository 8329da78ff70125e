"""Server selection: which servers of a :class:`TopologyDescription` suit an operation, and which one to use.

The steps follow the Server Selection and Max Staleness specifications: drop deprioritized servers (unless
that leaves nothing suitable), keep the servers the topology type, operation and read preference allow
(mode, then ``maxStalenessSeconds``, then tag sets), keep those within ``localThresholdMS`` of the fastest,
and pick the less busy of two random choices. All of it is synchronous and does no I/O; the ``Topology``
awaits its Condition only when :func:`select_servers` returns nothing.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from mongio.errors import ConfigurationError
from mongio.events.logs import format_error
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import ServerType
from mongio.topology.topology_description import TopologyDescription, wire_version_problem
from mongio.topology.topology_type import TopologyType

__all__ = [
    "IDLE_WRITE_PERIOD",
    "MODE_NAMES",
    "SMALLEST_MAX_STALENESS",
    "ReadPreferenceLike",
    "RoundTripTimeTracker",
    "ServerSelector",
    "choose_server",
    "has_readable_server",
    "has_writable_server",
    "latency_window",
    "rejection_reasons",
    "select_servers",
    "suitable_servers",
    "validate_max_staleness",
]

IDLE_WRITE_PERIOD = 10.0  # seconds between the no-op writes of an idle primary
SMALLEST_MAX_STALENESS = 90  # seconds

# Read preference modes, numbered as PyMongo numbers them (``ReadPreference.X.mode``).
PRIMARY = 0
PRIMARY_PREFERRED = 1
SECONDARY = 2
SECONDARY_PREFERRED = 3
NEAREST = 4
MODE_NAMES = ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")

ServerSelector = Callable[[list[ServerDescription]], list[ServerDescription]]
"""An application's extra filter: gets the suitable servers and returns those still acceptable."""


class ReadPreferenceLike(Protocol):
    """What selection reads from a read preference (``mongio.options.read_preference`` objects qualify)."""

    @property
    def mode(self) -> int: ...

    @property
    def tag_sets(self) -> Sequence[Mapping[str, Any]] | None: ...

    @property
    def max_staleness(self) -> float | None: ...


def _criteria(
    read_preference: ReadPreferenceLike | None,
) -> tuple[int, Sequence[Mapping[str, Any]], float | None]:
    if read_preference is None:
        return PRIMARY, (), None
    max_staleness = read_preference.max_staleness
    if max_staleness is not None and max_staleness == -1:
        max_staleness = None
    return read_preference.mode, read_preference.tag_sets or (), max_staleness


def validate_max_staleness(
    topology_description: TopologyDescription, read_preference: ReadPreferenceLike | None
) -> None:
    """Raise :class:`~mongio.errors.ConfigurationError` for a ``maxStalenessSeconds`` this topology forbids.

    With mode primary no staleness may be given; in a replica set it must be at least 90 seconds and at
    least ``heartbeatFrequencyMS + idleWritePeriodMS``, since an idle set may look that stale.
    """
    mode, _tags, max_staleness = _criteria(read_preference)
    if max_staleness is None:
        return
    if mode == PRIMARY:
        raise ConfigurationError("maxStalenessSeconds cannot be used with read preference mode primary")
    if topology_description.topology_type not in (
        TopologyType.ReplicaSetWithPrimary,
        TopologyType.ReplicaSetNoPrimary,
    ):
        return
    heartbeat = topology_description.heartbeat_frequency
    smallest = max(SMALLEST_MAX_STALENESS, heartbeat + IDLE_WRITE_PERIOD)
    if max_staleness < smallest:
        raise ConfigurationError(
            f"maxStalenessSeconds must be at least {smallest:g} (at least {SMALLEST_MAX_STALENESS} and at least "
            f"heartbeatFrequencyMS ({heartbeat * 1000:g}) plus the idle write period "
            f"({IDLE_WRITE_PERIOD * 1000:g}) in milliseconds), not {max_staleness:g}"
        )


def _staleness_estimator(
    topology_description: TopologyDescription,
) -> Callable[[ServerDescription], float | None]:
    """A function giving a secondary's estimated staleness in seconds (the Max Staleness specification's
    formulas), or ``None`` when nothing proves it fresh (no ``lastWriteDate`` to compare)."""
    heartbeat = topology_description.heartbeat_frequency
    all_servers = topology_description.server_descriptions().values()
    primary = next((sd for sd in all_servers if sd.server_type == ServerType.RSPrimary), None)
    if primary is not None and topology_description.topology_type == TopologyType.ReplicaSetWithPrimary:
        known_primary = primary

        def against_primary(sd: ServerDescription) -> float | None:
            if sd.last_write_date is None or known_primary.last_write_date is None:
                return None
            return (
                (sd.last_update_time - sd.last_write_date)
                - (known_primary.last_update_time - known_primary.last_write_date)
                + heartbeat
            )

        return against_primary
    writes = [
        sd.last_write_date
        for sd in all_servers
        if sd.server_type == ServerType.RSSecondary and sd.last_write_date is not None
    ]
    newest = max(writes) if writes else None

    def against_newest_secondary(sd: ServerDescription) -> float | None:
        if sd.last_write_date is None or newest is None:
            return None
        return newest - sd.last_write_date + heartbeat

    return against_newest_secondary


def _staleness_filter(
    topology_description: TopologyDescription,
    candidates: list[ServerDescription],
    max_staleness: float | None,
) -> list[ServerDescription]:
    """Keep the candidates whose estimated replication lag is at most ``max_staleness`` seconds."""
    if max_staleness is None or max_staleness <= 0:
        return candidates
    staleness = _staleness_estimator(topology_description)
    fresh: list[ServerDescription] = []
    for sd in candidates:
        if sd.server_type != ServerType.RSSecondary:
            fresh.append(sd)
            continue
        estimate = staleness(sd)
        if estimate is not None and estimate <= max_staleness:
            fresh.append(sd)
    return fresh


def _tag_filter(
    candidates: list[ServerDescription], tag_sets: Sequence[Mapping[str, Any]]
) -> list[ServerDescription]:
    """The candidates matching the first tag set that matches any; all of them for an empty list."""
    if not tag_sets:
        return candidates
    for tag_set in tag_sets:
        matching = [sd for sd in candidates if all(sd.tags.get(k) == v for k, v in tag_set.items())]
        if matching:
            return matching
    return []


def _suitable(
    topology_description: TopologyDescription,
    servers: list[ServerDescription],
    mode: int,
    tag_sets: Sequence[Mapping[str, Any]],
    max_staleness: float | None,
    is_write: bool,
) -> list[ServerDescription]:
    topology_type = topology_description.topology_type
    if topology_type == TopologyType.Unknown:
        return []
    if topology_type in (TopologyType.Single, TopologyType.LoadBalanced):
        # A direct connection ignores the read preference: the one server takes everything.
        return [sd for sd in servers if sd.is_server_type_known]
    if topology_type == TopologyType.Sharded:
        return [sd for sd in servers if sd.server_type == ServerType.Mongos]

    primaries = [sd for sd in servers if sd.server_type == ServerType.RSPrimary]
    if is_write or mode == PRIMARY:
        return primaries
    secondaries = [sd for sd in servers if sd.server_type == ServerType.RSSecondary]

    def eligible(candidates: list[ServerDescription]) -> list[ServerDescription]:
        return _tag_filter(_staleness_filter(topology_description, candidates, max_staleness), tag_sets)

    if mode == PRIMARY_PREFERRED:
        return primaries or eligible(secondaries)
    if mode == SECONDARY:
        return eligible(secondaries)
    if mode == SECONDARY_PREFERRED:
        return eligible(secondaries) or primaries
    if mode == NEAREST:
        return eligible(primaries + secondaries)
    raise ConfigurationError(f"unknown read preference mode {mode!r}")


def suitable_servers(
    topology_description: TopologyDescription,
    read_preference: ReadPreferenceLike | None = None,
    *,
    is_write: bool = False,
    deprioritized: Collection[Address] = (),
) -> list[ServerDescription]:
    """The servers suitable for a read with ``read_preference`` (primary when ``None``) or for a write.

    Deprioritized addresses (servers that just failed a retryable attempt) are left out unless that leaves
    no suitable server, in which case they count like the others.
    """
    mode, tag_sets, max_staleness = _criteria(read_preference)
    servers = list(topology_description.server_descriptions().values())
    if deprioritized:
        preferred = [sd for sd in servers if sd.address not in deprioritized]
        if len(preferred) < len(servers):
            chosen = _suitable(topology_description, preferred, mode, tag_sets, max_staleness, is_write)
            if chosen:
                return chosen
    return _suitable(topology_description, servers, mode, tag_sets, max_staleness, is_write)


def latency_window(
    servers: Sequence[ServerDescription], local_threshold_ms: float
) -> list[ServerDescription]:
    """The servers whose average round trip time is within ``local_threshold_ms`` of the fastest's.

    A server without a measured time (a load balancer) counts as the fastest possible.
    """
    if len(servers) <= 1:
        return list(servers)
    times = [sd.round_trip_time or 0.0 for sd in servers]
    limit = min(times) + local_threshold_ms / 1000.0
    return [sd for sd, rtt in zip(servers, times) if rtt <= limit]


def select_servers(
    topology_description: TopologyDescription,
    read_preference: ReadPreferenceLike | None = None,
    *,
    is_write: bool = False,
    deprioritized: Collection[Address] = (),
    server_selector: ServerSelector | None = None,
    local_threshold_ms: float | None = None,
) -> list[ServerDescription]:
    """The servers an operation may use now: suitable and within the latency window (empty when none).

    Raises :class:`~mongio.errors.ConfigurationError` when a server's wire version is unsupported or the
    read preference's ``maxStalenessSeconds`` is invalid for this topology: waiting would not help.
    ``local_threshold_ms`` defaults to the topology settings' value.
    """
    topology_description.check_compatible()
    if not is_write:
        validate_max_staleness(topology_description, read_preference)
    servers = suitable_servers(
        topology_description, read_preference, is_write=is_write, deprioritized=deprioritized
    )
    settings = topology_description.topology_settings
    # The client's selector (the server_selector keyword), then the caller's.
    for selector in (settings.server_selector, server_selector):
        if selector is not None and servers:
            servers = selector(servers)
    if local_threshold_ms is None:
        local_threshold_ms = settings.local_threshold_ms
    return latency_window(servers, local_threshold_ms)


def rejection_reasons(
    topology_description: TopologyDescription,
    read_preference: ReadPreferenceLike | None = None,
    *,
    is_write: bool = False,
    deprioritized: Collection[Address] = (),
    server_selector: ServerSelector | None = None,
    local_threshold_ms: float | None = None,
) -> dict[Address, str]:
    """Why :func:`select_servers` would not return each server of the topology that it leaves out.

    Each reason names the step that rejected the server: unusable (Unknown with its last error, an
    unsupported wire version), the wrong type for the topology or the read preference, too stale for
    ``maxStalenessSeconds``, no matching tag set, the primary or secondary fallback of a ``*Preferred`` mode,
    deprioritized, refused by a custom server selector, or outside the latency window. It repeats the
    selection's steps one server at a time, so it is for a failed selection's error and for log messages,
    never for a selection that succeeds. A reason reads after the server's type, as the timeout error shows
    it: ``RSSecondary, a write needs the primary``.
    """
    mode, tag_sets, max_staleness = _criteria(read_preference)
    reasons: dict[Address, str] = {}
    candidates: list[ServerDescription] = []
    for sd in topology_description.server_descriptions().values():
        reason = _unusable_reason(sd) or _type_reason(topology_description.topology_type, sd, mode, is_write)
        if reason is None:
            candidates.append(sd)
        else:
            reasons[sd.address] = reason
    replica_set = topology_description.topology_type in (
        TopologyType.ReplicaSetWithPrimary,
        TopologyType.ReplicaSetNoPrimary,
    )
    if replica_set and not is_write and mode != PRIMARY:
        reasons.update(
            _read_preference_reasons(topology_description, candidates, mode, tag_sets, max_staleness)
        )
    kept = [sd for sd in candidates if sd.address not in reasons]
    try:
        suitable = suitable_servers(
            topology_description, read_preference, is_write=is_write, deprioritized=deprioritized
        )
    except ConfigurationError as exc:
        return {sd.address: str(exc) for sd in kept} | reasons
    suitable_addresses = {sd.address for sd in suitable}
    for sd in kept:
        if sd.address not in suitable_addresses:
            reasons[sd.address] = (
                "deprioritized: it failed an earlier attempt of this operation and other servers are suitable"
                if sd.address in deprioritized
                else "not suitable"
            )
    settings = topology_description.topology_settings
    for selector in (settings.server_selector, server_selector):
        if selector is not None and suitable:
            accepted = {sd.address for sd in selector(suitable)}
            for sd in suitable:
                if sd.address not in accepted:
                    reasons[sd.address] = "refused by the custom server selector"
            suitable = [sd for sd in suitable if sd.address in accepted]
    if local_threshold_ms is None:
        local_threshold_ms = settings.local_threshold_ms
    reasons.update(_latency_reasons(suitable, local_threshold_ms))
    return reasons


def _unusable_reason(sd: ServerDescription) -> str | None:
    """Why the client cannot use ``sd`` whatever the operation: not known, or speaking unsupported wire versions."""
    if sd.server_type == ServerType.Unknown:
        if sd.error is not None:
            return f"error: {format_error(sd.error)}"
        return "not reached yet: no check has succeeded"
    problem = wire_version_problem(sd)
    if problem is not None:
        return f"incompatible: it {problem}"
    return None


def _type_reason(topology_type: TopologyType, sd: ServerDescription, mode: int, is_write: bool) -> str | None:
    """Why a known server's type rules it out for this topology and operation, or ``None``."""
    server_type = sd.server_type
    if topology_type == TopologyType.Unknown:
        return "the topology's type is still Unknown"
    if topology_type in (TopologyType.Single, TopologyType.LoadBalanced):
        return None
    if topology_type == TopologyType.Sharded:
        return None if server_type == ServerType.Mongos else "not a mongos"
    if server_type == ServerType.RSPrimary:
        return (
            "read preference secondary reads only from secondaries"
            if mode == SECONDARY and not is_write
            else None
        )
    if is_write or mode == PRIMARY:
        needs = "a write" if is_write else "a read with read preference primary"
        return f"{needs} needs the primary"
    if server_type != ServerType.RSSecondary:
        return "it serves no reads"
    return None


def _read_preference_reasons(
    topology_description: TopologyDescription,
    candidates: list[ServerDescription],
    mode: int,
    tag_sets: Sequence[Mapping[str, Any]],
    max_staleness: float | None,
) -> dict[Address, str]:
    """Why candidates of a suitable type in a replica set fail a non-primary read preference: the
    ``*Preferred`` fallback, ``maxStalenessSeconds``, then the tag sets."""
    reasons: dict[Address, str] = {}
    primaries = [sd for sd in candidates if sd.server_type == ServerType.RSPrimary]
    secondaries = [sd for sd in candidates if sd.server_type == ServerType.RSSecondary]
    if mode == PRIMARY_PREFERRED and primaries:
        for sd in secondaries:
            reasons[sd.address] = "read preference primaryPreferred reads from the primary while there is one"
        return reasons
    pool = primaries + secondaries if mode == NEAREST else secondaries
    fresh = _staleness_filter(topology_description, pool, max_staleness)
    if len(fresh) < len(pool):
        staleness = _staleness_estimator(topology_description)
        for sd in pool:
            if sd not in fresh:
                reasons[sd.address] = _stale_reason(staleness(sd), max_staleness)
    tagged = _tag_filter(fresh, tag_sets)
    for sd in fresh:
        if sd not in tagged:
            reasons[sd.address] = _tag_reason(sd, tagged, tag_sets)
    if mode == SECONDARY_PREFERRED and tagged:
        for sd in primaries:
            reasons[sd.address] = (
                "read preference secondaryPreferred reads from a secondary while one is eligible"
            )
    return reasons


def _stale_reason(estimate: float | None, max_staleness: float | None) -> str:
    if estimate is None:
        return "stale: its staleness cannot be estimated (no lastWriteDate to compare)"
    return f"stale: estimated {estimate:g} s behind, more than maxStalenessSeconds {max_staleness:g}"


def _tag_reason(
    sd: ServerDescription, tagged: list[ServerDescription], tag_sets: Sequence[Mapping[str, Any]]
) -> str:
    tags = dict(sd.tags)
    if not tagged:
        return f"its tags {tags} match none of the tag sets {[dict(tag_set) for tag_set in tag_sets]}"
    chosen = next(
        dict(tag_set) for tag_set in tag_sets if all(tagged[0].tags.get(k) == v for k, v in tag_set.items())
    )
    return f"its tags {tags} do not match {chosen}, the first tag set other servers match"


def _latency_reasons(servers: Sequence[ServerDescription], local_threshold_ms: float) -> dict[Address, str]:
    in_window = {sd.address for sd in latency_window(servers, local_threshold_ms)}
    if len(in_window) == len(servers):
        return {}
    fastest = min(sd.round_trip_time or 0.0 for sd in servers)
    return {
        sd.address: (
            f"outside the latency window: round trip {(sd.round_trip_time or 0.0) * 1000:g} ms, more than "
            f"localThresholdMS {local_threshold_ms:g} ms above the fastest server's {fastest * 1000:g} ms"
        )
        for sd in servers
        if sd.address not in in_window
    }


def choose_server(
    candidates: Sequence[ServerDescription],
    operation_count: Callable[[Address], int],
    rng: random.Random | None = None,
) -> ServerDescription:
    """Of two servers drawn at random from ``candidates``, the one running fewer operations.

    Two random choices spread load evenly yet steer work away from a slow server, whose operations pile
    up. ``rng`` may be given for reproducible choices. ``candidates`` must not be empty.
    """
    if not candidates:
        raise ValueError("choose_server needs at least one candidate")
    if len(candidates) == 1:
        return candidates[0]
    first, second = (rng if rng is not None else random).sample(list(candidates), 2)
    return first if operation_count(first.address) <= operation_count(second.address) else second


def has_readable_server(
    topology_description: TopologyDescription, read_preference: ReadPreferenceLike | None = None
) -> bool:
    """Whether a read with ``read_preference`` (primary when ``None``) has a suitable server now."""
    if topology_description.topology_type == TopologyType.LoadBalanced:
        return True
    return bool(suitable_servers(topology_description, read_preference))


def has_writable_server(topology_description: TopologyDescription) -> bool:
    """Whether a write has a suitable server now."""
    if topology_description.topology_type == TopologyType.LoadBalanced:
        return True
    return bool(suitable_servers(topology_description, is_write=True))


class RoundTripTimeTracker:
    """A server's round trip times: the moving average selection uses and the recent minimum.

    The average is an exponentially weighted moving average with weight 0.2 on the newest sample, starting
    from the first sample. The minimum is taken over the last 10 samples and reported as 0 until there are
    at least two. Times are in seconds.
    """

    ALPHA = 0.2
    MIN_SAMPLES = 2
    MAX_SAMPLES = 10

    __slots__ = ("_average", "_samples")

    def __init__(self, average: float | None = None) -> None:
        """Start empty, or from a known ``average`` (which counts as history, not as a sample)."""
        self._average: float | None = average
        self._samples: deque[float] = deque(maxlen=self.MAX_SAMPLES)

    def add_sample(self, sample: float) -> None:
        """Record one measured round trip time."""
        if sample < 0:
            raise ValueError(f"a round trip time cannot be negative: {sample!r}")
        self._samples.append(sample)
        if self._average is None:
            self._average = sample
        else:
            self._average = self.ALPHA * sample + (1 - self.ALPHA) * self._average

    @property
    def average(self) -> float | None:
        """The moving average, or ``None`` before the first sample."""
        return self._average

    def get(self) -> float | None:
        return self._average

    @property
    def min(self) -> float:
        """The least of the last 10 samples; 0 until two samples have been recorded."""
        if len(self._samples) < self.MIN_SAMPLES:
            return 0.0
        return min(self._samples)

    def reset(self) -> None:
        """Forget every sample: the server became Unknown."""
        self._average = None
        self._samples.clear()
