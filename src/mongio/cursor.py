"""Cursors: :class:`Cursor` for ``find`` and :class:`CommandCursor` for ``aggregate``, ``listIndexes``,
``listCollections`` and ``cursor_command``.

A cursor runs its first command when it is first awaited or iterated, then fetches further batches with
``getMore`` on the server that answered the first command. Three ways to use one::

    async for doc in coll.find({"x": 1}):
        ...
    docs = await coll.find({"x": 1}).to_list()
    cursor = await coll.find({"x": 1})     # the first batch is fetched; the cursor comes back

A cursor that was not given a session takes an implicit one for its whole life and ends it when the server
cursor is exhausted or closed. Close cursors you do not read to the end (``await cursor.close()`` or
``async with``); one that is garbage-collected while the server still holds it is handed to the client, which
kills it on its own event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import math
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from mongio.backend import running_loop
from mongio.bson import RawBSONDocument
from mongio.bson.lazy_batch import DocumentBatch
from mongio.errors import (
    ConfigurationError,
    CursorNotFound,
    InvalidOperation,
    MongioError,
    OperationFailure,
    OperationTimeoutError,
)
from mongio.event_loops import bind_to_running_loop
from mongio.execution import deadline as csot
from mongio.execution.connection_pin import ConnectionPin
from mongio.execution.deadline import TimeoutMode
from mongio.operations.base import CursorState, Operation
from mongio.operations.crud import CursorType, Distinct, Explain, Find, GetMore, KillCursors
from mongio.operations.models import index_document
from mongio.sessions.client_session import check_session_argument

if TYPE_CHECKING:
    from mongio.bson import CodecOptions
    from mongio.collection import Collection
    from mongio.sessions.client_session import ClientSession

__all__ = ["CommandCursor", "Cursor", "CursorType", "RawBatchCommandCursor", "RawBatchCursor"]

_T = TypeVar("_T")
_Self = TypeVar("_Self", bound="_CursorBase[Any]")
_C = TypeVar("_C", bound="Cursor[Any]")

# The cursor flags of OP_QUERY, which PyMongo's add_option/remove_option take.
_TAILABLE = 2
_OPLOG_REPLAY = 8
_NO_TIMEOUT = 16
_AWAIT_DATA = 32
_EXHAUST = 64
_PARTIAL = 128
_KNOWN_FLAGS = _TAILABLE | _OPLOG_REPLAY | _NO_TIMEOUT | _AWAIT_DATA | _EXHAUST | _PARTIAL
# Reusable: nullcontext keeps no state.
_NO_TIMEOUT_SCOPE: contextlib.nullcontext[None] = contextlib.nullcontext()
# What running a cursor sets on it (the class holds the values of a cursor that has not run).
_RUN_STATE = (
    "_id",
    "_address",
    "_namespace",
    "_started",
    "_killed",
    "_post_batch_resume_token",
    "_retrieved",
    "_csot_timeout",
    "_csot_mode",
    "_csot_deadline",
    "_loop",
    "_limit",
    "_single_batch",
    "_has_enough",
    "_keeps_documents",
)

# What Cursor.__init__ puts in its option dict for an option not given (by the names of Find's FindOptions),
# which Find would take by default: it is left out of the Find the cursor builds.
_NOT_GIVEN: dict[str, Any] = {
    "projection": None,
    "skip": 0,
    "batch_size": 0,
    "no_cursor_timeout": None,
    "cursor_type": CursorType.NON_TAILABLE,
    "sort": None,
    "allow_partial_results": None,
    "oplog_replay": None,
    "collation": None,
    "hint": None,
    "max_scan": None,
    "max_time_ms": None,
    "max_await_time_ms": None,
    "max": None,
    "min": None,
    "return_key": None,
    "show_record_id": None,
    "comment": None,
    "allow_disk_use": None,
    "let": None,
    "raw_data": None,
}
# The options find_one takes by name without a cursor (its common ones): each goes to Find as given.
SINGLE_BATCH_OPTIONS = frozenset({"projection", "sort", "hint", "comment", "collation", "max_time_ms", "let"})


class _CursorBase(Generic[_T]):
    """What both cursor kinds share: the buffered batch, getMore on the cursor's server, the implicit
    session's life, and closing (also from ``__del__``)."""

    _client: Any
    _codec_options: CodecOptions

    # The state of a cursor that has not run: kept on the class, so that making a cursor sets only what each
    # cursor needs of its own. Running the cursor sets its own values.
    _id: int | None = None
    _address: Any = None
    _namespace = ""
    _started = False
    _killed = False
    _post_batch_resume_token: Any = None
    _batch_size = 0
    _max_await_time_ms: int | None = None
    _comment: Any = None
    _retrieved = 0
    # Client-side operation timeout: the database's or collection's own timeout (seconds) and the mode asked
    # for; settled by the first command: the timeout (seconds, math.inf without bound; None: CSOT is off),
    # the mode in force, and the deadline of a CURSOR_LIFETIME cursor.
    _level_timeout: float | None = None
    _timeout_mode: TimeoutMode | None = None
    _csot_timeout: float | None = None
    _csot_mode: TimeoutMode | None = None
    _csot_deadline: float | None = None
    # The event loop of the first command: the server cursor is fetched from there only.
    _loop: asyncio.AbstractEventLoop | None = None
    # Set by _received when every document wanted has come though the server still holds the cursor (a find's
    # limit): the server cursor is then closed, the buffered documents kept.
    _has_enough = False
    # Whether this cursor's replies may keep their batch undecoded (Operation.lazy_batch): only while the
    # program is not seen keeping the documents it takes (a DocumentBatch's ``kept``, or to_list), since
    # documents that are all kept cost less decoded a batch at a time.
    _lazy_batches = False
    _keeps_documents = False

    def __init__(self, client: Any, session: Any, codec_options: CodecOptions) -> None:
        if session is not None:
            check_session_argument(session)
        self._client = client
        self._explicit_session = session
        self._session: Any = session
        self._codec_options = codec_options
        # The documents received and not yet handed out: a deque, or the batch itself when its documents are
        # decoded as they are taken (see _lazy_batches).
        self._data: collections.deque[_T] | DocumentBatch = collections.deque()
        # Load-balanced mode: the connection the server cursor lives on, from the first command that left it
        # open until it is exhausted, killed, or closed after the connection broke.
        self._pin = ConnectionPin()
        # The deadline of a timeout() block the cursor was made in.
        self._made_under: float | None = csot.current_deadline()

    def _forget_run(self) -> None:
        """Back to the state of a cursor that has not run (its options stay): what ``rewind`` leaves."""
        for name in _RUN_STATE:
            self.__dict__.pop(name, None)
        self._session = self._explicit_session
        self._data = collections.deque()
        self._pin = ConnectionPin()
        self._made_under = csot.current_deadline()

    # -- what subclasses provide ------------------------------------------------------------------------------

    def _first_operation(self) -> Operation[Any]:
        """The command that opens the cursor (its reply handler gives a ``CursorState``)."""
        raise NotImplementedError

    def _get_more_batch_size(self) -> int:
        return self._batch_size

    def _received(self, count: int) -> None:
        """Told how many documents each batch brought (a find cursor counts them against its limit)."""

    def _accept_raw_batch(
        self: _CursorBase[bytes], state: CursorState, accept: Callable[[CursorState], None]
    ) -> None:
        """A raw batch cursor's ``_accept``: the bookkeeping (id, namespace, limits counted in documents) done
        by ``accept``, the batch's documents (RawBSONDocuments, decoded with :func:`raw_batch_codec_options`)
        joined into one item."""
        documents = state.batch
        accept(state._replace(batch=[]))
        if documents:
            data = self._data
            assert isinstance(data, collections.deque)  # a raw batch cursor's replies are decoded whole
            data.append(b"".join(document.raw for document in documents))
            self._retrieved += len(documents)
            self._received(len(documents))

    def _tailable(self) -> bool:
        return False

    def _await_data(self) -> bool:
        return False

    def _ends_quietly(self) -> bool:
        """Whether a getMore error meaning the server cursor is gone (_TAILABLE_ENDED_CODES) ends this cursor
        instead of being raised: for tailable find cursors, as in PyMongo (a command cursor's, a change
        stream's above all, is raised: the stream resumes on it)."""
        return False

    def _exhaust(self) -> bool:
        """Whether the cursor's getMore may be answered by an exhaust stream (``CursorType.EXHAUST``)."""
        return False

    # -- the client-side operation timeout ---------------------------------------------------------------

    def _settle_timeout(self, operation: Operation[Any]) -> None:
        """Fix the cursor's timeout and mode before its first command, refusing the combinations the
        client-side operations timeout specification forbids."""
        deadline = csot.current_deadline()
        if deadline is None:
            deadline = self._made_under
        value = self._client.executor.operation_timeout(self._level_timeout, self._session, deadline=deadline)
        mode = self._timeout_mode
        if value is None:
            if mode is not None:
                raise ConfigurationError("timeout_mode needs a timeoutMS (client, database, collection or timeout())")
            return
        tailable = self._tailable()
        if mode is None:
            mode = TimeoutMode.ITERATION if tailable else TimeoutMode.CURSOR_LIFETIME
        elif tailable and mode is TimeoutMode.CURSOR_LIFETIME:
            raise InvalidOperation("a tailable cursor takes only timeout_mode=ITERATION")
        if mode is TimeoutMode.ITERATION and operation.has_write_stage:
            raise InvalidOperation("an aggregation with $out or $merge cannot use timeout_mode=ITERATION")
        max_await = self._max_await_time_ms
        if max_await is not None and not math.isinf(value) and max_await >= value * 1000:
            raise InvalidOperation(
                f"max_await_time_ms ({max_await}) must be less than the timeout ({value * 1000:g} ms)"
            )
        self._csot_timeout = value
        self._csot_mode = mode
        if mode is TimeoutMode.CURSOR_LIFETIME:
            self._csot_deadline = deadline if deadline is not None else time.monotonic() + value

    def _timeout_scope(self, first: bool) -> contextlib.AbstractContextManager[None]:
        """The deadline and ``maxTimeMS`` rule for the first command (``first``) or one ``next()`` call."""
        if self._csot_timeout is None:
            # CSOT is off: no generator-based context manager to make on every call.
            return _NO_TIMEOUT_SCOPE
        return self._timeout_scope_in_force(first)

    @contextlib.contextmanager
    def _timeout_scope_in_force(self, first: bool) -> Iterator[None]:
        value = self._csot_timeout
        if value is None:
            yield
            return
        if self._tailable() and not self._await_data():
            policy: csot.MaxTimePolicy = "omit"
        elif first:
            awaited = self._tailable() or self._csot_mode is TimeoutMode.CURSOR_LIFETIME
            policy = "send" if awaited else "omit"
        else:
            policy = "cap" if self._await_data() else "omit"
        with csot.sending_max_time(policy):
            if self._csot_mode is TimeoutMode.CURSOR_LIFETIME:
                with csot.within(self._csot_deadline):
                    yield
            else:
                with csot.timeout(value):
                    yield

    # -- state ------------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """Whether the cursor may still give documents: True before it runs, then while documents are
        buffered or the server holds more. A tailable cursor stays alive after an empty batch."""
        return bool(self._data) or not self._killed

    @property
    def cursor_id(self) -> int | None:
        """The server's cursor id (0 once the server has no more results), or None before the cursor runs."""
        return self._id

    @property
    def address(self) -> Any:
        """The ``(host, port)`` of the server the cursor runs on, or None before it runs."""
        return self._address

    @property
    def session(self) -> Any:
        """The explicit session this cursor was given, or None (an implicit session is not exposed)."""
        return self._explicit_session

    @property
    def retrieved(self) -> int:
        """Documents received from the server so far."""
        return self._retrieved

    # -- running ----------------------------------------------------------------------------------------------

    async def _execute(self, operation: Operation[Any], address: Any = None) -> Any:
        return await self._client.executor.execute(
            operation, self._session, address=address, level_timeout=self._level_timeout, pin=self._pin
        )

    def _take_implicit_session(self) -> None:
        if self._session is None:
            self._session = self._client.implicit_session()

    async def _release_session(self) -> None:
        session = self._session
        if session is not None and session is not self._explicit_session:
            self._session = None
            await session.end_session()

    def _accept(self, state: CursorState) -> None:
        self._id = state.id
        if state.namespace:
            self._namespace = state.namespace
        self._post_batch_resume_token = state.post_batch_resume_token
        batch = state.batch
        count = len(batch)
        self._retrieved += count
        if self._data:
            self._data = collections.deque([*self._data, *batch])
        elif type(batch) is DocumentBatch:
            self._data = batch  # its documents decoded as they are taken
        else:
            self._data = collections.deque(batch)
        self._received(count)

    async def _open(self) -> None:
        """Run the first command: the cursor's server, id and first batch."""
        state = await self._first_reply()
        self._accept(state)
        if not state.id:
            self._finished()
            if self._session is not self._explicit_session:
                await self._release_session()
        elif self._has_enough:
            await self._close_keeping_buffered()

    async def _first_reply(self) -> CursorState:
        """Run the first command and give its cursor reply (its server is the cursor's from now on). When the
        command fails the cursor is finished."""
        self._loop = running_loop()
        self._started = True
        operation = self._first_operation()
        self._take_implicit_session()
        try:
            self._settle_timeout(operation)
            with self._timeout_scope(first=True):
                state: CursorState
                # getMore and killCursors must go to the server that created the cursor.
                state, self._address = await self._client.executor.execute_answered(
                    operation, self._session, level_timeout=self._level_timeout, pin=self._pin
                )
        except Exception:
            self._killed = True
            await self._release_session_quietly()
            raise
        except BaseException:
            # Cancelled: no awaiting here; the client gives the implicit session back.
            self._abandon()
            raise
        return state

    def _finished(self) -> None:
        """The server holds no more results: nothing more to fetch and no connection to keep."""
        self._killed = True
        self._pin.release()

    async def _get_more(self) -> None:
        bind_to_running_loop(self._loop, "this cursor", "run the query again on this loop")
        database, _, collection = self._namespace.partition(".")
        operation = GetMore(
            database,
            collection,
            self._id or 0,
            batch_size=self._get_more_batch_size(),
            max_await_time_ms=self._max_await_time_ms,
            comment=self._comment,
            exhaust=self._exhaust(),
            codec_options=self._codec_options,
            lazy_batch=self._lazy_batches and not self._seen_keeping_documents(),
        )
        try:
            state: CursorState
            if self._pin.streaming:
                # The server is streaming this cursor's batches: the next one is read, nothing is sent.
                state = await self._client.executor.receive_streamed(
                    operation, self._session, self._pin, self._address, level_timeout=self._level_timeout
                )
            else:
                state = await self._execute(operation, self._address)
        except CursorNotFound:
            self._id = 0
            self._killed = True
            self._pin.release()
            await self._release_session_quietly()
            if self._ends_quietly():
                return  # the server dropped the tailable cursor: it is over (see _TAILABLE_ENDED_CODES)
            raise
        except OperationTimeoutError:
            if self._exhaust():
                # Batches the server had already streamed were lost with the connection the timeout closed:
                # the cursor cannot go on from where the server is. The time being up here, the client
                # kills the server cursor on its own time.
                self._abandon()
                raise
            # The server cursor lives on: the next call may try again, and close() kills it with a fresh
            # timeout. A load-balanced cursor's connection that the timeout cut off mid-exchange goes back
            # (the pool closes it); the next command takes another.
            if self._pin.broken:
                self._pin.release()
            raise
        except OperationFailure as exc:
            if not (self._ends_quietly() and exc.code in _TAILABLE_ENDED_CODES):
                await self._after_get_more_error()
                raise
            # The capped collection rolled over the tailable cursor's position, or the server killed the
            # cursor: it is over, as PyMongo has it, not an error; the server cursor is gone, nothing to kill.
            self._id = 0
            self._killed = True
            self._pin.release()
            await self._release_session_quietly()
            return
        except Exception:
            await self._after_get_more_error()
            raise
        except BaseException:
            # Cancelled mid-getMore: the batch is lost and awaiting here is not allowed, so the client
            # kills the server cursor on its own time.
            self._abandon()
            raise
        self._accept(state)
        if not state.id:
            self._finished()
            await self._release_session()
        elif self._has_enough:
            await self._close_keeping_buffered()

    async def _after_get_more_error(self) -> None:
        """A getMore failed: the cursor is closed (its server cursor killed), unless it is load balanced: the
        connection stays with the cursor until close(), which kills the server cursor over it, or only gives it
        back when the error broke it."""
        if not self._pin.held:
            await self.close()

    def _seen_keeping_documents(self) -> bool:
        """Whether the program was seen keeping the documents it took from this cursor (then no batch is left
        undecoded any more)."""
        data = self._data
        if type(data) is DocumentBatch and data.kept:
            self._keeps_documents = True
        return self._keeps_documents

    async def _close_keeping_buffered(self) -> None:
        if not self._killed:
            buffered = collections.deque(self._data)
            await self.close()
            self._data = buffered

    async def _release_session_quietly(self) -> None:
        try:
            await self._release_session()
        except MongioError:
            pass

    async def _refresh(self) -> bool:
        """Fetch until a document is buffered; False when the cursor has nothing more to give now."""
        if not self._started:
            await self._open()
        # No timeout scope to enter when the first batch brought documents or ended the cursor.
        if not self._data and not self._killed:
            with self._timeout_scope(first=False):
                while not self._data and not self._killed:
                    await self._get_more()
                    if self._tailable():
                        break
        return bool(self._data)

    def __await__(self: _Self) -> Generator[Any, None, _Self]:
        """``cursor = await coll.find(q)``: run the first command (once) and give the cursor back."""

        async def first_batch() -> _Self:
            if not self._started:
                await self._open()
            return self

        return first_batch().__await__()

    def __aiter__(self) -> AsyncIterator[_T]:
        return self

    async def __anext__(self) -> _T:
        if self._data or await self._refresh():
            return self._data.popleft()
        raise StopAsyncIteration

    async def next(self) -> _T:
        """The next document; raises ``StopAsyncIteration`` when there is none (PyMongo's ``next``)."""
        return await self.__anext__()

    async def try_next(self) -> _T | None:
        """The next document, or None if none is available now.

        For a tailable cursor this makes at most one ``getMore`` and returns None when it brings nothing,
        so a loop can do other work between polls; ``alive`` tells whether to call again.
        """
        if self._data:
            return self._data.popleft()
        if not self._started:
            await self._open()
        elif not self._killed:
            with self._timeout_scope(first=False):
                await self._get_more()
        return self._data.popleft() if self._data else None

    async def to_list(self, length: int | None = None) -> list[_T]:
        """Read documents into a list: all of them, or at most ``length`` (the rest stay in the cursor).

        ``docs = await coll.find({"x": 1}).to_list()``
        """
        if length is not None:
            if isinstance(length, bool) or not isinstance(length, int):
                raise TypeError(f"length must be an int or None, not {length!r}")
            if length < 1:
                raise ValueError(f"to_list() length must be greater than 0, not {length}")
        result: list[_T] = []
        self._keeps_documents = True
        while length is None or len(result) < length:
            # A cursor the server has closed has nothing more to fetch: no _refresh() to learn that.
            if not self._data and (self._killed or not await self._refresh()):
                break
            data = self._data
            if length is None:
                result.extend(data)
                data.clear()
            else:
                for _ in range(min(len(data), length - len(result))):
                    result.append(data.popleft())
        return result

    async def close(self) -> None:
        """Close the cursor: kill it on the server if it is still open there and end its implicit session.

        Errors from ``killCursors`` are ignored: the server drops idle cursors on its own.
        """
        try:
            running: asyncio.AbstractEventLoop | None = running_loop()
        except RuntimeError:
            running = None  # a coroutine closed by the garbage collector after its loop was closed
        if running is None or (self._loop is not None and self._loop is not running):
            # Closed from another event loop, or from none (its own may be gone): the client kills the server
            # cursor.
            self._abandon()
            return
        self._data.clear()
        cursor_id = self._id
        was_open = self._started and not self._killed
        self._killed = True
        self._started = True
        pin = self._pin
        if pin.streaming:
            # Replies are still on their way over the cursor's connection: it can carry no killCursors and
            # must not go back to the pool half-read, so it is closed. The server cursor is killed over
            # another connection to its server, but not behind a load balancer, where another connection may
            # lead to another service (which then reaps the cursor of the closed connection).
            kill_elsewhere = pin.held_for_stream_only
            pin.discard("its exhaust cursor was closed before the stream ended")
            was_open = was_open and kill_elsewhere
        if was_open and cursor_id and not pin.broken:
            database, _, collection = self._namespace.partition(".")
            self._id = 0
            # killCursors gets the cursor's timeout afresh (even after a CURSOR_LIFETIME deadline passed)
            # unless close() runs in a timeout() block of its own.
            refresh = self._csot_timeout if csot.current_deadline() is None else None
            try:
                with csot.timeout(refresh):
                    await self._execute(
                        KillCursors(database, collection, [cursor_id], codec_options=self._codec_options),
                        self._address,
                    )
            except MongioError:
                pass
            except BaseException:
                # Cancelled: the connection may hold an unread reply; it must not serve another command.
                pin.discard("the cursor's close() was cancelled")
                raise
        # Whatever killCursors did (a broken connection sends none), the connection goes back.
        pin.release()
        await self._release_session_quietly()

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _abandon(self, *, finalizing: bool = False) -> None:
        """Hand whatever the server still holds for this cursor (its id, its implicit session) to the client,
        which cleans it up on its event loop. Safe from ``__del__`` (``finalizing``) and from a cancelled
        task. A load-balanced cursor's connection is closed (the server cursor may live on it) and given
        back."""
        if self._pin.held:
            if finalizing:
                self._pin.release_soon()
            else:
                self._pin.discard("its cursor was abandoned while still open")
        if self._killed:
            return
        self._killed = True
        self._data.clear()
        session = self._session if self._session is not self._explicit_session else None
        self._session = None
        cursor_id = self._id or 0
        self._id = 0
        if not cursor_id and session is None:
            return
        self._client.close_abandoned_cursor(self._address, self._namespace, cursor_id, session)

    def __del__(self) -> None:
        # The class holds both flags, so a cursor whose __init__ failed has them too.
        if self._started and not self._killed:
            try:
                self._abandon(finalizing=True)
            except Exception:  # a finalizer must not raise, and nothing more can be done here
                pass

    def _check_okay_to_chain(self) -> None:
        if self._started:
            raise InvalidOperation("cannot set options after executing query")


