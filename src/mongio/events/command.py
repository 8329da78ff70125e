"""Command monitoring: started, succeeded and failed events, their listener, and the command log messages.

Events use PyMongo's names and fields (``pymongo.monitoring``), so listeners port by changing the import.
Sensitive commands (authentication, user management, and a ``hello`` carrying ``speculativeAuthenticate``)
are shown with an empty command and an empty reply, as the command monitoring specification requires; when
the server answers one with an error, the failure shows only the error's ``code``, ``codeName`` and
``errorLabels``. A failure the driver detected itself (a network error) carries nothing from the server and
is shown whole.

Log messages go to the ``mongio.command`` logger at ``DEBUG`` level; their ``command`` and ``reply`` fields
are relaxed Extended JSON, cut to the maximum document length (see :mod:`mongio.events.logs`) followed by
``...``. The ``failure`` field is the error's text (a server's reply in it cut the same way), or for a
sensitive command's server error the redacted document itself. Nothing is built when nobody listens and the
logger is off: check :attr:`CommandPublisher.enabled` first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from mongio.events.logs import (
    DEFAULT_MAX_DOCUMENT_LENGTH,
    LogMessage,
    document_text,
    format_error,
    server_reply,
)

__all__ = [
    "COMMAND_LOGGER",
    "COMMAND_LOGGER_NAME",
    "DEFAULT_MAX_DOCUMENT_LENGTH",
    "SENSITIVE_COMMANDS",
    "CommandFailedEvent",
    "CommandListener",
    "CommandPublisher",
    "CommandStartedEvent",
    "CommandSucceededEvent",
    "is_sensitive",
    "redacted_failure",
]

COMMAND_LOGGER_NAME = "mongio.command"
COMMAND_LOGGER = logging.getLogger(COMMAND_LOGGER_NAME)
_DEBUG = logging.DEBUG
_EVENTS_LOGGER = logging.getLogger("mongio.events")

SENSITIVE_COMMANDS = frozenset(
    {
        "authenticate",
        "saslstart",
        "saslcontinue",
        "getnonce",
        "createuser",
        "updateuser",
        "copydbgetnonce",
        "copydbsaslstart",
        "copydb",
    }
)
_HELLO_COMMANDS = frozenset({"hello", "ismaster"})
# What a sensitive command's server error keeps: nothing in these can carry credentials.
_UNREDACTED_FAILURE_FIELDS = ("code", "codeName", "errorLabels")

Address = tuple[str, int | None]


def is_sensitive(command_name: str, command: Mapping[str, Any]) -> bool:
    """Whether the command's body and reply must not be shown to listeners or in logs."""
    name = command_name.lower()
    if name in SENSITIVE_COMMANDS:
        return True
    return name in _HELLO_COMMANDS and "speculativeAuthenticate" in command


def redacted_failure(reply: Mapping[str, Any]) -> dict[str, Any]:
    """A sensitive command's error reply with every field but ``code``, ``codeName`` and ``errorLabels``
    removed."""
    return {field: reply[field] for field in _UNREDACTED_FAILURE_FIELDS if field in reply}


class _CommandEvent:
    __slots__ = (
        "_address",
        "_command_name",
        "_database_name",
        "_operation_id",
        "_request_id",
        "_server_connection_id",
        "_service_id",
    )

    def __init__(
        self,
        command_name: str,
        request_id: int,
        connection_id: Address,
        operation_id: int | None,
        service_id: Any = None,
        database_name: str = "",
        server_connection_id: int | None = None,
    ) -> None:
        self._command_name = command_name
        self._request_id = request_id
        self._address = connection_id
        self._operation_id = operation_id
        self._service_id = service_id
        self._database_name = database_name
        self._server_connection_id = server_connection_id

    @property
    def command_name(self) -> str:
        """The command's name, e.g. ``"find"``."""
        return self._command_name

    @property
    def request_id(self) -> int:
        """The request id of the message that carried the command."""
        return self._request_id

    @property
    def connection_id(self) -> Address:
        """The address of the server the command went to."""
        return self._address

    @property
    def server_connection_id(self) -> int | None:
        """The server's id for the connection (``connectionId`` of its hello reply)."""
        return self._server_connection_id

    @property
    def operation_id(self) -> int | None:
        """The same for every command of one operation (its retries, its batches)."""
        return self._operation_id

    @property
    def service_id(self) -> Any:
        """The ``serviceId`` of the load-balanced service, else ``None``."""
        return self._service_id

    @property
    def database_name(self) -> str:
        """The database the command ran against."""
        return self._database_name


