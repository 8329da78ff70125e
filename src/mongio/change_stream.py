"""Change streams: the changes made to a collection, a database or a whole deployment, as they happen.

``watch()`` runs the ``aggregate`` that opens the stream and returns it; iterate it, and close it when done::

    async with await coll.watch([{"$match": {"operationType": "insert"}}]) as stream:
        async for change in stream:
            print(change["fullDocument"])

A stream is a tailable cursor that resumes by itself: when a ``getMore`` fails with a network error or an
error the server marks resumable, the stream opens a new cursor (after a new server selection, with the same
session) that starts right after the last change it returned, once per error. Other errors close the stream
and are raised.

``await stream.next()`` waits for the next change; ``await stream.try_next()`` makes at most one ``getMore``
and returns None when it brought nothing. To store a position and resume from it after a restart, read
``stream.resume_token`` after each ``try_next()`` (even one that returned None: the server moves the token
forward while nothing matches) and pass it back as ``resume_after`` (or ``start_after``)::

    async with await coll.watch(resume_after=saved) as stream:
        while stream.alive:
            change = await stream.try_next()
            save(stream.resume_token)
            if change is not None:
                process(change)

Change streams need a replica set or a sharded cluster, and a ``majority`` read concern or none. Prefer
``watch()`` to an ``aggregate`` with a ``$changeStream`` stage: only a stream made by ``watch()`` resumes.

A stream that is cancelled in the middle of a ``getMore`` (``asyncio.timeout`` around ``next()``) gives up
that cursor; the next call opens a new one from the cached resume token, so no change is lost or repeated.

Under a client-side operation timeout (``timeoutMS`` on the client, a database, a collection or the session,
or ``watch()`` called in a ``mongio.timeout()`` block) the ``aggregate`` gets that timeout, and so does each later ``next()`` or
``try_next()`` call, resume included. A call that times out leaves the stream usable: call ``next()`` again
and it resumes in a new cursor. If that happens before any change arrived, the server may be slower to catch
up than the timeout allows: close the stream and watch again with a longer timeout.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from mongio.cursor import CommandCursor
from mongio.error_classification import is_resumable
from mongio.errors import InvalidOperation, MongioError
from mongio.event_loops import bind_to_running_loop
from mongio.execution import deadline as csot
from mongio.operations.change_stream_stage import (
    ChangeStreamAggregate,
    change_stream_options,
    resume_options,
)

if TYPE_CHECKING:
    from mongio.bson import CodecOptions
    from mongio.cursor_client import CursorClient
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import ReadPreferenceMode
    from mongio.sessions.client_session import ClientSession

__all__ = [
    "AsyncChangeStream",
    "AsyncClusterChangeStream",
    "AsyncCollectionChangeStream",
    "AsyncDatabaseChangeStream",
    "ChangeStream",
    "ClusterChangeStream",
    "CollectionChangeStream",
    "DatabaseChangeStream",
]

_T = TypeVar("_T")
_Self = TypeVar("_Self", bound="ChangeStream[Any]")

_MISSING_TOKEN = "Cannot provide resume functionality when the resume token is missing."


class _StreamCursor(CommandCursor[Any]):
    """The tailable cursor under a change stream: one batch at a time, told apart so the stream knows when
    it hands out the last change of a batch (whose resume token is the batch's ``postBatchResumeToken``)."""

    def __init__(self, *args: Any, max_await_time_ms: int | None = None, **kwargs: Any) -> None:
        # The stream checked max_await_time_ms against its timeout once, in watch(); a resume made late in a
        # call must not fail that check against what is left of the call.
        super().__init__(*args, **kwargs)
        self._stream_max_await_ms = max_await_time_ms

    def _tailable(self) -> bool:
        return True

    def _await_data(self) -> bool:
        return True

    @property
    def buffered(self) -> bool:
        return bool(self._data)

    @property
    def open_on_server(self) -> bool:
        return not self._killed

    @property
    def post_batch_resume_token(self) -> Any:
        return self._post_batch_resume_token

    def take(self) -> tuple[Any, bool]:
        """The next buffered change, and whether it was the last of its batch."""
        change = self._data.popleft()
        return change, not self._data

    async def open(self) -> None:
        await self._open()
        self._max_await_time_ms = self._stream_max_await_ms

    async def fetch(self) -> None:
        """One ``getMore`` (with ``maxTimeMS`` only from ``max_await_time_ms``, capped by the time left)."""
        with self._timeout_scope(first=False):
            await self._get_more()


class ChangeStream(Generic[_T]):
    """A change stream, made by ``watch()`` on a :class:`~mongio.MongoClient`, a database or a collection.

    Use it as an async iterator (``async for change in stream``) and close it when done, or use it as an
    async context manager (``async with await coll.watch() as stream``). See the module documentation for
    how to keep a resume token.
    """

    # Whether the stream is of the whole deployment (the $changeStream stage's allChangesForCluster).
    _all_changes_for_cluster: ClassVar[bool] = False
    # Read by the finalizer, which also runs for a stream whose __init__ refused its arguments before setting
    # them: no session then, so nothing to give back.
    _session: Any = None
    _explicit_session: ClientSession | None = None

    def __init__(
        self,
        client: CursorClient,
        database: str,
        collection: str | None,
        pipeline: Sequence[Mapping[str, Any]] | None = None,
        *,
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
        level_timeout: float | None = None,
        read_preference: ReadPreferenceMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions,
    ) -> None:
        if pipeline is None:
            pipeline = []
        if not isinstance(pipeline, list | tuple):
            raise TypeError(f"pipeline must be a list, not {type(pipeline).__name__}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)):
            raise TypeError(f"batch_size must be an int, not {batch_size!r}")
        if max_await_time_ms is not None and (
            isinstance(max_await_time_ms, bool) or not isinstance(max_await_time_ms, int)
        ):
            raise TypeError(f"max_await_time_ms must be an int, not {max_await_time_ms!r}")
        self._client = client
        self._database = database
        self._collection = collection
        self._pipeline = list(pipeline)
        self._options = change_stream_options(
            full_document=full_document,
            full_document_before_change=full_document_before_change,
            resume_after=resume_after,
            start_after=start_after,
            start_at_operation_time=start_at_operation_time,
            show_expanded_events=show_expanded_events,
            all_changes_for_cluster=self._all_changes_for_cluster,
        )
        self._batch_size = batch_size
        self._max_await_time_ms = max_await_time_ms
        self._collation = collation
        self._comment = comment
        self._read_preference = read_preference
        self._read_concern = read_concern
        self._codec_options = codec_options
        self._explicit_session = session
        self._session: Any = session
        # Where the stream is: the cached resume token, and whether a stream opened with start_after has yet
        # to return a change (until then a resume keeps using startAfter).
        self._resume_token: Any = start_after if start_after is not None else resume_after
        self._start_after_pending = start_after is not None
        self._gave_start_point = any(p is not None for p in (resume_after, start_after, start_at_operation_time))
        self._operation_time: Any = start_at_operation_time
        self._max_wire_version: int | None = None
        self._cursor: _StreamCursor | None = None
        # A cursor given up by a cancelled or timed-out call: the next call kills it and resumes.
        self._interrupted = False
        self._closed = False
        # The event loop the stream was opened on: its cursor and session belong there.
        self._loop: asyncio.AbstractEventLoop | None = None
        # Whether the first aggregate ran: watch() returns the stream unopened; awaiting it, entering it or
        # asking it for a change opens it (PyMongo's and Motor's idioms both).
        self._started = False
        # The client-side operation timeout of every call (seconds; math.inf: no bound; None: CSOT off), and
        # the one the stream's database or collection set (same units), which comes before the client's.
        self._level_timeout = level_timeout
        # Settled where watch() is called, so an enclosing timeout() block bounds the stream even when it is
        # opened later (awaited or entered outside the block).
        self._timeout: float | None = self._settle_timeout()

    # -- state ------------------------------------------------------------------------------------------------

    @property
    def resume_token(self) -> Any:
        """The token to resume after the last change returned (or after the server's scan position when
        nothing matched lately): pass it to ``watch(resume_after=...)`` to continue where this stream was.
        None until the stream has one."""
        return self._resume_token

    @property
    def alive(self) -> bool:
        """False once the stream is closed, or its cursor ended (after an ``invalidate`` event)."""
        if self._closed:
            return False
        cursor = self._cursor
        return cursor is None or self._interrupted or cursor.buffered or cursor.open_on_server

    @property
    def session(self) -> ClientSession | None:
        """The explicit session the stream was given, or None."""
        return self._explicit_session

    # -- opening and resuming ---------------------------------------------------------------------------------

    def _aggregate(self, options: Mapping[str, Any]) -> ChangeStreamAggregate:
        return ChangeStreamAggregate(
            self._database,
            self._collection,
            options,
            self._pipeline,
            batch_size=self._batch_size,
            collation=self._collation,
            comment=self._comment,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            codec_options=self._codec_options,
        )

    async def _run_aggregate(self, options: Mapping[str, Any]) -> None:
        if self._session is None:
            # One session for the stream's life: a resume must run in the session of the cursor it replaces.
            self._session = self._client.implicit_session()
        operation = self._aggregate(options)
        cursor = _StreamCursor(
            self._client,
            operation,
            session=self._session,
            codec_options=self._codec_options,
            batch_size=self._batch_size or 0,
            max_await_time_ms=self._max_await_time_ms,
            comment=self._comment,
        )
        self._cursor = cursor
        try:
            await cursor.open()
        except Exception:
            raise
        except BaseException:
            # Cancelled: the cursor gave itself up; the next call tries again from the cached token.
            self._interrupted = True
            raise
        self._max_wire_version = operation.max_wire_version
        if (
            self._operation_time is None
            and not self._gave_start_point
            and not cursor.buffered
            and cursor.post_batch_resume_token is None
        ):
            self._operation_time = operation.operation_time
        self._batch_received()

    async def _open(self) -> None:
        """Run the first ``aggregate``; an error there is raised as it is (never resumed)."""
        try:
            await self._run_aggregate(self._options)
        except Exception:
            await self._close_quietly()
            raise
        except BaseException:
            # Cancelled before the stream was handed out: nothing may be awaited now, so the client takes
            # back the session.
            self._closed = True
            self._interrupted = False
            self._cursor = None
            self._abandon_session()
            raise

    async def _opened(self: _Self) -> _Self:
        """Run the first ``aggregate`` unless it ran already, and give the stream back."""
        self._loop = bind_to_running_loop(
            self._loop,
            "this change stream",
            "call watch() again on this loop, with resume_after=stream.resume_token to continue from here",
        )
        if not self._started and not self._closed:
            with csot.timeout(self._timeout):
                await self._open()
            self._started = True
        return self

    def __await__(self: _Self) -> Generator[Any, None, _Self]:
        """``await coll.watch()`` (PyMongo's async API) opens the stream and gives it back."""
        return self._opened().__await__()

    def _settle_timeout(self) -> float | None:
        """The timeout each call of the stream gets: what is left of an enclosing ``timeout()`` block, else
        the database's or collection's timeout, else the session's ``default_timeout_ms``, else the client's
        ``timeoutMS``. ``max_await_time_ms`` must be shorter, or no ``getMore`` could end in time."""
        value: float | None = self._client.executor.operation_timeout(
            self._level_timeout, self._explicit_session, deadline=csot.current_deadline()
        )
        max_await = self._max_await_time_ms
        if value is not None and max_await is not None and not math.isinf(value) and max_await >= value * 1000:
            raise InvalidOperation(
                f"max_await_time_ms ({max_await}) must be less than the timeout ({value * 1000:g} ms)"
            )
        return value

    async def _resume(self) -> None:
        options = resume_options(
            self._options,
            self._resume_token,
            start_after_pending=self._start_after_pending,
            operation_time=self._operation_time,
        )
        await self._run_aggregate(options)

    def _batch_received(self) -> None:
        cursor = self._cursor
        if cursor is not None and not cursor.buffered and cursor.post_batch_resume_token is not None:
            self._resume_token = cursor.post_batch_resume_token

    async def _drop_interrupted(self) -> None:
        """Close the cursor an interrupted call left behind: a timed-out ``getMore`` may leave it open on the
        server; a cancelled one already handed it to the client, which kills it."""
        self._interrupted = False
        cursor = self._cursor
        if cursor is not None and cursor.open_on_server:
            await cursor.close()

    # -- iterating --------------------------------------------------------------------------------------------

    def _take(self, cursor: _StreamCursor) -> Any:
        change, last_of_batch = cursor.take()
        try:
            token = change["_id"]
        except (KeyError, TypeError, IndexError):
            token = None
        if token is None:
            raise InvalidOperation(_MISSING_TOKEN)
        if last_of_batch and cursor.post_batch_resume_token is not None:
            token = cursor.post_batch_resume_token
        self._resume_token = token
        self._start_after_pending = False
        return change

    async def try_next(self) -> _T | None:
        """The next change if one is available now, else None (always None once the stream has ended after an
        ``invalidate`` event or was closed: :attr:`alive` is then False).

        Makes at most one ``getMore`` (which the server holds open for ``max_await_time_ms`` while nothing
        happens), resuming once if it fails with a resumable error. Read :attr:`resume_token` after each
        call to keep the stream's position, and :attr:`alive` to know whether to call again.
        """
        await self._opened()
        with csot.timeout(self._timeout):
            return await self._try_next()

    async def _try_next(self) -> _T | None:
        if not self.alive:
            # Ended (after its ``invalidate`` event) or closed: nothing will come, as PyMongo's None says.
            if not self._closed:
                await self.close()
            return None
        cursor = self._cursor
        if cursor is None:
            await self._open()
        elif self._interrupted:
            await self._drop_interrupted()
            await self._resume_or_close()
            # The call that was interrupted made no progress: this one also looks for new changes.
            cursor = self._cursor
            if cursor is not None and not cursor.buffered and cursor.open_on_server:
                await self._fetch(cursor)
        elif not cursor.buffered and cursor.open_on_server:
            await self._fetch(cursor)
        cursor = self._cursor
        if cursor is None or not cursor.buffered:
            return None
        try:
            change: _T = self._take(cursor)
        except InvalidOperation:
            await self.close()
            raise
        return change

    async def _fetch(self, cursor: _StreamCursor) -> None:
        try:
            await cursor.fetch()
        except Exception as exc:
            if _timed_out(exc):
                # Out of time: the stream stays usable and the next call resumes.
                self._interrupted = True
                raise
            if not is_resumable(exc, self._max_wire_version):
                await self._close_quietly()
                raise
            if cursor.open_on_server:
                # A load-balanced cursor keeps its connection after a failed getMore until it is closed.
                await cursor.close()
            await self._resume_or_close()
            return
        except BaseException:
            # Cancelled mid-getMore: the cursor is given up (its batch is lost); the next call resumes from
            # the cached token in a new cursor.
            self._interrupted = True
            raise
        self._batch_received()

    async def _resume_or_close(self) -> None:
        try:
            await self._resume()
        except Exception as exc:
            if _timed_out(exc):
                self._interrupted = True
                raise
            await self._close_quietly()
            raise

    async def next(self) -> _T:
        """The next change, waiting for one as long as it takes (or for the stream's timeout, if it has
        one); raises ``StopAsyncIteration`` once the stream is closed or has ended (after an ``invalidate``
        event)."""
        await self._opened()
        with csot.timeout(self._timeout):
            while self.alive:
                change = await self._try_next()
                if change is not None:
                    return change
            if not self._closed:
                await self.close()
            raise StopAsyncIteration

    def __aiter__(self: _Self) -> _Self:
        return self

    async def __anext__(self) -> _T:
        return await self.next()

    # -- closing ----------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the stream: kill its cursor on the server and end its implicit session."""
        with csot.timeout(self._timeout):
            await self._close()

    async def _close(self) -> None:
        self._closed = True
        cursor, self._cursor = self._cursor, None
        self._interrupted = False
        if cursor is not None:
            await cursor.close()
        session = self._session
        self._session = None
        if session is not None and session is not self._explicit_session:
            await session.end_session()

    async def _close_quietly(self) -> None:
        try:
            await self.close()
        except MongioError:
            pass

    async def __aenter__(self: _Self) -> _Self:
        return await self._opened()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _abandon_session(self) -> None:
        """Give the implicit session to the client without awaiting (from ``__del__`` or a cancelled task)."""
        session, self._session = self._session, None
        if session is None or session is self._explicit_session:
            return
        self._client.close_abandoned_cursor(None, "", 0, session)

    def __del__(self) -> None:
        try:
            self._abandon_session()
        except Exception:  # a finalizer must not raise, and nothing more can be done here
            pass

    def __repr__(self) -> str:
        target = self._database if self._collection is None else f"{self._database}.{self._collection}"
        return f"<{type(self).__name__} {target} alive={self.alive}>"


def _timed_out(error: BaseException) -> bool:
    """A timeout of the client-side operation timeout (not a socket timeout without it, which is a network
    error and resumes at once)."""
    return csot.is_enabled() and bool(getattr(error, "timeout", False))


class CollectionChangeStream(ChangeStream[_T]):
    """The change stream of :meth:`Collection.watch`."""


class DatabaseChangeStream(ChangeStream[_T]):
    """The change stream of :meth:`Database.watch`: every collection of one database."""


class ClusterChangeStream(ChangeStream[_T]):
    """The change stream of :meth:`MongoClient.watch`: every collection of every database (``admin``,
    ``local`` and ``config`` excepted)."""

    _all_changes_for_cluster = True


# PyMongo's async names.
AsyncChangeStream = ChangeStream
AsyncCollectionChangeStream = CollectionChangeStream
AsyncDatabaseChangeStream = DatabaseChangeStream
AsyncClusterChangeStream = ClusterChangeStream
