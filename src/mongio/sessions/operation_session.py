"""``OperationSession``: everything the executor asks of a session while it runs an operation in it.

:class:`~mongio.sessions.client_session.ClientSession` provides it. The executor (``mongio.execution``) calls
nothing else on a session: what the session adds to a command (its server session, its transaction's fields,
its read concern) and takes from a reply, whether an operation runs inside its transaction, and where a
transaction is pinned (a mongos, or a load balancer's connection), are the session's to answer.

The methods are public within the package, not part of the user API: they are not documented for users and
not compared with PyMongo's session (``tests/docs/public_api.py`` lists :data:`EXECUTOR_METHODS` among the
package-internal members).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mongio.bson.timestamp import Timestamp
    from mongio.operations.base import Operation
    from mongio.sessions.client_session import SessionOptions
    from mongio.sessions.server_session import ServerSession
    from mongio.topology.server_description import Address

__all__ = ["EXECUTOR_METHODS", "OperationSession"]


class OperationSession(Protocol):
    """What the executor needs of the session an operation runs in, in the order of an operation's life."""

    @property
    def options(self) -> SessionOptions:
        """The session's options (``snapshot``, ``default_timeout_ms``)."""
        ...

    @property
    def implicit(self) -> bool:
        """Whether the driver made the session for one operation or cursor (the caller did not pass it)."""
        ...

    @property
    def cluster_time(self) -> Mapping[str, Any] | None:
        """The greatest ``$clusterTime`` the session has seen."""
        ...

    # -- before the first attempt --------------------------------------------------------------------------

    def check_usable(self, client: object) -> None:
        """Raise unless an operation of ``client`` may run in the session now (not ended, this client's, no
        timeout of its own inside ``with_transaction``); binds the session to the running event loop."""
        ...

    def begin_operation(self, op: Operation[Any]) -> bool:
        """Whether ``op`` (neither commit nor abort) runs inside the session's transaction."""
        ...

    def transaction_server(self) -> Address | None:
        """The mongos a sharded transaction is pinned to, once its first command chose one."""
        ...

    # -- each attempt -----------------------------------------------------------------------------------------

    def pinned_connection_from(self, pool: object) -> Any:
        """A load-balanced transaction's connection when it belongs to ``pool``, else ``None``."""
        ...

    def holds(self, conn: object) -> bool:
        """Whether ``conn`` is the session's pinned connection (the executor must not check it in)."""
        ...

    def checked_server_session(self) -> ServerSession:
        """The server session the command carries (taken from the client's pool at the first command)."""
        ...

    def transaction_fields(self) -> dict[str, Any]:
        """What a command inside the transaction carries besides ``lsid``."""
        ...

    def pin_transaction(self, address: Address | None, pool: Any, conn: Any) -> None:
        """Pin the transaction to the mongos at ``address`` or to ``conn`` of ``pool``, unless pinned already."""
        ...

    def read_concern_for(self, document: dict[str, Any] | None, *, standalone: bool) -> dict[str, Any] | None:
        """The read concern of a read outside a transaction: ``document`` with the session's own part."""
        ...

    def after_cluster_time(self) -> Timestamp | None:
        """The ``afterClusterTime`` a causally consistent session's writes wait for (``None``: none)."""
        ...

    def take_from_reply(self, reply: Mapping[str, Any], *, in_transaction: bool) -> None:
        """What a reply tells the session (cluster and operation times, snapshot time, recovery token)."""
        ...

    # -- after a failed attempt, and at the end -----------------------------------------------------------

    def has_pinned_connection(self) -> bool:
        """Whether a load-balanced transaction holds a connection."""
        ...

    def unpin(self) -> None:
        """Forget the transaction's mongos and give its connection back."""
        ...

    def transaction_sent(self) -> None:
        """The operation whose command started the transaction is over (after all its attempts)."""
        ...

    # -- for the operation's tracing span --------------------------------------------------------------------

    def transaction_trace(self) -> Any:
        """The tracing span of the transaction under way (the parent of its operations' spans), or ``None``."""
        ...


# The methods of the contract (its properties are the session's user API as well).
EXECUTOR_METHODS: frozenset[str] = frozenset(
    name for name, value in vars(OperationSession).items() if callable(value) and not name.startswith("_")
)