class CommandStartedEvent(_CommandEvent):
    """A command is about to be sent. ``command`` includes ``$db`` and the document sequences as arrays."""

    __slots__ = ("_command",)

    def __init__(
        self,
        command: Mapping[str, Any],
        database_name: str,
        request_id: int,
        connection_id: Address,
        operation_id: int | None,
        service_id: Any = None,
        server_connection_id: int | None = None,
        *,
        command_name: str | None = None,
    ) -> None:
        name = command_name if command_name is not None else next(iter(command), "")
        super().__init__(
            name, request_id, connection_id, operation_id, service_id, database_name, server_connection_id
        )
        self._command: Mapping[str, Any] = {} if is_sensitive(name, command) else command

    @property
    def command(self) -> Mapping[str, Any]:
        """The command document sent (sensitive commands are redacted to an empty document)."""
        return self._command

    def __repr__(self) -> str:
        return (
            f"<CommandStartedEvent {self.command_name} on {self.database_name!r} request_id={self.request_id} "
            f"operation_id={self.operation_id} server={self.connection_id}>"
        )


class CommandSucceededEvent(_CommandEvent):
    """A command's reply arrived with ``ok: 1`` (write errors inside it still count as success)."""

    __slots__ = ("_duration_micros", "_reply")

    def __init__(
        self,
        duration: float,
        reply: Mapping[str, Any],
        command_name: str,
        request_id: int,
        connection_id: Address,
        operation_id: int | None,
        service_id: Any = None,
        database_name: str = "",
        server_connection_id: int | None = None,
        *,
        sensitive: bool = False,
    ) -> None:
        super().__init__(
            command_name,
            request_id,
            connection_id,
            operation_id,
            service_id,
            database_name,
            server_connection_id,
        )
        self._duration_micros = int(duration * 1_000_000)
        self._reply: Mapping[str, Any] = (
            {} if sensitive or command_name.lower() in SENSITIVE_COMMANDS else reply
        )

    @property
    def duration_micros(self) -> int:
        """How long the command took, in microseconds."""
        return self._duration_micros

    @property
    def reply(self) -> Mapping[str, Any]:
        """The server's reply (redacted to an empty document for sensitive commands)."""
        return self._reply

    def __repr__(self) -> str:
        return (
            f"<CommandSucceededEvent {self.command_name} request_id={self.request_id} "
            f"duration_micros={self.duration_micros}>"
        )


class CommandFailedEvent(_CommandEvent):
    """A command failed: the server answered ``ok: 0``, or the exchange broke.

    ``sensitive=True`` says ``failure`` is a sensitive command's server reply: only its ``code``,
    ``codeName`` and ``errorLabels`` are kept."""

    __slots__ = ("_duration_micros", "_failure")

    def __init__(
        self,
        duration: float,
        failure: Mapping[str, Any],
        command_name: str,
        request_id: int,
        connection_id: Address,
        operation_id: int | None,
        service_id: Any = None,
        database_name: str = "",
        server_connection_id: int | None = None,
        *,
        sensitive: bool = False,
    ) -> None:
        super().__init__(
            command_name,
            request_id,
            connection_id,
            operation_id,
            service_id,
            database_name,
            server_connection_id,
        )
        self._duration_micros = int(duration * 1_000_000)
        self._failure: Mapping[str, Any] = redacted_failure(failure) if sensitive else failure

    @property
    def duration_micros(self) -> int:
        """How long the command took until it failed, in microseconds."""
        return self._duration_micros

    @property
    def failure(self) -> Mapping[str, Any]:
        """The server's error reply (redacted for a sensitive command), or ``{"errmsg": ..., "errtype": ...}``
        for a client-side error."""
        return self._failure

    def __repr__(self) -> str:
        return (
            f"<CommandFailedEvent {self.command_name} request_id={self.request_id} "
            f"duration_micros={self.duration_micros} failure={self.failure!r}>"
        )


