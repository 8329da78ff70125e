"""What :class:`~mongio.client.MongoClient`, :class:`~mongio.database.Database` and
:class:`~mongio.collection.Collection` share, written once: the options each carries (:class:`OptionScope`),
``with_options`` and the running of operations for a database or a collection (:class:`DerivedScope`), and
``watch`` (:class:`ChangeStreamSource`).

A database takes its options from its client and a collection from its database, each option replaced where
given; they read their parent's options through its public properties.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mongio.cursor import CommandCursor, ObjectCommandCursor
from mongio.execution.deadline import level_timeout
from mongio.operations.crud import Aggregate
from mongio.options.read_concern import as_read_concern
from mongio.options.read_preference import as_read_preference
from mongio.options.write_concern import as_write_concern
from mongio.sessions.client_session import check_session_argument

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from mongio.bson import CodecOptions
    from mongio.change_stream import ChangeStream
    from mongio.client import MongoClient
    from mongio.execution.executor import Executor
    from mongio.operations.base import Operation
    from mongio.options.protocols import (
        CodecOptionsLike,
        ReadConcernLike,
        ReadPreferenceLike,
        WriteConcernLike,
    )
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import ReadPreferenceMode
    from mongio.options.write_concern import WriteConcern
    from mongio.sessions.client_session import ClientSession

__all__ = ["ChangeStreamSource", "DerivedScope", "OptionScope", "split_options"]

_R = TypeVar("_R")
_Stream = TypeVar("_Stream", bound="ChangeStream[Any]")

# The aggregate command's options under PyMongo's (server) names and mongio's snake_case ones; any other
# keyword goes into the command as it is.
AGGREGATE_OPTIONS = {
    "allowDiskUse": "allow_disk_use",
    "allow_disk_use": "allow_disk_use",
    "batchSize": "batch_size",
    "batch_size": "batch_size",
    "bypassDocumentValidation": "bypass_document_validation",
    "bypass_document_validation": "bypass_document_validation",
    "collation": "collation",
    "hint": "hint",
    "maxTimeMS": "max_time_ms",
    "max_time_ms": "max_time_ms",
    "maxAwaitTimeMS": "max_await_time_ms",
    "max_await_time_ms": "max_await_time_ms",
    "rawData": "raw_data",
    "raw_data": "raw_data",
}



def split_options(kwargs: Mapping[str, Any], names: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` split into the options ``names`` knows (under the names it gives them) and the rest, which
    go into the command as given (PyMongo passes unknown keyword arguments through to the server)."""
    options: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in kwargs.items():
        name = names.get(key)
        if name is None:
            extra[key] = value
        else:
            options[name] = value
    return options, extra

class OptionScope:
    """The options a client, a database or a collection carries: set by each constructor, read here."""

    _codec_options: CodecOptions
    _read_preference: ReadPreferenceMode
    _read_concern: ReadConcern
    _write_concern: WriteConcern
    # The timeoutMS a database or collection sets (seconds, math.inf for no limit), which comes before a
    # session's default and the client's; None when none is set (always on the client, whose own timeoutMS
    # its executor applies last).
    _timeout: float | None = None
    _executor: Executor

    @property
    def codec_options(self) -> CodecOptions:
        """How documents are decoded and encoded (document class, time zones, UUIDs...); the databases and
        collections made from here inherit it unless given their own."""
        return self._codec_options

    @property
    def read_preference(self) -> ReadPreferenceMode:
        """Which members reads go to; the databases and collections made from here inherit it unless given
        their own."""
        return self._read_preference

    @property
    def read_concern(self) -> ReadConcern:
        """The read concern sent with reads; the databases and collections made from here inherit it unless
        given their own."""
        return self._read_concern

    @property
    def write_concern(self) -> WriteConcern:
        """The write concern sent with writes; the databases and collections made from here inherit it
        unless given their own."""
        return self._write_concern


