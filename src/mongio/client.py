"""``MongoClient``: the entry point, shaped like PyMongo's ``AsyncMongoClient``.

::

    client = MongoClient("mongodb://localhost:27017")   # no I/O, no event loop needed yet

    async def main() -> None:
        async with client:
            await client.admin.command("ping")

A client can be made anywhere, including at module level before any event loop runs, and used from any
loop: successive ``asyncio.run()`` calls, or one loop per thread at once. Its topology (one monitor task per
server, the connection pools) starts on a loop the first time the client is used there and closes when that
loop shuts down (:mod:`mongio.loop_runtime`); :meth:`MongoClient.close` stops and awaits every task it
started, on every loop; after that every operation raises :class:`~mongio.errors.ClientClosedError`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from mongio.api_base import ChangeStreamSource
from mongio.backend import gather, running_loop, timeout
from mongio.bson.codec_options import CodecOptions
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.handshake import DriverInfo, server_api_fields
from mongio.connection.pool import Pool
from mongio.connection.pool_options import PoolOptions
from mongio.connection.tls import create_revocation_checker, create_ssl_context
from mongio.errors import ClientClosedError, ConfigurationError, CursorNotFound, InvalidOperation, MongioError
from mongio.events.command import CommandListener, CommandPublisher
from mongio.events.listeners import ConnectionPoolListener
from mongio.execution import deadline as csot
from mongio.execution.connection_pin import ConnectionPin
from mongio.execution.executor import Executor
from mongio.execution.retry_policy import RetryOptions
from mongio.listener_registry import adapt_listeners
from mongio.loop_runtime import LoopRuntimes, cancel_from_anywhere
from mongio.loop_runtime.background_closings import track_background_closing
from mongio.operations.base import ConnectionContext, CursorState, Operation
from mongio.operations.client_bulk import BatchWriteConcernRetry, ClientBulkWrite, ClientBulkWriteBatch
from mongio.operations.collections import DropDatabase, ListDatabases
from mongio.operations.crud import GetMore, KillCursors
from mongio.operations.models import WriteModel
from mongio.operations.results import ClientBulkWriteResult
from mongio.options.client_options import ClientOptions
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import ReadPreferenceMode
from mongio.options.uri_options import fold_case
from mongio.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern, as_write_concern
from mongio.server_answer import ServerAnswer
from mongio.sessions.client_session import ClientSession, SessionOptions
from mongio.sessions.transaction_state import check_no_operation_concerns
from mongio.topology.monitor import monitor_connection_factory
from mongio.topology.server_description import Address
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology import ConnectErrorHook, Topology
from mongio.topology.topology_description import TopologyDescription
from mongio.topology.topology_type import TopologyType
from mongio.tracing import client_tracing
from mongio.typings import DocumentType

if TYPE_CHECKING:
    from mongio.bson.timestamp import Timestamp
    from mongio.change_stream import ClusterChangeStream
    from mongio.connection.auth.oidc_cache import OidcTokenCache
    from mongio.connection.auth.scram import ScramKeyCache
    from mongio.connection.socks import SocksProxy
    from mongio.cursor import CommandCursor
    from mongio.database import Database
    from mongio.encryption.auto_encrypter import AutoEncrypter
    from mongio.options.protocols import (
        CodecOptionsLike,
        DriverInfoLike,
        ReadConcernLike,
        ReadPreferenceLike,
        TimestampLike,
        TransactionOptionsLike,
        WriteConcernLike,
        WriteModelLike,
    )
    from mongio.options.proxy_options import ProxyOptions
    from mongio.sessions.transaction_state import TransactionOptions

__all__ = ["AsyncMongoClient", "MongoClient"]

_V = TypeVar("_V")
_REPLICA_SET_TYPES = (TopologyType.ReplicaSetWithPrimary, TopologyType.ReplicaSetNoPrimary)
_MISSING = object()

# What the internal client of automatic encryption does not take from its parent's keywords.
_NOT_INHERITED_BY_INTERNAL_CLIENT = frozenset(map(fold_case, ("auto_encryption_opts", "minPoolSize")))

_CODEC_KEYWORDS = (
    "tzinfo",
    "type_registry",
    "datetime_conversion",
    "unicode_decode_error_handler",
)
_UUID_REPRESENTATIONS = {
    "unspecified": 0,
    "pythonlegacy": 3,
    "standard": 4,
    "javalegacy": 5,
    "csharplegacy": 6,
}


def _socks_proxy(options: ProxyOptions | None) -> SocksProxy | None:
    """The SOCKS5 proxy of a client with ``proxyHost``; its module (and python-socks) is imported only then."""
    if options is None:
        return None
    from mongio.connection.socks import SocksProxy

    return SocksProxy(options)


def _codec_options(options: ClientOptions, document_class: Any, tz_aware: bool) -> CodecOptions:
    kwargs: dict[str, Any] = {
        name: options.extras[name] for name in _CODEC_KEYWORDS if options.extras.get(name) is not None
    }
    if options.uuid_representation is not None:
        kwargs["uuid_representation"] = _UUID_REPRESENTATIONS.get(str(options.uuid_representation).lower(), 0)
    codec_options = CodecOptions(document_class=document_class, tz_aware=tz_aware, **kwargs)
    if options.pymongo_types:
        from mongio import pymongo_types  # imported only by the clients that turn the mode on

        pymongo_types.enable()
        return pymongo_types.typed_codec_options(codec_options)
    return codec_options


def _as_driver_info(value: Any) -> DriverInfo:
    """``value`` as mongio's :class:`DriverInfo`: itself, or built from the ``name``, ``version`` and
    ``platform`` of another (PyMongo's namedtuple)."""
    if isinstance(value, DriverInfo):
        return value
    fields: list[Any] = [getattr(value, name, _MISSING) for name in ("name", "version", "platform")]
    if any(field is _MISSING for field in fields):
        raise TypeError(f"driver info must be a DriverInfo, not {type(value).__name__}")
    return DriverInfo(*fields)


class _ListDatabasesCursor(ListDatabases):
    """``listDatabases`` answered as a one-batch cursor, for :meth:`MongoClient.list_databases`."""

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:  # type: ignore[override]
        return CursorState(0, "admin.$cmd", list(reply.get("databases", [])))


class _Closing(Coroutine[Any, Any, None]):
    """What :meth:`MongoClient.close` returns: awaitable any number of times, and a coroutine too, so that
    ``asyncio.run(client.close())`` takes it as it takes PyMongo's. The closing does not wait to be awaited:
    ``task`` (None when nothing is left to wait for on the calling loop) is already running, and cancelling a
    wait for it leaves it running."""

    __slots__ = ("_driven", "_task")

    def __init__(self, task: asyncio.Task[None] | None) -> None:
        self._task = task
        self._driven: Generator[Any, None, None] | None = None

    def __await__(self) -> Generator[Any, None, None]:
        if self._task is not None:
            # Shielded: cancelling one wait (asyncio.wait_for timing out, a cancelled request) must not stop
            # the closing halfway, with connections left open; awaiting again waits for the rest.
            yield from asyncio.shield(self._task).__await__()

    def _driver(self) -> Generator[Any, None, None]:
        # One generator for whoever drives this object as a coroutine (asyncio.run's task).
        if self._driven is None:
            self._driven = self.__await__()
        return self._driven

    def send(self, value: Any) -> Any:
        return self._driver().send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        return self._driver().throw(typ if val is None else val)

    def close(self) -> None:
        if self._driven is not None:
            self._driven.close()


_NOTHING_TO_CLOSE = _Closing(None)


class MongoClient(ChangeStreamSource["ClusterChangeStream[DocumentType]"], Generic[DocumentType]):
    """A client for a MongoDB deployment (``AsyncMongoClient`` is the same class, under PyMongo's name).

    ``host`` is a connection string (``mongodb://`` or ``mongodb+srv://``), a ``host[:port]``, or a list of
    either; keyword arguments are PyMongo's (``maxPoolSize=...``, ``event_listeners=[...]``,
    ``serverSelectionTimeoutMS=...``) and win over the connection string. ``document_class`` and
    ``tz_aware`` shape decoded documents.

    Generic over the document type, as PyMongo's ``AsyncMongoClient`` is: ``client: MongoClient[Movie] =
    MongoClient()`` (``Movie`` a ``TypedDict``, say) makes ``client.db.coll`` a ``Collection[Movie]``, whose
    ``find_one`` returns ``Movie | None`` and whose ``insert_one`` takes a ``Movie``. ``MongoClient`` alone
    is ``MongoClient[dict[str, Any]]``.

    ``tracing={"enabled": True, "query_text_max_length": 0}`` makes OpenTelemetry spans of its operations
    and commands (see :mod:`mongio.tracing`; off by default).

    Use ``async with MongoClient(uri) as client:`` or call :meth:`close` when done. Making the client does
    no I/O; the first operation (or ``await client.aconnect()``) starts monitoring on the running loop.
    ``connect=True`` starts monitoring at once, in the background, when the client is made on a running
    event loop (a client made outside any loop, at module level say, has no loop to connect on: its first
    operation connects); a failure there is met again by the first operation.

    Retries: reads (``retryReads=true``, the default) and single-document writes (``retryWrites=true``, the
    default; a write goes again with the same ``txnNumber``, so it happens at most once) are retried once
    after a network error or a retryable server error (with ``timeoutMS``, while time is left). Every
    command, ``command()``, ``getMore`` and multi-document writes included, is also retried when the server
    answers that it is overloaded (an error labelled both ``SystemOverloadedError`` and
    ``RetryableError``): at most ``maxAdaptiveRetries`` times (default 2), after a jittered exponential
    backoff (100 ms base, or the server's ``baseBackoffMS``, doubling per retry, 10 s at most), and only
    when ``retryReads`` (reads), ``retryWrites`` (writes) or both (``command()``) are on. Application code
    that retries on errors of its own may need to allow for this. ``enableOverloadRetargeting=true`` sends
    an overload retry to another suitable server when there is one; ``adaptiveRetries=true`` makes
    overload retries draw on a per-client token bucket, so a long overload cannot multiply the load.
    """

    HOST = "localhost"
    PORT = 27017

    def __init__(
        self,
        host: str | Sequence[str] | None = None,
        port: int | None = None,
        document_class: type[DocumentType] | None = None,
        tz_aware: bool | None = None,
        connect: bool | None = None,
        type_registry: Any = None,
        **kwargs: Any,
    ) -> None:
        # PyMongo's signature: None means the default (dict, naive datetimes, connect on first use). The named
        # arguments join the other keywords, so that every keyword is read from one place, the options'
        # extras, whatever its case.
        named = {
            "document_class": document_class,
            "tz_aware": tz_aware,
            "connect": connect,
            "type_registry": type_registry,
        }
        kwargs.update({name: value for name, value in named.items() if value is not None})
        self._options = ClientOptions.from_uri(host, port, **kwargs)
        _tell_of_lookalike_service(self._options)
        extras = self._options.extras
        # Each listener as mongio's class for each kind it is (PyMongo's listeners included), after the
        # ones monitoring.register() was given.
        listeners = adapt_listeners(extras.get("event_listeners") or ())
        # OpenTelemetry spans: a client option, never a URI option (see mongio.tracing).
        tracing = client_tracing(extras.get("tracing"))
        self._event_listeners = listeners
        self._codec_options = _codec_options(
            self._options, extras.get("document_class") or dict, bool(extras.get("tz_aware"))
        )
        self._read_preference: ReadPreferenceMode = self._options.read_preference
        self._read_concern: ReadConcern = self._options.read_concern
        self._write_concern: WriteConcern = self._options.write_concern
        # What lives on an event loop (topology, pools, monitors, cursor reaper) is kept per loop.
        self._runtimes = LoopRuntimes(self._kill_abandoned_cursors)
        self._closed = False
        self._closing: _Closing | None = None
        # connect=True: the background start of monitoring, stopped by close() if still under way.
        self._connecting: asyncio.Task[None] | None = None
        self._metadata = self._options.client_metadata
        self._ssl_context = create_ssl_context(self._options.tls) if self._options.tls is not None else None
        self._proxy = _socks_proxy(self._options.proxy)
        # The OCSP check and its cache, shared by every connection of the client (docs/ocsp.md).
        self._revocation = (
            create_revocation_checker(self._options.tls, self._ssl_context)
            if self._options.tls is not None and self._ssl_context is not None
            else None
        )
        # SCRAM keys this client derived; SCRAM itself is imported only by clients with credentials.
        self._scram_cache: ScramKeyCache | None = None
        if self._options.credential is not None:
            from mongio.connection.auth.scram import ScramKeyCache

            self._scram_cache = ScramKeyCache()
        # The MONGODB-OIDC Client Cache: one access token for all this client's connections.
        self._oidc_cache: OidcTokenCache | None = None
        if self._options.credential is not None and self._options.credential.mechanism == "MONGODB-OIDC":
            from mongio.connection.auth.oidc_cache import OidcTokenCache

            self._oidc_cache = OidcTokenCache()
        # Automatic encryption (auto_encryption_opts): the executor's operation hook, None without it.
        self._encrypter = self._auto_encrypter(host, port, kwargs)
        timeout_ms = self._options.timeout_ms
        self._executor = Executor(
            self,
            retry_options=RetryOptions.from_client_options(self._options),
            publisher=CommandPublisher(item for item in listeners if isinstance(item, CommandListener)),
            timeout=None
            if timeout_ms is None
            else (float("inf") if timeout_ms == 0 else timeout_ms / 1000.0),
            server_selection_timeout=self._options.server_selection_timeout,
            wait_queue_timeout=self._options.wait_queue_timeout,
            server_api=self._options.extras.get("server_api"),
            tracing=tracing,
            command_crypt=self._encrypter,
        )
        if self._options.connect:
            self._start_connecting()

    def _auto_encrypter(
        self, host: str | Sequence[str] | None, port: int | None, kwargs: Mapping[str, Any]
    ) -> AutoEncrypter | None:
        """Automatic encryption for ``auto_encryption_opts`` (its module, and pymongocrypt, imported only
        then); its internal client is made from this client's own arguments, as the specification asks."""
        opts = self._options.extras.get("auto_encryption_opts")
        if opts is None:
            return None
        from mongio.encryption.auto_encrypter import AutoEncrypter

        def internal_client() -> MongoClient[Any]:
            options = {
                name: value
                for name, value in kwargs.items()
                if fold_case(name) not in _NOT_INHERITED_BY_INTERNAL_CLIENT
            }
            return MongoClient(host, port, minPoolSize=0, **options)

        unlimited = self._options.options.get("maxPoolSize") == 0
        return AutoEncrypter(opts, self, internal_client, unlimited_pool=unlimited)

    def _start_connecting(self) -> None:
        """``connect=True``: start monitoring on the running loop now, as PyMongo starts connecting in the
        background; outside any loop the first operation connects."""
        try:
            loop = running_loop()
        except RuntimeError:
            return
        # A fresh context: the opening must not inherit a deadline or session of the code making the client.
        self._connecting = loop.create_task(
            self._connect_in_background(), name="mongio connect", context=contextvars.Context()
        )

    async def _connect_in_background(self) -> None:
        try:
            await self.open_topology()
        except MongioError as exc:
            # Nobody awaits this task: the first operation opens the topology again and raises what it meets.
            _log.debug("connect=True: could not start monitoring in the background: %s", exc, exc_info=exc)

    def _stop_connecting(self, loop: asyncio.AbstractEventLoop | None) -> Awaitable[None] | None:
        """Cancel the background start of monitoring if it is still under way; returns what ``loop`` awaits
        for it to end (``None`` when it is over, or runs on another loop, which is told to cancel it)."""
        connecting, self._connecting = self._connecting, None
        if connecting is None or connecting.done():
            return None
        return cancel_from_anywhere(connecting, loop)

    def __repr__(self) -> str:
        seeds = ", ".join(f"{host}:{port}" if port else host for host, port in self._options.seeds)
        where = f"mongodb+srv://{self._options.srv_host}" if self._options.is_srv else seeds
        state = "closed" if self._closed else ("open" if self._runtimes else "not connected")
        return f"MongoClient({where!r}, {state})"

    def eq_props(self) -> tuple[tuple[Address, ...], str | None, str | None, str]:
        """What makes two clients equal, as in PyMongo: the seeds, the replica set name, and the
        ``mongodb+srv`` name and service name."""
        options = self._options
        return (
            tuple(sorted(options.seeds, key=lambda address: (address[0], address[1] or 0))),
            options.replica_set,
            options.srv_host,
            options.srv_service_name,
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MongoClient):
            return self.eq_props() == other.eq_props()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.eq_props())

    # Not iterable (nor an Iterable): without this, iter() would fall back on __getitem__ and ``for x in client``
    # would make databases "0", "1", ... for ever. Use list_database_names() to see its databases.
    __iter__ = None

    def __next__(self) -> Any:
        """Raises ``TypeError``: a client is not iterable (the name exists so ``next(client)`` says so)."""
        raise TypeError(f"{type(self).__name__!r} object is not iterable")

    next = __next__

    # -- starting and stopping -------------------------------------------------------------------------------

    def closed_error(self) -> ClientClosedError:
        """Internal, not part of the API: the error an operation of the closed client raises."""
        return ClientClosedError(f"{self!r} was closed; make a new client to run more operations")

    @property
    def executor(self) -> Executor:
        """Internal, not part of the API: the executor that runs this client's operations, the one way the
        package's databases, collections, cursors, change streams and sessions reach it."""
        return self._executor

    async def open_topology(self) -> Topology:
        """Internal, not part of the API: the topology of the running event loop, started there on first use."""
        if self._closed:
            raise self.closed_error()
        runtime = self._runtimes.for_loop(running_loop())
        topology = await runtime.open(self._new_topology)
        if self._closed:
            raise self.closed_error()
        self._executor.attach(topology)
        return topology

    @property
    def _topology(self) -> Topology | None:
        """The started topology of the running event loop (else of the loop that used the client last), for
        tools and tests that look at the pools and monitors; ``None`` before the client started there."""
        runtime = self._runtimes.current()
        return None if runtime is None else runtime.topology

    async def _new_topology(self) -> Topology:
        options = self._options
        if options.needs_resolution:
            options = self._options = await options.resolve()
        return self._make_topology(options)

    def _abandon_server_cursor(self, address: Address | None, namespace: str, cursor_id: int) -> None:
        """Queue a server cursor for killing by the cursor reaper of the running loop's runtime, else of the
        runtime used last (safe from a finalizer and from any thread)."""
        runtime = self._runtimes.current()
        if runtime is not None and not runtime.closed:
            runtime.cursor_reaper.abandon(address, namespace, cursor_id)

    def _make_topology(self, options: ClientOptions) -> Topology:
        settings = ConnectionSettings(
            metadata=self._metadata,
            credential=options.credential,
            compressors=options.compressors,
            zlib_compression_level=options.zlib_compression_level,
            server_api=options.extras.get("server_api"),
            load_balanced=options.load_balanced,
            connect_timeout=options.connect_timeout,
            socket_timeout=options.socket_timeout,
            ssl_context=self._ssl_context,
            proxy=self._proxy,
            revocation=self._revocation,
            scram_cache=self._scram_cache,
            oidc_cache=self._oidc_cache,
        )
        pool_options = PoolOptions.from_uri_options(
            options.options,
            load_balanced=options.load_balanced,
            event_listeners=[
                item for item in self._event_listeners if isinstance(item, ConnectionPoolListener)
            ],
        )
        topology_settings = TopologySettings(
            seeds=options.seeds,
            replica_set_name=options.replica_set,
            direct_connection=options.direct_connection,
            load_balanced=options.load_balanced,
            heartbeat_frequency=options.heartbeat_frequency,
            local_threshold_ms=options.local_threshold_ms,
            server_selection_timeout=options.server_selection_timeout,
            srv_max_hosts=options.srv_max_hosts,
            server_selector=options.extras.get("server_selector"),
        )
        def make_pool(address: Address, on_connect_error: ConnectErrorHook) -> Pool[Any]:
            async def connect(connection_id: int, generation: int) -> Any:
                # Under CSOT a connection opened for an operation must be ready by the end of the operation's
                # computedServerSelectionTimeout (within connectTimeoutMS for the stream). One opened by
                # the pool's upkeep (minPoolSize) runs outside any operation: the client's timeoutMS then
                # bounds each authentication command afresh, as the CSOT specification asks; its hello
                # keeps connectTimeoutMS, so a server slow to answer hellos (its RTT above timeoutMS) still
                # gets its pool filled.
                deadline = csot.establishment_deadline()
                auth_timeout = None
                if not csot.is_enabled():
                    client_timeout = self._executor.operation_timeout(None, None)
                    if client_timeout is not None and not math.isinf(client_timeout):
                        auth_timeout = client_timeout
                return await establish(
                    address,
                    settings,
                    id=connection_id,
                    generation=generation,
                    deadline=deadline,
                    auth_timeout=auth_timeout,
                )

            return Pool(address, connect, pool_options, on_connect_error=on_connect_error)

        return Topology(
            topology_settings,
            monitor_connection_factory=monitor_connection_factory(settings),
            pool_factory=make_pool,
            server_monitoring_mode=options.server_monitoring_mode,
            connect_timeout=options.connect_timeout,
            listeners=self._event_listeners,
            srv_host=options.srv_host,
            srv_service_name=options.srv_service_name,
            # A declared API version goes on the monitors' hello commands too.
            monitor_command_fields=server_api_fields(options.extras.get("server_api")),
        )

    async def aconnect(self) -> None:
        """Start monitoring the deployment now rather than at the first operation."""
        await self.open_topology()

    def close(self) -> Coroutine[Any, Any, None]:
        """Kill the server cursors of cursors dropped while open, end the pooled server sessions
        (``endSessions``), stop every monitor and close every connection.

        ``await client.close()`` (PyMongo's idiom) returns once every task the client started has finished.
        ``client.close()`` without ``await`` (Motor's idiom) closes all the same, on the running event loop,
        in the background. Called where no event loop runs (Motor's idiom between ``run_until_complete`` calls,
        before ``loop.close()``), it runs each idle loop the client used until the client's part in it is
        closed, and the closings any client left in the background there (without ``await``) are done, and returns
        when done, so that nothing is left pending there. A closing left in the background on a loop then
        closed without running again cannot finish: its sockets are closed and a ``ResourceWarning`` says so. What the client
        runs on other event loops is closed there (on another thread's running loop through that loop; for a
        closed loop its sockets are closed at once). ``endSessions``
        is sent once, from the calling loop when the client was used on it, else from another thread's
        running loop that the client uses, else, when server sessions are pooled, over a connection made on
        the calling loop for it. Afterwards every operation raises
        :class:`~mongio.errors.ClientClosedError`
        (new sessions and first connections from the call on, operations on a connected client once the
        closing has stopped its servers); closing twice is harmless and returns the same closing.

        Operations still in flight when the servers stop end at once with
        :class:`~mongio.errors.ClientClosedError` naming the closing (its ``__cause__`` is how the operation
        was cut off): their connections are closed under them, and those waiting for a server or a connection
        are refused; none is retried. The closing never fails because of what a server sent: an error while
        killing cursors, ending sessions or closing connections is logged at debug level, with the exception,
        under the ``mongio`` logger.
        """
        if self._closing is None:
            self._closed = True
            try:
                loop: asyncio.AbstractEventLoop | None = running_loop()
            except RuntimeError:
                loop = None
            closings = self._close_runtimes(loop)
            connecting = self._stop_connecting(loop)
            if connecting is not None:
                closings.append(connecting)
            if self._encrypter is not None:
                if loop is None:
                    self._encrypter.close_now()
                else:
                    closings.append(self._encrypter.aclose())
            if not closings or loop is None:
                # Without a running loop, a runtime on another thread's loop closes there on its own.
                self._closing = _NOTHING_TO_CLOSE
            else:
                # A task, so that closing starts even when nobody awaits it; indexed, so that running its loop
                # again to close something else finishes it too.
                task = loop.create_task(_wait_all(closings, self._left_unfinished), name="mongio client.close()")
                track_background_closing(task)
                self._closing = _Closing(task)
        return self._closing

    def _left_unfinished(self) -> None:
        """The closing's task was destroyed before it finished: its loop was closed (close() without await,
        then loop.close() with the closing under way). What is left of the client on that loop is let go of,
        its sockets closed, and the reason given."""
        self._runtimes.let_go_of_stranded()
        warnings.warn(
            f"{self!r}: close() was not awaited and its event loop was closed before the closing finished; "
            "the client's connections were closed without ending its sessions. Await client.close() (or run "
            "the loop until it is done) before closing the loop.",
            ResourceWarning,
            stacklevel=1,
        )

    def _close_runtimes(self, loop: asyncio.AbstractEventLoop | None) -> list[Awaitable[None]]:
        """Close every runtime (see :meth:`LoopRuntimes.close_all`); returns what ``loop`` (the caller's) is
        to await.

        ``endSessions`` is sent once (the sessions specification asks it of every client's shutdown): from
        the caller's runtime, else from one on another thread's running loop, else, when server sessions are
        pooled and the caller runs a loop, from a runtime opened there for it (the loops that used the
        sessions have shut down, closing their runtimes, and the sessions outlive them)."""
        closings, sent = self._runtimes.close_all(loop, _CLOSE_FLUSH_TIMEOUT, self._executor.end_sessions)
        if not sent and loop is not None and len(self._executor.session_pool):
            closings.append(self._end_sessions_from_a_new_runtime(loop))
        return closings

    async def _end_sessions_from_a_new_runtime(self, loop: asyncio.AbstractEventLoop) -> None:
        """Open a runtime on ``loop`` only to send ``endSessions``, then close it (see :meth:`_close_runtimes`)."""
        runtime = self._runtimes.for_loop(loop)
        try:
            async with timeout(_CLOSE_FLUSH_TIMEOUT):
                await runtime.open(self._new_topology)
        except Exception as exc:
            _log.debug(
                "could not connect to send endSessions while closing the client: %s: %s",
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
        await runtime.close(_CLOSE_FLUSH_TIMEOUT, functools.partial(self._executor.end_sessions, discover=True))

    async def aclose(self) -> None:
        """:meth:`close` under the name :func:`contextlib.aclosing` and async resources use."""
        await self.close()

    async def __aenter__(self) -> MongoClient[DocumentType]:
        await self.open_topology()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- options and state -----------------------------------------------------------------------------------

    @property
    def options(self) -> ClientOptions:
        """Every setting of this client, typed."""
        return self._options

    @property
    def topology_description(self) -> TopologyDescription:
        """The current description of the deployment (type Unknown until the client has started), as the
        event loop that used the client last sees it."""
        runtime = self._runtimes.last
        if runtime is not None and runtime.topology is not None and not runtime.topology.closed:
            return runtime.topology.description
        from mongio.topology.topology_description import initial_topology_description

        options = self._options
        return initial_topology_description(
            TopologySettings(
                seeds=options.seeds,
                replica_set_name=options.replica_set,
                direct_connection=options.direct_connection,
                load_balanced=options.load_balanced,
            )
        )

    @property
    def nodes(self) -> frozenset[Address]:
        """The addresses of the servers the client currently knows to be up (empty before it connects)."""
        return frozenset(sd.address for sd in self.topology_description.known_servers)

    def _writable_now(self) -> Any:
        writable = [sd for sd in self.topology_description.known_servers if sd.is_writable]
        return writable[0] if writable else None

    def _members_now(self, server_type: ServerType) -> set[Address]:
        description = self.topology_description
        if description.topology_type not in _REPLICA_SET_TYPES:
            return set()
        return {sd.address for sd in description.known_servers if sd.server_type is server_type}

    def _primary_now(self) -> Address | None:
        for sd in self.topology_description.known_servers:
            if sd.server_type is ServerType.RSPrimary:
                primary: Address = sd.address
                return primary
        return None

    def _check_single_address(self) -> None:
        description = self.topology_description
        if description.topology_type is TopologyType.Sharded and len(description.server_descriptions()) > 1:
            raise InvalidOperation(
                "MongoClient.address cannot name one server: the client is connected to several mongoses; "
                "use nodes instead"
            )

    async def _writable_server(self) -> Any:
        """The description of the server writes go to, selected as for a write (waits for one, up to
        ``serverSelectionTimeoutMS``)."""
        topology = await self.open_topology()
        server = await topology.select_server(is_write=True, operation="serverProperty")
        server.operation_finished()
        return server.description

    async def _address_answer(self) -> Address | None:
        await self.open_topology()
        self._check_single_address()
        address: Address | None = (await self._writable_server()).address
        return address

    async def _after_connecting(self, read: Callable[[], _V]) -> _V:
        await self.open_topology()
        return read()

    @property
    def address(self) -> ServerAnswer[Address | None]:
        """The address of the server the client writes to when there is exactly one choice: the standalone,
        primary or (single) mongos. As a value: from what the client knows now (``None`` when nothing is
        known yet); awaited (PyMongo's ``await client.address``): connects and selects that server first.
        Raises :class:`~mongio.errors.InvalidOperation` for several mongoses, as PyMongo does."""
        self._check_single_address()
        writable = self._writable_now()
        return ServerAnswer(None if writable is None else writable.address, self._address_answer)

    @property
    def primary(self) -> ServerAnswer[Address | None]:
        """The replica set primary's address, or ``None`` (awaitable: connects first)."""
        return ServerAnswer(self._primary_now(), lambda: self._after_connecting(self._primary_now))

    @property
    def secondaries(self) -> ServerAnswer[set[Address]]:
        """The addresses of the replica set's secondaries known now (awaitable: connects first)."""

        def read() -> set[Address]:
            return self._members_now(ServerType.RSSecondary)

        return ServerAnswer(read(), lambda: self._after_connecting(read))

    @property
    def arbiters(self) -> ServerAnswer[set[Address]]:
        """The addresses of the replica set's arbiters known now (awaitable: connects first)."""

        def read() -> set[Address]:
            return self._members_now(ServerType.RSArbiter)

        return ServerAnswer(read(), lambda: self._after_connecting(read))

    @property
    def is_primary(self) -> ServerAnswer[bool]:
        """Whether the server the client writes to is a standalone, a primary or a mongos (awaitable:
        selects that server first, as PyMongo does)."""

        async def fetch() -> bool:
            return bool((await self._writable_server()).is_writable)

        return ServerAnswer(self._writable_now() is not None, fetch)

    @property
    def is_mongos(self) -> ServerAnswer[bool]:
        """Whether the client talks to mongos (awaitable: selects the server writes go to first)."""

        async def fetch() -> bool:
            return bool((await self._writable_server()).server_type is ServerType.Mongos)

        return ServerAnswer(self.topology_description.topology_type is TopologyType.Sharded, fetch)

    def append_metadata(self, driver_info: DriverInfo | DriverInfoLike) -> None:
        """Add a wrapping library's name, version and platform to the handshake metadata of connections
        made from now on (PyMongo's method). Accepts :class:`mongio.driver_info.DriverInfo` or any object
        with ``name``, ``version`` and ``platform`` attributes (PyMongo's ``DriverInfo``)."""
        self._metadata.append(_as_driver_info(driver_info))

    # -- databases --------------------------------------------------------------------------------------------

    def get_database(
        self,
        name: str | None = None,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        timeout: float | None = None,
    ) -> Database[DocumentType]:
        """The database ``name`` (the connection string's database when omitted), with these options in
        place of the client's; ``timeout`` (seconds, 0 for no limit) replaces the client's ``timeoutMS``
        for its operations. No I/O."""
        from mongio.database import Database

        if name is None:
            name = self._options.database
            if name is None:
                raise ConfigurationError("no database name given and the connection string names none")
        return Database(self, name, codec_options, read_preference, write_concern, read_concern, timeout)

    def get_default_database(
        self,
        default: str | None = None,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
    ) -> Database[DocumentType]:
        """The connection string's database, else ``default``."""
        name = self._options.database or default
        if name is None:
            raise ConfigurationError("the connection string names no default database and none was given")
        return self.get_database(name, codec_options, read_preference, write_concern, read_concern)

    def __getitem__(self, name: str) -> Database[DocumentType]:
        return self.get_database(name)

    def __getattr__(self, name: str) -> Database[DocumentType]:
        if name.startswith("_"):
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r}. To access the {name} database, "
                f"use client[{name!r}]."
            )
        return self.get_database(name)

    async def list_databases(
        self, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> Any:
        """A cursor over ``listDatabases``' documents (``filter``, ``nameOnly``, ``authorizedDatabases`` may
        be given as keywords)."""
        from mongio.cursor import CommandCursor

        operation = _ListDatabasesCursor(
            filter=kwargs.pop("filter", None),
            name_only=kwargs.pop("nameOnly", None),
            authorized_databases=kwargs.pop("authorizedDatabases", None),
            comment=comment,
            codec_options=self._codec_options,
        )
        if kwargs:
            raise TypeError(f"list_databases() got unexpected options {sorted(kwargs)}")
        cursor: Any = CommandCursor(self, operation, session=session, codec_options=self._codec_options)
        return cursor

    def list_database_objects(
        self,
        filter: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> CommandCursor[Database[DocumentType]]:
        """A cursor over a :class:`~mongio.database.Database` for each database, each with the client's
        options (as ``client[name]`` would give). An addition to PyMongo's API (the enumerate-databases
        specification's optional method).

        Runs ``listDatabases`` with ``nameOnly`` unless ``filter`` looks at more than ``name``;
        ``authorizedDatabases`` may be given as a keyword. Retried like the other reads::

            async for database in client.list_database_objects(filter={"name": {"$regex": "^tenant_"}}):
                print(database.name, await database.list_collection_names())
        """
        from mongio.cursor import ObjectCommandCursor

        name_only = kwargs.pop("nameOnly", None)
        if name_only is None and (filter is None or set(filter) <= {"name"}):
            name_only = True
        operation = _ListDatabasesCursor(
            filter=filter,
            name_only=name_only,
            authorized_databases=kwargs.pop("authorizedDatabases", None),
            comment=comment,
            codec_options=self._codec_options,
        )
        if kwargs:
            raise TypeError(f"list_database_objects() got unexpected options {sorted(kwargs)}")

        def database(info: Mapping[str, Any]) -> Database[DocumentType]:
            return self.get_database(str(info["name"]))

        return ObjectCommandCursor(
            self, operation, database, session=session, codec_options=self._codec_options
        )

    async def list_database_names(
        self, session: ClientSession | None = None, comment: Any = None
    ) -> list[str]:
        """The names of the databases."""
        operation = ListDatabases(name_only=True, comment=comment, codec_options=self._codec_options)
        databases = await self._executor.execute(operation, session)
        return [str(entry["name"]) for entry in databases]

    async def drop_database(
        self, name_or_database: Any, session: ClientSession | None = None, comment: Any = None
    ) -> None:
        """Drop a database, given by name or as a ``Database``."""
        name = (
            name_or_database if isinstance(name_or_database, str) else getattr(name_or_database, "name", None)
        )
        if not isinstance(name, str):
            raise TypeError("name_or_database must be a str or a Database")
        operation = DropDatabase(name, comment=comment, write_concern=self._write_concern)
        await self._executor.execute(operation, session)

    async def server_info(self, session: ClientSession | None = None) -> dict[str, Any]:
        """The ``buildInfo`` of the server."""
        from mongio.operations.run_command import RunCommand

        operation = RunCommand("admin", "buildinfo", codec_options=self._codec_options)
        result: dict[str, Any] = await self._executor.execute(operation, session)
        return result

    async def bulk_write(
        self,
        models: Iterable[WriteModel | WriteModelLike],
        session: ClientSession | None = None,
        ordered: bool = True,
        verbose_results: bool = False,
        bypass_document_validation: bool | None = None,
        comment: Any = None,
        let: Mapping[str, Any] | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        *,
        raw_data: bool | None = None,
    ) -> ClientBulkWriteResult:
        """Run inserts, updates, replaces and deletes over any namespaces in as few ``bulkWrite`` commands as
        the server's limits allow (MongoDB 8.0+). Each model names its namespace (``InsertOne({...},
        namespace="db.coll")``). Raises :class:`~mongio.operations.ClientBulkWriteException` when any write
        failed, with the partial result."""
        concern = as_write_concern(write_concern) if write_concern is not None else self._write_concern
        if session is not None and session.in_transaction:
            # The transaction's write concern applies (on commit): one given here is refused, the client's
            # is not used.
            check_no_operation_concerns(write_concern=write_concern is not None)
            concern = DEFAULT_WRITE_CONCERN
        bulk = ClientBulkWrite(
            # PyMongo's models are converted there (as_write_model), though its signature names mongio's only.
            cast("Iterable[WriteModel]", models),
            ordered=ordered,
            bypass_document_validation=bypass_document_validation,
            comment=comment,
            let=let,
            verbose_results=verbose_results,
            raw_data=raw_data,
            write_concern=concern,
            codec_options=self._codec_options,
        )
        # The results cursor of each batch is drained in the batch's session, on the batch's server.
        own_session = self.implicit_session() if session is None and concern.acknowledged else None
        run_in = session if session is not None else own_session
        # Load balanced: a batch's results cursor lives on the connection that opened it.
        pin = ConnectionPin()
        try:
            # timeoutMS bounds all the batches together, not each one.
            with self._executor.timeout_scope(None, session):
                while (batch := bulk.next_batch()) is not None:
                    await self._run_client_bulk_batch(batch, run_in, pin)
                    pin.release()
                    for address, replaced in bulk.take_superseded_cursors():
                        await self._drop_results_cursor(None, address, replaced, run_in)
        except MongioError as exc:
            for address, replaced in bulk.take_superseded_cursors():
                await self._drop_results_cursor(None, address, replaced, run_in)
            bulk.raise_top_level(exc)
        except BaseException:
            # Cancelled (or a client-side error): nothing more is awaited, the reaper kills what is left.
            for address, replaced in bulk.take_superseded_cursors():
                self._abandon_server_cursor(address, replaced.namespace, replaced.id)
            raise
        finally:
            pin.release()
            if own_session is not None:
                await own_session.end_session()
        return bulk.result()

    async def _run_client_bulk_batch(
        self, batch: ClientBulkWriteBatch, run_in: ClientSession | None, pin: ConnectionPin
    ) -> None:
        """Run one ``bulkWrite`` command of a client bulk write and drain its results cursor into the batch, on
        the batch's server (and, load balanced, its connection)."""
        batch_server: Address
        try:
            cursor, batch_server = await self._executor.execute_answered(batch, run_in, pin=pin)
        except BatchWriteConcernRetry as unretried:
            # Its retry (if any) failed the same way: a write concern error does not end the bulk write, and
            # the reply's results cursor is drained like any other.
            if unretried.batch is not batch:
                raise
            cursor = batch.accept_reply(unretried)
            batch_server = unretried.address
        if not cursor.id:
            return
        try:
            while cursor.id:
                more = GetMore(cursor.database, cursor.collection, cursor.id, codec_options=self._codec_options)
                cursor = await self._executor.execute(more, run_in, address=batch_server, pin=pin)
                batch.record_results(cursor.batch)
        except BaseException as exc:
            await self._drop_results_cursor(exc, batch_server, cursor, run_in, pin)
            raise
        batch.cursor_exhausted()

    def _change_stream_origin(
        self,
    ) -> tuple[type[ClusterChangeStream[DocumentType]], MongoClient[DocumentType], str, str | None]:
        from mongio.change_stream import ClusterChangeStream  # on first use: most programs never watch

        return ClusterChangeStream, self, "admin", None

    # -- sessions ----------------------------------------------------------------------------------------------

    def start_session(
        self,
        causal_consistency: bool | None = None,
        default_transaction_options: TransactionOptions | TransactionOptionsLike | None = None,
        snapshot: bool | None = False,
        default_timeout_ms: float | None = None,
        snapshot_time: Timestamp | TimestampLike | None = None,
    ) -> ClientSession:
        """A new session: ``async with client.start_session() as s:`` (or end it with ``await s.end_session()``).

        Causally consistent by default; ``snapshot=True`` makes every read see one point in time (the
        ``snapshot_time`` given, else that of the first read). ``default_timeout_ms`` bounds each of its
        operations (0: no bound) unless a ``timeout()`` block does. Transactions:
        :meth:`ClientSession.start_transaction` and :meth:`ClientSession.with_transaction`.
        """
        if self._closed:
            raise self.closed_error()
        options = SessionOptions(
            causal_consistency, default_transaction_options, snapshot, default_timeout_ms, snapshot_time
        )
        return ClientSession(self, options)

    def implicit_session(self) -> ClientSession:
        """Internal, not part of the API: a session the driver makes for one cursor's life (not causally
        consistent)."""
        return ClientSession(self, SessionOptions(causal_consistency=False), implicit=True)

    def close_abandoned_cursor(
        self, address: Address | None, namespace: str, cursor_id: int, session: ClientSession | None
    ) -> None:
        """Internal, not part of the API: a cursor was garbage-collected (or cancelled mid-fetch) with a server
        cursor or an implicit session still open. Its server session is given back at once; the server cursor
        is queued for the cursor reaper's task, which kills it on the client's loop (this may run in a
        finalizer: nothing is awaited)."""
        server_session = session.abandon() if session is not None else None
        if server_session is not None:
            self._executor.release_server_session(server_session)
        if cursor_id:
            self._abandon_server_cursor(address, namespace, cursor_id)

    async def _drop_results_cursor(
        self,
        error: BaseException | None,
        address: Address,
        cursor: CursorState,
        session: ClientSession | None,
        pin: ConnectionPin | None = None,
    ) -> None:
        """Kill a bulk write's results cursor that a failed ``getMore`` left open on the server (``error``), or
        that a retry's reply replaced (no error). ``pin`` holds the cursor's connection (load balanced), which
        goes back to its pool afterwards."""
        if isinstance(error, CursorNotFound) or (pin is not None and pin.broken):
            return
        if error is not None and not isinstance(error, Exception):
            # Cancelled: nothing may be awaited here, so the reaper task kills it; a held connection, with the
            # cursor open on it, is closed.
            if pin is not None and pin.held:
                pin.discard("a client bulk write was cancelled while draining its results cursor")
            else:
                self._abandon_server_cursor(address, cursor.namespace, cursor.id)
            return
        operation = KillCursors(cursor.database, cursor.collection, [cursor.id], codec_options=self._codec_options)
        try:
            await self._executor.execute(operation, session, address=address, pin=pin)
        except MongioError:
            pass  # the server drops idle cursors on its own
        except BaseException:
            if pin is not None:
                pin.discard("killing a client bulk write's results cursor was cancelled")
            raise

    async def _kill_abandoned_cursors(self, address: Address, namespace: str, cursor_ids: Sequence[int]) -> None:
        database, _, collection = namespace.partition(".")
        operation = KillCursors(database, collection, cursor_ids, codec_options=self._codec_options)
        await self._executor.execute(operation, None, address=address)

    async def _run(self, operation: Operation[Any], session: ClientSession | None = None) -> Any:
        return await self._executor.execute(operation, session)


_log = logging.getLogger("mongio.client")


# Host name endings of services that speak MongoDB's protocol without being MongoDB, and the page that
# says what they support; a client whose seed (or SRV name) ends so is told once, when it is created.
_LOOKALIKE_SERVICES = (
    (".cosmos.azure.com", "CosmosDB", "https://www.mongodb.com/supportability/cosmosdb"),
    (".docdb.amazonaws.com", "DocumentDB", "https://www.mongodb.com/supportability/documentdb"),
    (".docdb-elastic.amazonaws.com", "DocumentDB", "https://www.mongodb.com/supportability/documentdb"),
)


def _lookalike_service_notice(options: ClientOptions) -> str | None:
    """The notice for the first host name that belongs to a MongoDB-compatible service, or None."""
    names = [options.srv_host] if options.srv_host is not None else [host for host, _ in options.seeds]
    for name in names:
        folded = name.lower()
        for ending, service, page in _LOOKALIKE_SERVICES:
            if folded.endswith(ending):
                return (
                    f"host {name} appears to be a {service} cluster, not MongoDB: for what it supports, "
                    f"see {page}"
                )
    return None


def _tell_of_lookalike_service(options: ClientOptions) -> None:
    """Log the notice at INFO on ``mongio.client``; when nothing listens there, warn (UserWarning), as
    PyMongo does, so that it is seen either way."""
    notice = _lookalike_service_notice(options)
    if notice is None:
        return
    if _log.isEnabledFor(logging.INFO):
        _log.info(notice)
    else:
        warnings.warn(notice, UserWarning, stacklevel=3)  # at the line that created the client

# How long close() spends killing the cursors still queued by the cursor reaper.
_CLOSE_FLUSH_TIMEOUT = 5.0


async def _wait_all(closings: list[Awaitable[None]], left_unfinished: Callable[[], None]) -> None:
    """Wait for every closing. One that failed is logged at debug level with its exception, not raised:
    ``close()`` never fails on what a server sent. A cancellation (or a KeyboardInterrupt) is raised. Closed
    unfinished (its task destroyed with its loop), it calls ``left_unfinished``."""
    try:
        results = await gather(*closings)
    except GeneratorExit:
        left_unfinished()
        raise
    for result in results:
        if isinstance(result, Exception):
            _log.debug("closing the client failed: %s: %s", type(result).__name__, result, exc_info=result)
        elif isinstance(result, BaseException):
            raise result


AsyncMongoClient = MongoClient
