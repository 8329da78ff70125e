"""``$clusterTime`` gossip and ``operationTime`` for causal consistency, as plain comparisons.

A ``$clusterTime`` document is ``{clusterTime: Timestamp, signature: {...}}``; two are compared by the
timestamp alone (seconds, then increment) and the signature travels with the winner. The client keeps the
highest one any server sent; a session keeps its own, which ``advance_cluster_time`` may also raise, and the
command carries the greater of the two. A causally consistent session also keeps the highest
``operationTime`` it has seen, to send as ``readConcern.afterClusterTime``; a snapshot session keeps the
``atClusterTime`` of its first read, to send as ``readConcern.atClusterTime``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.bson.timestamp import Timestamp, as_timestamp

__all__ = [
    "ClusterClock",
    "cluster_time_value",
    "compare_cluster_times",
    "greater_cluster_time",
    "greater_operation_time",
    "session_read_concern",
    "snapshot_time_from_reply",
]

ClusterTime = Mapping[str, Any]


def cluster_time_value(cluster_time: ClusterTime | None) -> Timestamp | None:
    """The timestamp a ``$clusterTime`` document carries, or ``None``."""
    if cluster_time is None:
        return None
    value = as_timestamp(cluster_time.get("clusterTime"))
    if value is None:
        found = type(cluster_time.get("clusterTime")).__name__
        raise TypeError(f"$clusterTime.clusterTime must be a Timestamp, not {found}")
    return value


def compare_cluster_times(a: ClusterTime | None, b: ClusterTime | None) -> int:
    """Negative, zero or positive as ``a`` is older than, as new as, or newer than ``b`` (``None`` is oldest)."""
    ta, tb = cluster_time_value(a), cluster_time_value(b)
    if ta is None or tb is None:
        return (ta is not None) - (tb is not None)
    return (ta > tb) - (ta < tb)


def greater_cluster_time(a: ClusterTime | None, b: ClusterTime | None) -> ClusterTime | None:
    """The newer of two ``$clusterTime`` documents; ``a`` when they are equal."""
    return b if compare_cluster_times(b, a) > 0 else a


def greater_operation_time(a: Timestamp | None, b: Timestamp | None) -> Timestamp | None:
    """The later of two operation times (``None`` is oldest); ``a`` when they are equal."""
    if b is None:
        return a
    if a is None or b > a:
        return b
    return a


class ClusterClock:
    """The highest ``$clusterTime`` seen, for a client or a session.

    :meth:`advance` only ever moves it forward. The client advances its clock only with ``$clusterTime``
    values read from server replies (never from SDAM monitoring replies); a session's may also be advanced
    by the application.
    """

    __slots__ = ("_cluster_time",)

    def __init__(self, cluster_time: ClusterTime | None = None) -> None:
        self._cluster_time = cluster_time

    @property
    def cluster_time(self) -> ClusterTime | None:
        return self._cluster_time

    def advance(self, cluster_time: ClusterTime | None) -> bool:
        """Take ``cluster_time`` if it is newer; return whether it was."""
        if cluster_time is None:
            return False
        current = self._cluster_time
        if current is not None:
            new, old = cluster_time.get("clusterTime"), current.get("clusterTime")
            if type(new) is Timestamp and type(old) is Timestamp:
                # The usual case (every reply carries one): both decoded by mongio, compared directly.
                if new > old:
                    self._cluster_time = cluster_time
                    return True
                return False
        if compare_cluster_times(cluster_time, current) > 0:
            self._cluster_time = cluster_time
            return True
        return False

    def advance_from_reply(self, reply: Mapping[str, Any]) -> bool:
        """Advance with the reply's ``$clusterTime``, if it has one."""
        cluster_time = reply.get("$clusterTime")
        if cluster_time is None or not (type(cluster_time) is dict or isinstance(cluster_time, Mapping)):
            return False
        return self.advance(cluster_time)

    def __repr__(self) -> str:
        return f"ClusterClock({self._cluster_time!r})"


def session_read_concern(
    read_concern: Mapping[str, Any] | None,
    *,
    causal_consistency: bool = False,
    operation_time: Timestamp | None = None,
    snapshot: bool = False,
    snapshot_time: Timestamp | None = None,
) -> dict[str, Any] | None:
    """The ``readConcern`` to send for an operation in a session, outside a transaction (``None``: send none).

    ``read_concern`` is the operation's own document (empty or ``None`` for the server default). A causally
    consistent session with an ``operation_time`` adds ``afterClusterTime`` (sending a read concern even when
    it would otherwise be omitted, and no ``level`` unless the operation set one). A snapshot session sends
    ``level: snapshot`` on every command, with ``atClusterTime`` once its snapshot time is known. Not for
    ``runCommand``, which never gets a read concern added.
    """
    if snapshot:
        document: dict[str, Any] = {"level": "snapshot"}
        if snapshot_time is not None:
            document["atClusterTime"] = snapshot_time
        return document
    document = dict(read_concern or {})
    if causal_consistency and operation_time is not None:
        document["afterClusterTime"] = operation_time
    return document or None


def snapshot_time_from_reply(reply: Mapping[str, Any]) -> Timestamp | None:
    """The ``atClusterTime`` of a snapshot read's reply: in ``cursor`` for find/aggregate, at top level for
    distinct."""
    cursor = reply.get("cursor")
    if isinstance(cursor, Mapping):
        in_cursor = as_timestamp(cursor.get("atClusterTime"))
        if in_cursor is not None:
            return in_cursor
    return as_timestamp(reply.get("atClusterTime"))
