"""``expectEvents`` and ``expectLogMessages``: what a client was seen to publish, against what a test expects.

The runner records each client's events as the small dataclasses below (any object with the same attributes
will do), in the order they were published, and its log messages as ``LogMessage``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio

from mongio.bson.errors import BSONError
from spec_runner.unified import ejson
from spec_runner.unified.errors import MatchError, UnifiedTestError
from spec_runner.unified.matcher import EntityLookup, Matcher

# --- recorded events -------------------------------------------------------------------------------------


@dataclass
class RecordedEvent:
    """Base of the recorded events; ``NAME`` is the test format's key for the event type."""

    NAME: ClassVar[str] = ""
    FAMILY: ClassVar[str] = ""


@dataclass
class CommandStartedEvent(RecordedEvent):
    NAME: ClassVar[str] = "commandStartedEvent"
    FAMILY: ClassVar[str] = "command"
    command_name: str = ""
    database_name: str = ""
    command: Mapping[str, Any] = field(default_factory=dict)
    request_id: int = 0
    operation_id: int = 0
    server_connection_id: int | None = None
    service_id: Any = None


@dataclass
class CommandSucceededEvent(RecordedEvent):
    NAME: ClassVar[str] = "commandSucceededEvent"
    FAMILY: ClassVar[str] = "command"
    command_name: str = ""
    database_name: str = ""
    reply: Mapping[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    request_id: int = 0
    operation_id: int = 0
    server_connection_id: int | None = None
    service_id: Any = None


@dataclass
class CommandFailedEvent(RecordedEvent):
    NAME: ClassVar[str] = "commandFailedEvent"
    FAMILY: ClassVar[str] = "command"
    command_name: str = ""
    database_name: str = ""
    failure: Any = None
    duration_ms: float = 0.0
    request_id: int = 0
    operation_id: int = 0
    server_connection_id: int | None = None
    service_id: Any = None


@dataclass
class PoolCreatedEvent(RecordedEvent):
    NAME: ClassVar[str] = "poolCreatedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""


@dataclass
class PoolReadyEvent(RecordedEvent):
    NAME: ClassVar[str] = "poolReadyEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""


@dataclass
class PoolClearedEvent(RecordedEvent):
    NAME: ClassVar[str] = "poolClearedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    service_id: Any = None
    interrupt_in_use_connections: bool | None = None


@dataclass
class PoolClosedEvent(RecordedEvent):
    NAME: ClassVar[str] = "poolClosedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""


@dataclass
class ConnectionCreatedEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionCreatedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0


@dataclass
class ConnectionReadyEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionReadyEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0


@dataclass
class ConnectionClosedEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionClosedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0
    reason: str = ""


@dataclass
class ConnectionCheckOutStartedEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionCheckOutStartedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""


@dataclass
class ConnectionCheckOutFailedEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionCheckOutFailedEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    reason: str = ""


@dataclass
class ConnectionCheckedOutEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionCheckedOutEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0


@dataclass
class ConnectionCheckedInEvent(RecordedEvent):
    NAME: ClassVar[str] = "connectionCheckedInEvent"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0


@dataclass
class ConnectionPendingResponseStarted(RecordedEvent):
    NAME: ClassVar[str] = "connectionPendingResponseStarted"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0


@dataclass
class ConnectionPendingResponseSucceeded(RecordedEvent):
    NAME: ClassVar[str] = "connectionPendingResponseSucceeded"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0


@dataclass
class ConnectionPendingResponseFailed(RecordedEvent):
    NAME: ClassVar[str] = "connectionPendingResponseFailed"
    FAMILY: ClassVar[str] = "cmap"
    address: str = ""
    connection_id: int = 0
    reason: str = ""


@dataclass
class ServerDescriptionChangedEvent(RecordedEvent):
    """``previous_type``/``new_type``: the server types' names as SDAM spells them (``RSPrimary``)."""

    NAME: ClassVar[str] = "serverDescriptionChangedEvent"
    FAMILY: ClassVar[str] = "sdam"
    address: str = ""
    previous_type: str = "Unknown"
    new_type: str = "Unknown"


@dataclass
class ServerHeartbeatStartedEvent(RecordedEvent):
    NAME: ClassVar[str] = "serverHeartbeatStartedEvent"
    FAMILY: ClassVar[str] = "sdam"
    address: str = ""
    awaited: bool = False


@dataclass
class ServerHeartbeatSucceededEvent(RecordedEvent):
    NAME: ClassVar[str] = "serverHeartbeatSucceededEvent"
    FAMILY: ClassVar[str] = "sdam"
    address: str = ""
    awaited: bool = False


@dataclass
class ServerHeartbeatFailedEvent(RecordedEvent):
    NAME: ClassVar[str] = "serverHeartbeatFailedEvent"
    FAMILY: ClassVar[str] = "sdam"
    address: str = ""
    awaited: bool = False


@dataclass
class TopologyDescriptionChangedEvent(RecordedEvent):
    """``previous_type``/``new_type``: the topology types' names as SDAM spells them (``Single``)."""

    NAME: ClassVar[str] = "topologyDescriptionChangedEvent"
    FAMILY: ClassVar[str] = "sdam"
    previous_type: str = "Unknown"
    new_type: str = "Unknown"


@dataclass
class TopologyOpeningEvent(RecordedEvent):
    NAME: ClassVar[str] = "topologyOpeningEvent"
    FAMILY: ClassVar[str] = "sdam"


@dataclass
class TopologyClosedEvent(RecordedEvent):
    NAME: ClassVar[str] = "topologyClosedEvent"
    FAMILY: ClassVar[str] = "sdam"


EVENT_CLASSES: dict[str, type[RecordedEvent]] = {
    cls.NAME: cls
    for cls in (
        CommandStartedEvent,
        CommandSucceededEvent,
        CommandFailedEvent,
        PoolCreatedEvent,
        PoolReadyEvent,
        PoolClearedEvent,
        PoolClosedEvent,
        ConnectionCreatedEvent,
        ConnectionReadyEvent,
        ConnectionClosedEvent,
        ConnectionCheckOutStartedEvent,
        ConnectionCheckOutFailedEvent,
        ConnectionCheckedOutEvent,
        ConnectionCheckedInEvent,
        ConnectionPendingResponseStarted,
        ConnectionPendingResponseSucceeded,
        ConnectionPendingResponseFailed,
        ServerDescriptionChangedEvent,
        ServerHeartbeatStartedEvent,
        ServerHeartbeatSucceededEvent,
        ServerHeartbeatFailedEvent,
        TopologyDescriptionChangedEvent,
        TopologyOpeningEvent,
        TopologyClosedEvent,
    )
}
"""Event type names (the ``observeEvents`` and ``expectedEvent`` keys) to their recorded classes."""

EVENT_FAMILIES: dict[str, frozenset[str]] = {
    family: frozenset(name for name, cls in EVENT_CLASSES.items() if family == cls.FAMILY)
    for family in ("command", "cmap", "sdam")
}

# The fields an expected event of each type may assert, beside the type itself.
_ALLOWED_FIELDS: dict[str, frozenset[str]] = {
    "commandStartedEvent": frozenset(
        {"command", "commandName", "databaseName", "hasServiceId", "hasServerConnectionId"}
    ),
    "commandSucceededEvent": frozenset(
        {"reply", "commandName", "databaseName", "hasServiceId", "hasServerConnectionId"}
    ),
    "commandFailedEvent": frozenset({"commandName", "databaseName", "hasServiceId", "hasServerConnectionId"}),
    "poolClearedEvent": frozenset({"hasServiceId", "interruptInUseConnections"}),
    "connectionClosedEvent": frozenset({"reason"}),
    "connectionCheckOutFailedEvent": frozenset({"reason"}),
    "connectionPendingResponseFailed": frozenset({"reason"}),
    "serverDescriptionChangedEvent": frozenset({"previousDescription", "newDescription"}),
    "topologyDescriptionChangedEvent": frozenset({"previousDescription", "newDescription"}),
    "serverHeartbeatStartedEvent": frozenset({"awaited"}),
    "serverHeartbeatSucceededEvent": frozenset({"awaited"}),
    "serverHeartbeatFailedEvent": frozenset({"awaited"}),
}


def event_name(event: Any) -> str:
    """The test format's name for a recorded event (its ``NAME``)."""
    name = getattr(event, "NAME", None)
    if not isinstance(name, str) or not name:
        raise UnifiedTestError(f"recorded event {event!r} has no NAME")
    return name


def _has_service_id(event: Any) -> bool:
    service_id = getattr(event, "service_id", None)
    if service_id is None:
        return False
    raw = getattr(service_id, "binary", None)
    if isinstance(raw, bytes):
        return any(raw)
    return bool(str(service_id).strip("0"))


def _has_server_connection_id(event: Any) -> bool:
    value = getattr(event, "server_connection_id", None)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _expected_parts(expected: Mapping[str, Any], family: str | None) -> tuple[str, Mapping[str, Any]]:
    if not isinstance(expected, Mapping) or len(expected) != 1:
        raise UnifiedTestError(f"an expected event has exactly one key (the event type), not {expected!r}")
    ((name, assertions),) = expected.items()
    if name not in EVENT_CLASSES:
        raise UnifiedTestError(f"unknown expected event type {name!r}")
    if family is not None and name not in EVENT_FAMILIES[family]:
        raise UnifiedTestError(f"{name} is not a {family} event")
    if not isinstance(assertions, Mapping):
        raise UnifiedTestError(f"{name}: assertions must be a document, not {assertions!r}")
    unknown = set(assertions) - _ALLOWED_FIELDS.get(name, frozenset())
    if unknown:
        raise UnifiedTestError(f"{name}: unknown assertion(s) {sorted(unknown)}")
    return name, assertions


def check_event(
    expected: Mapping[str, Any],
    actual: Any,
    *,
    path: str = "event",
    family: str | None = None,
    entities: EntityLookup | None = None,
) -> None:
    """Raise ``MatchError`` unless the recorded ``actual`` event meets the ``expectedEvent`` document."""
    name, assertions = _expected_parts(expected, family)
    got = event_name(actual)
    if got != name:
        raise MatchError(path, f"expected a {name}, got a {got}: {actual!r}")
    matcher = Matcher(entities)
    if "command" in assertions:
        matcher.match(assertions["command"], actual.command, root=True, path=f"{path}.command")
    if "reply" in assertions:
        matcher.match(assertions["reply"], actual.reply, root=True, path=f"{path}.reply")
    for key, attribute in (
        ("commandName", "command_name"),
        ("databaseName", "database_name"),
        ("reason", "reason"),
    ):
        if key in assertions and getattr(actual, attribute, None) != assertions[key]:
            raise MatchError(
                f"{path}.{key}", f"expected {assertions[key]!r}, got {getattr(actual, attribute, None)!r}"
            )
    for key, attribute in (
        ("interruptInUseConnections", "interrupt_in_use_connections"),
        ("awaited", "awaited"),
    ):
        if key in assertions:
            value = getattr(actual, attribute, None)
            if value is None or bool(value) != assertions[key]:
                raise MatchError(f"{path}.{key}", f"expected {assertions[key]!r}, got {value!r}")
    if "hasServiceId" in assertions and _has_service_id(actual) != assertions["hasServiceId"]:
        raise MatchError(
            f"{path}.hasServiceId",
            f"expected {assertions['hasServiceId']}, service id is {getattr(actual, 'service_id', None)!r}",
        )
    if (
        "hasServerConnectionId" in assertions
        and _has_server_connection_id(actual) != assertions["hasServerConnectionId"]
    ):
        raise MatchError(
            f"{path}.hasServerConnectionId",
            f"expected {assertions['hasServerConnectionId']}, server connection id is "
            f"{getattr(actual, 'server_connection_id', None)!r}",
        )
    for key, attribute in (("previousDescription", "previous_type"), ("newDescription", "new_type")):
        if key in assertions:
            description = assertions[key]
            if not isinstance(description, Mapping) or set(description) - {"type"}:
                raise UnifiedTestError(f"{path}.{key}: only 'type' can be asserted, not {description!r}")
            if "type" in description and getattr(actual, attribute, None) != description["type"]:
                raise MatchError(
                    f"{path}.{key}.type",
                    f"expected {description['type']!r}, got {getattr(actual, attribute, None)!r}",
                )


def event_matches(expected: Mapping[str, Any], actual: Any, *, entities: EntityLookup | None = None) -> bool:
    """Whether ``actual`` meets ``expected`` (for ``waitForEvent`` and ``assertEventCount``)."""
    try:
        check_event(expected, actual, entities=entities)
    except MatchError:
        return False
    return True


def count_matching(
    expected: Mapping[str, Any], events: Sequence[Any], *, entities: EntityLookup | None = None
) -> int:
    """How many of ``events`` meet ``expected``."""
    _expected_parts(expected, None)
    return sum(1 for event in events if event_matches(expected, event, entities=entities))


def check_events(
    expected_for_client: Mapping[str, Any],
    observed: Sequence[Any],
    *,
    entities: EntityLookup | None = None,
) -> None:
    """Check one ``expectedEventsForClient`` against the events the client was seen to publish.

    ``observed`` holds the client's recorded events of every family (ignored commands already dropped);
    only those of the object's ``eventType`` (``command`` by default) are compared, in order.
    """
    family = expected_for_client.get("eventType", "command")
    if family not in EVENT_FAMILIES:
        raise UnifiedTestError(f"unknown eventType {family!r}")
    client = expected_for_client.get("client", "?")
    expected = list(expected_for_client["events"])
    actual = [event for event in observed if event_name(event) in EVENT_FAMILIES[family]]
    ignore_extra = bool(expected_for_client.get("ignoreExtraEvents", False))
    base = f"expectEvents[{client}, {family}]"
    if len(actual) < len(expected):
        names = [event_name(e) for e in actual]
        raise MatchError(base, f"expected {len(expected)} events, observed {len(actual)}: {names}")
    if len(actual) > len(expected) and not ignore_extra:
        extra = actual[len(expected) :]
        raise MatchError(base, f"expected {len(expected)} events, observed {len(actual)}; extra: {extra!r}")
    for index, (want, got) in enumerate(zip(expected, actual)):
        check_event(want, got, path=f"{base}[{index}]", family=family, entities=entities)


# --- log messages ----------------------------------------------------------------------------------------

LOG_LEVELS = ("emergency", "alert", "critical", "error", "warning", "notice", "info", "debug", "trace")
LOG_COMPONENTS = ("command", "topology", "serverSelection", "connection")

# What a redacted failure may keep: the fields the security rules do not consider sensitive.
_REDACTED_FAILURE_KEYS = frozenset({"code", "codeName", "errorLabels"})


@dataclass
class LogMessage:
    """One structured log message a client emitted.

    ``failure_redacted`` is set by whoever records the message when it knows; otherwise a failure that is a
    document is taken as redacted when it keeps only code, code name and error labels.
    """

    level: str
    component: str
    data: Mapping[str, Any]
    failure_redacted: bool | None = None


def _failure_is_redacted(message: Any) -> bool:
    """Whether a log message's failure was redacted: a document (or the Extended JSON text of one, which is
    how a driver that logs failures as strings shows it) that keeps nothing but code, code name and error
    labels, or an empty string; any other text (an error message) is not redacted."""
    known = getattr(message, "failure_redacted", None)
    if known is not None:
        return bool(known)
    failure = message.data.get("failure")
    if isinstance(failure, str):
        if not failure.strip():
            return True
        try:
            failure = ejson.loads(failure)
        except (ValueError, TypeError, KeyError, BSONError):
            return False
    if isinstance(failure, Mapping):
        return set(failure) <= _REDACTED_FAILURE_KEYS
    return False


def check_log_message(
    expected: Mapping[str, Any], actual: Any, *, path: str = "message", entities: EntityLookup | None = None
) -> None:
    """Raise ``MatchError`` unless ``actual`` meets one ``expectedLogMessage``."""
    if str(actual.level).lower() != str(expected["level"]).lower():
        raise MatchError(f"{path}.level", f"expected {expected['level']!r}, got {actual.level!r}")
    if actual.component != expected["component"]:
        raise MatchError(f"{path}.component", f"expected {expected['component']!r}, got {actual.component!r}")
    if "failureIsRedacted" in expected:
        if "failure" not in actual.data:
            raise MatchError(f"{path}.data.failure", "expected a failure in the log data, but there is none")
        redacted = _failure_is_redacted(actual)
        if redacted != expected["failureIsRedacted"]:
            state = "redacted" if redacted else "not redacted"
            raise MatchError(
                f"{path}.failureIsRedacted",
                f"expected {expected['failureIsRedacted']}, the failure is {state}: {actual.data['failure']!r}",
            )
    Matcher(entities).match(expected["data"], actual.data, root=True, path=f"{path}.data")


def log_message_matches(
    expected: Mapping[str, Any], actual: Any, *, entities: EntityLookup | None = None
) -> bool:
    try:
        check_log_message(expected, actual, entities=entities)
    except MatchError:
        return False
    return True


def check_log_messages(
    expected_for_client: Mapping[str, Any], observed: Sequence[Any], *, entities: EntityLookup | None = None
) -> None:
    """Check one ``expectedLogMessagesForClient`` against the client's log messages, in order.

    Messages that match any of ``ignoreMessages`` are dropped first; with ``ignoreExtraMessages`` messages
    after the expected ones are allowed.
    """
    client = expected_for_client.get("client", "?")
    ignore = list(expected_for_client.get("ignoreMessages", ()))
    actual = [m for m in observed if not any(log_message_matches(i, m, entities=entities) for i in ignore)]
    expected = list(expected_for_client["messages"])
    base = f"expectLogMessages[{client}]"
    ignore_extra = bool(expected_for_client.get("ignoreExtraMessages", False))
    if len(actual) < len(expected) or (len(actual) > len(expected) and not ignore_extra):
        shown = [(m.component, m.level, dict(m.data).get("message")) for m in actual]
        raise MatchError(base, f"expected {len(expected)} log messages, observed {len(actual)}: {shown}")
    for index, (want, got) in enumerate(zip(expected, actual)):
        check_log_message(want, got, path=f"{base}[{index}]", entities=entities)


# --- recording -------------------------------------------------------------------------------------------

# Commands whose events carry credentials (command logging and monitoring, "Security"); hello and legacy
# hello are sensitive only when they carry speculativeAuthenticate, which shows as a redacted (empty) body.
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


class _Waiter:
    __slots__ = ("count", "expected", "seen")

    def __init__(self, expected: Mapping[str, Any], count: int) -> None:
        self.expected = expected
        self.count = count
        self.seen = anyio.Event()


class ClientEventStore:
    """The events one client entity was seen to publish, filtered as the client's options say.

    ``record`` is what the client's listeners call (synchronously, on the loop); ``wait_for`` lets
    ``waitForEvent`` sleep until enough matching events arrived, woken by ``record`` rather than polling.
    """

    def __init__(
        self,
        observe: Iterable[str] = (),
        *,
        ignore_commands: Iterable[str] = (),
        observe_sensitive: bool = False,
        entities: EntityLookup | None = None,
    ) -> None:
        unknown = set(observe) - set(EVENT_CLASSES)
        if unknown:
            raise UnifiedTestError(f"observeEvents: unknown event type(s) {sorted(unknown)}")
        self.observe = frozenset(observe)
        self.ignore_commands = frozenset(name.lower() for name in ignore_commands) | {"configurefailpoint"}
        self.observe_sensitive = observe_sensitive
        self.entities = entities
        self.events: list[Any] = []
        self.enabled = True
        self._sensitive_requests: set[Any] = set()
        self._waiters: list[_Waiter] = []

    def _ignored_command(self, event: Any) -> bool:
        name = str(getattr(event, "command_name", "")).lower()
        if name in self.ignore_commands:
            return True
        if self.observe_sensitive:
            return False
        if name in SENSITIVE_COMMANDS:
            return True
        if name in _HELLO_COMMANDS:
            request_id = getattr(event, "request_id", None)
            if event_name(event) == CommandStartedEvent.NAME:
                command = getattr(event, "command", {}) or {}
                if not command or "speculativeAuthenticate" in command:
                    self._sensitive_requests.add(request_id)
                    return True
                return False
            if request_id in self._sensitive_requests:
                self._sensitive_requests.discard(request_id)
                return True
            reply = getattr(event, "reply", None)
            return reply is not None and not reply
        return False

    def record(self, event: Any) -> None:
        """Keep ``event`` if its type is observed and it is not an ignored command; wake waiters."""
        if not self.enabled:
            return
        name = event_name(event)
        if name not in self.observe:
            return
        if name in EVENT_FAMILIES["command"] and self._ignored_command(event):
            return
        self.events.append(event)
        for waiter in list(self._waiters):
            if not waiter.seen.is_set() and self.count(waiter.expected) >= waiter.count:
                waiter.seen.set()

    def count(self, expected: Mapping[str, Any]) -> int:
        """How many recorded events meet one ``expectedEvent``."""
        return count_matching(expected, self.events, entities=self.entities)

    async def wait_for(self, expected: Mapping[str, Any], count: int, within: float = 10.0) -> None:
        """Return once ``count`` recorded events meet ``expected``; ``MatchError`` after ``within`` seconds."""
        if self.count(expected) >= count:
            return
        waiter = _Waiter(expected, count)
        self._waiters.append(waiter)
        try:
            with anyio.fail_after(within):
                await waiter.seen.wait()
        except TimeoutError:
            raise MatchError(
                "waitForEvent",
                f"{count} x {dict(expected)} not observed within {within}s (saw {self.count(expected)})",
            ) from None
        finally:
            self._waiters.remove(waiter)


# Severity order of the logging spec, most severe first.
_LEVEL_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}


