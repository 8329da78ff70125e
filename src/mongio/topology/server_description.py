"""What the client knows about one server, built from its last ``hello`` reply or the error that replaced it.

A :class:`ServerDescription` is immutable: the topology replaces it rather than changing it, so any task may
keep a reference and read it without a lock. Nothing here does I/O.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from mongio.bson.objectid import ObjectId

# A server address (``(host, port)``, the port ``None`` only for a Unix socket path), how it is written and
# the port a host without one gets are defined once, with the transport that connects to it.
from mongio.connection.transport import DEFAULT_PORT, Address, format_address
from mongio.topology.server_type import ServerType
from mongio.wire.header import announced_limits

__all__ = [
    "DEFAULT_PORT",
    "Address",
    "ServerDescription",
    "format_address",
    "parse_address",
]


_WRITABLE_TYPES = frozenset(
    {ServerType.RSPrimary, ServerType.Standalone, ServerType.Mongos, ServerType.LoadBalancer}
)
_DATA_BEARING_TYPES = _WRITABLE_TYPES | {ServerType.RSSecondary}
# Read per retryable write: module constants, since on Python 3.11 reading a member off its enum class is an
# unspecialized lookup, several times the cost of reading a global.
_LOAD_BALANCER = ServerType.LoadBalancer
_TAKE_RETRYABLE_WRITES = frozenset({ServerType.Mongos, ServerType.RSPrimary})


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> Address:
    """``"host:port"``, ``"[::1]:port"``, ``"host"`` or a ``.sock`` path to an :data:`Address`.

    Host names are lower-cased, as DNS names are case-insensitive and the specification requires the same
    server reported as ``"A"`` and ``"a"`` to be one server. Raises ``ValueError`` on a malformed port.
    """
    text = text.strip()
    if text.endswith(".sock"):
        return text, None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"an IPv6 literal must end with ']': {text!r}")
        host, rest = text[1:end], text[end + 1 :]
        if not rest:
            return host.lower(), default_port
        if not rest.startswith(":"):
            raise ValueError(f"unexpected text after the IPv6 literal in {text!r}")
        return host.lower(), _port(rest[1:], text)
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host.lower(), _port(port, text)
    # No colon, or an unbracketed IPv6 literal: the whole text is the host.
    return text.lower(), default_port


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise ValueError(f"port must be an integer from 1 to 65535 in {whole!r}")
    return int(text)


def _addresses(values: Any) -> frozenset[Address]:
    if not values:
        return frozenset()
    return frozenset(parse_address(str(v)) for v in values)


def _seconds_since_epoch(value: Any) -> float | None:
    """A BSON datetime (``datetime`` or a milliseconds value such as ``DatetimeMS``) as epoch seconds."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return float(value.timestamp())
    return int(value) / 1000.0


def _reply_type(hello: Mapping[str, Any]) -> ServerType:
    if not hello.get("ok"):
        return ServerType.Unknown
    if hello.get("isreplicaset"):
        return ServerType.RSGhost
    if hello.get("setName"):
        if hello.get("hidden"):
            return ServerType.RSOther
        # "isWritablePrimary" is the modern name; "ismaster" answers the legacy hello.
        primary = hello["isWritablePrimary"] if "isWritablePrimary" in hello else hello.get("ismaster")
        if primary:
            return ServerType.RSPrimary
        if hello.get("secondary"):
            return ServerType.RSSecondary
        if hello.get("arbiterOnly"):
            return ServerType.RSArbiter
        return ServerType.RSOther
    if hello.get("msg") == "isdbgrid":
        return ServerType.Mongos
    return ServerType.Standalone


def _error_key(error: BaseException | None) -> tuple[str, str] | None:
    return None if error is None else (type(error).__name__, str(error))