class CommandListener:
    """Base class for command listeners: every method does nothing until overridden.

    Methods run synchronously in the task that runs the command: keep them quick and non-blocking. An
    exception a listener raises is logged (logger ``mongio.events``) and otherwise ignored.
    """

    def started(self, event: CommandStartedEvent) -> None:
        """A command is about to be sent."""

    def succeeded(self, event: CommandSucceededEvent) -> None:
        """A command succeeded."""

    def failed(self, event: CommandFailedEvent) -> None:
        """A command failed."""


def failure_document(error: BaseException) -> dict[str, Any]:
    """What a failed event shows of ``error``: the server's reply when there is one."""
    reply = server_reply(error)
    if reply is not None:
        return dict(reply)
    return {"errmsg": str(error), "errtype": type(error).__name__}


def _deliver(listeners: tuple[CommandListener, ...], method: str, event: object) -> None:
    for listener in listeners:
        try:
            getattr(listener, method)(event)
        except Exception:
            _EVENTS_LOGGER.exception("command listener %r failed in %s", listener, method)


class CommandPublisher:
    """Delivers a client's command events and command log messages. The executor checks :attr:`enabled`
    before gathering anything to publish.

    ``max_document_length`` bounds the documents in log messages; ``None`` (the default) takes the
    ``MONGODB_LOG_MAX_DOCUMENT_LENGTH`` environment variable, else :data:`DEFAULT_MAX_DOCUMENT_LENGTH`.
    """

    __slots__ = ("_listeners", "max_document_length")

    def __init__(
        self,
        listeners: Iterable[CommandListener] = (),
        max_document_length: int | None = None,
    ) -> None:
        if max_document_length is not None and max_document_length <= 0:
            raise ValueError(f"max_document_length must be a positive integer, not {max_document_length!r}")
        self._listeners = tuple(listeners)
        self.max_document_length = max_document_length

    @property
    def listeners(self) -> tuple[CommandListener, ...]:
        return self._listeners

    @property
    def enabled(self) -> bool:
        """True when an event or a log message would be delivered now."""
        return bool(self._listeners) or COMMAND_LOGGER.isEnabledFor(_DEBUG)

    def _fields(
        self,
        message: str,
        command_name: str,
        database_name: str,
        request_id: int,
        operation_id: int | None,
        address: Address,
        connection_id: int,
        server_connection_id: int | None,
        service_id: Any,
    ) -> dict[str, Any]:
        host, port = address
        fields: dict[str, Any] = {
            "message": message,
            "commandName": command_name,
            "databaseName": database_name,
            "requestId": request_id,
            "driverConnectionId": connection_id,
            "serverHost": host,
        }
        if operation_id is not None:
            fields["operationId"] = operation_id
        if port is not None:
            fields["serverPort"] = port
        if server_connection_id is not None:
            fields["serverConnectionId"] = server_connection_id
        if service_id is not None:
            fields["serviceId"] = str(service_id)
        return fields

    @staticmethod
    def _where(fields: Mapping[str, Any]) -> str:
        """The connection and ids part of the specification's unstructured text; absent values leave out
        their segment."""
        text = f"using a connection with driver-generated ID {fields['driverConnectionId']}"
        if "serverConnectionId" in fields:
            text += f" and server-generated ID {fields['serverConnectionId']}"
        text += f" to {fields['serverHost']}" + (f":{fields['serverPort']}" if "serverPort" in fields else "")
        if "serviceId" in fields:
            text += f" with service ID {fields['serviceId']}"
        text += f". The requestID is {fields['requestId']}"
        if "operationId" in fields:
            text += f" and the operation ID is {fields['operationId']}"
        return text

    def started(
        self,
        command: Mapping[str, Any],
        command_name: str,
        database_name: str,
        request_id: int,
        operation_id: int | None,
        address: Address,
        connection_id: int,
        server_connection_id: int | None,
        service_id: Any,
    ) -> None:
        if self._listeners:
            event = CommandStartedEvent(
                command,
                database_name,
                request_id,
                address,
                operation_id,
                service_id,
                server_connection_id,
                command_name=command_name,
            )
            _deliver(self._listeners, "started", event)
        if COMMAND_LOGGER.isEnabledFor(_DEBUG):
            fields = self._fields(
                "Command started",
                command_name,
                database_name,
                request_id,
                operation_id,
                address,
                connection_id,
                server_connection_id,
                service_id,
            )
            shown = {} if is_sensitive(command_name, command) else command
            fields["command"] = document_text(shown, self.max_document_length)
            text = (
                f'Command "{command_name}" started on database "{database_name}" {self._where(fields)}. '
                f"Command: {fields['command']}"
            )
            COMMAND_LOGGER.debug(LogMessage("command", fields, text))

    def succeeded(
        self,
        reply: Mapping[str, Any],
        duration: float,
        command_name: str,
        database_name: str,
        request_id: int,
        operation_id: int | None,
        address: Address,
        connection_id: int,
        server_connection_id: int | None,
        service_id: Any,
        *,
        sensitive: bool = False,
    ) -> None:
        if self._listeners:
            event = CommandSucceededEvent(
                duration,
                reply,
                command_name,
                request_id,
                address,
                operation_id,
                service_id,
                database_name,
                server_connection_id,
                sensitive=sensitive,
            )
            _deliver(self._listeners, "succeeded", event)
        if COMMAND_LOGGER.isEnabledFor(_DEBUG):
            fields = self._fields(
                "Command succeeded",
                command_name,
                database_name,
                request_id,
                operation_id,
                address,
                connection_id,
                server_connection_id,
                service_id,
            )
            ms = duration * 1000.0
            fields["durationMS"] = ms
            shown = {} if sensitive or command_name.lower() in SENSITIVE_COMMANDS else reply
            fields["reply"] = document_text(shown, self.max_document_length)
            text = (
                f'Command "{command_name}" succeeded on database "{database_name}" in {ms:g} ms '
                f"{self._where(fields)}. Command reply: {fields['reply']}"
            )
            COMMAND_LOGGER.debug(LogMessage("command", fields, text))

    def failed(
        self,
        error: BaseException,
        duration: float,
        command_name: str,
        database_name: str,
        request_id: int,
        operation_id: int | None,
        address: Address,
        connection_id: int,
        server_connection_id: int | None,
        service_id: Any,
        *,
        sensitive: bool = False,
    ) -> None:
        sensitive = sensitive or command_name.lower() in SENSITIVE_COMMANDS
        # Only what the server said can carry secrets: a failure the driver detected is shown whole.
        reply = server_reply(error)
        redact = sensitive and reply is not None
        if self._listeners:
            event = CommandFailedEvent(
                duration,
                failure_document(error),
                command_name,
                request_id,
                address,
                operation_id,
                service_id,
                database_name,
                server_connection_id,
                sensitive=redact,
            )
            _deliver(self._listeners, "failed", event)
        if COMMAND_LOGGER.isEnabledFor(_DEBUG):
            fields = self._fields(
                "Command failed",
                command_name,
                database_name,
                request_id,
                operation_id,
                address,
                connection_id,
                server_connection_id,
                service_id,
            )
            ms = duration * 1000.0
            fields["durationMS"] = ms
            if redact and reply is not None:
                failure: Any = redacted_failure(reply)
                shown = document_text(failure, self.max_document_length)
            else:
                failure = shown = format_error(error, self.max_document_length)
            fields["failure"] = failure
            text = (
                f'Command "{command_name}" failed on database "{database_name}" in {ms:g} ms '
                f"{self._where(fields)}. Error: {shown}"
            )
            COMMAND_LOGGER.debug(LogMessage("command", fields, text))
