"""``commitTransaction`` and ``abortTransaction``: the two commands that end a transaction.

Both run on ``admin`` and are retryable writes even when ``retryWrites`` is off (the executor retries them
once). Their bodies come from the session's transaction state, which decides the write concern: a commit
attempted again, by the executor or by the application, asks for ``w: "majority"``.
"""

from __future__ import annotations

from typing import Any, Protocol

from mongio.operations.base import Command, ConnectionContext, Operation, check_write_concern_reply

__all__ = ["AbortTransaction", "CommitTransaction", "TransactionCommands"]


class TransactionCommands(Protocol):
    """What the operations need of a session's transaction state."""

    def commit_command(self, txn_number: int) -> dict[str, Any]: ...

    def abort_command(self, txn_number: int) -> dict[str, Any]: ...

    def record_commit_failure(self, *, retryable_overload: bool) -> None: ...


class _TransactionCommand(Operation[dict[str, Any]]):
    takes_write_concern = True

    def __init__(self, transaction: TransactionCommands, txn_number: int) -> None:
        super().__init__("admin")
        self._transaction = transaction
        self._txn_number = txn_number

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
        check_write_concern_reply(reply)
        return reply


class CommitTransaction(_TransactionCommand):
    """Commit the session's transaction ``txn_number``."""

    command_name = "commitTransaction"
    transaction_command = "commitTransaction"

    def build(self, context: ConnectionContext) -> Command:
        return Command(self._transaction.commit_command(self._txn_number))

    def retrying(self, *, after_overload: bool) -> None:
        self._transaction.record_commit_failure(retryable_overload=after_overload)


class AbortTransaction(_TransactionCommand):
    """Abort the session's transaction ``txn_number``."""

    command_name = "abortTransaction"
    transaction_command = "abortTransaction"

    def build(self, context: ConnectionContext) -> Command:
        return Command(self._transaction.abort_command(self._txn_number))