class ServerDescription:
    """The client's view of one server.

    Build it from a ``hello`` reply (``hello``) and the round trip time the check took, or from the error a
    failed check or operation raised (``error``, which makes the server ``Unknown``). Round trip times are in
    seconds, as in PyMongo. ``last_update_time`` is a ``time.monotonic()`` reading (taken now unless given).

    Two descriptions of the same address are equal when the fields the specification marks for comparison are
    equal; round trip and update times are left out, so an unchanged server publishes no change event.
    """

    __slots__ = (
        "_address",
        "_arbiters",
        "_cluster_time",
        "_election_id",
        "_error",
        "_hello",
        "_hosts",
        "_iscryptd",
        "_last_update_time",
        "_last_write_date",
        "_ls_timeout_minutes",
        "_max_bson_size",
        "_max_message_size",
        "_max_wire_version",
        "_max_write_batch_size",
        "_me",
        "_min_round_trip_time",
        "_min_wire_version",
        "_op_time",
        "_passives",
        "_primary",
        "_replica_set_name",
        "_round_trip_time",
        "_server_type",
        "_service_id",
        "_set_version",
        "_tags",
        "_topology_version",
    )

    def __init__(
        self,
        address: Address,
        hello: Mapping[str, Any] | None = None,
        round_trip_time: float | None = None,
        error: BaseException | None = None,
        min_round_trip_time: float = 0.0,
        *,
        last_update_time: float | None = None,
        topology_version: Mapping[str, Any] | None = None,
        server_type: ServerType | None = None,
    ) -> None:
        doc: Mapping[str, Any] = hello if hello is not None and hello.get("ok") else {}
        self._address = address
        self._hello = doc
        self._error = error
        self._server_type = server_type if server_type is not None else _reply_type(doc)
        self._hosts = _addresses(doc.get("hosts"))
        self._passives = _addresses(doc.get("passives"))
        self._arbiters = _addresses(doc.get("arbiters"))
        self._me = parse_address(str(doc["me"])) if doc.get("me") else None
        self._primary = parse_address(str(doc["primary"])) if doc.get("primary") else None
        self._tags: dict[str, str] = dict(doc.get("tags") or {})
        self._replica_set_name: str | None = doc.get("setName") or None
        set_version = doc.get("setVersion")
        self._set_version = int(set_version) if set_version is not None else None
        election_id = doc.get("electionId")
        self._election_id = election_id if election_id is None else ObjectId(election_id)
        self._min_wire_version = int(doc.get("minWireVersion", 0))
        self._max_wire_version = int(doc.get("maxWireVersion", 0))
        self._max_bson_size, self._max_message_size, self._max_write_batch_size = announced_limits(doc)
        ls_timeout = doc.get("logicalSessionTimeoutMinutes")
        self._ls_timeout_minutes = int(ls_timeout) if ls_timeout is not None else None
        last_write = doc.get("lastWrite") or {}
        self._last_write_date = _seconds_since_epoch(last_write.get("lastWriteDate"))
        self._op_time = last_write.get("opTime")
        self._iscryptd = bool(doc.get("iscryptd", False))
        self._service_id = doc.get("serviceId")
        self._cluster_time = doc.get("$clusterTime")
        if topology_version is None:
            topology_version = doc.get("topologyVersion")
        if topology_version is None and error is not None:
            # A state-change error carries the server's topologyVersion; the Unknown it causes keeps it.
            details = getattr(error, "details", None)
            if isinstance(details, Mapping):
                topology_version = details.get("topologyVersion")
        self._topology_version = topology_version
        known = self._server_type != ServerType.Unknown
        self._round_trip_time = round_trip_time if known else None
        self._min_round_trip_time = min_round_trip_time if known else 0.0
        self._last_update_time = time.monotonic() if last_update_time is None else last_update_time

    @classmethod
    def load_balancer(cls, address: Address) -> ServerDescription:
        """The description of a load balancer: its address and type, every other field unset."""
        return cls(address, server_type=ServerType.LoadBalancer)

    def to_unknown(self, error: BaseException | None = None) -> ServerDescription:
        """A default ``Unknown`` description of the same address, carrying ``error``."""
        return ServerDescription(self._address, error=error)

    @property
    def address(self) -> Address:
        """The ``(host, port)`` the client connects to (not the server's ``me``)."""
        return self._address

    @property
    def server_type(self) -> ServerType:
        """What the server reported itself to be (``Unknown`` until it answers or after an error)."""
        return self._server_type

    @property
    def server_type_name(self) -> str:
        """The server type's name, e.g. ``"RSPrimary"``."""
        return self._server_type.name

    @property
    def hello(self) -> Mapping[str, Any]:
        """The ``hello`` reply this description was built from (empty when there was none)."""
        return self._hello

    @property
    def hosts(self) -> frozenset[Address]:
        """The replica set members (not passive, not arbiters) this server reported."""
        return self._hosts

    @property
    def passives(self) -> frozenset[Address]:
        """The priority-zero members this server reported."""
        return self._passives

    @property
    def arbiters(self) -> frozenset[Address]:
        """The arbiters this server reported."""
        return self._arbiters

    @property
    def all_hosts(self) -> frozenset[Address]:
        """This server's opinion of the replica set's members: hosts, passives and arbiters."""
        return self._hosts | self._passives | self._arbiters

    @property
    def me(self) -> Address | None:
        """The address the server is known by in the replica set configuration."""
        return self._me

    @property
    def primary(self) -> Address | None:
        """This server's opinion of who the primary is."""
        return self._primary

    @property
    def tags(self) -> Mapping[str, str]:
        """The member's tags, which read preference tag sets match against."""
        return self._tags

    @property
    def replica_set_name(self) -> str | None:
        """The replica set name (``setName``) the server reported, if any."""
        return self._replica_set_name

    @property
    def set_version(self) -> int | None:
        """The replica set configuration version a member reports."""
        return self._set_version

    @property
    def election_id(self) -> ObjectId | None:
        """The ``electionId`` a primary reports, else ``None``."""
        return self._election_id

    @property
    def election_tuple(self) -> tuple[ObjectId | None, int | None]:
        """``(electionId, setVersion)``, the pair that orders primaries."""
        return self._election_id, self._set_version

    @property
    def min_wire_version(self) -> int:
        """The oldest wire protocol version the server speaks (0 when unknown)."""
        return self._min_wire_version

    @property
    def max_wire_version(self) -> int:
        """The newest wire protocol version the server speaks (0 when unknown)."""
        return self._max_wire_version

    @property
    def max_bson_size(self) -> int:
        """The largest document the server accepts, in bytes."""
        return self._max_bson_size

    @property
    def max_message_size(self) -> int:
        """The largest wire message the server accepts, in bytes."""
        return self._max_message_size

    @property
    def max_write_batch_size(self) -> int:
        """The most writes the server accepts in one command."""
        return self._max_write_batch_size

    @property
    def logical_session_timeout_minutes(self) -> int | None:
        """How long the server keeps an idle session; ``None`` when it has no sessions."""
        return self._ls_timeout_minutes

    @property
    def last_write_date(self) -> float | None:
        """The ``lastWrite.lastWriteDate`` the server reported, in seconds since the epoch."""
        return self._last_write_date

    @property
    def op_time(self) -> Any:
        """The opaque ``lastWrite.opTime`` the server reported."""
        return self._op_time

    @property
    def last_update_time(self) -> float:
        """When this description was made, on the ``time.monotonic()`` clock."""
        return self._last_update_time

    @property
    def round_trip_time(self) -> float | None:
        """The average round trip time in seconds; ``None`` while the server is Unknown."""
        return self._round_trip_time

    @property
    def min_round_trip_time(self) -> float:
        """The least round trip time of the recent samples, in seconds."""
        return self._min_round_trip_time

    @property
    def error(self) -> BaseException | None:
        """The error that made this server Unknown, if any."""
        return self._error

    @property
    def topology_version(self) -> Mapping[str, Any] | None:
        """``{"processId": ObjectId, "counter": Int64}`` from the reply or state-change error, or ``None``."""
        return self._topology_version

    @property
    def iscryptd(self) -> bool:
        """Whether the server is a mongocryptd."""
        return self._iscryptd

    @property
    def service_id(self) -> Any:
        """The ``serviceId`` a server behind a load balancer reports."""
        return self._service_id

    @property
    def cluster_time(self) -> Mapping[str, Any] | None:
        """The ``$clusterTime`` of the reply, if any."""
        return self._cluster_time

    @property
    def is_server_type_known(self) -> bool:
        """True unless the server is Unknown."""
        return self._server_type != ServerType.Unknown

    @property
    def is_writable(self) -> bool:
        """Whether writes may go to this server (a primary, standalone, mongos or load balancer)."""
        return self._server_type in _WRITABLE_TYPES

    @property
    def is_readable(self) -> bool:
        """Whether reads may go to this server (the writable types and secondaries)."""
        return self._server_type == ServerType.RSSecondary or self.is_writable

    @property
    def is_data_bearing(self) -> bool:
        """Whether the server holds application data (the readable types)."""
        return self._server_type in _DATA_BEARING_TYPES

    @property
    def retryable_writes_supported(self) -> bool:
        """Whether the server supports retryable writes (sessions on a primary or mongos, or a load balancer)."""
        if self._server_type == _LOAD_BALANCER:
            return True
        return self._ls_timeout_minutes is not None and self._server_type in _TAKE_RETRYABLE_WRITES

    @property
    def retryable_reads_supported(self) -> bool:
        """Whether the server supports retryable reads."""
        return self._max_wire_version >= 6

    def _comparison_key(self) -> tuple[Any, ...]:
        return (
            self._address,
            _error_key(self._error),
            self._server_type,
            self._min_wire_version,
            self._max_wire_version,
            self._me,
            self._hosts,
            self._passives,
            self._arbiters,
            self._tags,
            self._replica_set_name,
            self._election_id,
            self._set_version,
            self._primary,
            self._ls_timeout_minutes,
            self._topology_version,
            self._iscryptd,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerDescription):
            return NotImplemented
        return self._comparison_key() == other._comparison_key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{format_address(self._address)!r}", f"server_type: {self._server_type.name}"]
        if self._round_trip_time is not None:
            parts.append(f"rtt: {self._round_trip_time!r}")
        if self._error is not None:
            parts.append(f"error: {self._error!r}")
        return f"<ServerDescription {', '.join(parts)}>"