class Cursor(_CursorBase[_T]):
    """The cursor of :meth:`Collection.find`. Its options can be changed with the builder methods until it
    first runs: ``coll.find({"x": 1}).sort("y", -1).limit(10)``.

    Under a client-side operation timeout (``timeoutMS``, or a :func:`mongio.timeout` block around the
    ``find`` call or its first iteration), ``timeout_mode`` (:class:`mongio.TimeoutMode`) says what it
    bounds: ``CURSOR_LIFETIME`` (the default of non-tailable cursors) the whole life of the cursor from its
    first command, ``ITERATION`` (the default, and only mode, of tailable cursors) each ``next()`` call on its
    own. Documents already fetched are returned even after the time ran out; a ``getMore`` that times out
    leaves the cursor open, and ``close()`` kills it with the timeout counted afresh.
    """

    _lazy_batches = True

    def __init__(
        self,
        collection: Collection[Any],
        filter: Mapping[str, Any] | None = None,
        projection: Any = None,
        skip: int = 0,
        limit: int = 0,
        no_cursor_timeout: bool = False,
        cursor_type: int = CursorType.NON_TAILABLE,
        sort: Any = None,
        allow_partial_results: bool = False,
        oplog_replay: bool = False,
        batch_size: int = 0,
        collation: Any = None,
        hint: Any = None,
        max_scan: int | None = None,
        max_time_ms: int | None = None,
        max: Mapping[str, Any] | None = None,
        min: Mapping[str, Any] | None = None,
        return_key: bool | None = None,
        show_record_id: bool | None = None,
        snapshot: bool | None = None,
        comment: Any = None,
        session: ClientSession | None = None,
        allow_disk_use: bool | None = None,
        let: Mapping[str, Any] | None = None,
        *,
        raw_data: bool | None = None,
        timeout_mode: TimeoutMode | str | None = None,
    ) -> None:
        super().__init__(collection.database.client, session, collection.codec_options)
        self._level_timeout = collection.timeout
        if timeout_mode is not None:
            self._timeout_mode = TimeoutMode(timeout_mode)
        if snapshot:
            raise InvalidOperation("the snapshot option was removed in MongoDB 4.0; use a snapshot session")
        self._collection = collection
        # The options by the names Find takes them. The values are checked by the Find built below.
        self._spec = {
            "filter": filter,
            "projection": projection,
            "skip": skip,
            "limit": limit,
            "batch_size": batch_size,
            "no_cursor_timeout": no_cursor_timeout or None,
            "cursor_type": cursor_type,
            # An empty sort means none, as in PyMongo (ODMs pass one when no order was asked for): Find says so.
            "sort": sort,
            "allow_partial_results": allow_partial_results or None,
            "oplog_replay": oplog_replay or None,
            "collation": collation,
            "hint": hint,
            "max_scan": max_scan,
            "max_time_ms": max_time_ms,
            "max_await_time_ms": None,
            "max": max,
            "min": min,
            "return_key": return_key,
            "show_record_id": show_record_id,
            "comment": comment,
            "allow_disk_use": allow_disk_use,
            "let": let,
            "raw_data": raw_data,
        }
        # Built now so that a bad value fails at the call that gave it; kept for the first run.
        self._prepared: Find | None = self._find_operation()

    @property
    def collection(self) -> Collection[Any]:
        """The collection this cursor reads."""
        return self._collection

    def _find_operation(self) -> Find:
        collection = self._collection
        # Only the options given go to Find, the others by position: each passed by name costs its matching,
        # and the two dozen a cursor holds would make up most of the cost of making a cursor. The one that is
        # the very object Find takes by default is left out (identity, so that a value merely equal to it, 0.0
        # or False, is still checked).
        spec = self._spec
        given = {name: spec[name] for name, default in _NOT_GIVEN.items() if spec[name] is not default}
        return Find(
            collection.database.name,
            collection.name,
            spec["filter"],
            spec["limit"],
            collection.read_preference,
            collection.read_concern,
            collection.codec_options,
            **given,
        )

    def _first_operation(self) -> Operation[CursorState]:
        spec = self._spec
        if (spec["min"] is not None or spec["max"] is not None) and spec["hint"] is None:
            # The server refuses it too; said before anything is sent, as PyMongo does.
            raise InvalidOperation("min() and max() need a hint(): the index whose keys they bound")
        operation = self._prepared or self._find_operation()
        self._prepared = None
        operation.lazy_batch = self._lazy_batches and not self._keeps_documents
        self._limit = operation.limit
        self._single_batch = operation.single_batch
        self._batch_size = operation.batch_size
        self._max_await_time_ms = operation.max_await_time_ms
        self._comment = operation.comment
        return operation

    _limit = 0
    _single_batch = False

    def _take_implicit_session(self) -> None:
        # A single batch (find_one) has no getMore to tie to its find: the server session the executor takes
        # for that one command is enough, and a ClientSession per call would cost ~8% of a find_one's CPU.
        if not self._single_batch:
            super()._take_implicit_session()

    def _tailable(self) -> bool:
        return bool(self._spec["cursor_type"] & _TAILABLE)

    def _await_data(self) -> bool:
        return bool(self._spec["cursor_type"] & _AWAIT_DATA)

    def _ends_quietly(self) -> bool:
        return self._tailable()

    def _exhaust(self) -> bool:
        return bool(self._spec["cursor_type"] == CursorType.EXHAUST)

    def _get_more_batch_size(self) -> int:
        if self._limit:
            remaining = self._limit - self._retrieved
            return min(self._batch_size, remaining) if self._batch_size else remaining
        return self._batch_size

    def _received(self, count: int) -> None:
        # With a limit (or a single batch) the server may keep an empty cursor open: nothing more is wanted.
        if (self._single_batch or (self._limit and self._retrieved >= self._limit)) and self._id:
            self._has_enough = True

    async def first_document(self) -> _T | None:
        """Run this unrun single-batch cursor (``limit`` < 0) and give the first document of its batch, or
        None: :meth:`Collection.find_one <mongio.collection.Collection.find_one>`. The cursor is closed when
        this returns: the server had nothing more, or the cursor it kept open anyway was killed."""
        # The reply's batch is not buffered: only its first document is wanted. A single-batch cursor has no
        # implicit session to end, and the server keeps no cursor when it answers with id 0. Its one document
        # is decoded at once: a lazy batch would add only the cost of its framing (about 6 µs).
        self._lazy_batches = False
        state = await self._first_reply()
        batch = state.batch
        if not state.id:
            self._finished()
        else:
            await self._close_keeping_nothing(state)
        return next(iter(batch), None)  # a list, or a DocumentBatch (this cursor's Find may leave it lazy)

    async def kill_left_open(self, state: CursorState, address: Any, pin: ConnectionPin) -> None:
        """``find_one`` ran this unrun cursor's ``find`` without it (on ``pin``, answered by the server at
        ``address``) and the server kept a cursor open anyway: this cursor takes the reply as its first, as
        :meth:`first_document` would have, and kills the server cursor."""
        self._loop = running_loop()
        self._started = True
        # The timeout the killCursors is given afresh (close), settled as the first command would have.
        self._settle_timeout(self._first_operation())
        self._pin = pin
        self._address = address
        await self._close_keeping_nothing(state)

    async def _close_keeping_nothing(self, state: CursorState) -> None:
        """A single batch's reply left a server cursor open: kill it now. The batch is not buffered: only its
        first document was wanted."""
        self._accept(state._replace(batch=[]))
        await self.close()

    # -- builder methods (before the cursor runs) -------------------------------------------------------------

    def _set(self, **changes: Any) -> Cursor[_T]:
        self._check_okay_to_chain()
        old = self._spec
        self._spec = {**old, **changes}
        try:
            self._prepared = self._find_operation()
        except BaseException:
            self._spec = old
            raise
        return self

    def sort(self, key_or_list: Any, direction: Any = None) -> Cursor[_T]:
        """Sort by one key (``sort("x", -1)``) or several (``sort([("x", 1), ("y", -1)])``)."""
        if direction is not None:
            if not isinstance(key_or_list, str):
                raise TypeError("give a key name with a direction, or a list of (key, direction) pairs")
            keys = index_document([(key_or_list, direction)], "sort")
        else:
            keys = index_document(key_or_list, "sort")
        return self._set(sort=keys)

    def skip(self, skip: int) -> Cursor[_T]:
        """Skip the first ``skip`` matching documents."""
        return self._set(skip=_non_negative(skip, "skip"))

    def limit(self, limit: int) -> Cursor[_T]:
        """Return at most ``limit`` documents (0: no limit; a negative number: one batch of at most
        ``-limit`` documents, then the cursor closes)."""
        return self._set(limit=_int(limit, "limit"))

    def batch_size(self, batch_size: int) -> Cursor[_T]:
        """Ask the server for batches of ``batch_size`` documents (0: the server's default)."""
        return self._set(batch_size=_non_negative(batch_size, "batch_size"))

    def hint(self, index: Any) -> Cursor[_T]:
        """Use this index: its name, or its keys as for ``create_index``. None removes the hint."""
        return self._set(hint=index)

    def max_time_ms(self, max_time_ms: int | None) -> Cursor[_T]:
        """Let the server spend at most this many milliseconds on the query (``maxTimeMS``)."""
        return self._set(max_time_ms=max_time_ms)

    def max_await_time_ms(self, max_await_time_ms: int | None) -> Cursor[_T]:
        """For a ``TAILABLE_AWAIT`` cursor: how long each ``getMore`` waits for new documents."""
        return self._set(max_await_time_ms=max_await_time_ms)

    def comment(self, comment: Any) -> Cursor[_T]:
        """Attach a comment to the query (shown in the server's logs and profiler)."""
        return self._set(comment=comment)

    def collation(self, collation: Any) -> Cursor[_T]:
        """Compare strings with this collation (a mapping or a ``Collation``)."""
        return self._set(collation=collation)

    def min(self, spec: Any) -> Cursor[_T]:
        """The inclusive lower bound of the index used, as ``[(key, value), ...]`` in the index's key order
        (needs a ``hint``)."""
        return self._set(min=dict(index_document(_index_bound(spec, "min"), "min")))

    def max(self, spec: Any) -> Cursor[_T]:
        """The exclusive upper bound of the index used, as ``[(key, value), ...]`` in the index's key order
        (needs a ``hint``)."""
        return self._set(max=dict(index_document(_index_bound(spec, "max"), "max")))

    def allow_disk_use(self, allow_disk_use: bool) -> Cursor[_T]:
        """Let a large sort write temporary files on the server."""
        if not isinstance(allow_disk_use, bool):
            raise TypeError("allow_disk_use must be True or False")
        return self._set(allow_disk_use=allow_disk_use)

    def add_option(self, mask: int) -> Cursor[_T]:
        """Set cursor flags by their OP_QUERY bit (2 tailable, 16 no timeout, 32 await data, 128 partial)."""
        return self._set(**self._flags_changes(self._flags() | _flag_mask(mask)))

    def remove_option(self, mask: int) -> Cursor[_T]:
        """Clear cursor flags by their OP_QUERY bit."""
        return self._set(**self._flags_changes(self._flags() & ~_flag_mask(mask)))

    def _flags(self) -> int:
        spec = self._spec
        flags = int(spec["cursor_type"])
        if spec["no_cursor_timeout"]:
            flags |= _NO_TIMEOUT
        if spec["allow_partial_results"]:
            flags |= _PARTIAL
        if spec["oplog_replay"]:
            flags |= _OPLOG_REPLAY
        return flags

    @staticmethod
    def _flags_changes(flags: int) -> dict[str, Any]:
        if flags & _AWAIT_DATA and not flags & _TAILABLE:
            raise InvalidOperation("await data (32) needs the tailable flag (2)")
        return {
            "cursor_type": flags & (_TAILABLE | _AWAIT_DATA | _EXHAUST),
            "no_cursor_timeout": True if flags & _NO_TIMEOUT else None,
            "allow_partial_results": True if flags & _PARTIAL else None,
            "oplog_replay": True if flags & _OPLOG_REPLAY else None,
        }

    def where(self, code: Any) -> Cursor[_T]:
        """Add a ``$where`` JavaScript clause to the filter (servers without JavaScript refuse it)."""
        self._check_okay_to_chain()
        filter = dict(self._spec["filter"] or {})
        filter["$where"] = code
        return self._set(filter=filter)

    # -- other methods ----------------------------------------------------------------------------------------

    def __getitem__(self, index: Any) -> NoReturn:
        """Not supported, as with PyMongo's async cursor: use ``skip()``/``limit()`` (``find_one`` with
        ``skip=n`` for a single document)."""
        raise IndexError("Cursor does not support indexing; use skip() and limit()")

    def clone(self) -> Cursor[_T]:
        """A new, unrun cursor with the same query, options and session."""
        return self._copy(self._spec)

    def __copy__(self) -> Cursor[_T]:
        """``copy.copy(cursor)``: :meth:`clone`."""
        return self.clone()

    def __deepcopy__(self, memo: dict[int, Any]) -> Cursor[_T]:
        """``copy.deepcopy(cursor)``: :meth:`clone`, with copies of the query's documents (filter,
        projection, sort...); the collection and the session are the same."""
        return self._copy(copy.deepcopy(self._spec, memo))

    def _copy(self, spec: Mapping[str, Any]) -> Cursor[_T]:
        """A new, unrun cursor of this kind with the query and options ``spec``."""
        return self._remade(Cursor, self._collection, spec)

    def _remade(self, cursor_class: type[_C], source: Any, spec: Mapping[str, Any] | None = None) -> _C:
        """A new, unrun ``cursor_class`` with this cursor's query (or ``spec``), options, session and timeout
        mode, made by its constructor from ``source`` (what that constructor takes first: the collection to
        read) and the builder method of the one option the constructor does not take."""
        options = dict(self._spec if spec is None else spec)
        max_await_time_ms = options.pop("max_await_time_ms")
        other = cursor_class(source, session=self._explicit_session, timeout_mode=self._timeout_mode, **options)
        if max_await_time_ms is not None:
            other.max_await_time_ms(max_await_time_ms)
        return other

    async def rewind(self) -> Cursor[_T]:
        """Close the cursor and make it unrun again, so iterating it runs the query anew."""
        await self.close()
        self._forget_run()
        return self

    async def explain(self, verbosity: str | None = None, max_time_ms: int | None = None) -> dict[str, Any]:
        """The server's query plan for this query (``explain``), at the given verbosity; ``max_time_ms``
        bounds the explain command itself (the query's own ``max_time_ms`` stays inside it)."""
        explained = Explain(self._find_operation(), verbosity=verbosity, max_time_ms=max_time_ms)
        result: dict[str, Any] = await self._client.executor.execute(
            explained, self._explicit_session, level_timeout=self._level_timeout
        )
        return result

    async def distinct(self, key: str) -> list[Any]:
        """The distinct values of ``key`` among the documents this query matches."""
        spec = self._spec
        collection = self._collection
        operation = Distinct(
            collection.database.name,
            collection.name,
            key,
            spec["filter"],
            collation=spec["collation"],
            hint=spec["hint"],
            comment=spec["comment"],
            max_time_ms=spec["max_time_ms"],
            raw_data=spec["raw_data"],
            read_preference=collection.read_preference,
            read_concern=collection.read_concern,
            codec_options=collection.codec_options,
        )
        values: list[Any] = await self._client.executor.execute(
            operation, self._explicit_session, level_timeout=self._level_timeout
        )
        return values

    def __repr__(self) -> str:
        return f"<Cursor {self._collection.full_name} filter={self._spec['filter']!r} id={self._id}>"


