"""``ClientSession``: a logical session, for causal consistency and snapshot reads (transactions come later).

Made by :meth:`mongio.client.MongoClient.start_session`::

    async with client.start_session() as session:
        await coll.insert_one({"x": 1}, session=session)
        doc = await coll.find_one({"x": 1}, session=session)  # reads its own write

A session takes its server session (the ``lsid`` the server knows it by) from the client's pool the first
time it sends a command, and gives it back when it ends. A session is bound to the client that made it and
must not be used by two operations at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mongio.bson.timestamp import Timestamp
from mongio.errors import InvalidOperation
from mongio.sessions.cluster_time import ClusterClock, greater_operation_time
from mongio.sessions.server_session import ServerSession
from mongio.sessions.transaction_state import TransactionOptions

if TYPE_CHECKING:
    from mongio.client import MongoClient

__all__ = ["ClientSession", "SessionOptions"]


class SessionOptions:
    """The options of a session: ``causal_consistency`` (default True unless ``snapshot``), ``snapshot``,
    ``default_transaction_options`` and ``default_timeout_ms`` (the ``timeoutMS`` of its operations when
    none is in force, in place of the client's)."""

    __slots__ = ("_causal_consistency", "_default_timeout_ms", "_default_transaction_options", "_snapshot")

    def __init__(
        self,
        causal_consistency: bool | None = None,
        default_transaction_options: TransactionOptions | None = None,
        snapshot: bool | None = False,
        default_timeout_ms: float | None = None,
    ) -> None:
        if default_timeout_ms is not None and default_timeout_ms < 0:
            raise ValueError(f"default_timeout_ms must be non-negative, not {default_timeout_ms}")
        self._default_timeout_ms = default_timeout_ms
        snapshot = bool(snapshot)
        if snapshot and causal_consistency:
            raise InvalidOperation("a session cannot be both causally consistent and a snapshot session")
        self._causal_consistency = (not snapshot) if causal_consistency is None else bool(causal_consistency)
        self._default_transaction_options = default_transaction_options
        self._snapshot = snapshot

    @property
    def causal_consistency(self) -> bool:
        return self._causal_consistency

    @property
    def default_transaction_options(self) -> TransactionOptions | None:
        return self._default_transaction_options

    @property
    def snapshot(self) -> bool:
        return self._snapshot

    @property
    def default_timeout_ms(self) -> float | None:
        return self._default_timeout_ms


class ClientSession:
    """A logical session of one client. Use it as ``async with client.start_session() as s:`` or end it
    with ``await s.end_session()``; pass it to operations as ``session=s``."""

    def __init__(self, client: MongoClient, options: SessionOptions, *, implicit: bool = False) -> None:
        self._client = client
        self._options = options
        self._implicit = implicit
        self._server_session: ServerSession | None = None
        self._ended = False
        self._clock = ClusterClock()
        self._operation_time: Timestamp | None = None
        self._snapshot_time: Timestamp | None = None

    def __repr__(self) -> str:
        state = "ended" if self._ended else "active"
        kind = "implicit" if self._implicit else "explicit"
        return f"<ClientSession {kind} {state} id={self.session_id if self._server_session else None}>"

    # -- what the application reads --------------------------------------------------------------------------

    @property
    def client(self) -> MongoClient:
        """The client this session belongs to."""
        return self._client

    @property
    def options(self) -> SessionOptions:
        return self._options

    @property
    def implicit(self) -> bool:
        """True for a session the driver made for an operation or a cursor (never shown to the application)."""
        return self._implicit

    @property
    def has_ended(self) -> bool:
        return self._ended

    @property
    def session_id(self) -> Mapping[str, Any]:
        """The ``lsid`` document; taking it gives the session its server session if it had none yet."""
        return self._checked_server_session().session_id

    @property
    def cluster_time(self) -> Mapping[str, Any] | None:
        """The highest ``$clusterTime`` this session has seen."""
        return self._clock.cluster_time

    @property
    def operation_time(self) -> Timestamp | None:
        """The ``operationTime`` of the latest reply in this session (causal consistency waits for it)."""
        return self._operation_time

    @property
    def in_transaction(self) -> bool:
        return False

    def advance_cluster_time(self, cluster_time: Mapping[str, Any]) -> None:
        """Raise this session's cluster time (e.g. to the ``cluster_time`` of another session)."""
        if not isinstance(cluster_time, Mapping):
            raise TypeError(
                "cluster_time must be a mapping like {'clusterTime': Timestamp, 'signature': ...}"
            )
        if not isinstance(cluster_time.get("clusterTime"), Timestamp):
            raise ValueError("cluster_time must have a Timestamp 'clusterTime'")
        self._clock.advance(cluster_time)

    def advance_operation_time(self, operation_time: Timestamp) -> None:
        """Raise this session's operation time (e.g. to the ``operation_time`` of another session)."""
        if not isinstance(operation_time, Timestamp):
            raise TypeError("operation_time must be a Timestamp")
        self._operation_time = greater_operation_time(self._operation_time, operation_time)

    # -- transactions (not yet) -----------------------------------------------------------------------------

    def start_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Transactions are not supported yet by this version of mongio."""
        raise InvalidOperation("transactions are not yet supported by mongio; run the operations without one")

    async def with_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Transactions are not supported yet by this version of mongio."""
        raise InvalidOperation("transactions are not yet supported by mongio; run the operations without one")

    # -- ending ------------------------------------------------------------------------------------------

    async def end_session(self) -> None:
        """End the session: its server session goes back to the client's pool. Ending twice is harmless."""
        if self._ended:
            return
        self._ended = True
        server_session, self._server_session = self._server_session, None
        if server_session is not None:
            self._client._executor.release_server_session(server_session)

    async def __aenter__(self) -> ClientSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.end_session()

    # -- for the executor ----------------------------------------------------------------------------------

    def _check_usable(self, client: object) -> None:
        if self._ended:
            raise InvalidOperation(
                "this session has ended (end_session() was called or its async with block exited); "
                "start a new one with client.start_session()"
            )
        if client is not self._client:
            raise InvalidOperation(
                f"this session was started by another client ({self._client!r}); a session can only be "
                "used with the client that created it"
            )

    def _checked_server_session(self) -> ServerSession:
        if self._ended:
            raise InvalidOperation("this session has ended; start a new one with client.start_session()")
        if self._server_session is None:
            self._server_session = self._client._executor.acquire_server_session()
        return self._server_session

    @property
    def _causal(self) -> bool:
        return self._options.causal_consistency

    @property
    def _snapshot(self) -> bool:
        return self._options.snapshot

    def _advance_from_reply(self, reply: Mapping[str, Any]) -> None:
        self._clock.advance_from_reply(reply)
        operation_time = reply.get("operationTime")
        if isinstance(operation_time, Timestamp):
            self._operation_time = greater_operation_time(self._operation_time, operation_time)
