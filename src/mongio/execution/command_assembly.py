"""Command assembly: the command an attempt sends, made for the connection it got.

:meth:`CommandAssembler.command_for` takes the server session (the caller's session's, or one taken for
this operation alone) and a retryable write's txnNumber, has the operation build its command
(``op.build(conn)``), then adds the fields the executor owns: ``lsid``, ``txnNumber``, the transaction's
fields, ``$clusterTime``, ``readConcern``, ``writeConcern``, ``$readPreference``, the stable API fields,
``maxTimeMS`` and ``$db``.

Which facts each decision rests on. The server as selected (its description, and the topology's as it was
then): session support, a retryable write's eligibility (the retryable writes specification judges the server
selected for the attempt: sessions supported and not a standalone; a step-down while the attempt waited for a
connection does not make it ineligible, the server's refusal is then retried), ``$readPreference``, the read
concern's standalone rule, a transaction's pinning, and the round-trip time ``maxTimeMS`` leaves for. The
connection's own handshake: the wire version for features (``$clusterTime``, snapshot reads, exhaust
getMores, the command's build), compression, and a load balancer's service id.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.errors import ConfigurationError
from mongio.execution import deadline as csot
from mongio.operations.base import Command, EncryptedWriteLimits, Operation, Retryability
from mongio.sessions.cluster_time import ClusterClock
from mongio.sessions.server_session import ServerSession, ServerSessionPool
from mongio.topology.server_type import ServerType
from mongio.topology.topology_type import TopologyType

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.execution.operation_run import Attempt, OperationRun
    from mongio.sessions.operation_session import OperationSession
    from mongio.topology.server_description import ServerDescription
    from mongio.topology.topology import PoolLike, Server, Topology
    from mongio.topology.topology_description import TopologyDescription

__all__ = ["CommandAssembler", "read_preference_document"]

_MONGOS_LIKE = frozenset({ServerType.Mongos, ServerType.LoadBalancer})
# The enum members every operation compares with, as module constants: on Python 3.11 reading a member off
# its enum class is an unspecialized attribute lookup, several times the cost of reading a global.
_STANDALONE = ServerType.Standalone
_SINGLE = TopologyType.Single
_SHARDED = TopologyType.Sharded
_RETRYABLE_WRITE = Retryability.WRITE
# The write commands that take a readConcern with afterClusterTime in a causally consistent session.
_CAUSAL_WRITE_COMMANDS = frozenset(
    {
        "insert",
        "update",
        "delete",
        "findAndModify",
        "bulkWrite",
        "create",
        "createIndexes",
        "drop",
        "dropDatabase",
        "dropIndexes",
    }
)
# The commands a snapshot session sends without its snapshot read concern.
# Commands a snapshot session gives no read concern: a cursor's follow-ups, and explain, which takes none.
_NO_SNAPSHOT_COMMANDS = frozenset({"getMore", "killCursors", "explain"})
_SNAPSHOT_MIN_WIRE_VERSION = 13  # MongoDB 5.0
_CLUSTER_TIME_MIN_WIRE_VERSION = 6  # MongoDB 3.6
_EXHAUST_MIN_WIRE_VERSION = 8  # MongoDB 4.2: getMore takes exhaustAllowed
_MONGOS_EXHAUST_MIN_WIRE_VERSION = 22  # MongoDB 7.1: a mongos goes on with an exhaust getMore's stream


class CommandAssembler:
    """Assembles the commands of one client's operations; owned by its executor, which shares with it the
    cluster clock, the server session pool, the stable API fields and the ``retryWrites`` option."""

    __slots__ = ("_api_fields", "_cluster_clock", "_retry_writes", "_session_pool", "_write_split_size")

    def __init__(
        self,
        cluster_clock: ClusterClock,
        session_pool: ServerSessionPool,
        api_fields: dict[str, Any],
        retry_writes: bool,
        *,
        write_split_size: int | None = None,
    ) -> None:
        self._cluster_clock = cluster_clock
        self._session_pool = session_pool
        self._api_fields = api_fields
        self._retry_writes = retry_writes
        # Automatic encryption: write batches are built for EncryptedWriteLimits (cut at this many bytes).
        self._write_split_size = write_split_size

    def command_for(
        self,
        topology: Topology,
        run: OperationRun[Any],
        attempt: Attempt,
        server: Server,
        pool: PoolLike,
        conn: Connection,
        described: TopologyDescription,
        description: ServerDescription,
    ) -> tuple[Command, ServerSession | None, bool]:
        """The command for ``conn`` (to ``server``, described by ``description`` in ``described``, both as
        they were when the server was selected). Returns it with its server session and whether it may open
        an exhaust stream."""
        op = run.op
        # Sessions only now that a connection is ours: operations waiting for one hold no server session.
        # One clock reading: the pool's expiry check and the session's last use (it is about to be sent).
        now = time.monotonic()
        server_session = self._server_session_for(topology, described, run, description, now)
        if op.retryability is _RETRYABLE_WRITE:
            self._decide_txn_number(run, description, server_session)
        attempt.generation = conn.generation
        attempt.wire_version = conn.max_wire_version
        split_size = self._write_split_size
        command = op.build(conn if split_size is None else EncryptedWriteLimits(conn, split_size))
        body = command.body
        if run.txn_number is not None and op.retryability is not _RETRYABLE_WRITE:
            # The build found statements that cannot be retried (a multi-document write).
            run.txn_number = None
        if server_session is not None:
            body["lsid"] = server_session.session_id
            server_session.mark_used(now)
        if run.txn_number is not None:
            body["txnNumber"] = run.txn_number
        session = run.session
        if run.in_transaction and session is not None and server_session is not None:
            body.update(session.transaction_fields())
            sharded = described.topology_type is _SHARDED
            load_balanced = topology.settings.load_balanced
            session.pin_transaction(
                server.address if sharded else None, pool, conn if load_balanced else None
            )
        self.add_fields(
            body,
            op,
            session,
            description,
            conn.max_wire_version,
            described.topology_type,
            in_transaction=run.transaction_bound,
            csot_on=attempt.deadline is not None,
        )
        body["$db"] = op.database
        exhaust = (
            run.pin is not None and op.exhaust and not run.in_transaction and _may_stream(conn, description)
        )
        return command, server_session, exhaust

    def _server_session_for(
        self,
        topology: Topology,
        description: TopologyDescription,
        run: OperationRun[Any],
        server: ServerDescription,
        now: float,
    ) -> ServerSession | None:
        """The server session the command carries: the caller's session's, else one taken (at ``now``, a
        ``time.monotonic()`` reading) for this operation alone (not for an unacknowledged write); ``None`` when
        the deployment supports no sessions (as the topology's ``description`` says)."""
        minutes = description.logical_session_timeout_minutes
        if minutes is None and not description.knows_a_data_bearing_server:
            # The topology lost sight of every data-bearing server after this operation selected one (every
            # mongos just marked Unknown, say): the selected server's own hello still answers the question,
            # and a retryable write sent without its session could be applied twice.
            minutes = server.logical_session_timeout_minutes
        supported = minutes is not None or topology.settings.load_balanced
        session = run.session
        if session is not None:
            if supported:
                return session.checked_server_session()
            if not session.implicit:
                raise ConfigurationError(
                    "this deployment does not support sessions (its servers report no "
                    "logicalSessionTimeoutMinutes); run the operation without session="
                )
            return None
        if not (run.acknowledged and supported):
            return None
        if run.implicit is None:
            run.implicit = self._session_pool.acquire(
                minutes, load_balanced=topology.settings.load_balanced, now=now
            )
        return run.implicit

    def _decide_txn_number(
        self, run: OperationRun[Any], description: ServerDescription, server_session: ServerSession | None
    ) -> None:
        """For a retryable write (only: no other operation takes one): the first attempt to get a connection
        takes the txnNumber every retry reuses; a retry on a server that cannot take it ends the operation
        with the previous error."""
        if not run.txn_decided:
            run.txn_decided = True
            if (
                self._retry_writes
                and server_session is not None
                and description.retryable_writes_supported
                and not run.in_transaction
            ):
                run.txn_number = server_session.next_txn_number()
        elif run.txn_number is not None and not description.retryable_writes_supported:
            assert run.retry_state is not None
            decision = run.retry_state.cannot_retry(
                "the server selected for the retry does not support retryable writes"
            )
            assert decision.error is not None
            raise decision.error

    def add_fields(
        self,
        body: dict[str, Any],
        op: Operation[Any],
        session: OperationSession | None,
        description: ServerDescription,
        wire_version: int,
        topology_type: TopologyType,
        *,
        in_transaction: bool = False,
        csot_on: bool = False,
    ) -> None:
        """Add ``$clusterTime``, the concerns, ``$readPreference``, the stable API fields and ``maxTimeMS``
        (``csot_on``: a CSOT deadline is in force), for the server ``description`` selected and a connection
        whose handshake gave ``wire_version``."""
        cluster_time = self._cluster_clock.cluster_time
        if session is not None:
            own = session.cluster_time
            if own is not None and (cluster_time is None or own["clusterTime"] > cluster_time["clusterTime"]):
                cluster_time = own
        if cluster_time is not None and wire_version >= _CLUSTER_TIME_MIN_WIRE_VERSION:
            body["$clusterTime"] = cluster_time
        # A transaction's read concern goes on its first command only (already in the body). Without a session,
        # only an operation that takes a read concern can get one.
        if (
            not in_transaction
            and (session is not None or op.takes_read_concern)
            and "readConcern" not in body
        ):
            _add_read_concern(body, op, session, description, wire_version)
        if csot_on or op.takes_write_concern:
            _add_write_concern(body, op, in_transaction, csot_on)
        if "$readPreference" not in body:
            if in_transaction:
                read_preference = _transaction_read_preference(op, description, topology_type)
            else:
                read_preference = read_preference_document(op, description, topology_type)
            if read_preference is not None:
                body["$readPreference"] = read_preference
        if self._api_fields and "apiVersion" not in body:
            body.update(self._api_fields)
        if csot_on:
            _add_max_time(body, op, description)


def read_preference_document(
    op: Operation[Any], description: ServerDescription, topology_type: TopologyType
) -> dict[str, Any] | None:
    """The ``$readPreference`` to send with ``op`` to a server, per the server selection specification.

    Mongos and load balancers get it unless it is primary (commands go in OP_MSG, where every other mode
    is sent, a plain secondaryPreferred included); a direct connection to a replica set member gets
    ``primaryPreferred`` for a primary read preference so any member answers; a standalone never gets it;
    replica set members get it unless it is primary. Writes carry none.
    """
    if op.takes_write_concern and not op.has_write_stage:
        return None
    read_preference = op.read_preference
    server_type = description.server_type
    if server_type in _MONGOS_LIKE:
        if read_preference is None or read_preference.mode == 0:
            return None
        return read_preference.document
    if topology_type is _SINGLE:
        if server_type is _STANDALONE:
            return None
        if read_preference is None or read_preference.mode == 0:
            return {"mode": "primaryPreferred"}
        return read_preference.document
    if read_preference is None or read_preference.mode == 0:
        return None
    return read_preference.document


def _may_stream(conn: Connection, description: ServerDescription) -> bool:
    """Whether the server behind ``conn`` answers a getMore with an exhaust stream: MongoDB 4.2 (wire version
    8) and later (OP_MSG specification, exhaustAllowed); a mongos from 7.1 (wire version 22) only (older ones do
    not go on with the stream). Elsewhere the cursor sends ordinary getMores, as the
    find/getMore/killCursors specification allows."""
    wire_version = conn.max_wire_version
    if description.server_type is ServerType.Mongos:
        return wire_version >= _MONGOS_EXHAUST_MIN_WIRE_VERSION
    return wire_version >= _EXHAUST_MIN_WIRE_VERSION


def _add_read_concern(
    body: dict[str, Any],
    op: Operation[Any],
    session: OperationSession | None,
    description: ServerDescription,
    wire_version: int,
) -> None:
    """The read concern outside a transaction: a snapshot session's on every command but getMore and
    killCursors; a read's own, with the causally consistent session's ``afterClusterTime``; and for the
    writes that take one, ``afterClusterTime`` alone in a causally consistent session."""
    if session is not None and session.options.snapshot:
        standalone = description.server_type is ServerType.Standalone
        if wire_version < _SNAPSHOT_MIN_WIRE_VERSION:
            raise ConfigurationError("Snapshot reads require MongoDB 5.0 or later")
        if op.command_name not in _NO_SNAPSHOT_COMMANDS:
            body["readConcern"] = session.read_concern_for(None, standalone=standalone)
        return
    if op.takes_read_concern:
        read_concern = op.read_concern
        document = read_concern.document if read_concern is not None else None
        if session is not None:
            standalone = description.server_type is ServerType.Standalone
            document = session.read_concern_for(document, standalone=standalone)
        if document:
            body["readConcern"] = document
        return
    if (
        session is not None
        and description.server_type is not ServerType.Standalone
        and op.command_name in _CAUSAL_WRITE_COMMANDS
        and not op.is_user_command
    ):
        after = session.after_cluster_time()
        if after is not None:
            body["readConcern"] = {"afterClusterTime": after}


def _add_write_concern(body: dict[str, Any], op: Operation[Any], in_transaction: bool, csot_on: bool) -> None:
    """The operation's write concern (none inside a transaction: the transaction's goes on commit and
    abort); under CSOT (``csot_on``: a deadline is in force) without ``wtimeout``, which ``timeoutMS`` replaces (a caller's own command document
    is sent as it is)."""
    if op.takes_write_concern and "writeConcern" not in body and not in_transaction:
        write_concern = op.write_concern
        if write_concern is not None and not write_concern.is_server_default:
            body["writeConcern"] = write_concern.document
    if not csot_on:
        return
    concern = body.get("writeConcern")
    if isinstance(concern, Mapping) and "wtimeout" in concern and not op.is_user_command:
        concern = {key: value for key, value in concern.items() if key != "wtimeout"}
        if concern:
            body["writeConcern"] = concern
        else:
            del body["writeConcern"]


def _transaction_read_preference(
    op: Operation[Any], description: ServerDescription, topology_type: TopologyType
) -> dict[str, Any] | None:
    """A transaction reads from the primary: only a direct connection to a replica set member is told."""
    if (
        not op.takes_write_concern
        and topology_type is TopologyType.Single
        and description.server_type is not ServerType.Standalone
    ):
        return {"mode": "primaryPreferred"}
    return None


def _add_max_time(body: dict[str, Any], op: Operation[Any], description: ServerDescription) -> None:
    """``maxTimeMS`` from the CSOT deadline, per the command's policy; computed even when none is sent, so
    that too little time left fails before anything is written."""
    policy = csot.max_time_policy()
    if policy == "send" and op.command_name == "getMore":
        # A getMore never takes the operation's maxTimeMS; an awaitData one's maxAwaitTimeMS is capped.
        policy = "cap"
    max_time_ms = csot.max_time_ms_for(description.min_round_trip_time)
    if max_time_ms is None or policy == "omit":
        return
    if policy == "send":
        # timeoutMS replaces the deprecated maxTimeMS option.
        body["maxTimeMS"] = max_time_ms
    elif "maxTimeMS" in body:
        body["maxTimeMS"] = min(body["maxTimeMS"], max_time_ms)