class CommandCursor(_CursorBase[_T]):
    """The cursor of ``aggregate``, ``list_indexes``, ``list_collections`` and ``cursor_command``.

    The command runs when the cursor is first awaited or iterated::

        async for doc in coll.aggregate([{"$match": {"x": 1}}]):
            ...
        cursor = await coll.aggregate(pipeline)     # the command has run; its first batch is here
    """

    def __init__(
        self,
        client: Any,
        operation: Operation[Any],
        *,
        session: ClientSession | None = None,
        codec_options: CodecOptions,
        batch_size: int = 0,
        max_await_time_ms: int | None = None,
        comment: Any = None,
        level_timeout: float | None = None,
        timeout_mode: TimeoutMode | str | None = None,
    ) -> None:
        super().__init__(client, session, codec_options)
        self._level_timeout = level_timeout
        self._timeout_mode = None if timeout_mode is None else TimeoutMode(timeout_mode)
        self._operation = operation
        self._batch_size = batch_size
        self._max_await_time_ms = max_await_time_ms
        self._comment = comment

    def _first_operation(self) -> Operation[Any]:
        return self._operation

    def _tailable(self) -> bool:
        # A cursor_command is tailable (and awaitData) when its command document says so.
        return self._operation.command_flag("tailable")

    def _await_data(self) -> bool:
        return self._operation.command_flag("awaitData")

    def batch_size(self, batch_size: int) -> CommandCursor[_T]:
        """The number of documents each following ``getMore`` asks for (0: the server's default)."""
        self._batch_size = _non_negative(batch_size, "batch_size")
        return self

    def __repr__(self) -> str:
        return f"<CommandCursor {self._operation.command_name} ns={self._namespace!r} id={self._id}>"