_ACTING_CLIENT: ContextVar[str | None] = ContextVar("unified_acting_client", default=None)


@contextmanager
def acting_client(name: str | None) -> Iterator[None]:
    """Attribute what is logged inside the block, and in the tasks started from it (a client's monitors,
    its pool's fillers), to client entity ``name``. The driver logs through process-wide loggers, so this is
    how one client's messages are told from another's (the format's advice for global log collectors)."""
    token = _ACTING_CLIENT.set(name)
    try:
        yield
    finally:
        _ACTING_CLIENT.reset(token)


def current_acting_client() -> str | None:
    """The client entity the code running now acts for (``None``: not known)."""
    return _ACTING_CLIENT.get()


class ClientLogStore:
    """The log messages one client emitted, for the components and minimum levels in ``observeLogMessages``.

    With ``client``, a message logged while another client entity is acting (see ``acting_client``) is
    not this client's and is dropped; a message logged with no client acting is kept.
    """

    def __init__(self, observe: Mapping[str, str], *, client: str | None = None) -> None:
        unknown = set(observe) - set(LOG_COMPONENTS)
        if unknown:
            raise UnifiedTestError(f"observeLogMessages: unknown component(s) {sorted(unknown)}")
        self.observe = {component: _LEVEL_RANK[level.lower()] for component, level in observe.items()}
        self.client = client
        self.messages: list[LogMessage] = []
        self.enabled = True

    def record(self, message: LogMessage) -> None:
        """Keep ``message`` if its component is observed at its level and no other client logged it."""
        if not self.enabled:
            return
        if self.client is not None:
            source = current_acting_client()
            if source is not None and source != self.client:
                return
        threshold = self.observe.get(message.component)
        rank = _LEVEL_RANK.get(str(message.level).lower())
        if threshold is not None and rank is not None and rank <= threshold:
            self.messages.append(message)