class DerivedScope(OptionScope):
    """A database or a collection: its options are its parent's (the client's, the database's) but those
    given, and its operations run on the client's executor under its timeout."""

    _client: MongoClient[Any]

    @property
    def timeout(self) -> float | None:
        """The client-side operation timeout set on this object (or, for a collection, on its database):
        ``timeoutMS`` in seconds, ``math.inf`` when 0 was given (no limit). None when neither sets one: a
        session's ``default_timeout_ms``, else the client's ``timeoutMS``, applies. A :func:`mongio.timeout`
        block comes before all of them."""
        return self._timeout

    def _inherit_options(
        self,
        parent: OptionScope,
        parent_timeout: float | None,
        codec_options: CodecOptions | CodecOptionsLike | None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None,
        write_concern: WriteConcern | WriteConcernLike | None,
        read_concern: ReadConcern | ReadConcernLike | None,
        timeout: float | None,
    ) -> None:
        """Set the options: each given one, else ``parent``'s (``parent_timeout`` for the timeout: the
        database's for a collection; None for a database, the client's applying on its own)."""
        self._codec_options = parent.codec_options.resolve(codec_options)
        self._read_preference = (
            parent.read_preference if read_preference is None else as_read_preference(read_preference)
        )
        self._write_concern = parent.write_concern if write_concern is None else as_write_concern(write_concern)
        self._read_concern = parent.read_concern if read_concern is None else as_read_concern(read_concern)
        self._timeout = parent_timeout if timeout is None else level_timeout(timeout)

    def _with_options(
        self,
        codec_options: CodecOptions,
        read_preference: ReadPreferenceMode | ReadPreferenceLike,
        write_concern: WriteConcern | WriteConcernLike,
        read_concern: ReadConcern | ReadConcernLike,
        timeout: float | None,
    ) -> Self:
        """The same database or collection, made by its constructor with these options."""
        raise NotImplementedError

    def with_options(
        self,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        timeout: float | None = None,
    ) -> Self:
        """The same database or collection with some options changed; the others are kept.

        ``fast = coll.with_options(write_concern=WriteConcern(w=1))``; ``timeout`` (seconds; 0 for no limit)
        bounds each operation on it as ``timeoutMS`` does, unless a :func:`mongio.timeout` block is in force;
        once set it cannot be unset, only changed.
        """
        return self._with_options(
            self._codec_options.resolve(codec_options),
            self._read_preference if read_preference is None else read_preference,
            self._write_concern if write_concern is None else write_concern,
            self._read_concern if read_concern is None else read_concern,
            self._timeout if timeout is None else timeout,
        )

    # -- running ----------------------------------------------------------------------------------------------

    def _run(self, operation: Operation[_R], session: Any) -> Coroutine[Any, Any, _R]:
        """The coroutine that runs ``operation`` under this object's timeout: the executor's own, handed back
        rather than awaited here (one coroutine level less for every operation; await it at once)."""
        if session is not None:
            check_session_argument(session)
        return self._executor.execute(operation, session, level_timeout=self._timeout)

    def _command_cursor(
        self,
        operation: Operation[Any],
        session: Any,
        item: Callable[[Mapping[str, Any]], Any] | None = None,
        *,
        cursor_class: type[CommandCursor[Any]] = CommandCursor,
        **cursor_options: Any,
    ) -> CommandCursor[Any]:
        """A ``cursor_class`` over what ``operation`` answers (each document made into ``item`` when given), run
        under this object's timeout."""
        if item is not None:
            return ObjectCommandCursor(
                self._client,
                operation,
                item,
                session=session,
                codec_options=operation.codec_options,
                level_timeout=self._timeout,
                **cursor_options,
            )
        return cursor_class(
            self._client,
            operation,
            session=session,
            codec_options=operation.codec_options,
            level_timeout=self._timeout,
            **cursor_options,
        )

    def _aggregate(
        self,
        database: str,
        collection: str | None,
        pipeline: Sequence[Mapping[str, Any]],
        session: ClientSession | None,
        let: Mapping[str, Any] | None,
        comment: Any,
        kwargs: dict[str, Any],
        cursor_class: type[CommandCursor[Any]] = CommandCursor,
    ) -> CommandCursor[Any]:
        """The ``cursor_class`` of an ``aggregate`` on ``collection`` (``None``: the database,
        ``{aggregate: 1}``) with this object's options; ``kwargs`` are the command's options (see
        ``AGGREGATE_OPTIONS``), others going into the command as given, and ``timeout_mode``."""
        timeout_mode = kwargs.pop("timeout_mode", None)
        options, extra = split_options(kwargs, AGGREGATE_OPTIONS)
        operation = Aggregate(
            database,
            collection,
            pipeline,
            let=let,
            comment=comment,
            extra=extra or None,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
            **options,
        )
        return self._command_cursor(
            operation,
            session,
            cursor_class=cursor_class,
            batch_size=options.get("batch_size") or 0,
            max_await_time_ms=operation.max_await_time_ms,
            comment=comment,
            timeout_mode=timeout_mode,
        )


