"""The structure of a unified test file, checked the way the format's JSON schema checks it.

The rules are written here as small validator objects (objects with their properties, required keys and
whether other keys are allowed; arrays with a minimum length; strings, enums, patterns; alternatives), and
``validate`` returns every violation with its path. It runs on the plain JSON of the file, before Extended
JSON is decoded, so a wrapper such as ``{"$numberLong": "1"}`` is still an object here, as the schema sees it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Problems = list[str]


def _where(path: str) -> str:
    return path or "(top level)"


class Rule:
    """One schema rule; ``check`` appends a message for each violation under ``path``."""

    def check(self, value: Any, path: str, problems: Problems) -> None:
        raise NotImplementedError


class AnyValue(Rule):
    def check(self, value: Any, path: str, problems: Problems) -> None:
        return


class Type(Rule):
    """A JSON type: ``string``, ``boolean``, ``integer``, ``number``, ``object`` or ``array``."""

    def __init__(
        self, name: str, *, enum: Sequence[Any] | None = None, pattern: str | None = None, const: Any = None
    ) -> None:
        self.name = name
        self.enum = list(enum) if enum is not None else None
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.const = const

    def matches_type(self, value: Any) -> bool:
        if self.name == "string":
            return isinstance(value, str)
        if self.name == "boolean":
            return isinstance(value, bool)
        if self.name == "integer":
            return (isinstance(value, int) and not isinstance(value, bool)) or (
                isinstance(value, float) and value.is_integer()
            )
        if self.name == "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        if self.name == "object":
            return isinstance(value, Mapping)
        if self.name == "array":
            return isinstance(value, list)
        raise ValueError(self.name)

    def check(self, value: Any, path: str, problems: Problems) -> None:
        if not self.matches_type(value):
            problems.append(f"{_where(path)}: expected {self.name}, got {type(value).__name__} {value!r:.60}")
            return
        if self.enum is not None and value not in self.enum:
            problems.append(f"{_where(path)}: {value!r} is not one of {self.enum}")
        if self.pattern is not None and self.pattern.search(value) is None:
            problems.append(f"{_where(path)}: {value!r} does not match {self.pattern.pattern}")
        if self.const is not None and value != self.const:
            problems.append(f"{_where(path)}: must be {self.const!r}, not {value!r}")


class Array(Rule):
    def __init__(self, items: Rule | None = None, *, min_items: int = 0) -> None:
        self.items = items
        self.min_items = min_items

    def check(self, value: Any, path: str, problems: Problems) -> None:
        if not isinstance(value, list):
            problems.append(f"{_where(path)}: expected array, got {type(value).__name__}")
            return
        if len(value) < self.min_items:
            problems.append(f"{_where(path)}: needs at least {self.min_items} item(s)")
        if self.items is not None:
            for index, item in enumerate(value):
                self.items.check(item, f"{path}[{index}]", problems)


class Object(Rule):
    """An object with known properties; other keys are an error unless ``additional`` (True or a rule for
    their values) allows them, or a ``patterns`` regex names them."""

    def __init__(
        self,
        properties: Mapping[str, Rule] | None = None,
        *,
        required: Sequence[str] = (),
        additional: bool | Rule = False,
        patterns: Mapping[str, Rule] | None = None,
        min_properties: int = 0,
        max_properties: int | None = None,
        forbidden: Sequence[str] = (),
        exclusive: Sequence[tuple[str, str]] = (),
        extra: Callable[[Mapping[str, Any], str, Problems], None] | None = None,
    ) -> None:
        self.properties = dict(properties or {})
        self.required = list(required)
        self.additional = additional
        self.patterns = [(re.compile(p), rule) for p, rule in (patterns or {}).items()]
        self.min_properties = min_properties
        self.max_properties = max_properties
        self.forbidden = list(forbidden)
        self.exclusive = list(exclusive)
        self.extra = extra

    def check(self, value: Any, path: str, problems: Problems) -> None:
        if not isinstance(value, Mapping):
            problems.append(f"{_where(path)}: expected object, got {type(value).__name__} {value!r:.60}")
            return
        for key in self.required:
            if key not in value:
                problems.append(f"{_where(path)}: missing required key {key!r}")
        if len(value) < self.min_properties:
            problems.append(f"{_where(path)}: needs at least {self.min_properties} key(s)")
        if self.max_properties is not None and len(value) > self.max_properties:
            problems.append(
                f"{_where(path)}: allows at most {self.max_properties} key(s), has {sorted(value)}"
            )
        for key in self.forbidden:
            if key in value:
                problems.append(f"{_where(path)}: {key!r} is not allowed here")
        for first, second in self.exclusive:
            if first in value and second in value:
                problems.append(f"{_where(path)}: {first!r} and {second!r} cannot be used together")
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            rule = self.properties.get(key)
            if rule is None:
                rule = next((r for pattern, r in self.patterns if pattern.search(key)), None)
            if rule is not None:
                rule.check(item, here, problems)
            elif self.additional is False:
                problems.append(f"{_where(path)}: unexpected key {key!r}")
            elif isinstance(self.additional, Rule):
                self.additional.check(item, here, problems)
        if self.extra is not None:
            self.extra(value, path, problems)


class OneOf(Rule):
    """Exactly one alternative must hold (the problems of the closest alternative are reported)."""

    def __init__(self, *alternatives: Rule) -> None:
        self.alternatives = alternatives

    def check(self, value: Any, path: str, problems: Problems) -> None:
        results: list[Problems] = []
        for rule in self.alternatives:
            found: Problems = []
            rule.check(value, path, found)
            results.append(found)
        passing = sum(1 for r in results if not r)
        if passing == 1:
            return
        if passing > 1:
            problems.append(f"{_where(path)}: matches more than one of the allowed forms")
            return
        # Report the alternative of the value's own type: its problems say what is wrong inside it.
        mismatch = f"{_where(path)}: expected "

        def rank(found: list[str]) -> tuple[bool, int]:
            return (any(p.startswith(mismatch) for p in found), len(found))

        problems.extend(sorted(results, key=rank)[0])


class Ref(Rule):
    """A rule defined later (recursive structures)."""

    def __init__(self, resolve: Callable[[], Rule]) -> None:
        self.resolve = resolve

    def check(self, value: Any, path: str, problems: Problems) -> None:
        self.resolve().check(value, path, problems)


STRING = Type("string")
BOOLEAN = Type("boolean")
INTEGER = Type("integer")
OBJECT = Type("object")
ANY = AnyValue()
VERSION = Type("string", pattern=r"^[0-9]+(\.[0-9]+){1,2}$")

TOPOLOGY_NAMES = ("single", "replicaset", "sharded", "sharded-replicaset", "load-balanced")
LOG_SEVERITY = Type(
    "string", enum=("emergency", "alert", "critical", "error", "warning", "notice", "info", "debug", "trace")
)
LOG_COMPONENT = Type("string", enum=("command", "topology", "serverSelection", "connection"))

COMMAND_EVENTS = ("commandStartedEvent", "commandSucceededEvent", "commandFailedEvent")
CMAP_EVENTS = (
    "poolCreatedEvent",
    "poolReadyEvent",
    "poolClearedEvent",
    "poolClosedEvent",
    "connectionCreatedEvent",
    "connectionReadyEvent",
    "connectionClosedEvent",
    "connectionCheckOutStartedEvent",
    "connectionCheckOutFailedEvent",
    "connectionCheckedOutEvent",
    "connectionCheckedInEvent",
    "connectionPendingResponseStarted",
    "connectionPendingResponseSucceeded",
    "connectionPendingResponseFailed",
)
SDAM_EVENTS = (
    "serverDescriptionChangedEvent",
    "serverHeartbeatStartedEvent",
    "serverHeartbeatSucceededEvent",
    "serverHeartbeatFailedEvent",
    "topologyDescriptionChangedEvent",
    "topologyOpeningEvent",
    "topologyClosedEvent",
)
OBSERVABLE_EVENTS = (*COMMAND_EVENTS, *CMAP_EVENTS, *SDAM_EVENTS)
STORABLE_EVENTS = (
    "PoolCreatedEvent",
    "PoolReadyEvent",
    "PoolClearedEvent",
    "PoolClosedEvent",
    "ConnectionCreatedEvent",
    "ConnectionReadyEvent",
    "ConnectionClosedEvent",
    "ConnectionCheckOutStartedEvent",
    "ConnectionCheckOutFailedEvent",
    "ConnectionCheckedOutEvent",
    "ConnectionCheckedInEvent",
    "CommandStartedEvent",
    "CommandSucceededEvent",
    "CommandFailedEvent",
    "ServerDescriptionChangedEvent",
    "TopologyDescriptionChangedEvent",
)

RUN_ON_REQUIREMENT = Object(
    {
        "minServerVersion": VERSION,
        "maxServerVersion": VERSION,
        "topologies": Array(Type("string", enum=TOPOLOGY_NAMES), min_items=1),
        "serverless": Type("string", enum=("require", "forbid", "allow")),
        "serverParameters": Object(additional=True, min_properties=1),
        "auth": BOOLEAN,
        "authMechanism": STRING,
        "csfle": OneOf(BOOLEAN, Object({"minLibmongocryptVersion": VERSION}, min_properties=1)),
    },
    min_properties=1,
)

_STRING_OR_PLACEHOLDER = OneOf(STRING, Object({"$$placeholder": ANY}, required=("$$placeholder",)))


def _provider(*fields: str) -> Object:
    return Object(dict.fromkeys(fields, _STRING_OR_PLACEHOLDER))


KMS_PROVIDERS = Object(
    patterns={
        r"^aws(:[a-zA-Z0-9_]+)?$": _provider("accessKeyId", "secretAccessKey", "sessionToken"),
        r"^azure(:[a-zA-Z0-9_]+)?$": _provider(
            "tenantId", "clientId", "clientSecret", "identityPlatformEndpoint", "accessToken"
        ),
        r"^gcp(:[a-zA-Z0-9_]+)?$": _provider("email", "privateKey", "endpoint", "accessToken"),
        r"^kmip(:[a-zA-Z0-9_]+)?$": _provider("endpoint"),
        r"^local(:[a-zA-Z0-9_]+)?$": _provider("key"),
    }
)

COLLECTION_OR_DATABASE_OPTIONS = Object(
    {"readConcern": OBJECT, "readPreference": OBJECT, "writeConcern": OBJECT, "timeoutMS": INTEGER}
)

CLIENT_ENTITY = Object(
    {
        "id": STRING,
        "uriOptions": OBJECT,
        "useMultipleMongoses": BOOLEAN,
        "observeEvents": Array(Type("string", enum=OBSERVABLE_EVENTS), min_items=1),
        "ignoreCommandMonitoringEvents": Array(STRING, min_items=1),
        "storeEventsAsEntities": Array(
            Object(
                {"id": STRING, "events": Array(Type("string", enum=STORABLE_EVENTS), min_items=1)},
                required=("id", "events"),
            ),
            min_items=1,
        ),
        "observeLogMessages": Object(
            dict.fromkeys(("command", "topology", "serverSelection", "connection"), LOG_SEVERITY),
            min_properties=1,
        ),
        "observeTracingMessages": Object({"enableCommandPayload": BOOLEAN}),
        "serverApi": Object(
            {"version": STRING, "strict": BOOLEAN, "deprecationErrors": BOOLEAN}, required=("version",)
        ),
        "observeSensitiveCommands": BOOLEAN,
        "autoEncryptOpts": Object(
            {
                "keyVaultNamespace": STRING,
                "bypassAutoEncryption": BOOLEAN,
                "kmsProviders": KMS_PROVIDERS,
                "schemaMap": Object(additional=OBJECT),
                "extraOptions": OBJECT,
                "encryptedFieldsMap": Object(additional=OBJECT),
                "bypassQueryAnalysis": BOOLEAN,
                "keyExpirationMS": INTEGER,
            },
            required=("keyVaultNamespace", "kmsProviders"),
        ),
        "awaitMinPoolSizeMS": INTEGER,
    },
    required=("id",),
)

ENTITY = Object(
    {
        "client": CLIENT_ENTITY,
        "clientEncryption": Object(
            {
                "id": STRING,
                "clientEncryptionOpts": Object(
                    {
                        "keyVaultClient": STRING,
                        "keyVaultNamespace": STRING,
                        "kmsProviders": KMS_PROVIDERS,
                        "keyExpirationMS": INTEGER,
                    },
                    required=("keyVaultClient", "keyVaultNamespace", "kmsProviders"),
                ),
            },
            required=("id", "clientEncryptionOpts"),
        ),
        "database": Object(
            {
                "id": STRING,
                "client": STRING,
                "databaseName": STRING,
                "databaseOptions": COLLECTION_OR_DATABASE_OPTIONS,
            },
            required=("id", "client", "databaseName"),
        ),
        "collection": Object(
            {
                "id": STRING,
                "database": STRING,
                "collectionName": STRING,
                "collectionOptions": COLLECTION_OR_DATABASE_OPTIONS,
            },
            required=("id", "database", "collectionName"),
        ),
        "session": Object(
            {"id": STRING, "client": STRING, "sessionOptions": OBJECT}, required=("id", "client")
        ),
        "bucket": Object(
            {"id": STRING, "database": STRING, "bucketOptions": OBJECT}, required=("id", "database")
        ),
        "thread": Object({"id": STRING}, required=("id",)),
    },
    min_properties=1,
    max_properties=1,
)

COLLECTION_DATA = Object(
    {
        "collectionName": STRING,
        "databaseName": STRING,
        "createOptions": Object(additional=True, forbidden=("writeConcern",)),
        "documents": Array(OBJECT),
    },
    required=("collectionName", "databaseName", "documents"),
)

_EMPTY = Object()
_COMMAND_EVENT_COMMON = {
    "commandName": STRING,
    "databaseName": STRING,
    "hasServiceId": BOOLEAN,
    "hasServerConnectionId": BOOLEAN,
}

EXPECTED_COMMAND_EVENT = Object(
    {
        "commandStartedEvent": Object({"command": OBJECT, **_COMMAND_EVENT_COMMON}),
        "commandSucceededEvent": Object({"reply": OBJECT, **_COMMAND_EVENT_COMMON}),
        "commandFailedEvent": Object(_COMMAND_EVENT_COMMON),
    },
    min_properties=1,
    max_properties=1,
)

_REASON = Object({"reason": STRING})
EXPECTED_CMAP_EVENT = Object(
    {
        **dict.fromkeys(CMAP_EVENTS, _EMPTY),
        "poolClearedEvent": Object({"hasServiceId": BOOLEAN, "interruptInUseConnections": BOOLEAN}),
        "connectionClosedEvent": _REASON,
        "connectionCheckOutFailedEvent": _REASON,
        "connectionPendingResponseFailed": _REASON,
    },
    min_properties=1,
    max_properties=1,
)

_SERVER_DESCRIPTION = Object(
    {
        "type": Type(
            "string",
            enum=(
                "Standalone",
                "Mongos",
                "PossiblePrimary",
                "RSPrimary",
                "RSSecondary",
                "RSOther",
                "RSArbiter",
                "RSGhost",
                "LoadBalancer",
                "Unknown",
            ),
        )
    }
)
_TOPOLOGY_DESCRIPTION = Object(
    {
        "type": Type(
            "string",
            enum=(
                "Single",
                "Unknown",
                "ReplicaSetNoPrimary",
                "ReplicaSetWithPrimary",
                "Sharded",
                "LoadBalanced",
            ),
        )
    }
)
_AWAITED = Object({"awaited": BOOLEAN})
EXPECTED_SDAM_EVENT = Object(
    {
        "serverDescriptionChangedEvent": Object(
            {"previousDescription": _SERVER_DESCRIPTION, "newDescription": _SERVER_DESCRIPTION}
        ),
        "topologyDescriptionChangedEvent": Object(
            {"previousDescription": _TOPOLOGY_DESCRIPTION, "newDescription": _TOPOLOGY_DESCRIPTION}
        ),
        "serverHeartbeatStartedEvent": _AWAITED,
        "serverHeartbeatSucceededEvent": _AWAITED,
        "serverHeartbeatFailedEvent": _AWAITED,
        "topologyOpeningEvent": _EMPTY,
        "topologyClosedEvent": _EMPTY,
    },
    min_properties=1,
    max_properties=1,
)

EVENT_RULES = {"command": EXPECTED_COMMAND_EVENT, "cmap": EXPECTED_CMAP_EVENT, "sdam": EXPECTED_SDAM_EVENT}


def _events_of_type(value: Mapping[str, Any], path: str, problems: Problems) -> None:
    event_type = value.get("eventType", "command")
    events = value.get("events")
    rule = EVENT_RULES.get(event_type) if isinstance(event_type, str) else None
    if rule is not None and isinstance(events, list):
        Array(rule).check(events, f"{path}.events", problems)


EXPECTED_EVENTS_FOR_CLIENT = Object(
    {
        "client": STRING,
        "eventType": Type("string", enum=("command", "cmap", "sdam")),
        "events": Array(),
        "ignoreExtraEvents": BOOLEAN,
    },
    required=("client", "events"),
    extra=_events_of_type,
)

EXPECTED_LOG_MESSAGE = Object(
    {"level": LOG_SEVERITY, "component": LOG_COMPONENT, "data": OBJECT, "failureIsRedacted": BOOLEAN},
    required=("level", "component", "data"),
)

EXPECTED_LOG_MESSAGES_FOR_CLIENT = Object(
    {
        "client": STRING,
        "messages": Array(EXPECTED_LOG_MESSAGE),
        "ignoreExtraMessages": BOOLEAN,
        "ignoreMessages": Array(EXPECTED_LOG_MESSAGE),
    },
    required=("client", "messages"),
)

SPAN: Rule = Object(
    {"name": STRING, "attributes": OBJECT, "nested": Array(Ref(lambda: SPAN), min_items=1)},
    required=("name", "attributes"),
)

EXPECTED_TRACING_FOR_CLIENT = Object(
    {"client": STRING, "ignoreExtraSpans": BOOLEAN, "spans": Array(SPAN, min_items=1)},
    required=("client", "spans"),
)

EXPECTED_ERROR = Object(
    {
        "isError": Type("boolean", const=True),
        "isClientError": BOOLEAN,
        "isTimeoutError": BOOLEAN,
        "errorContains": STRING,
        "errorCode": INTEGER,
        "errorCodeName": STRING,
        "errorLabelsContain": Array(STRING, min_items=1),
        "errorLabelsOmit": Array(STRING, min_items=1),
        "writeErrors": OBJECT,
        "writeConcernErrors": Array(OBJECT),
        "errorResponse": OBJECT,
        "expectResult": ANY,
    },
    min_properties=1,
)

OPERATION = Object(
    {
        "name": STRING,
        "object": STRING,
        "arguments": OBJECT,
        "ignoreResultAndError": BOOLEAN,
        "expectError": EXPECTED_ERROR,
        "expectResult": ANY,
        "saveResultAsEntity": STRING,
    },
    required=("name", "object"),
    exclusive=(
        ("expectError", "expectResult"),
        ("expectError", "saveResultAsEntity"),
        ("ignoreResultAndError", "expectResult"),
        ("ignoreResultAndError", "expectError"),
        ("ignoreResultAndError", "saveResultAsEntity"),
    ),
)

TEST = Object(
    {
        "description": STRING,
        "runOnRequirements": Array(RUN_ON_REQUIREMENT, min_items=1),
        "skipReason": STRING,
        "operations": Array(OPERATION),
        "expectEvents": Array(EXPECTED_EVENTS_FOR_CLIENT, min_items=1),
        "expectLogMessages": Array(EXPECTED_LOG_MESSAGES_FOR_CLIENT, min_items=1),
        # The prose describes one object, the schema an array of them: accept both.
        "expectTracingMessages": OneOf(
            Array(EXPECTED_TRACING_FOR_CLIENT, min_items=1), EXPECTED_TRACING_FOR_CLIENT
        ),
        "outcome": Array(COLLECTION_DATA, min_items=1),
    },
    required=("description", "operations"),
)

TEST_FILE = Object(
    {
        "description": STRING,
        "schemaVersion": VERSION,
        "runOnRequirements": Array(RUN_ON_REQUIREMENT, min_items=1),
        "createEntities": Array(ENTITY, min_items=1),
        "initialData": Array(COLLECTION_DATA, min_items=1),
        "tests": Array(TEST, min_items=1),
        "_yamlAnchors": Object(additional=True),
    },
    required=("description", "schemaVersion", "tests"),
)


def validate(document: Any) -> Problems:
    """Every way ``document`` (a parsed test file, plain JSON) breaks the format's structure."""
    problems: Problems = []
    TEST_FILE.check(document, "", problems)
    return problems
