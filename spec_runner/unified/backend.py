"""The unified runner's ``Backend`` over mongio: entities made with the driver's public API, and the runner's
own work (initialData, outcome, fail points, the facts about the server) done on a connection of its own.

The runner's connection (``InternalClient``) is one ``mongio.connection`` connection to the first host of the
URI, handshaken and authenticated like the driver's: setting up and checking collections must not depend on
the client API the tests are exercising, and it needs no monitors.

Everything the driver publishes for a client entity is recorded by an ``EventRecorder`` (one listener object
of every kind) into the client's ``ClientEventStore``; its log messages come through a ``logging.Handler`` on
the ``mongio.*`` loggers into its ``ClientLogStore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

import anyio

from mongio.connection.connection import Connection
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.tls import create_ssl_context
from mongio.encryption import libmongocrypt
from mongio.errors import MongioError, OperationFailure
from mongio.events.listeners import ConnectionPoolListener
from mongio.execution import deadline
from mongio.options import ClientOptions, ReadConcern, WriteConcern
from mongio.options.read_preference import make_read_preference, read_pref_mode_from_name
from mongio.topology.heartbeat_events import ServerHeartbeatListener, ServerListener, TopologyListener
from spec_runner.unified import encryption_entities
from spec_runner.unified import events as recorded
from spec_runner.unified.entities import CURSOR_KINDS, EntityKind
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.events import ClientEventStore, ClientLogStore, LogMessage, acting_client
from spec_runner.unified.loader import CollectionData, EntityDescription
from spec_runner.unified.matcher import resolve_placeholders
from spec_runner.unified.operations import OperationContext
from spec_runner.unified.requirements import ServerFacts
from spec_runner.unified.tracing import SpanStore

if TYPE_CHECKING:
    from spec_runner.cluster import Deployment

NAMESPACE_NOT_FOUND = 26
NAMESPACE_EXISTS = 48
LOG_LENGTH_VARIABLE = "MONGODB_LOG_MAX_DOCUMENT_LENGTH"
LOGGING_TESTS_MAX_DOCUMENT_LENGTH = 10_000

class DriverGap(NotImplementedError):
    """The driver API lacks a method or an argument an operation needs: a failure of the test, never an
    error the test could have expected (``NotImplementedError`` is one of the runner's programming errors)."""


_SIGNATURE_MISMATCH = re.compile(
    r"unexpected keyword argument|positional argument|required (?:keyword-only |positional )?argument"
    r"|object is not callable"
)


def _is_pending_call(result: Any) -> bool:
    # A coroutine (MongoClient.close() returns one whose closing is under way), or a task; objects that
    # are merely awaitable as well (a cursor, a change stream, a session) are results in their own right.
    return asyncio.iscoroutine(result) or isinstance(result, asyncio.Future)


async def api_call(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a driver method (awaiting its result when it is a coroutine; a cursor is returned as it is) within
    the ``timeoutMS`` keyword's operation timeout when one is given; a call the method's signature refuses
    raises ``DriverGap`` naming the method, so a missing argument cannot pass for an expected client error."""
    timeout_ms = kwargs.pop("timeoutMS", None)
    try:
        if timeout_ms is None:
            result = function(*args, **kwargs)
            if _is_pending_call(result):
                result = await result
        else:
            # An operation's timeoutMS is a client-side operation timeout around this one call (0: no limit).
            with deadline.timeout(math.inf if timeout_ms == 0 else timeout_ms / 1000):
                result = function(*args, **kwargs)
                if _is_pending_call(result):
                    result = await result
    except TypeError as exc:
        if _SIGNATURE_MISMATCH.search(str(exc)):
            name = getattr(function, "__qualname__", repr(function))
            raise DriverGap(f"{name}: {exc}") from exc
        raise
    return result


def driver_api(module: str, name: str) -> Any:
    """A name of the driver API, imported when first needed: a part of the API that is not there yet fails
    the tests that need it (``ImportError``/``AttributeError`` are reported as the runner's own errors)."""
    return getattr(import_module(module), name)


try:  # the command listener base, so the client's publisher accepts the recorder as one
    _CommandListener: type = driver_api("mongio.events.command", "CommandListener")
except (ImportError, AttributeError):  # pragma: no cover - only while the API is being written
    _CommandListener = object


# --- the runner's own connection ---------------------------------------------------------------------------


class InternalClient:
    """One authenticated connection to the URI's first host, for the runner's own commands."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.options = ClientOptions.from_uri(uri)
        self._connection: Connection | None = None

    @property
    def address(self) -> Any:
        return self.options.seeds[0]

    async def _connect(self) -> Connection:
        if self._connection is None or self._connection.closed:
            tls = self.options.tls
            context = create_ssl_context(tls) if tls is not None else None
            settings = ConnectionSettings(credential=self.options.credential, ssl_context=context)
            self._connection = await establish(self.address, settings)
        return self._connection

    async def command(self, database: str, command: Mapping[str, Any], *, check: bool = True) -> dict[str, Any]:
        """Run ``command`` and return the reply (``OperationFailure`` for ``ok: 0`` unless ``check`` is off)."""
        connection = await self._connect()
        return await connection.command(database, command, check=check)

    async def find_all(
        self, database: str, collection: str, *, sort: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Every document of a collection, read from the primary with a local read concern."""
        command: dict[str, Any] = {"find": collection, "readConcern": {"level": "local"}}
        if sort is not None:
            command["sort"] = sort
        reply = await self.command(database, command)
        cursor = reply["cursor"]
        documents = list(cursor["firstBatch"])
        while cursor.get("id"):
            reply = await self.command(database, {"getMore": cursor["id"], "collection": collection})
            cursor = reply["cursor"]
            documents.extend(cursor["nextBatch"])
        return documents

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close("the test is over")
            await self._connection.wait_closed()
            self._connection = None


_FACTS: dict[str, ServerFacts] = {}


async def server_facts(internal: InternalClient) -> ServerFacts:
    """What ``runOnRequirements`` are checked against, read once per URI (``hello``, ``buildInfo``,
    ``getParameter: "*"``)."""
    cached = _FACTS.get(internal.uri)
    if cached is not None:
        return cached
    hello = await internal.command("admin", {"hello": 1})
    build_info = await internal.command("admin", {"buildInfo": 1})
    try:
        parameters: dict[str, Any] | None = await internal.command("admin", {"getParameter": "*"})
    except OperationFailure:
        parameters = None
    crypt_version = libmongocrypt.version()
    shards = None
    if hello.get("msg") == "isdbgrid":
        shards = await internal.find_all("config", "shards")
    facts = ServerFacts.from_replies(
        hello=hello,
        build_info=build_info,
        parameters=parameters,
        shards=shards,
        load_balanced=internal.options.load_balanced,
        auth_enabled=internal.options.credential is not None,
        csfle_available=crypt_version is not None,
        libmongocrypt_version=crypt_version,
    )
    _FACTS[internal.uri] = facts
    return facts


# --- recording what the driver publishes ------------------------------------------------------------------


def _address(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2:
        host, port = value
        return f"{host}:{port}" if port is not None else str(host)
    return str(value) if value is not None else ""


def _server_type(description: Any) -> str:
    name = getattr(description, "server_type_name", None)
    if isinstance(name, str):
        return name
    kind = getattr(description, "server_type", None)
    return str(getattr(kind, "name", kind))


def _topology_type(description: Any) -> str:
    name = getattr(description, "topology_type_name", None)
    if isinstance(name, str):
        return name
    kind = getattr(description, "topology_type", None)
    return str(getattr(kind, "name", kind))


def _duration_ms(event: Any) -> float:
    micros = getattr(event, "duration_micros", None)
    if isinstance(micros, int | float):
        return micros / 1000
    seconds = getattr(event, "duration", None)
    return float(seconds) * 1000 if isinstance(seconds, int | float) else 0.0


def _command_fields(event: Any) -> dict[str, Any]:
    return {
        "command_name": event.command_name,
        "database_name": getattr(event, "database_name", ""),
        "request_id": getattr(event, "request_id", 0),
        "operation_id": getattr(event, "operation_id", 0) or 0,
        "server_connection_id": getattr(event, "server_connection_id", None),
        "service_id": getattr(event, "service_id", None),
    }


def convert_event(event: Any) -> recorded.RecordedEvent | None:
    """The runner's record of one event the driver published (``None`` for kinds the format has no name
    for, such as server opening)."""
    kind = type(event).__name__
    address = _address(getattr(event, "address", None) or getattr(event, "connection_id", None))
    if kind == "CommandStartedEvent":
        return recorded.CommandStartedEvent(command=event.command, **_command_fields(event))
    if kind == "CommandSucceededEvent":
        return recorded.CommandSucceededEvent(
            reply=event.reply, duration_ms=_duration_ms(event), **_command_fields(event)
        )
    if kind == "CommandFailedEvent":
        return recorded.CommandFailedEvent(
            failure=event.failure, duration_ms=_duration_ms(event), **_command_fields(event)
        )
    if kind == "PoolClearedEvent":
        return recorded.PoolClearedEvent(
            address=address,
            service_id=getattr(event, "service_id", None),
            interrupt_in_use_connections=bool(getattr(event, "interrupt_connections", False)),
        )
    if kind in ("ServerHeartbeatStartedEvent", "ServerHeartbeatSucceededEvent", "ServerHeartbeatFailedEvent"):
        cls = recorded.EVENT_CLASSES[kind[0].lower() + kind[1:]]
        return cls(address=_address(event.connection_id), awaited=bool(event.awaited))  # type: ignore[call-arg]
    if kind == "ServerDescriptionChangedEvent":
        return recorded.ServerDescriptionChangedEvent(
            address=_address(getattr(event, "server_address", None)),
            previous_type=_server_type(event.previous_description),
            new_type=_server_type(event.new_description),
        )
    if kind == "TopologyDescriptionChangedEvent":
        return recorded.TopologyDescriptionChangedEvent(
            previous_type=_topology_type(event.previous_description),
            new_type=_topology_type(event.new_description),
        )
    if kind in ("TopologyOpeningEvent", "TopologyClosedEvent"):
        return recorded.EVENT_CLASSES[kind[0].lower() + kind[1:]]()
    cmap = recorded.EVENT_CLASSES.get(kind[0].lower() + kind[1:])
    if cmap is None or cmap.FAMILY != "cmap":
        return None
    fields: dict[str, Any] = {"address": address}
    declared = getattr(cmap, "__dataclass_fields__", {})
    if "connection_id" in declared:
        fields["connection_id"] = event.connection_id
    if "reason" in declared:
        fields["reason"] = str(event.reason)
    return cmap(**fields)


def _stored_entity_document(name: str, event: Any, converted: recorded.RecordedEvent) -> dict[str, Any]:
    """An event as ``storeEventsAsEntities`` stores it: its name, when it was seen, and its fields."""
    document: dict[str, Any] = {"name": name[0].upper() + name[1:], "observedAt": time.time()}
    for key, value in vars(converted).items():
        parts = key.split("_")
        camel = parts[0] + "".join(part.title() for part in parts[1:])
        if value is not None and isinstance(value, str | int | float | bool | Mapping):
            document[camel] = value
    if hasattr(event, "failure") and "failure" not in document:
        document["failure"] = repr(event.failure)
    return document


class EventRecorder(
    _CommandListener,  # type: ignore[misc]
    ConnectionPoolListener,
    ServerHeartbeatListener,
    ServerListener,
    TopologyListener,
):
    """Every listener interface at once: each event is converted and handed to the client's store (and to
    the ``storeEventsAsEntities`` lists)."""

    def __init__(
        self, store: ClientEventStore, stored: Mapping[str, list[list[dict[str, Any]]]] | None = None
    ) -> None:
        self.store = store
        self.stored = dict(stored or {})

    def _record(self, event: Any) -> None:
        converted = convert_event(event)
        if converted is None:
            return
        self.store.record(converted)
        for target in self.stored.get(converted.NAME, ()):
            target.append(_stored_entity_document(converted.NAME, event, converted))

    # Command and heartbeat listeners: started / succeeded / failed.
    def started(self, event: Any) -> None:
        self._record(event)

    def succeeded(self, event: Any) -> None:
        self._record(event)

    def failed(self, event: Any) -> None:
        self._record(event)

    # Server and topology listeners: opened / description_changed / closed.
    def opened(self, event: Any) -> None:
        self._record(event)

    def description_changed(self, event: Any) -> None:
        self._record(event)

    def closed(self, event: Any) -> None:
        self._record(event)

    # Connection pool listener.
    def pool_created(self, event: Any) -> None:
        self._record(event)

    def pool_ready(self, event: Any) -> None:
        self._record(event)

    def pool_cleared(self, event: Any) -> None:
        self._record(event)

    def pool_closed(self, event: Any) -> None:
        self._record(event)

    def connection_created(self, event: Any) -> None:
        self._record(event)

    def connection_ready(self, event: Any) -> None:
        self._record(event)

    def connection_closed(self, event: Any) -> None:
        self._record(event)

    def connection_check_out_started(self, event: Any) -> None:
        self._record(event)

    def connection_check_out_failed(self, event: Any) -> None:
        self._record(event)

    def connection_checked_out(self, event: Any) -> None:
        self._record(event)

    def connection_checked_in(self, event: Any) -> None:
        self._record(event)


_LOG_LEVELS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}
_LOGGERS = {
    "command": "mongio.command",
    "topology": "mongio.topology",
    "serverSelection": "mongio.serverSelection",
    "connection": "mongio.connection",
}


class LogRecorder(logging.Handler):
    """Puts the driver's structured log messages into a client's ``ClientLogStore`` while attached."""

    def __init__(self, store: ClientLogStore) -> None:
        super().__init__(logging.DEBUG)
        self.store = store
        self._attached: list[tuple[logging.Logger, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.msg
        fields = getattr(message, "fields", None)
        component = getattr(message, "component", None)
        if not isinstance(fields, Mapping):
            return
        if not isinstance(component, str):
            component = record.name.removeprefix("mongio.")
        level = _LOG_LEVELS.get(record.levelno, record.levelname.lower())
        self.store.record(LogMessage(level=level, component=component, data=dict(fields)))

    def attach(self) -> None:
        for component in self.store.observe:
            logger = logging.getLogger(_LOGGERS[component])
            self._attached.append((logger, logger.level))
            logger.setLevel(logging.DEBUG)
            logger.addHandler(self)

    def detach(self) -> None:
        for logger, level in self._attached:
            logger.removeHandler(self)
            logger.setLevel(level)
        self._attached.clear()


# --- option conversion --------------------------------------------------------------------------------------


def read_concern(document: Mapping[str, Any]) -> ReadConcern:
    return ReadConcern(document.get("level"))


def write_concern(document: Mapping[str, Any]) -> WriteConcern:
    unknown = set(document) - {"w", "wtimeoutMS", "journal", "j", "wtimeout"}
    if unknown:
        raise UnifiedTestError(f"writeConcern: unsupported field(s) {sorted(unknown)}")
    journal = document.get("journal", document.get("j"))
    return WriteConcern(w=document.get("w"), wtimeout=document.get("wtimeoutMS"), j=journal)


def read_preference(document: Mapping[str, Any]) -> Any:
    # The format's readPreference also allows hedge; hedged reads are deprecated (MongoDB 8.0 ignores them)
    # and mongio has none, so a test asking for them is refused rather than run without them.
    unknown = set(document) - {"mode", "tagSets", "maxStalenessSeconds"}
    if unknown:
        raise UnifiedTestError(f"readPreference: unsupported field(s) {sorted(unknown)}")
    mode = read_pref_mode_from_name(str(document["mode"]))
    staleness = document.get("maxStalenessSeconds", -1)
    return make_read_preference(mode, document.get("tagSets"), staleness)


def collection_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``databaseOptions`` / ``collectionOptions`` as keyword arguments of ``get_database`` /
    ``get_collection``."""
    options = dict(options or {})
    result: dict[str, Any] = {}
    if "readConcern" in options:
        result["read_concern"] = read_concern(options.pop("readConcern"))
    if "writeConcern" in options:
        result["write_concern"] = write_concern(options.pop("writeConcern"))
    if "readPreference" in options:
        result["read_preference"] = read_preference(options.pop("readPreference"))
    if "timeoutMS" in options:
        result["timeout"] = options.pop("timeoutMS") / 1000
    if options:
        raise UnifiedTestError(f"unsupported database/collection option(s) {sorted(options)}")
    return result


def transaction_options(document: Mapping[str, Any]) -> Any:
    transaction_options_class = driver_api("mongio.sessions.transaction_state", "TransactionOptions")
    values = dict(document)
    kwargs: dict[str, Any] = {}
    if "readConcern" in values:
        kwargs["read_concern"] = read_concern(values.pop("readConcern"))
    if "writeConcern" in values:
        kwargs["write_concern"] = write_concern(values.pop("writeConcern"))
    if "readPreference" in values:
        kwargs["read_preference"] = read_preference(values.pop("readPreference"))
    if "maxCommitTimeMS" in values:
        kwargs["max_commit_time_ms"] = values.pop("maxCommitTimeMS")
    if values:
        raise UnifiedTestError(f"unsupported transaction option(s) {sorted(values)}")
    return transaction_options_class(**kwargs)


def missing_environment_value(path: str) -> Any:
    # The format lets uriOptions take values "loaded from the test environment" (an OIDC environment name,
    # credentials); this environment provides none, so a test needing one cannot make its client.
    raise UnifiedTestError(f"{path}: $$placeholder needs a value from the test environment, and there is none")


def environment_value(uri_credential: Any) -> Callable[[str], Any]:
    """The test environment's values: a MONGODB-OIDC run's ``authMechanismProperties`` are those of the
    run's own URI (its ENVIRONMENT, TOKEN_RESOURCE); nothing else is provided."""

    def provide(path: str) -> Any:
        if (
            path == "uriOptions.authMechanismProperties"
            and uri_credential is not None
            and uri_credential.mechanism == "MONGODB-OIDC"
        ):
            return dict(uri_credential.mechanism_properties)
        return missing_environment_value(path)

    return provide


async def _ready_a_connection(client: Any) -> None:
    """Open a pooled connection for a client the test does not observe (a ``setupClient``), so a fail point
    it sets later takes one round trip, as it would through a client that had been in use; best effort."""
    with contextlib.suppress(Exception):
        with anyio.fail_after(2.0):
            await client.admin.command("ping")


def server_api(document: Mapping[str, Any]) -> Any:
    cls = driver_api("mongio.server_api", "ServerApi")
    return cls(str(document["version"]), strict=document.get("strict"), deprecation_errors=document.get("deprecationErrors"))


# --- the backend ------------------------------------------------------------------------------------------


class MongioBackend:
    """Entities over mongio's public API, and the runner's own work over ``InternalClient``."""

    def __init__(
        self,
        uri: str,
        internal: InternalClient,
        facts: ServerFacts,
        client_defaults: Mapping[str, Any] | None = None,
        deployment: Deployment | None = None,
    ) -> None:
        self.uri = uri
        self.internal = internal
        self.facts = facts
        # The cluster harness's deployment, when the run goes through it: ``useMultipleMongoses`` clients get
        # its whole URI, fail points are cleared on every member.
        self.deployment = deployment
        # URI options for every client entity that does not set them itself (a suite's speed-ups).
        self.client_defaults = dict(client_defaults or {})
        self.fail_points: list[tuple[Any, str]] = []  # (client or None for the internal one, fail point name)
        self._log_recorders: list[LogRecorder] = []
        self._set_max_document_length = False  # whether end_test must unset the variable again

    def _lengthen_logged_documents(self) -> None:
        """The logging tests run with a large max document length (command logging and monitoring tests
        README: "e.g. 10,000"), so whole commands and replies are logged and can be matched; it is set through
        the logging specification's ``MONGODB_LOG_MAX_DOCUMENT_LENGTH`` unless the environment already sets it,
        and restored by ``end_test``."""
        if self._set_max_document_length or LOG_LENGTH_VARIABLE in os.environ:
            return
        os.environ[LOG_LENGTH_VARIABLE] = str(LOGGING_TESTS_MAX_DOCUMENT_LENGTH)
        self._set_max_document_length = True

    # -- initialData and outcome ------------------------------------------------------------------------

    async def _drop(self, database: str, collection: str) -> None:
        command = {"drop": collection, "writeConcern": {"w": "majority"}}
        reply = await self.internal.command(database, command, check=False)
        if reply.get("ok") != 1 and reply.get("code") != NAMESPACE_NOT_FOUND:
            raise UnifiedTestError(f"initialData: dropping {database}.{collection} failed: {reply}")

    async def prepare_collection(self, data: CollectionData) -> None:
        database, name = data.database_name, data.collection_name
        await self._drop(database, name)
        for suffix in ("esc", "ecoc"):
            await self._drop(database, f"enxcol_.{name}.{suffix}")
        if data.create_options is not None or not data.documents:
            command = {"create": name, **dict(data.create_options or {}), "writeConcern": {"w": "majority"}}
            await self.internal.command(database, command)
        if data.documents:
            await self.internal.command(
                database,
                {"insert": name, "documents": list(data.documents), "writeConcern": {"w": "majority"}},
            )

    async def collection_documents(self, data: CollectionData) -> Sequence[Mapping[str, Any]]:
        return await self.internal.find_all(data.database_name, data.collection_name, sort={"_id": 1})

    # -- entities -----------------------------------------------------------------------------------------

    async def create_entity(self, description: EntityDescription, context: OperationContext) -> None:
        makers: dict[str, Callable[[EntityDescription, OperationContext], Any]] = {
            "client": self._client,
            "database": self._database,
            "collection": self._collection,
            "session": self._session,
            "bucket": self._bucket,
            "clientEncryption": self._client_encryption,
        }
        maker = makers.get(description.kind)
        if maker is None:
            raise UnifiedTestError(f"entity kind {description.kind!r} is not supported by this runner")
        await maker(description, context)

    async def _client(self, description: EntityDescription, context: OperationContext) -> None:
        options = dict(description.options)
        known = {
            "observeEvents",
            "ignoreCommandMonitoringEvents",
            "observeSensitiveCommands",
            "storeEventsAsEntities",
            "uriOptions",
            "useMultipleMongoses",
            "observeLogMessages",
            "serverApi",
            "observeTracingMessages",
            "awaitMinPoolSizeMS",
            "autoEncryptOpts",
        }
        unknown = set(options) - known
        if unknown:
            raise UnifiedTestError(f"client {description.id}: unsupported option(s) {sorted(unknown)}")
        observe = list(options.get("observeEvents", ()))
        store = ClientEventStore(
            observe,
            ignore_commands=options.get("ignoreCommandMonitoringEvents", ()),
            observe_sensitive=bool(options.get("observeSensitiveCommands", False)),
            entities=context.entities,
        )
        stored: dict[str, list[list[dict[str, Any]]]] = {}
        for item in options.get("storeEventsAsEntities", ()):
            target = context.entities.new_list(item["id"])
            for name in item["events"]:
                key = name[0].lower() + name[1:]
                stored.setdefault(key, []).append(target)
        if stored:
            store = ClientEventStore(
                set(observe) | set(stored),
                ignore_commands=options.get("ignoreCommandMonitoringEvents", ()),
                observe_sensitive=bool(options.get("observeSensitiveCommands", False)),
                entities=context.entities,
            )
        recorder = EventRecorder(store, stored)
        logs: ClientLogStore | None = None
        log_recorder: LogRecorder | None = None
        if "observeLogMessages" in options:
            self._lengthen_logged_documents()
            logs = ClientLogStore(options["observeLogMessages"], client=description.id)
            log_recorder = LogRecorder(logs)
            log_recorder.attach()
            self._log_recorders.append(log_recorder)
        kwargs: dict[str, Any] = dict(
            resolve_placeholders(
                options.get("uriOptions", {}), environment_value(self.internal.options.credential), "uriOptions"
            )
        )
        given = {key.lower() for key in kwargs}
        for key, value in self.client_defaults.items():
            if key.lower() not in given:
                kwargs[key] = value
        if "serverApi" in options:
            kwargs["server_api"] = server_api(options["serverApi"])
        if "autoEncryptOpts" in options:
            kwargs["auto_encryption_opts"] = await self._auto_encryption_opts(options["autoEncryptOpts"])
        spans: SpanStore | None = None
        if "observeTracingMessages" in options:
            spans = SpanStore(options["observeTracingMessages"] or {})
            kwargs["tracing"] = spans.client_option()
        mongo_client = driver_api("mongio.client", "MongoClient")
        listeners: list[Any] = [recorder] if (observe or stored) else []
        # The client's monitors and pools start inside this block, so what they log is the client's.
        with acting_client(description.id):
            client = mongo_client(self._client_uri(options), event_listeners=listeners, **kwargs)
            entity = context.entities.add(description.id, EntityKind.CLIENT, client, events=store)
            # Monitoring starts now, as a client made outside the test would have started before its first
            # operation (tests wait for SDAM events without running anything).
            await api_call(client.aconnect)
        min_pool_size = kwargs.get("minPoolSize") or 0
        if "awaitMinPoolSizeMS" in options and min_pool_size:
            await _await_min_pool_size(client, int(min_pool_size), options["awaitMinPoolSizeMS"] / 1000)
            # Events and log messages from before the pools were filled are not the test's.
            store.events.clear()
            if logs is not None:
                logs.messages.clear()
            for targets in stored.values():
                for target in targets:
                    target.clear()
        if logs is not None:
            entity.extras["logs"] = logs
        if not listeners and logs is None:
            with acting_client(description.id):  # what its ping logs is its own
                await _ready_a_connection(client)
        if spans is not None:
            spans.clear()  # the runner's own ping is not the test's
            entity.extras["spans"] = spans

    async def _auto_encryption_opts(self, options: Mapping[str, Any]) -> Any:
        """``AutoEncryptionOpts`` for an ``autoEncryptOpts`` document, with the stand-in query analyser as
        mongocryptd (tests/support/query_analyser.py)."""
        auto_encryption_opts = driver_api("mongio.encryption", "AutoEncryptionOpts")
        analyser_uri = await encryption_entities.query_analyser_uri()
        kmip = await encryption_entities.kmip_server_for(options.get("kmsProviders") or {})
        return auto_encryption_opts(**encryption_entities.auto_encryption_options(options, analyser_uri, kmip))

    def _client_uri(self, options: Mapping[str, Any]) -> str:
        """One mongos unless ``useMultipleMongoses`` (then every mongos of the harness's cluster); one member
        alone for ``directConnection: true`` (the unified test format: a single seed, no ``replicaSet``)."""
        if self.deployment is not None and options.get("useMultipleMongoses"):
            return self.deployment.uri
        if self.deployment is not None and (options.get("uriOptions") or {}).get("directConnection") is True:
            return self.deployment.direct_uri
        return self.uri

    async def _database(self, description: EntityDescription, context: OperationContext) -> None:
        options = description.options
        client = context.entities.client(options["client"])
        database = client.get_database(
            options["databaseName"], **collection_options(options.get("databaseOptions"))
        )
        context.entities.add(description.id, EntityKind.DATABASE, database, client=options["client"])

    async def _collection(self, description: EntityDescription, context: OperationContext) -> None:
        options = description.options
        database = context.entities.database(options["database"])
        collection = database.get_collection(
            options["collectionName"], **collection_options(options.get("collectionOptions"))
        )
        owner = context.entities.entity(options["database"]).extras.get("client")
        context.entities.add(description.id, EntityKind.COLLECTION, collection, client=owner)

    async def _session(self, description: EntityDescription, context: OperationContext) -> None:
        options = description.options
        client = context.entities.client(options["client"])
        session_options = dict(options.get("sessionOptions", {}))
        kwargs: dict[str, Any] = {}
        if "causalConsistency" in session_options:
            kwargs["causal_consistency"] = session_options.pop("causalConsistency")
        if "snapshot" in session_options:
            kwargs["snapshot"] = session_options.pop("snapshot")
        if "snapshotTime" in session_options:
            # The name of the entity holding the time (saved from getSnapshotTime).
            kwargs["snapshot_time"] = context.entities.get(session_options.pop("snapshotTime"))
        if "defaultTransactionOptions" in session_options:
            kwargs["default_transaction_options"] = transaction_options(
                session_options.pop("defaultTransactionOptions")
            )
        if "defaultTimeoutMS" in session_options:
            kwargs["default_timeout_ms"] = session_options.pop("defaultTimeoutMS")
        if session_options:
            raise UnifiedTestError(f"session {description.id}: unsupported option(s) {sorted(session_options)}")
        session = client.start_session(**kwargs)
        entity = context.entities.add_session(description.id, session, session.session_id)
        entity.extras["client"] = options["client"]

    async def _bucket(self, description: EntityDescription, context: OperationContext) -> None:
        options = dict(description.options)
        database = context.entities.database(options.pop("database"))
        bucket_class = driver_api("mongio.gridfs", "GridFSBucket")
        bucket_options = options.pop("bucketOptions", {})
        kwargs: dict[str, Any] = {}
        names = {"bucketName": "bucket_name", "chunkSizeBytes": "chunk_size_bytes"}
        for key, value in bucket_options.items():
            if key in names:
                kwargs[names[key]] = value
            elif key == "writeConcern":
                kwargs["write_concern"] = write_concern(value)
            elif key == "readConcern":
                kwargs["read_concern"] = read_concern(value)
            elif key == "readPreference":
                kwargs["read_preference"] = read_preference(value)
            else:
                raise UnifiedTestError(f"bucket {description.id}: unsupported option {key!r}")
        owner = context.entities.entity(description.options["database"]).extras.get("client")
        context.entities.add(description.id, EntityKind.BUCKET, bucket_class(database, **kwargs), client=owner)

    async def _client_encryption(self, description: EntityDescription, context: OperationContext) -> None:
        options = dict(description.options["clientEncryptionOpts"])
        key_vault_client = context.entities.client(options["keyVaultClient"])
        client_encryption_class = driver_api("mongio.encryption", "ClientEncryption")
        kmip = await encryption_entities.kmip_server_for(options.get("kmsProviders") or {})
        kwargs = encryption_entities.client_encryption_options(options, key_vault_client, kmip)
        try:
            client_encryption = client_encryption_class(**kwargs)
        except (ValueError, TypeError, MongioError) as exc:
            # The options the test gives are refused (a provider without its required fields, none at all).
            raise UnifiedTestError(
                f"clientEncryption {description.id}: its kmsProviders are refused: {exc}"
            ) from exc
        context.entities.add(
            description.id, EntityKind.CLIENT_ENCRYPTION, client_encryption, client=options["keyVaultClient"]
        )

    # -- fail points ----------------------------------------------------------------------------------------

    async def set_fail_point(
        self, fail_point: Mapping[str, Any], client: Any = None, address: str | None = None
    ) -> None:
        """``configureFailPoint`` on the server (through ``client`` when given, for ``failPoint``; on the server
        at ``address`` when given, for ``targetedFailPoint``); remembered so ``end_test`` turns it off."""
        command = dict(fail_point)
        if address is not None:
            targeted = InternalClient(f"mongodb://{address}/?directConnection=true")
            try:
                await targeted.command("admin", command)
            finally:
                await targeted.close()
        elif client is None:
            await self.internal.command("admin", command)
        else:
            await client.admin.command(command)
        self.fail_points.append((client, str(command["configureFailPoint"])))

    # -- cleanup ------------------------------------------------------------------------------------------

    async def disable_fail_points(self) -> None:
        errors = await self._disable_fail_points()
        if errors:
            raise UnifiedTestError(f"could not turn the test's fail points off: {'; '.join(errors)}")

    async def _disable_fail_points(self) -> list[str]:
        errors: list[str] = []
        for _client, name in reversed(self.fail_points):
            try:
                await self.internal.command("admin", {"configureFailPoint": name, "mode": "off"})
            except Exception as exc:  # the server may be the thing the test broke
                errors.append(f"disabling {name}: {exc}")
        self.fail_points.clear()
        if self.deployment is not None:
            # Fail points set through other mongoses than the runner's own.
            await anyio.to_thread.run_sync(self.deployment.clear_fail_points)
        return errors

    async def end_test(self, context: OperationContext) -> None:
        errors = await self._disable_fail_points()
        for entity in context.entities.of_kind(*CURSOR_KINDS):
            await _quietly(entity.value, "close")
        for entity in context.entities.of_kind(EntityKind.SESSION):
            await _quietly(entity.value, "end_session")
        for entity in context.entities.of_kind(EntityKind.CLIENT):
            await _quietly(entity.value, "close")
        # Last attached first, so each logger gets back the level it had before the test.
        for recorder in reversed(self._log_recorders):
            recorder.detach()
        self._log_recorders.clear()
        if self._set_max_document_length:
            os.environ.pop(LOG_LENGTH_VARIABLE, None)
            self._set_max_document_length = False
        try:
            # A transaction the test left open would hold its locks into the next test.
            await self.internal.command("admin", {"killAllSessions": []}, check=False)
        except Exception as exc:
            errors.append(f"killAllSessions: {exc}")
        try:
            await self._await_server_idle()
        except Exception as exc:
            errors.append(f"waiting for the server's operations to end: {exc}")
        if errors:
            logging.getLogger("spec_runner.unified").debug("cleanup problems: %s", "; ".join(errors))

    async def _await_server_idle(self, within: float = 5.0) -> None:
        """Wait until the server runs nothing but monitoring: a command the test's client gave up on (a
        client-side timeout during a blockConnection fail point) still runs on SecantusDB once the block
        ends, maxTimeMS or not, and its write would land in the next test's collections. Checked with
        currentOp every few milliseconds; after ``within`` seconds the next test starts anyway."""
        with anyio.fail_after(within):
            while True:
                reply = await self.internal.command("admin", {"currentOp": 1}, check=False)
                busy = [
                    op
                    for op in reply.get("inprog", ())
                    if op.get("active") and str(op.get("op", "")).lower() not in _MONITORING_OPS
                ]
                if not busy:
                    return
                await anyio.sleep(0.005)


# Commands always in flight on the server (monitors' awaitable hellos) or the probe itself.
_MONITORING_OPS = frozenset({"hello", "ismaster", "currentop"})


async def _await_min_pool_size(client: Any, size: int, within: float) -> None:
    """``awaitMinPoolSizeMS``: wait until the pool of every data-bearing server holds ``size`` established
    connections (the pools fill in the background, and publish nothing this could wait on without
    observing CMAP events, so this checks every few milliseconds)."""
    try:
        with anyio.fail_after(within):
            while True:
                topology = client._topology
                servers = [] if topology is None else list(topology.servers.values())
                data_bearing = [server for server in servers if server.description.is_data_bearing]
                if data_bearing and all(
                    server.pool is not None
                    and server.pool.total_connection_count - server.pool.pending_connection_count >= size
                    for server in data_bearing
                ):
                    return
                await anyio.sleep(0.005)
    except TimeoutError:
        raise UnifiedTestError(f"the connection pools did not reach minPoolSize={size} within {within}s") from None


async def _quietly(value: Any, method: str) -> None:
    function = getattr(value, method, None)
    if function is None:
        return
    try:
        result = function()
        if hasattr(result, "__await__"):
            await result
    except Exception as exc:
        logging.getLogger("spec_runner.unified").debug("cleanup: %s.%s failed: %s", value, method, exc)