class ChangeStreamSource(OptionScope, Generic[_Stream]):
    """What can be watched: a collection, a database or the whole deployment (the client)."""

    def _change_stream_origin(self) -> tuple[type[_Stream], MongoClient[Any], str, str | None]:
        """The class of this object's change streams, the client, and the database and collection (None
        for all of them) the stream's ``aggregate`` runs on."""
        raise NotImplementedError

    def watch(
        self,
        pipeline: Sequence[Mapping[str, Any]] | None = None,
        full_document: str | None = None,
        resume_after: Mapping[str, Any] | None = None,
        max_await_time_ms: int | None = None,
        batch_size: int | None = None,
        collation: Any = None,
        start_at_operation_time: Any = None,
        session: ClientSession | None = None,
        start_after: Mapping[str, Any] | None = None,
        comment: Any = None,
        full_document_before_change: str | None = None,
        show_expanded_events: bool | None = None,
    ) -> _Stream:
        """Watch the changes to this collection; on a database, to every collection of it (system collections
        excepted); on the client, to every collection of every database (``admin``, ``local``, ``config`` and
        system collections excepted). Returns the change stream (see :mod:`mongio.change_stream`), whose
        ``aggregate`` runs when it is awaited (PyMongo's ``await coll.watch()``), entered
        (``async with coll.watch()``, Motor's way) or first asked for a change. ::

            async with await coll.watch([{"$match": {"operationType": "insert"}}]) as stream:
                async for change in stream:
                    ...
            async with await client.watch() as stream:
                async for change in stream:
                    print(change["ns"], change["operationType"])

        ``pipeline`` stages follow the ``$changeStream`` stage. ``full_document`` (``"updateLookup"``,
        ``"whenAvailable"``, ``"required"``) and ``full_document_before_change`` ask for post- and pre-images;
        ``resume_after``, ``start_after`` (a resume token) or ``start_at_operation_time`` (a ``Timestamp``)
        say where to start; ``max_await_time_ms`` is how long each ``getMore`` waits for changes. Prefer this
        to an ``aggregate`` with ``$changeStream``: only a stream made here resumes after errors. The read
        concern must be ``majority`` or unset.
        """
        stream_class, client, database, collection = self._change_stream_origin()
        return stream_class(
            client,
            database,
            collection,
            pipeline,
            full_document=full_document,
            resume_after=resume_after,
            max_await_time_ms=max_await_time_ms,
            batch_size=batch_size,
            collation=collation,
            start_at_operation_time=start_at_operation_time,
            session=session,
            start_after=start_after,
            comment=comment,
            full_document_before_change=full_document_before_change,
            show_expanded_events=show_expanded_events,
            level_timeout=self._timeout,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            codec_options=self._codec_options,
        )
