"""``Database.command`` / ``run_command`` and ``run_cursor_command``: the user's command, sent as given.

Per the run-command spec these never retry and never get a read or write concern added (whatever the user
puts in the command is sent); the executor still adds session fields, ``$readPreference`` and ``$db``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.errors import InvalidOperation
from mongio.operations.base import Command, ConnectionContext, CursorState, Operation, parse_cursor

if TYPE_CHECKING:
    from mongio.options.read_preference import _ServerMode

__all__ = ["RunCommand", "RunCursorCommand", "command_document"]


def command_document(command: str | Mapping[str, Any], value: Any = 1, **kwargs: Any) -> dict[str, Any]:
    """The command as PyMongo's ``Database.command`` takes it: a name (``"ping"`` -> ``{"ping": 1}``, with
    ``value`` and ``kwargs`` added) or a whole document (its first key is the command name)."""
    if isinstance(command, str):
        document: dict[str, Any] = {command: value}
    elif isinstance(command, Mapping):
        if not command:
            raise InvalidOperation("the command document is empty")
        document = dict(command)
    else:
        raise TypeError(f"command must be a str or a mapping, not {type(command).__name__}")
    document.update(kwargs)
    return document


class RunCommand(Operation[dict[str, Any]]):
    """Run the user's command document on ``database``; returns the reply."""

    is_user_command = True

    def __init__(
        self,
        database: str,
        command: str | Mapping[str, Any],
        value: Any = 1,
        *,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(database, read_preference=read_preference, codec_options=codec_options)
        self._body = command_document(command, value, **kwargs)
        self.command_name = next(iter(self._body))

    def build(self, context: ConnectionContext) -> Command:
        return Command(dict(self._body))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
        return reply

    def command_flag(self, name: str) -> bool:
        return bool(self._body.get(name))


class RunCursorCommand(RunCommand):
    """``run_cursor_command``: a command whose reply is a cursor (``find``, ``aggregate``, ``listX``...).

    ``batch_size``, ``max_await_time_ms`` and ``comment`` are kept for the cursor's ``getMore`` commands.
    """

    def __init__(
        self,
        database: str,
        command: str | Mapping[str, Any],
        value: Any = 1,
        *,
        batch_size: int = 0,
        max_await_time_ms: int | None = None,
        comment: Any = None,
        read_preference: _ServerMode | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            database, command, value, read_preference=read_preference, codec_options=codec_options, **kwargs
        )
        self.batch_size = batch_size
        self.max_await_time_ms = max_await_time_ms
        self.comment = comment if comment is not None else self._body.get("comment")

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:  # type: ignore[override]
        return parse_cursor(reply)