class ObjectCommandCursor(CommandCursor[_T]):
    """A command cursor that hands out an object made from each document instead of the document: the
    :class:`~mongio.collection.Collection` objects of
    :meth:`Database.list_collection_objects <mongio.database.Database.list_collection_objects>` and the
    :class:`~mongio.database.Database` objects of
    :meth:`MongoClient.list_database_objects <mongio.client.MongoClient.list_database_objects>`.

    It runs, fetches more, closes and times out exactly as a :class:`CommandCursor`::

        async for collection in db.list_collection_objects():
            await collection.create_index("created")
    """

    def __init__(
        self,
        client: Any,
        operation: Operation[Any],
        item: Callable[[Mapping[str, Any]], _T],
        **cursor_options: Any,
    ) -> None:
        super().__init__(client, operation, **cursor_options)
        self._item = item

    def _accept(self, state: CursorState) -> None:
        # Each batch is turned into objects as it arrives, so the buffered items are what iteration hands out.
        super()._accept(state._replace(batch=[self._item(document) for document in state.batch]))


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}")
    return value


def _non_negative(value: Any, name: str) -> int:
    if _int(value, name) < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    return int(value)


# The errors of a tailable cursor's getMore that mean it is over (PyMongo ends the cursor without raising):
# CursorNotFound (43), QueryPlanKilled (175), CursorKilled (237), and the capped collection rolling over its
# position, CappedPositionLost (136; 96 and 17406 from servers before 3.6).
_TAILABLE_ENDED_CODES = frozenset({43, 175, 237, 136, 96, 17406})


