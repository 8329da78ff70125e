"""The CRUD commands: ``find``, ``getMore``, ``killCursors``, ``aggregate``, ``count``, ``distinct``, the
single-statement ``insert``/``update``/``delete`` commands and ``findAndModify``.

Arguments are checked and the constant part of each command is assembled when the operation is made;
``build()`` copies that dict and, for writes, attaches the already-encoded document sequence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions, Int64, encode
from mongio.bson._encoder import encode_insert_document
from mongio.errors import ConfigurationError, InvalidOperation
from mongio.operations.base import (
    Command,
    ConnectionContext,
    CursorState,
    DocumentSequence,
    Operation,
    Retryability,
    add_raw_data,
    check_write_concern_reply,
    check_write_reply,
    encode_insert,
    for_server,
    parse_cursor,
)
from mongio.operations.bulk import (
    COMMANDS,
    DELETE_HINT_MIN_WIRE_VERSION,
    check_lone_statement,
    check_unacknowledged_hint,
    command_body,
)
from mongio.operations.models import (
    KIND_DELETE,
    KIND_INSERT,
    KIND_UPDATE,
    DeleteMany,
    DeleteOne,
    ReplaceOne,
    ReturnDocument,
    UpdateMany,
    UpdateOne,
    index_document,
    model_statement,
    validate_array_filters,
    validate_let,
    validate_replacement,
    validate_update,
)
from mongio.operations.results import DeleteResult, InsertOneResult, UpdateResult
from mongio.wire.op_msg import PackedDocuments

if TYPE_CHECKING:
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import _ServerMode
    from mongio.options.write_concern import WriteConcern

__all__ = [
    "Aggregate",
    "CountDocuments",
    "CursorType",
    "Delete",
    "Distinct",
    "EstimatedDocumentCount",
    "Explain",
    "Find",
    "FindAndModify",
    "FindOptions",
    "GetMore",
    "Insert",
    "KillCursors",
    "Update",
    "check_aggregate_options",
]

R = TypeVar("R")

# Wire version 9 is MongoDB 4.4: the first to accept any BSON comment on getMore.
_GETMORE_COMMENT_MIN_WIRE_VERSION = 9
# Retryability's members as module constants for the single writes, made per call: on Python 3.11 reading a
# member off its enum class is an unspecialized lookup, several times the cost of reading a global.
_RETRYABLE_WRITE = Retryability.WRITE
_NOT_RETRYABLE = Retryability.NONE


class CursorType:
    """The cursor types of ``find`` (PyMongo's values).

    ``EXHAUST``: after the first batch, one ``getMore`` is sent with the OP_MSG ``exhaustAllowed`` flag and the
    server streams every following batch unasked (each reply flagged ``moreToCome``), preparing the next
    while the client reads the current one. The cursor keeps its connection until the stream ends (a reply
    without ``moreToCome``: when the cursor is still open, the next batch is asked for by another such
    ``getMore``); the connection then goes back to the pool. Closing the cursor before then closes that
    connection, which has replies still on their way, and kills the server cursor over another one.

    - It takes no ``limit`` and cannot be tailable (``InvalidOperation``); ``max_await_time_ms`` is for
      tailable cursors only.
    - In a transaction, and on a mongos older than 7.1 or a server older than 4.2, its batches come from
      ordinary ``getMore`` commands.
    - Load balanced: the stream runs over the connection the cursor is pinned to; closed mid-stream, that
      connection is closed and no ``killCursors`` is sent (another connection may reach another service;
      the cursor's own service reaps it with its connection).
    - Under a client-side operation timeout each streamed batch is awaited within the cursor's deadline
      (its lifetime, or one iteration). A timeout, or a cancellation, while a stream is under way closes the
      connection; the batches on their way are lost with it, so the cursor is closed too.
    """

    NON_TAILABLE = 0
    TAILABLE = 2
    TAILABLE_AWAIT = 34
    EXHAUST = 64


def _mapping(value: Any, name: str) -> Mapping[str, Any]:
    # A dict, the common case, skips the abstract base class check (a call into abc's own Python code).
    if type(value) is not dict and not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping (e.g. a dict), not {type(value).__name__}")
    return value


def _int(value: Any, name: str, minimum: int | None = 0) -> int:
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, not {value}")
    return value


def _hint(value: Any) -> str | dict[str, Any]:
    return value if isinstance(value, str) else index_document(value, "hint")


def _collation(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    document = getattr(value, "document", None)
    if isinstance(document, Mapping):
        return document
    raise TypeError(f"collation must be a mapping or a Collation, not {type(value).__name__}")


def _projection(value: Any) -> Mapping[str, Any]:
    # PyMongo takes a list (any sequence) or a set of field names as an inclusion projection; a str is one
    # name, not a sequence of them, and is refused.
    if isinstance(value, Mapping):
        return value
    names = isinstance(value, Sequence | AbstractSet) and not isinstance(value, str | bytes | bytearray)
    if names and all(isinstance(name, str) for name in value):
        return dict.fromkeys(value, 1)
    raise TypeError(f"projection must be a mapping or a list or set of field names, not {value!r}")


# The legacy query modifiers a filter of the OP_QUERY form ({"$query": filter, "$min": ...}) may hold, and the
# find command's field each one is.
_QUERY_MODIFIERS = {
    "$query": "filter",
    "$orderby": "sort",
    "$hint": "hint",
    "$comment": "comment",
    "$maxTimeMS": "maxTimeMS",
    "$max": "max",
    "$min": "min",
    "$returnKey": "returnKey",
    "$showRecordId": "showRecordId",
    "$showDiskLoc": "showRecordId",
}


def _unwrap_query_modifiers(body: dict[str, Any]) -> None:
    """Turn a ``find`` body's filter of the legacy form (``{"$query": filter, "$min": ...}``, which PyMongo
    still takes) into the command's fields; a modifier the find command has no field for is refused."""
    wrapped = body.pop("filter")
    for key, value in wrapped.items():
        name = _QUERY_MODIFIERS.get(key)
        if name is None:
            raise ValueError(f"{key!r} beside $query is not a query modifier the find command takes")
        body[name] = value


def _add_common(
    body: dict[str, Any],
    *,
    collation: Any = None,
    hint: Any = None,
    comment: Any = None,
    max_time_ms: Any = None,
    let: Any = None,
    raw_data: bool | None = None,
) -> None:
    if collation is not None:
        body["collation"] = _collation(collation)
    if hint is not None:
        body["hint"] = _hint(hint)
    if max_time_ms is not None:
        body["maxTimeMS"] = _int(max_time_ms, "max_time_ms")
    if let is not None:
        body["let"] = validate_let(let)
    if comment is not None:
        body["comment"] = comment
    add_raw_data(body, raw_data)


class _ReadOperation(Operation[Any]):
    """A read whose command is assembled once, when it is made: each subclass sets ``_body`` in its
    ``__init__`` (no ``__init__`` of its own here: one call level less for every find and aggregate)."""

    retryability = Retryability.READ
    takes_read_concern = True
    _body: dict[str, Any]

    @property
    def body(self) -> dict[str, Any]:
        """The command as built (a copy is sent)."""
        return self._body

    def build(self, context: ConnectionContext) -> Command:
        body = dict(self._body)
        # for_server only ever removes rawData.
        return Command(for_server(body, context) if "rawData" in body else body)


def _add_limit(body: dict[str, Any], limit: int, batch_size: int, single_batch: bool) -> int:
    """Put ``limit``, ``batchSize`` and ``singleBatch`` in a ``find``; a negative limit asks for one batch of
    at most that many documents. Returns the limit, made positive."""
    if type(limit) is not int or type(batch_size) is not int or batch_size < 0:
        # Only a value that may be wrong pays for the checks that name it (find_one makes a find per call).
        _int(limit, "limit", None)
        _int(batch_size, "batch_size")
    if limit < 0:
        single_batch = True
        limit = -limit
    if limit:
        body["limit"] = limit
    if batch_size:
        # A batch as large as the limit would leave an empty cursor open on the server (CRUD spec).
        body["batchSize"] = batch_size + 1 if limit and batch_size == limit else batch_size
    if single_batch:
        body["singleBatch"] = True
    return limit


# collation, hint, comment, max_time_ms, let and raw_data all left out (most finds).
_NO_COMMON_OPTIONS = (None,) * 6
_FLAG_FIELDS = ("returnKey", "showRecordId", "allowDiskUse", "noCursorTimeout", "allowPartialResults", "oplogReplay")
_NO_FLAGS = (None,) * len(_FLAG_FIELDS)


def _add_flags(body: dict[str, Any], flags: tuple[bool | None, ...]) -> None:
    """Put the boolean options of a ``find`` that were given (in the order of ``_FLAG_FIELDS``)."""
    for key, value in zip(_FLAG_FIELDS, flags, strict=True):
        if value is not None:
            body[key] = value


def _add_index_bounds(
    body: dict[str, Any], min: Mapping[str, Any] | None, max: Mapping[str, Any] | None, max_scan: int | None
) -> None:
    """Put a ``find``'s ``min``, ``max`` and ``maxScan``, when given."""
    if min is not None:
        body["min"] = _mapping(min, "min")
    if max is not None:
        body["max"] = _mapping(max, "max")
    if max_scan is not None:
        body["maxScan"] = _int(max_scan, "max_scan")


def _add_cursor_type(body: dict[str, Any], cursor_type: int, limit: int) -> None:
    """Put a tailable cursor's ``tailable`` (and ``awaitData``) in a ``find``; refuse what an exhaust cursor
    cannot do."""
    if cursor_type & CursorType.EXHAUST and cursor_type & CursorType.TAILABLE:
        raise InvalidOperation("an exhaust cursor cannot be tailable: use one cursor type or the other")
    if cursor_type not in (CursorType.TAILABLE, CursorType.TAILABLE_AWAIT, CursorType.EXHAUST):
        raise ValueError(f"cursor_type must be a CursorType value, not {cursor_type!r}")
    if cursor_type == CursorType.EXHAUST and (limit or "singleBatch" in body):
        # Closing the cursor at the limit would cut its stream short and cost the connection.
        raise InvalidOperation("an exhaust cursor takes no limit: stop reading it instead (or use batch_size)")
    if cursor_type & CursorType.TAILABLE:
        body["tailable"] = True
        if cursor_type == CursorType.TAILABLE_AWAIT:
            body["awaitData"] = True


class FindOptions(TypedDict, total=False):
    """The options of a ``find`` besides its filter and limit, by the names :class:`Find` takes them (each as
    ``find()`` documents it; left out: not sent)."""

    projection: Any
    sort: Any
    skip: int
    batch_size: int
    single_batch: bool
    hint: Any
    min: Mapping[str, Any] | None
    max: Mapping[str, Any] | None
    return_key: bool | None
    show_record_id: bool | None
    allow_disk_use: bool | None
    no_cursor_timeout: bool | None
    cursor_type: int
    allow_partial_results: bool | None
    oplog_replay: bool | None
    max_time_ms: int | None
    max_await_time_ms: int | None
    max_scan: int | None
    collation: Any
    let: Mapping[str, Any] | None
    comment: Any
    raw_data: bool | None


class Find(_ReadOperation):
    """``find``; the reply becomes a :class:`~mongio.operations.base.CursorState`.

    ``limit`` < 0 asks for a single batch of ``-limit`` documents; ``limit`` 0 and ``batch_size`` 0 mean no
    limit and the server's batch size. The other options are those of :class:`FindOptions`: ``cursor_type``
    is a :class:`CursorType`, an empty ``sort`` means none. ``max_await_time_ms`` is not part of ``find``: it
    is kept here for the cursor's ``getMore`` commands, as are ``batch_size`` and ``comment``. A find cursor
    sets :attr:`~mongio.operations.base.Operation.lazy_batch` on the ``Find`` it runs, when it decides how to
    receive its first batch.
    """

    command_name = "find"
    # What a find given no option but its filter and limit has; a find given options sets its own.
    batch_size = 0
    comment: Any = None
    cursor_type = CursorType.NON_TAILABLE
    max_await_time_ms: int | None = None

    def __init__(
        self,
        database: str,
        collection: str,
        filter: Mapping[str, Any] | None = None,
        limit: int = 0,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        **options: Unpack[FindOptions],
    ) -> None:
        # The options come as one mapping, checked by _add_options only when some are given: a find_one (one
        # find per call, usually with a filter alone) then pays for no keyword default of the two dozen. The
        # others may be given by position, the cheaper call to a class, which find_one makes.
        body: dict[str, Any] = {
            "find": collection,
            "filter": {} if filter is None else filter if type(filter) is dict else _mapping(filter, "filter"),
        }
        if "$query" in body["filter"]:
            _unwrap_query_modifiers(body)
        Operation.__init__(self, database, read_preference, read_concern, None, codec_options)
        self._body = body
        self.collection = collection
        if options:
            self.limit = self._add_options(body, limit, **options)
        elif limit == -1 and type(limit) is int:
            # find_one's: written out, as _add_limit would.
            body["limit"] = self.limit = 1
            body["singleBatch"] = True
        else:
            self.limit = _add_limit(body, limit, 0, False)
        self.single_batch = "singleBatch" in body

    def _add_options(
        self,
        body: dict[str, Any],
        limit: int,
        *,
        projection: Any = None,
        sort: Any = None,
        skip: int = 0,
        batch_size: int = 0,
        single_batch: bool = False,
        hint: Any = None,
        min: Mapping[str, Any] | None = None,
        max: Mapping[str, Any] | None = None,
        return_key: bool | None = None,
        show_record_id: bool | None = None,
        allow_disk_use: bool | None = None,
        no_cursor_timeout: bool | None = None,
        cursor_type: int = CursorType.NON_TAILABLE,
        allow_partial_results: bool | None = None,
        oplog_replay: bool | None = None,
        max_time_ms: int | None = None,
        max_await_time_ms: int | None = None,
        max_scan: int | None = None,
        collation: Any = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        raw_data: bool | None = None,
    ) -> int:
        """Check the options given to ``__init__`` and put them in the command (an unknown name is a
        ``TypeError``); returns the limit, made positive."""
        if projection is not None:
            body["projection"] = _projection(projection)
        if sort:
            body["sort"] = index_document(sort, "sort")
        if skip or type(skip) is not int:
            body["skip"] = _int(skip, "skip")
        limit = _add_limit(body, limit, batch_size, single_batch)
        if min is not None or max is not None or max_scan is not None:
            _add_index_bounds(body, min, max, max_scan)
        flags = (return_key, show_record_id, allow_disk_use, no_cursor_timeout, allow_partial_results, oplog_replay)
        if flags != _NO_FLAGS:
            _add_flags(body, flags)
        if cursor_type != CursorType.NON_TAILABLE:
            _add_cursor_type(body, cursor_type, limit)
        if (collation, hint, comment, max_time_ms, let, raw_data) != _NO_COMMON_OPTIONS:
            _add_common(
                body,
                collation=collation,
                hint=hint,
                comment=comment,
                max_time_ms=max_time_ms,
                let=let,
                raw_data=raw_data,
            )
        if max_await_time_ms is not None:
            _int(max_await_time_ms, "max_await_time_ms")
        self.batch_size = batch_size
        self.comment = comment
        self.cursor_type = cursor_type
        self.max_await_time_ms = max_await_time_ms if cursor_type == CursorType.TAILABLE_AWAIT else None
        return limit

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        return parse_cursor(reply)


class GetMore(Operation[CursorState]):
    """``getMore`` for a cursor's next batch. Not retryable; the executor sends it to the cursor's server
    (and, under a load balancer, on the cursor's pinned connection). ``exhaust``: the getMore of an exhaust
    cursor, which the server may answer with a stream of batches. ``lazy_batch``: see
    :attr:`~mongio.operations.base.Operation.lazy_batch`."""

    command_name = "getMore"

    def __init__(
        self,
        database: str,
        collection: str,
        cursor_id: int,
        *,
        batch_size: int = 0,
        max_await_time_ms: int | None = None,
        comment: Any = None,
        exhaust: bool = False,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
        lazy_batch: bool = False,
    ) -> None:
        super().__init__(database, codec_options=codec_options)
        self.exhaust = exhaust
        self.lazy_batch = lazy_batch
        body: dict[str, Any] = {"getMore": Int64(cursor_id), "collection": collection}
        if batch_size:
            body["batchSize"] = batch_size
        if max_await_time_ms is not None:
            body["maxTimeMS"] = max_await_time_ms
        self._body = body
        self._comment = comment

    def build(self, context: ConnectionContext) -> Command:
        body = dict(self._body)
        if self._comment is not None and context.max_wire_version >= _GETMORE_COMMENT_MIN_WIRE_VERSION:
            body["comment"] = self._comment
        return Command(body)

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        return parse_cursor(reply, "nextBatch")


class KillCursors(Operation[dict[str, Any]]):
    """``killCursors`` for cursors of one collection; returns the reply (``cursorsKilled``, ...)."""

    command_name = "killCursors"

    def __init__(
        self,
        database: str,
        collection: str,
        cursor_ids: Sequence[int],
        *,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__(database, codec_options=codec_options)
        self._body: dict[str, Any] = {"killCursors": collection, "cursors": [Int64(i) for i in cursor_ids]}

    def build(self, context: ConnectionContext) -> Command:
        return Command(dict(self._body))

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
        return reply


def has_write_stage(pipeline: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the pipeline ends in ``$out`` or ``$merge`` (the only places those stages may be)."""
    if not pipeline:
        return False
    last = pipeline[-1]
    return isinstance(last, Mapping) and ("$out" in last or "$merge" in last)


class Aggregate(_ReadOperation):
    """``aggregate`` on a collection, or on a database when ``collection`` is None (``{aggregate: 1}``, for
    ``$currentOp`` and the like).

    With ``$out``/``$merge`` the pipeline is a write: it is not a retryable read, it takes the write concern,
    and no cursor batch size is sent (a batch size of 0 would keep the pipeline from running). Whether a
    non-primary read preference may be used for it depends on the servers' wire versions, which the executor
    decides (``has_write_stage`` tells it to).
    """

    command_name = "aggregate"

    def __init__(
        self,
        database: str,
        collection: str | None,
        pipeline: Sequence[Mapping[str, Any]],
        *,
        allow_disk_use: bool | None = None,
        batch_size: int | None = None,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        max_await_time_ms: int | None = None,
        raw_data: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        if not isinstance(pipeline, list | tuple):
            raise TypeError(f"pipeline must be a list, not {type(pipeline).__name__}")
        for stage in pipeline:
            _mapping(stage, "each pipeline stage")
        check_aggregate_options(extra)
        self.has_write_stage = has_write_stage(pipeline)
        # The server makes the cursor of a pipeline opening with $changeStream tailable and awaitData.
        self._opens_change_stream = bool(pipeline) and "$changeStream" in pipeline[0]
        body: dict[str, Any] = {
            "aggregate": 1 if collection is None else collection,
            "pipeline": list(pipeline),
        }
        cursor: dict[str, Any] = {}
        if batch_size is not None:
            _int(batch_size, "batch_size")
            if not self.has_write_stage:
                cursor["batchSize"] = batch_size
        body["cursor"] = cursor
        if allow_disk_use is not None:
            body["allowDiskUse"] = allow_disk_use
        if bypass_document_validation is not None:
            body["bypassDocumentValidation"] = bypass_document_validation
        _add_common(
            body,
            collation=collation,
            hint=hint,
            comment=comment,
            max_time_ms=max_time_ms,
            let=let,
            raw_data=raw_data,
        )
        if extra:
            body.update(extra)
        super().__init__(
            database, read_preference=read_preference, read_concern=read_concern, codec_options=codec_options
        )
        self._body = body
        self.collection = collection
        self.write_concern = write_concern
        self.batch_size = batch_size or 0
        self.comment = comment
        self.max_await_time_ms = max_await_time_ms
        if self.has_write_stage:
            self.retryability = Retryability.NONE
            self.takes_write_concern = True

    def command_flag(self, name: str) -> bool:
        """``tailable`` and ``awaitData`` hold for a ``$changeStream`` pipeline: its cursor waits for changes."""
        return self._opens_change_stream and name in ("tailable", "awaitData")

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        if self.has_write_stage:
            if not self.acknowledged:
                # An unacknowledged $out/$merge gets no reply: a cursor with nothing in it, as PyMongo gives.
                return CursorState(0, f"{self.database}.{self.collection or '$cmd.aggregate'}", [])
            # $out/$merge write: the read and write concern specification has the helper report the
            # reply's writeConcernError.
            check_write_concern_reply(reply)
        return parse_cursor(reply)


# The aggregate command's own fields: given as options they would replace its target or its pipeline.
_RESERVED_AGGREGATE_OPTIONS = ("aggregate", "pipeline")


def check_aggregate_options(options: Mapping[str, Any] | None) -> None:
    """Refuse options (an aggregate's keyword arguments) naming one of the command's own fields."""
    for name in _RESERVED_AGGREGATE_OPTIONS:
        if options and name in options:
            raise ConfigurationError(f"{name!r} cannot be given as an aggregate option: it is the command's own field")


class CountDocuments(Aggregate):
    """``count_documents``: the spec's ``$match``/``$skip``/``$limit``/``$group`` pipeline; returns the count
    (0 when the collection is empty and the pipeline yields nothing)."""

    def __init__(
        self,
        database: str,
        collection: str,
        filter: Mapping[str, Any],
        *,
        skip: int | None = None,
        limit: int | None = None,
        collation: Any = None,
        hint: Any = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        pipeline: list[Mapping[str, Any]] = [{"$match": _mapping(filter, "filter")}]
        if skip:
            pipeline.append({"$skip": _int(skip, "skip")})
        if limit:
            pipeline.append({"$limit": _int(limit, "limit")})
        pipeline.append({"$group": {"_id": 1, "n": {"$sum": 1}}})
        super().__init__(
            database,
            collection,
            pipeline,
            collation=collation,
            hint=hint,
            comment=comment,
            max_time_ms=max_time_ms,
            raw_data=raw_data,
            read_preference=read_preference,
            read_concern=read_concern,
            codec_options=codec_options,
        )

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> int:  # type: ignore[override]
        batch = reply["cursor"].get("firstBatch") or ()
        return int(batch[0]["n"]) if batch else 0


class EstimatedDocumentCount(_ReadOperation):
    """``estimated_document_count``: the ``count`` command with no filter (collection metadata)."""

    command_name = "count"

    def __init__(
        self,
        database: str,
        collection: str,
        *,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        body: dict[str, Any] = {"count": collection}
        _add_common(body, comment=comment, max_time_ms=max_time_ms, raw_data=raw_data)
        super().__init__(
            database, read_preference=read_preference, read_concern=read_concern, codec_options=codec_options
        )
        self._body = body

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> int:
        return int(reply.get("n", 0))


class Distinct(_ReadOperation):
    """``distinct``; returns the list of values."""

    command_name = "distinct"

    def __init__(
        self,
        database: str,
        collection: str,
        key: str,
        filter: Mapping[str, Any] | None = None,
        *,
        collation: Any = None,
        hint: Any = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        if not isinstance(key, str):
            raise TypeError(f"key must be a str, not {type(key).__name__}")
        body: dict[str, Any] = {"distinct": collection, "key": key}
        if filter is not None:
            body["query"] = _mapping(filter, "filter")
        _add_common(
            body, collation=collation, hint=hint, comment=comment, max_time_ms=max_time_ms, raw_data=raw_data
        )
        super().__init__(
            database, read_preference=read_preference, read_concern=read_concern, codec_options=codec_options
        )
        self._body = body

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> list[Any]:
        values: list[Any] = reply.get("values", [])
        return values


class _LoneWrite(Operation[R]):
    """An ``insert``, ``update`` or ``delete`` command with one statement (``insert_one``, ``update_one``,
    ``delete_many``...), made once: the statement encoded, the body and the document sequence assembled, so a
    build only checks the statement against the connection's limits and copies the body. No batch is
    planned: one statement is never split. ``acknowledged`` and ``retryability`` are plain attributes (the
    executor reads them on every attempt); a statement that may touch several documents is not retryable.
    """

    takes_write_concern = True
    # Class attributes, not bare annotations: they hide the base class's properties so instances can set them.
    acknowledged: bool = True
    # A write goes to the primary and takes no read concern: both stay None, read by the executor.
    read_preference = None
    read_concern = None
    _kind = KIND_INSERT

    def __init__(
        self,
        database: str,
        collection: str,
        body: dict[str, Any],
        encoded: bytes | bytearray,
        document: Mapping[str, Any],
        *,
        multi: bool,
        has_hint: bool,
        raw_data: bool | None,
        write_concern: WriteConcern | None,
        codec_options: CodecOptions,
    ) -> None:
        # Operation's fields set here rather than by its __init__: one call fewer per single write.
        self.database = database
        self.write_concern = write_concern
        self.codec_options = codec_options
        self.collection = collection
        self._body = body
        self._has_raw_data = raw_data is not None
        self._size = len(encoded)
        # Packed: checked against maxBsonObjectSize by build(), so the wire takes it as it is.
        self._sequences = {COMMANDS[self._kind][1]: DocumentSequence([PackedDocuments(encoded)], [document])}
        self._multi = multi
        self._has_hint = has_hint
        self.acknowledged = write_concern is None or write_concern.acknowledged
        self.retryability = _RETRYABLE_WRITE if self.acknowledged and not multi else _NOT_RETRYABLE

    def use_transaction_write_concern(self) -> None:
        super().use_transaction_write_concern()
        self.acknowledged = True
        self.retryability = Retryability.NONE if self._multi else Retryability.WRITE

    def build(self, context: ConnectionContext) -> Command:
        check_lone_statement(self._size, context, self.command_name, self.acknowledged)
        if self._has_hint and not self.acknowledged:
            check_unacknowledged_hint(self._kind, context)
        body = dict(self._body)
        # Only rawData depends on the server.
        return Command(for_server(body, context) if self._has_raw_data else body, self._sequences)


class Insert(_LoneWrite[InsertOneResult]):
    """``insert_one``: an ``insert`` command with one document (given an ``_id`` if it has none)."""

    command_name = "insert"

    def __init__(
        self,
        database: str,
        collection: str,
        document: Any,
        *,
        bypass_document_validation: bool | None = None,
        comment: Any = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        # Encoded as insert_many encodes each document: the generated _id made there too.
        encoded, self.inserted_id = encode_insert_document(
            document, codec_options, lambda one: encode_insert(one, codec_options)
        )
        super().__init__(
            database,
            collection,
            command_body(KIND_INSERT, collection, True, bypass_document_validation, comment, None, raw_data),
            encoded,
            document,
            multi=False,
            has_hint=False,
            raw_data=raw_data,
            write_concern=write_concern,
            codec_options=codec_options,
        )

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> InsertOneResult:
        # Most replies report no error: the full check only for one that has an error field.
        if self.acknowledged and ("writeErrors" in reply or "writeConcernError" in reply):
            check_write_reply(reply)
        return InsertOneResult(self.inserted_id, self.acknowledged)


class Update(_LoneWrite[UpdateResult]):
    """``update_one``, ``update_many`` and ``replace_one``: an ``update`` command with one statement, given as
    the statement :func:`~mongio.operations.models.update_statement` made (which checked the arguments) or
    as an ``UpdateOne``/``UpdateMany``/``ReplaceOne`` model (which checked them when made)."""

    command_name = "update"
    _kind = KIND_UPDATE

    def __init__(
        self,
        database: str,
        collection: str,
        request: dict[str, Any] | UpdateOne | UpdateMany | ReplaceOne,
        *,
        bypass_document_validation: bool | None = None,
        comment: Any = None,
        let: Mapping[str, Any] | None = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        # The exact-type test (no isinstance call), which mypy cannot narrow on: a dict is the statement itself.
        statement = request if type(request) is dict else model_statement(request)  # type: ignore[arg-type]
        super().__init__(
            database,
            collection,
            command_body(KIND_UPDATE, collection, True, bypass_document_validation, comment, let, raw_data),
            encode(statement, codec_options=codec_options, max_size=None),
            statement,
            multi=statement.get("multi") is True,
            has_hint="hint" in statement,
            raw_data=raw_data,
            write_concern=write_concern,
            codec_options=codec_options,
        )

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> UpdateResult:
        if not self.acknowledged:
            return UpdateResult(reply, False)
        if "writeErrors" in reply or "writeConcernError" in reply:
            check_write_reply(reply)
        # A copy: the reply itself is also what the command-succeeded event reports. Like PyMongo's,
        # raw_result says whether an existing document was updated and holds an upsert's id alone.
        upserted = reply.get("upserted")
        raw = {**reply, "updatedExisting": bool(reply.get("n")) and not upserted}
        if upserted:
            raw["upserted"] = upserted[0].get("_id")
        return UpdateResult(raw, True)


class Delete(_LoneWrite[DeleteResult]):
    """``delete_one`` and ``delete_many``: a ``delete`` command with one statement, given as the statement
    :func:`~mongio.operations.models.delete_statement` made or as a ``DeleteOne``/``DeleteMany`` model."""

    command_name = "delete"
    _kind = KIND_DELETE

    def __init__(
        self,
        database: str,
        collection: str,
        request: dict[str, Any] | DeleteOne | DeleteMany,
        *,
        comment: Any = None,
        let: Mapping[str, Any] | None = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        # The exact-type test (no isinstance call), which mypy cannot narrow on: a dict is the statement itself.
        statement = request if type(request) is dict else model_statement(request)  # type: ignore[arg-type]
        super().__init__(
            database,
            collection,
            command_body(KIND_DELETE, collection, True, None, comment, let, raw_data),
            encode(statement, codec_options=codec_options, max_size=None),
            statement,
            multi=statement["limit"] == 0,
            has_hint="hint" in statement,
            raw_data=raw_data,
            write_concern=write_concern,
            codec_options=codec_options,
        )

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> DeleteResult:
        if not self.acknowledged:
            return DeleteResult(reply, False)
        if "writeErrors" in reply or "writeConcernError" in reply:
            check_write_reply(reply)
        return DeleteResult(reply, True)


class FindAndModify(Operation[Any]):
    """``find_one_and_delete``/``_replace``/``_update``; returns the document (or None).

    Give exactly one of ``remove=True``, ``update`` (``$`` operators or a pipeline) or ``replacement``.
    """

    command_name = "findAndModify"
    takes_write_concern = True

    def __init__(
        self,
        database: str,
        collection: str,
        filter: Mapping[str, Any],
        *,
        remove: bool = False,
        update: Any = None,
        replacement: Any = None,
        projection: Any = None,
        sort: Any = None,
        upsert: bool | None = None,
        return_document: ReturnDocument | bool = ReturnDocument.BEFORE,
        array_filters: Sequence[Mapping[str, Any]] | None = None,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        max_time_ms: int | None = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__(database, write_concern=write_concern, codec_options=codec_options)
        body: dict[str, Any] = {"findAndModify": collection, "query": _mapping(filter, "filter")}
        if remove:
            if update is not None or replacement is not None:
                raise ValueError("remove cannot be combined with an update or a replacement")
            body["remove"] = True
        elif update is not None:
            if replacement is not None:
                raise ValueError("give an update or a replacement, not both")
            body["update"] = validate_update(update)
        elif replacement is not None:
            body["update"] = validate_replacement(replacement)
        else:
            raise ValueError("findAndModify needs remove=True, an update or a replacement")
        if not remove:
            if not isinstance(return_document, bool | int):
                raise TypeError("return_document must be ReturnDocument.BEFORE or ReturnDocument.AFTER")
            body["new"] = bool(return_document)
            if upsert is not None:
                body["upsert"] = upsert
        if projection is not None:
            body["fields"] = _projection(projection)
        if sort is not None:
            body["sort"] = index_document(sort, "sort")
        if array_filters is not None:
            if remove or replacement is not None:
                raise ValueError("array_filters only applies to updates")
            body["arrayFilters"] = validate_array_filters(array_filters)
        if bypass_document_validation is not None and not remove:
            body["bypassDocumentValidation"] = bypass_document_validation
        _add_common(
            body,
            collation=collation,
            hint=hint,
            comment=comment,
            max_time_ms=max_time_ms,
            let=let,
            raw_data=raw_data,
        )
        self._body = body
        self._hint = hint is not None

    def build(self, context: ConnectionContext) -> Command:
        if self._hint and not self.acknowledged and context.max_wire_version < DELETE_HINT_MIN_WIRE_VERSION:
            raise ConfigurationError(
                "hint on an unacknowledged findAndModify needs MongoDB 4.4+ "
                f"(wire version {DELETE_HINT_MIN_WIRE_VERSION}, this server is {context.max_wire_version})"
            )
        return Command(for_server(dict(self._body), context))

    @property
    def retryability(self) -> Retryability:  # type: ignore[override]
        return Retryability.WRITE if self.acknowledged else Retryability.NONE

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> Any:
        if not self.acknowledged:
            return None
        check_write_concern_reply(reply)
        return reply.get("value")


class Explain(Operation[dict[str, Any]]):
    """``explain`` of another operation's command (``find``, ``aggregate``, ``count``, ``distinct``, a write...);
    returns the server's plan document. ``max_time_ms`` bounds the explain itself, as the CRUD spec asks."""

    command_name = "explain"

    def __init__(
        self, operation: Operation[Any], *, verbosity: str | None = None, max_time_ms: int | None = None
    ) -> None:
        super().__init__(
            operation.database,
            read_preference=operation.read_preference,
            read_concern=operation.read_concern,
            codec_options=operation.codec_options,
        )
        self._inner = operation
        self._extra: dict[str, Any] = {}
        if verbosity is not None:
            self._extra["verbosity"] = verbosity
        if max_time_ms is not None:
            self._extra["maxTimeMS"] = _int(max_time_ms, "max_time_ms")

    def build(self, context: ConnectionContext) -> Command:
        inner = self._inner.build(context)
        explained = inner.body
        for identifier, sequence in (inner.sequences or {}).items():
            # explain takes the whole command as one document: sequences go back into it as arrays.
            explained[identifier] = sequence.documents
        # explain itself takes no read concern (not even a causally consistent session's afterClusterTime,
        # which takes_read_concern=False leaves out): the explained command carries the one it was given.
        read_concern = self._inner.read_concern if self._inner.takes_read_concern else None
        if read_concern is not None and read_concern.document:
            explained["readConcern"] = read_concern.document
        body: dict[str, Any] = {"explain": explained}
        body.update(self._extra)
        return Command(body)

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
        return reply
