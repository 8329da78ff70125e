"""The command monitoring events of one command: started, then succeeded or failed, published from here.

The executor makes a :class:`CommandEvents` for a command only when the client publishes events (a listener
or the command logger is on), just before sending it; the object keeps what every event of that command
repeats (its name, database, request and operation ids, the connection and server it went to) and the time
it started, so each event is one call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.events.command import CommandPublisher, is_sensitive

if TYPE_CHECKING:
    from mongio.connection.connection import Connection
    from mongio.operations.base import DocumentSequence
    from mongio.topology.server_description import Address

__all__ = ["CommandEvents"]


class CommandEvents:
    """The events of one command sent on ``conn``: call :meth:`started` once it is written, then
    :meth:`succeeded` or :meth:`failed` once, whatever ends it (a reply, an error, a cancellation)."""

    __slots__ = (
        "_address",
        "_body",
        "_command_name",
        "_conn",
        "_database",
        "_operation_id",
        "_publisher",
        "_request_id",
        "_shown",
        "_start",
    )

    def __init__(
        self,
        publisher: CommandPublisher,
        command_name: str,
        database: str,
        operation_id: int | None,
        address: Address,
        conn: Connection,
        body: dict[str, Any],
        sequences: Mapping[str, DocumentSequence] | None = None,
    ) -> None:
        self._publisher = publisher
        self._command_name = command_name
        self._database = database
        self._operation_id = operation_id
        self._address = address
        self._conn = conn
        self._body = body
        shown = body
        if sequences:
            # The started event shows the document sequences as the command's arrays.
            shown = dict(body)
            for identifier, sequence in sequences.items():
                shown[identifier] = sequence.documents
        self._shown = shown
        self._request_id = 0
        self._start = time.monotonic()

    def _context(self) -> tuple[str, str, int, int | None, Address, int, int | None, Any]:
        conn = self._conn
        return (
            self._command_name,
            self._database,
            self._request_id,
            self._operation_id,
            self._address,
            conn.id,
            conn.server_connection_id,
            conn.service_id,
        )

    def started(self, request_id: int) -> None:
        """The command, request ``request_id``, is on its way."""
        self._request_id = request_id
        self._publisher.started(self._shown, *self._context())

    def succeeded(self, reply: Mapping[str, Any]) -> None:
        sensitive = is_sensitive(self._command_name, self._body)
        self._publisher.succeeded(
            reply, time.monotonic() - self._start, *self._context(), sensitive=sensitive
        )

    def failed(self, error: BaseException) -> None:
        sensitive = is_sensitive(self._command_name, self._body)
        self._publisher.failed(error, time.monotonic() - self._start, *self._context(), sensitive=sensitive)