def _index_bound(spec: Any, name: str) -> list[Any] | tuple[Any, ...]:
    """A min/max bound: a list or tuple of (key, value) pairs, whose order must be the index's."""
    if not isinstance(spec, list | tuple):
        raise TypeError(f"{name} must be a list or tuple of (key, value) pairs, not {type(spec).__name__}")
    return spec


def _flag_mask(mask: Any) -> int:
    if _int(mask, "mask") & ~_KNOWN_FLAGS:
        raise ValueError(f"unknown cursor flag bits in {mask}")
    return int(mask)


# -- raw batches ------------------------------------------------------------------------------------------------


def raw_batch_codec_options(codec_options: CodecOptions) -> CodecOptions:
    """The codec options that decode a reply lazily, so each document's BSON can be handed out as it came."""
    return codec_options.with_options(document_class=RawBSONDocument)


class RawBatchCursor(Cursor[bytes]):
    """The cursor of :meth:`Collection.find_raw_batches <mongio.collection.Collection.find_raw_batches>`: each
    item is one batch as the server sent it, the BSON of its documents back to back (``bytes``), for code that
    decodes BSON itself (``mongio.bson.decode_all(batch)``). Limits and batch sizes still count documents."""

    def __init__(self, collection: Collection[Any], *args: Any, **kwargs: Any) -> None:
        raw = collection.with_options(codec_options=raw_batch_codec_options(collection.codec_options))
        super().__init__(raw, *args, **kwargs)
        self._plain_collection = collection

    @property
    def collection(self) -> Collection[Any]:
        """The collection this cursor reads."""
        return self._plain_collection

    def _accept(self, state: CursorState) -> None:
        self._accept_raw_batch(state, super()._accept)

    def __getitem__(self, index: Any) -> NoReturn:
        """Not supported (``InvalidOperation``, as PyMongo's raw batch cursors): iterate the batches."""
        raise InvalidOperation("a raw batch cursor cannot be indexed: iterate its batches")

    def clone(self) -> RawBatchCursor:
        """A new, unrun raw batch cursor with the same query, options and session."""
        return self._copy(self._spec)

    def _copy(self, spec: Mapping[str, Any]) -> RawBatchCursor:
        return self._remade(RawBatchCursor, self._plain_collection, spec)

    async def explain(self, verbosity: str | None = None, max_time_ms: int | None = None) -> dict[str, Any]:
        """The server's query plan for this query, decoded as the collection decodes documents."""
        return await self._remade(Cursor, self._plain_collection).explain(verbosity, max_time_ms)


class RawBatchCommandCursor(CommandCursor[bytes]):
    """The cursor of :meth:`Collection.aggregate_raw_batches
    <mongio.collection.Collection.aggregate_raw_batches>`: each item is one batch of results as the server sent
    it, the BSON of its documents back to back (``bytes``)."""

    def _accept(self, state: CursorState) -> None:
        self._accept_raw_batch(state, super()._accept)

    def __getitem__(self, index: Any) -> NoReturn:
        """Not supported (``InvalidOperation``, as PyMongo's raw batch cursors): iterate the batches."""
        raise InvalidOperation("a raw batch cursor cannot be indexed: iterate its batches")
