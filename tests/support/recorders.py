"""A command listener that keeps every command monitoring event, for tests to inspect what a client sent."""

from __future__ import annotations

from typing import Any, TypeVar

import anyio

from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

__all__ = ["CommandEvent", "CommandRecorder"]

CommandEvent = CommandStartedEvent | CommandSucceededEvent | CommandFailedEvent
E = TypeVar("E", CommandStartedEvent, CommandSucceededEvent, CommandFailedEvent)


class CommandRecorder(CommandListener):
    """Every started, succeeded and failed command event, in the order they were published."""

    def __init__(self) -> None:
        self.events: list[Any] = []  # CommandEvent; Any so that a test can unpack them by position
        self._signals: dict[str, anyio.Event] = {}

    def started(self, event: CommandStartedEvent) -> None:
        self.events.append(event)
        signal = self._signals.get(event.command_name)
        if signal is not None:
            signal.set()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.events.append(event)

    def failed(self, event: CommandFailedEvent) -> None:
        self.events.append(event)

    def clear(self) -> None:
        self.events.clear()

    def of(self, kind: type[E], name: str | None = None) -> list[E]:
        """The events of one kind, of the command ``name`` if given."""
        return [e for e in self.events if isinstance(e, kind) and (name is None or e.command_name == name)]

    @property
    def started_events(self) -> list[CommandStartedEvent]:
        return self.of(CommandStartedEvent)

    @property
    def succeeded_events(self) -> list[CommandSucceededEvent]:
        return self.of(CommandSucceededEvent)

    def names(self, database: str | None = None) -> list[str]:
        """The names of the commands started (on ``database`` if given), in order."""
        return [e.command_name for e in self.started_events if database is None or e.database_name == database]

    def commands(self, name: str) -> list[dict[str, Any]]:
        """The documents of the ``name`` commands started, in order."""
        return [dict(e.command) for e in self.of(CommandStartedEvent, name)]

    def last(self, name: str | None = None) -> dict[str, Any]:
        """The document of the last command started (the last ``name`` command if given)."""
        return dict(self.of(CommandStartedEvent, name)[-1].command)

    def replies(self, *names: str) -> list[dict[str, Any]]:
        """The replies of the commands that succeeded (of those names if any are given), in order."""
        return [dict(e.reply) for e in self.succeeded_events if not names or e.command_name in names]

    def failures(self, name: str) -> list[CommandFailedEvent]:
        return self.of(CommandFailedEvent, name)

    def outcomes(self, *names: str) -> list[tuple[str, str]]:
        """(event class name, command name) of every event of those commands, in order."""
        return [(type(e).__name__, e.command_name) for e in self.events if e.command_name in names]

    def signal(self, name: str) -> anyio.Event:
        """An event set when a ``name`` command starts (from now on); made on the running backend."""
        return self._signals.setdefault(name, anyio.Event())
