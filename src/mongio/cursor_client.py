"""``CursorClient``: what a cursor or a change stream asks of the client it reads from.

:class:`~mongio.MongoClient` provides it. Besides its executor, a cursor or change stream needs a session of
its own when the caller gave none, and a way to give back what it holds when it is dropped without being
closed (from a finalizer or a cancelled task, where nothing can be awaited).

The methods are public within the package, not part of the user API: ``tests/docs/public_api.py`` lists
:data:`CURSOR_CLIENT_METHODS` among the package-internal members of ``MongoClient``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mongio.execution.executor import Executor
    from mongio.sessions.client_session import ClientSession
    from mongio.topology.server_description import Address

__all__ = ["CURSOR_CLIENT_METHODS", "CursorClient"]


class CursorClient(Protocol):
    """What a cursor or change stream needs of its client."""

    @property
    def executor(self) -> Executor:
        """The executor that runs the client's operations."""
        ...

    def implicit_session(self) -> ClientSession:
        """A session the driver makes for one cursor's or change stream's life."""
        ...

    def close_abandoned_cursor(
        self, address: Address | None, namespace: str, cursor_id: int, session: ClientSession | None
    ) -> None:
        """Give back what a dropped cursor held: its implicit ``session`` at once, and its server cursor
        (``cursor_id`` on ``address``, 0 for none) to be killed later. Nothing is awaited."""
        ...


CURSOR_CLIENT_METHODS = frozenset({"implicit_session", "close_abandoned_cursor"})
