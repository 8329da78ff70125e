"""``Collection``: CRUD, aggregation, bulk writes and index management on one collection.

Every method builds one operation and awaits the client's executor (which selects the server, adds the session,
concerns and read preference, and retries when allowed)::

    coll = client.shop.orders
    await coll.insert_one({"sku": "a1", "qty": 2})
    async for order in coll.find({"qty": {"$gt": 1}}).sort("qty", -1):
        ...
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NoReturn

from mongio.api_base import AGGREGATE_OPTIONS, ChangeStreamSource, DerivedScope, split_options
from mongio.cursor import (
    SINGLE_BATCH_OPTIONS,
    CommandCursor,
    Cursor,
    RawBatchCommandCursor,
    RawBatchCursor,
    raw_batch_codec_options,
)
from mongio.errors import ConfigurationError
from mongio.execution.connection_pin import ConnectionPin
from mongio.execution.deadline import TimeoutMode
from mongio.operations.bulk import BulkWrite
from mongio.operations.collections import ListCollections, RenameCollection, validate_collection_name
from mongio.operations.count_command import Count
from mongio.operations.crud import (
    CountDocuments,
    Delete,
    Distinct,
    EstimatedDocumentCount,
    Find,
    FindAndModify,
    Insert,
    Update,
    check_aggregate_options,
)
from mongio.operations.indexes import (
    CreateIndexes,
    CreateSearchIndexes,
    DropIndexes,
    DropSearchIndex,
    ListIndexes,
    ListSearchIndexes,
    UpdateSearchIndex,
)
from mongio.operations.map_reduce import MapReduce
from mongio.operations.models import (
    IndexModel,
    ReturnDocument,
    SearchIndexModel,
    WriteModel,
    delete_statement,
    update_statement,
    validate_replacement,
    validate_update,
)
from mongio.operations.results import (
    BulkWriteResult,
    DeleteResult,
    InsertManyResult,
    InsertOneResult,
    UpdateResult,
)
from mongio.sessions.client_session import check_session_argument
from mongio.typings import DocumentType as _D  # the document type (PyMongo's _DocumentType)

if TYPE_CHECKING:
    from mongio.bson import CodecOptions, RawBSONDocument
    from mongio.change_stream import CollectionChangeStream
    from mongio.client import MongoClient
    from mongio.database import Database
    from mongio.options.protocols import (
        CodecOptionsLike,
        IndexModelLike,
        ReadConcernLike,
        ReadPreferenceLike,
        SearchIndexModelLike,
        WriteConcernLike,
        WriteModelLike,
    )
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import ReadPreferenceMode
    from mongio.options.write_concern import WriteConcern
    from mongio.sessions.client_session import ClientSession

__all__ = ["Collection", "ReturnDocument"]


# Keyword arguments PyMongo passes through to commands under the server's names; ours take snake_case.
# An aggregate that cannot write: the aggregation options but those of a write stage, plus ``let``.
_LIST_SEARCH_INDEXES_OPTIONS = {
    **{
        key: name
        for key, name in AGGREGATE_OPTIONS.items()
        if name not in ("bypass_document_validation", "raw_data")
    },
    "let": "let",
}
_READ_OPTIONS = {
    "collation": "collation",
    "hint": "hint",
    "maxTimeMS": "max_time_ms",
    "max_time_ms": "max_time_ms",
    "skip": "skip",
    "limit": "limit",
    "rawData": "raw_data",
    "raw_data": "raw_data",
}
_COUNT_OPTIONS = {**_READ_OPTIONS, "comment": "comment"}
_MAP_REDUCE_OPTIONS = {
    "collation": "collation",
    "maxTimeMS": "max_time_ms",
    "max_time_ms": "max_time_ms",
    "rawData": "raw_data",
    "raw_data": "raw_data",
}
_FIND_AND_MODIFY_OPTIONS = {
    "collation": "collation",
    "maxTimeMS": "max_time_ms",
    "max_time_ms": "max_time_ms",
    "bypassDocumentValidation": "bypass_document_validation",
    "bypass_document_validation": "bypass_document_validation",
    "rawData": "raw_data",
    "raw_data": "raw_data",
}
_MAX_TIME_OPTIONS = {
    "maxTimeMS": "max_time_ms",
    "max_time_ms": "max_time_ms",
    "rawData": "raw_data",
    "raw_data": "raw_data",
}


def _options(kwargs: Mapping[str, Any], names: Mapping[str, str], method: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in kwargs.items():
        name = names.get(key)
        if name is None:
            raise TypeError(f"{method}() got an unexpected keyword argument {key!r}")
        options[name] = value
    return options


class Collection(DerivedScope, ChangeStreamSource["CollectionChangeStream[_D]"], Generic[_D]):
    """A collection of a :class:`~mongio.database.Database`: ``client.db.coll`` or ``db["coll"]``.

    Making one does no I/O. It carries codec options, read preference, read concern and write concern,
    inherited from its database unless given.

    The CRUD and index methods take a keyword-only ``raw_data`` (``rawData`` where camelCase options are
    taken): an internal option of MongoDB 8.2+ (not sent to older servers) that works on the stored buckets
    of a time-series collection. It is meant for MongoDB's own tools and may change without notice.
    """

    def __init__(
        self,
        database: Database[_D],
        name: str,
        create: bool | None = False,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        session: ClientSession | None = None,
        *,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Usually made by ``db[name]`` or :meth:`Database.get_collection`; the arguments are PyMongo's.

        ``create`` and extra keyword arguments (the options of a collection to create) are refused with
        ``ValueError``, as by PyMongo's ``AsyncCollection``: creating a collection is I/O, which a constructor
        cannot await; use ``await db.create_collection(name, ...)``. ``session`` is accepted for the same
        signature and unused. ``timeout`` (seconds, 0 for no limit) is this collection's own ``timeoutMS``.
        """
        if create or kwargs:
            raise ValueError(
                "Collection does not support the `create` or `kwargs` arguments: use "
                "`await database.create_collection(name, ...)` to create a collection."
            )
        self._database = database
        self._client = database.client
        # Read by every operation: kept here, where one attribute read finds them (on Python 3.11 each read
        # of an attribute of a class with __getattr__, as Collection and Database are, takes the slow path).
        self._database_name = database.name
        # The client's, for good: every operation of this collection runs there.
        self._executor = database.client.executor
        self._name = validate_collection_name(name)
        # Each option given, else the database's (its timeout included).
        self._inherit_options(
            database, database.timeout, codec_options, read_preference, write_concern, read_concern, timeout
        )

    # -- identity and options ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The collection's name (``"orders"``)."""
        return self._name

    @property
    def full_name(self) -> str:
        """The namespace: ``"<database>.<collection>"``."""
        return f"{self._database_name}.{self._name}"

    @property
    def database(self) -> Database[_D]:
        """The database this collection belongs to."""
        return self._database

    def _with_options(
        self,
        codec_options: CodecOptions,
        read_preference: ReadPreferenceMode | ReadPreferenceLike,
        write_concern: WriteConcern | WriteConcernLike,
        read_concern: ReadConcern | ReadConcernLike,
        timeout: float | None,
    ) -> Collection[_D]:
        return Collection(
            self._database,
            self._name,
            codec_options=codec_options,
            read_preference=read_preference,
            write_concern=write_concern,
            read_concern=read_concern,
            timeout=timeout,
        )

    def _change_stream_origin(self) -> tuple[type[CollectionChangeStream[_D]], MongoClient[_D], str, str | None]:
        from mongio.change_stream import CollectionChangeStream  # on first use: most programs never watch

        return CollectionChangeStream, self._client, self._database_name, self._name

    def __getattr__(self, name: str) -> Collection[_D]:
        """A sub-collection: ``coll.archive`` is the collection ``"<coll>.archive"``."""
        if name.startswith("_"):
            full = f"{self._name}.{name}"
            raise AttributeError(
                f"Collection has no attribute {name!r}. To access the {full} collection, use "
                f"database[{full!r}]."
            )
        return self[name]

    def __getitem__(self, name: str) -> Collection[_D]:
        return Collection(
            self._database,
            f"{self._name}.{name}",
            codec_options=self._codec_options,
            read_preference=self._read_preference,
            write_concern=self._write_concern,
            read_concern=self._read_concern,
            timeout=self._timeout,
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Collection):
            return self._database == other.database and self._name == other.name
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._database, self._name))

    def __bool__(self) -> bool:
        raise NotImplementedError(
            "Collection objects do not implement truth value testing or bool(). "
            "Compare with None instead: collection is not None"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        method = self._name.rpartition(".")[2]
        raise TypeError(
            f"'Collection' object is not callable. If you meant to call the '{method}' method on a "
            f"'Collection' object it is failing because no such method exists."
        )

    # Not iterable: without this, iter() would fall back on __getitem__ and ``for x in coll`` would walk
    # sub-collections ("coll.0", "coll.1", ...) for ever. Use find() to iterate over documents.
    __iter__ = None

    def __next__(self) -> NoReturn:
        """Raises ``TypeError``: a collection is not iterable (``find()`` returns a cursor that is)."""
        raise TypeError("'Collection' object is not iterable")

    next = __next__

    def __repr__(self) -> str:
        return f"Collection({self._database!r}, {self._name!r})"

    # -- writes -----------------------------------------------------------------------------------------------

    async def insert_one(
        self,
        document: _D | RawBSONDocument,
        bypass_document_validation: bool | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> InsertOneResult:
        """Insert one document; it gets an ``_id`` (a new ObjectId, also stored in ``document``) if it has none.

        ``result = await coll.insert_one({"x": 1}); result.inserted_id``
        """
        operation = Insert(
            self._database_name,
            self._name,
            document,
            bypass_document_validation=bypass_document_validation,
            comment=comment,
            raw_data=raw_data,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
        )
        return await self._run(operation, session)

    async def insert_many(
        self,
        documents: Iterable[_D | RawBSONDocument],
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> InsertManyResult:
        """Insert several documents, in as few commands as the server's limits allow.

        ``ordered=True`` stops at the first error; ``False`` tries them all. Failures raise
        :class:`~mongio.errors.BulkWriteError`.
        """
        if isinstance(documents, Mapping | str | bytes) or not isinstance(documents, Iterable):
            raise TypeError("documents must be a non-empty list")
        documents = list(documents)
        if not documents:
            raise TypeError("documents must be a non-empty list")
        bulk = BulkWrite.for_insert_many(
            self._database_name,
            self._name,
            documents,
            ordered=ordered,
            bypass_document_validation=bypass_document_validation,
            comment=comment,
            raw_data=raw_data,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
        )
        await self._run_bulk(bulk, session)
        return InsertManyResult(bulk.inserted_ids, bulk.acknowledged)

    async def _run_bulk(
        self, bulk: BulkWrite, session: Any, operation_name: str | None = None
    ) -> BulkWriteResult:
        # timeoutMS bounds the whole bulk write, not each batch; it is one operation (one tracing span).
        if session is not None:
            check_session_argument(session)
        with self._executor.timeout_scope(self._timeout, session, operation_name):
            while (batch := bulk.next_batch()) is not None:
                await self._run(batch, session)
        return bulk.result()

    async def bulk_write(
        self,
        requests: Sequence[WriteModel | WriteModelLike],
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        let: Mapping[str, Any] | None = None,
        *,
        raw_data: bool | None = None,
    ) -> BulkWriteResult:
        """Run a list of ``InsertOne``, ``UpdateOne``, ``UpdateMany``, ``ReplaceOne``, ``DeleteOne`` and
        ``DeleteMany`` requests with as few commands as possible.

        ::

            await coll.bulk_write([InsertOne({"x": 1}), DeleteOne({"x": 0})], ordered=False)
        """
        if not isinstance(requests, list | tuple):
            raise TypeError("requests must be a list")
        bulk = BulkWrite(
            self._database_name,
            self._name,
            requests,
            ordered=ordered,
            bypass_document_validation=bypass_document_validation,
            comment=comment,
            let=let,
            raw_data=raw_data,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
        )
        return await self._run_bulk(bulk, session, "bulkWrite")

    def _update(
        self,
        statement: dict[str, Any],
        bypass_document_validation: bool | None,
        let: Mapping[str, Any] | None,
        comment: Any,
        raw_data: bool | None,
    ) -> Update:
        """The operation of an update, built from a checked statement."""
        return Update(
            self._database_name,
            self._name,
            statement,
            bypass_document_validation=bypass_document_validation,
            comment=comment,
            let=let,
            raw_data=raw_data,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
        )

    async def update_one(
        self,
        filter: Mapping[str, Any],
        update: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        upsert: bool = False,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        array_filters: Sequence[Mapping[str, Any]] | None = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        sort: Any = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> UpdateResult:
        """Update the first document matching ``filter`` (``sort`` picks which) with ``$`` operators or a
        pipeline; with ``upsert=True`` insert one if none matches.

        ``await coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, upsert=True)``
        """
        statement = update_statement(
            filter, validate_update(update), upsert or None, collation, array_filters, hint, sort, multi=False
        )
        operation = self._update(statement, bypass_document_validation, let, comment, raw_data)
        return await self._run(operation, session)

    async def update_many(
        self,
        filter: Mapping[str, Any],
        update: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        upsert: bool = False,
        array_filters: Sequence[Mapping[str, Any]] | None = None,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> UpdateResult:
        """Update every document matching ``filter``.

        ``await coll.update_many({"done": False}, {"$set": {"done": True}})``
        """
        statement = update_statement(
            filter, validate_update(update), upsert or None, collation, array_filters, hint, None, multi=True
        )
        operation = self._update(statement, bypass_document_validation, let, comment, raw_data)
        return await self._run(operation, session)

    async def replace_one(
        self,
        filter: Mapping[str, Any],
        replacement: Mapping[str, Any],
        upsert: bool = False,
        bypass_document_validation: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        sort: Any = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> UpdateResult:
        """Replace the first document matching ``filter`` with ``replacement`` (no ``$`` operators)."""
        statement = update_statement(
            filter, validate_replacement(replacement), upsert or None, collation, None, hint, sort, multi=None
        )
        operation = self._update(statement, bypass_document_validation, let, comment, raw_data)
        return await self._run(operation, session)

    def _delete(
        self, statement: dict[str, Any], let: Mapping[str, Any] | None, comment: Any, raw_data: bool | None
    ) -> Delete:
        """The operation of a delete, built from a checked statement."""
        return Delete(
            self._database_name,
            self._name,
            statement,
            comment=comment,
            let=let,
            raw_data=raw_data,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
        )

    async def delete_one(
        self,
        filter: Mapping[str, Any],
        collation: Any = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> DeleteResult:
        """Delete the first document matching ``filter``.

        ``(await coll.delete_one({"_id": 1})).deleted_count``
        """
        statement = delete_statement(filter, collation, hint, multi=False)
        operation = self._delete(statement, let, comment, raw_data)
        return await self._run(operation, session)

    async def delete_many(
        self,
        filter: Mapping[str, Any],
        collation: Any = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        *,
        raw_data: bool | None = None,
    ) -> DeleteResult:
        """Delete every document matching ``filter`` (``{}`` deletes them all)."""
        statement = delete_statement(filter, collation, hint, multi=True)
        operation = self._delete(statement, let, comment, raw_data)
        return await self._run(operation, session)

    # -- reads ------------------------------------------------------------------------------------------------

    def find(self, *args: Any, **kwargs: Any) -> Cursor[_D]:
        """A cursor over the documents matching a filter; it runs when first iterated or awaited.

        Takes PyMongo's arguments: ``filter``, ``projection``, ``skip``, ``limit``, ``sort``, ``batch_size``,
        ``hint``, ``max_time_ms``, ``collation``, ``comment``, ``cursor_type``, ``session``... ::

            async for doc in coll.find({"x": {"$gt": 1}}, {"_id": 0}).sort("x"):
                ...
            docs = await coll.find({"x": 1}).to_list()
            cursor = await coll.find({"x": 1})    # first batch fetched
        """
        return Cursor(self, *args, **kwargs)

    async def find_one(self, filter: Any = None, *args: Any, **kwargs: Any) -> _D | None:
        """The first document matching ``filter`` (anything but a mapping is taken as an ``_id``), or None.

        ``doc = await coll.find_one({"sku": "a1"})``
        """
        if filter is not None and type(filter) is not dict and not isinstance(filter, Mapping):
            filter = {"_id": filter}
        if args and len(args) == 1 and "projection" not in kwargs:
            kwargs["projection"] = args[0]
            args = ()
        session = kwargs.pop("session", None) if kwargs else None
        if args or (kwargs and not SINGLE_BATCH_OPTIONS.issuperset(kwargs)):
            kwargs["session"] = session
            kwargs["limit"] = -1
            cursor: Cursor[_D] = self.find(filter, *args, **kwargs)
            return await cursor.first_document()
        # One find, run with no cursor: a single batch leaves nothing to fetch, and the executor gives this one
        # command the timeout the cursor would have settled (its lifetime's, maxTimeMS sent). The options are
        # those a find cursor hands to Find as given; the others go by position (limit, read preference, read
        # concern, codec options): a class called with names costs a find_one about 1% more.
        operation = Find(
            self._database_name,
            self._name,
            filter,
            -1,
            self._read_preference,
            self._read_concern,
            self._codec_options,
            **kwargs,
        )
        pin = ConnectionPin()
        state, address = await self._executor.execute_answered(
            operation, session, level_timeout=self._timeout, pin=pin
        )
        batch = state.batch
        if state.id:
            # The server kept a cursor open anyway: the cursor of this find_one takes it, to kill it.
            left_open: Cursor[_D] = self.find(filter, limit=-1, session=session, **kwargs)
            await left_open.kill_left_open(state, address, pin)
        document: _D | None = batch[0] if batch else None
        return document

    def find_raw_batches(self, *args: Any, **kwargs: Any) -> RawBatchCursor:
        """Like :meth:`find`, but each item is a whole batch from the server as ``bytes`` (the BSON of its
        documents back to back), for code that decodes BSON itself::

            async for batch in coll.find_raw_batches({"x": 1}, batch_size=1000):
                rows = mongio.bson.decode_all(batch)
        """
        return RawBatchCursor(self, *args, **kwargs)

    def aggregate_raw_batches(
        self,
        pipeline: Sequence[Mapping[str, Any]],
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> RawBatchCommandCursor:
        """Like :meth:`aggregate` (same options, ``let`` included), but each item is a whole batch of results
        as ``bytes`` (the BSON of its documents back to back)."""
        raw = self.with_options(codec_options=raw_batch_codec_options(self._codec_options))
        cursor = raw._aggregate(
            raw._database_name, raw._name, pipeline, session, None, comment, kwargs, RawBatchCommandCursor
        )
        assert isinstance(cursor, RawBatchCommandCursor)
        return cursor

    async def _find_and_modify(self, filter: Mapping[str, Any], session: Any, **arguments: Any) -> _D | None:
        operation = FindAndModify(
            self._database_name,
            self._name,
            filter,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
            **arguments,
        )
        result: _D | None = await self._run(operation, session)
        return result

    async def find_one_and_delete(
        self,
        filter: Mapping[str, Any],
        projection: Any = None,
        sort: Any = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> _D | None:
        """Delete the first document matching ``filter`` (``sort`` picks which) and return it, or None."""
        return await self._find_and_modify(
            filter,
            session,
            remove=True,
            projection=projection,
            sort=sort,
            hint=hint,
            let=let,
            comment=comment,
            **_options(kwargs, _FIND_AND_MODIFY_OPTIONS, "find_one_and_delete"),
        )

    async def find_one_and_replace(
        self,
        filter: Mapping[str, Any],
        replacement: Mapping[str, Any],
        projection: Any = None,
        sort: Any = None,
        upsert: bool = False,
        return_document: ReturnDocument | bool = ReturnDocument.BEFORE,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> _D | None:
        """Replace the first document matching ``filter``; return it as it was before (the default) or,
        with ``return_document=ReturnDocument.AFTER``, as it is after. None when nothing matched."""
        return await self._find_and_modify(
            filter,
            session,
            replacement=replacement,
            projection=projection,
            sort=sort,
            upsert=upsert or None,
            return_document=return_document,
            hint=hint,
            let=let,
            comment=comment,
            **_options(kwargs, _FIND_AND_MODIFY_OPTIONS, "find_one_and_replace"),
        )

    async def find_one_and_update(
        self,
        filter: Mapping[str, Any],
        update: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        projection: Any = None,
        sort: Any = None,
        upsert: bool = False,
        return_document: ReturnDocument | bool = ReturnDocument.BEFORE,
        array_filters: Sequence[Mapping[str, Any]] | None = None,
        hint: Any = None,
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> _D | None:
        """Update the first document matching ``filter`` and return it before (the default) or after the
        update.

        ``doc = await coll.find_one_and_update({"_id": "seq"}, {"$inc": {"n": 1}},
        upsert=True, return_document=ReturnDocument.AFTER)``
        """
        return await self._find_and_modify(
            filter,
            session,
            update=update,
            projection=projection,
            sort=sort,
            upsert=upsert or None,
            return_document=return_document,
            array_filters=array_filters,
            hint=hint,
            let=let,
            comment=comment,
            **_options(kwargs, _FIND_AND_MODIFY_OPTIONS, "find_one_and_update"),
        )

    async def count_documents(
        self,
        filter: Mapping[str, Any],
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> int:
        """The number of documents matching ``filter`` (exact; ``skip``, ``limit``, ``hint``, ``collation``
        and ``maxTimeMS`` may be given)."""
        operation = CountDocuments(
            self._database_name,
            self._name,
            filter,
            comment=comment,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            codec_options=self._codec_options,
            **_options(kwargs, _READ_OPTIONS, "count_documents"),
        )
        count: int = await self._run(operation, session)
        return count

    async def estimated_document_count(self, comment: Any = None, **kwargs: Any) -> int:
        """The collection's document count from its metadata: fast, but may be off after an unclean
        shutdown. Takes ``maxTimeMS``. A ``session`` raises ConfigurationError, as in PyMongo: the ``count``
        command it runs cannot be part of a transaction."""
        if "session" in kwargs:
            raise ConfigurationError(
                "estimated_document_count does not support sessions (the sessions specification: its count "
                "command cannot run in a transaction)"
            )
        options = _options(kwargs, _MAX_TIME_OPTIONS, "estimated_document_count")
        operation = EstimatedDocumentCount(
            self._database_name,
            self._name,
            comment=comment,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            codec_options=self._codec_options,
            **options,
        )
        count: int = await self._run(operation, None)
        return count

    async def count(
        self, filter: Mapping[str, Any] | None = None, session: ClientSession | None = None, **kwargs: Any
    ) -> int:
        """The number of documents matching ``filter``, from the server's ``count`` command.

        .. deprecated::
            The CRUD specification deprecates this helper (PyMongo 4 removed it); use
            :meth:`count_documents` for an exact count of matching documents, or
            :meth:`estimated_document_count` for the fast metadata count of the whole collection. Without a
            filter the ``count`` command answers from collection metadata, and on a sharded cluster it may
            count orphaned documents or miss some during a chunk migration.

        Takes ``skip``, ``limit``, ``hint``, ``collation``, ``maxTimeMS`` and ``comment`` keywords; it is
        retried once like any read when retryable reads are on. ``await coll.count({"qty": 0})``
        """
        warnings.warn(
            "count is deprecated: use count_documents, or estimated_document_count for the whole collection",
            DeprecationWarning,
            stacklevel=2,
        )
        operation = Count(
            self._database_name,
            self._name,
            filter,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            codec_options=self._codec_options,
            **_options(kwargs, _COUNT_OPTIONS, "count"),
        )
        count: int = await self._run(operation, session)
        return count

    def _map_reduce(
        self, map: Any, reduce: Any, out: Any, read_preference: ReadPreferenceMode | None, kwargs: Mapping[str, Any]
    ) -> MapReduce:
        options, extra = split_options(kwargs, _MAP_REDUCE_OPTIONS)
        return MapReduce(
            self._database_name,
            self._name,
            map,
            reduce,
            out,
            extra=extra,
            read_preference=read_preference,
            read_concern=self._read_concern,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
            **options,
        )

    async def map_reduce(
        self,
        map: Any,
        reduce: Any,
        out: str | Mapping[str, Any],
        full_response: bool = False,
        session: ClientSession | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run the server's ``mapReduce`` command on this collection, on the primary.

        .. deprecated::
            MongoDB deprecated map-reduce in 5.0 and PyMongo 4 removed this helper; use :meth:`aggregate`
            (``$group``, ``$merge``, ``$out``, ``$accumulator``) instead.

        ``map`` and ``reduce`` are JavaScript functions (``str`` or :class:`~mongio.bson.Code`); ``out`` is
        the output collection's name or a mapping such as ``{"replace": "totals", "db": "reports"}`` or
        ``{"inline": 1}``. Other keywords (``query``, ``sort``, ``limit``, ``finalize``, ``scope``,
        ``collation``, ``maxTimeMS``...) go into the command. Returns the output :class:`Collection`, or the
        server's whole reply when ``full_response`` is true or the results are inline. Not retried.
        """
        warnings.warn("map_reduce is deprecated: use aggregate", DeprecationWarning, stacklevel=2)
        operation = self._map_reduce(map, reduce, out, None, kwargs)
        response: dict[str, Any] = await self._run(operation, session)
        result = response.get("result")
        if full_response or not result:
            return response
        if isinstance(result, Mapping):
            return self._client[result["db"]][result["collection"]]
        return self._database[result]

    async def inline_map_reduce(
        self,
        map: Any,
        reduce: Any,
        full_response: bool = False,
        session: ClientSession | None = None,
        **kwargs: Any,
    ) -> Any:
        """:meth:`map_reduce` with ``out={"inline": 1}``, which may run on a secondary as the collection's read
        preference allows; returns the list of results (the whole reply when ``full_response`` is true).

        .. deprecated::
            As :meth:`map_reduce`: use :meth:`aggregate` instead.
        """
        warnings.warn("inline_map_reduce is deprecated: use aggregate", DeprecationWarning, stacklevel=2)
        operation = self._map_reduce(map, reduce, {"inline": 1}, self._read_preference, kwargs)
        response: dict[str, Any] = await self._run(operation, session)
        if full_response:
            return response
        return response.get("results")

    async def distinct(
        self,
        key: str,
        filter: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        hint: Any = None,
        **kwargs: Any,
    ) -> list[Any]:
        """The distinct values of ``key`` among the documents matching ``filter``.

        ``await coll.distinct("sku", {"qty": {"$gt": 0}})``
        """
        options = _options(kwargs, _READ_OPTIONS, "distinct")
        if "skip" in options or "limit" in options:
            raise TypeError("distinct() takes no skip or limit")
        operation = Distinct(
            self._database_name,
            self._name,
            key,
            filter,
            comment=comment,
            hint=hint,
            read_preference=self._read_preference,
            read_concern=self._read_concern,
            codec_options=self._codec_options,
            **options,
        )
        values: list[Any] = await self._run(operation, session)
        return values

    def aggregate(
        self,
        pipeline: Sequence[Mapping[str, Any]],
        session: ClientSession | None = None,
        let: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> CommandCursor[_D]:
        """Run an aggregation pipeline; a cursor over its results (it runs when awaited or iterated).

        Options: ``allowDiskUse``, ``batchSize``, ``maxTimeMS``, ``maxAwaitTimeMS``, ``collation``, ``hint``,
        ``bypassDocumentValidation`` (snake_case works too); any other keyword goes into the command. ::

            async for row in coll.aggregate([{"$group": {"_id": "$sku", "n": {"$sum": 1}}}]):
                ...
            cursor = await coll.aggregate(pipeline)      # PyMongo's spelling works too

        ``timeout_mode`` (:class:`~mongio.TimeoutMode`) says how a ``timeoutMS`` bounds the cursor.
        """
        return self._aggregate(self._database_name, self._name, pipeline, session, let, comment, kwargs)

    # -- indexes ----------------------------------------------------------------------------------------------

    async def create_indexes(
        self,
        indexes: Sequence[IndexModel | IndexModelLike],
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> list[str]:
        """Create several indexes in one command; returns their names. Takes ``maxTimeMS`` and
        ``commitQuorum``."""
        options = _options(
            kwargs,
            {
                "maxTimeMS": "max_time_ms",
                "max_time_ms": "max_time_ms",
                "commitQuorum": "commit_quorum",
                "commit_quorum": "commit_quorum",
                "rawData": "raw_data",
                "raw_data": "raw_data",
            },
            "create_indexes",
        )
        operation = CreateIndexes(
            self._database_name,
            self._name,
            list(indexes),
            comment=comment,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
            **options,
        )
        names: list[str] = await self._run(operation, session)
        return names

    async def create_index(
        self, keys: Any, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> str:
        """Create an index; returns its name. Keys as ``"x"``, ``[("x", 1), ("y", -1)]`` or a mapping;
        options such as ``unique=True``, ``name=``, ``expireAfterSeconds=``, ``partialFilterExpression=``.

        ``await coll.create_index([("sku", ASCENDING)], unique=True)``
        """
        command_options = {
            key: kwargs.pop(key)
            for key in ("maxTimeMS", "max_time_ms", "commitQuorum", "commit_quorum", "rawData", "raw_data")
            if key in kwargs
        }
        names = await self.create_indexes(
            [IndexModel(keys, **kwargs)], session=session, comment=comment, **command_options
        )
        return names[0]

    async def drop_index(
        self, index_or_name: Any, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> None:
        """Drop one index, by name or by the keys it was created with."""
        if index_or_name == "*":
            raise ValueError("use drop_indexes() to drop all indexes")
        await self._drop_indexes(index_or_name, session, comment, kwargs)

    async def drop_indexes(
        self, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> None:
        """Drop every index but the one on ``_id``."""
        await self._drop_indexes("*", session, comment, kwargs)

    async def _drop_indexes(self, index: Any, session: Any, comment: Any, kwargs: Mapping[str, Any]) -> None:
        options = _options(kwargs, _MAX_TIME_OPTIONS, "drop_index")
        operation = DropIndexes(
            self._database_name,
            self._name,
            index,
            comment=comment,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
            **options,
        )
        await self._run(operation, session)

    def list_indexes(
        self,
        session: ClientSession | None = None,
        comment: Any = None,
        *,
        batch_size: int | None = None,
        raw_data: bool | None = None,
        timeout_mode: TimeoutMode | str | None = None,
    ) -> CommandCursor[Any]:
        """A cursor over the collection's index specifications (none for a missing collection);
        ``batch_size`` bounds each batch the server returns.

        ``async for index in coll.list_indexes(): print(index["name"])``
        """
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)):
            raise TypeError(f"batch_size must be an int, not {batch_size!r}")
        if batch_size is not None and batch_size < 0:
            raise ValueError(f"batch_size must be >= 0, not {batch_size}")
        operation = ListIndexes(
            self._database_name,
            self._name,
            batch_size=batch_size,
            comment=comment,
            raw_data=raw_data,
            read_preference=self._primary(),
            codec_options=self._codec_options,
        )
        return self._command_cursor(
            operation, session, comment=comment, timeout_mode=timeout_mode, batch_size=batch_size or 0
        )

    def _primary(self) -> ReadPreferenceMode | None:
        # Index and collection listings read from the primary, as PyMongo does: their results describe what
        # the next write will see.
        return None

    async def index_information(
        self, session: ClientSession | None = None, comment: Any = None
    ) -> dict[str, Any]:
        """The indexes as ``{name: {"key": [(field, direction), ...], ...other options}}``."""
        information: dict[str, Any] = {}
        async for index in self.list_indexes(session=session, comment=comment):
            details = dict(index)
            name = details.pop("name")
            details["key"] = list(details["key"].items())
            information[name] = details
        return information

    async def create_search_index(
        self,
        model: SearchIndexModel | SearchIndexModelLike | Mapping[str, Any],
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> str:
        """Create one Atlas Search index; returns its name."""
        names = await self.create_search_indexes([model], session=session, comment=comment, **kwargs)
        return names[0]

    async def create_search_indexes(
        self,
        models: Sequence[SearchIndexModel | SearchIndexModelLike | Mapping[str, Any]],
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> list[str]:
        """Create Atlas Search indexes; returns their names."""
        _options(kwargs, {}, "create_search_indexes")
        operation = CreateSearchIndexes(
            self._database_name, self._name, list(models), comment=comment, codec_options=self._codec_options
        )
        names: list[str] = await self._run(operation, session)
        return names

    def list_search_indexes(
        self,
        name: str | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> CommandCursor[Any]:
        """A cursor over the Atlas Search indexes (or the one named ``name``). Takes the aggregation options
        (``allowDiskUse``, ``batchSize``, ``collation``, ``hint``, ``let``, ``maxTimeMS``, ``maxAwaitTimeMS``;
        snake_case works too) and ``timeout_mode``. The command carries no read concern: the search index
        process refuses one."""
        timeout_mode = kwargs.pop("timeout_mode", None)
        check_aggregate_options(kwargs)
        options = _options(kwargs, _LIST_SEARCH_INDEXES_OPTIONS, "list_search_indexes")
        operation = ListSearchIndexes(
            self._database_name,
            self._name,
            name,
            comment=comment,
            read_preference=self._read_preference,
            codec_options=self._codec_options,
            **options,
        )
        return self._command_cursor(
            operation,
            session,
            batch_size=options.get("batch_size") or 0,
            max_await_time_ms=operation.max_await_time_ms,
            comment=comment,
            timeout_mode=timeout_mode,
        )

    async def update_search_index(
        self,
        name: str,
        definition: Mapping[str, Any],
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> None:
        """Give the Atlas Search index ``name`` a new definition."""
        _options(kwargs, {}, "update_search_index")
        operation = UpdateSearchIndex(
            self._database_name,
            self._name,
            name,
            definition,
            comment=comment,
            codec_options=self._codec_options,
        )
        await self._run(operation, session)

    async def drop_search_index(
        self, name: str, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> None:
        """Drop the Atlas Search index ``name`` (no error if the collection does not exist)."""
        _options(kwargs, {}, "drop_search_index")
        operation = DropSearchIndex(
            self._database_name, self._name, name, comment=comment, codec_options=self._codec_options
        )
        await self._run(operation, session)

    # -- the collection itself --------------------------------------------------------------------------------

    async def drop(
        self,
        session: ClientSession | None = None,
        comment: Any = None,
        encrypted_fields: Mapping[str, Any] | None = None,
    ) -> None:
        """Drop the collection and its indexes (no error if it does not exist), with this collection's write
        concern. A Queryable Encryption collection's state collections go first, as
        :meth:`Database.drop_collection` says (``encrypted_fields=``, the client's map, or the server's)."""
        database = self._database.with_options(
            codec_options=self._codec_options, write_concern=self._write_concern, timeout=self.timeout
        )
        await database.drop_collection(self._name, session, comment, encrypted_fields)

    async def rename(
        self, new_name: str, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Rename the collection (in the same database); ``dropTarget=True`` replaces an existing target.

        ``await coll.rename("orders_2024")``
        """
        drop_target = kwargs.pop("dropTarget", kwargs.pop("drop_target", None))
        operation = RenameCollection(
            self._database_name,
            self._name,
            new_name,
            drop_target=drop_target,
            comment=comment,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
            **kwargs,
        )
        reply: dict[str, Any] = await self._run(operation, session)
        return reply

    async def options(self, session: ClientSession | None = None, comment: Any = None) -> dict[str, Any]:
        """The options the collection was created with (``capped``, ``validator``...); ``{}`` if none or if
        the collection does not exist."""
        operation = ListCollections(
            self._database_name,
            filter={"name": self._name},
            comment=comment,
            codec_options=self._codec_options,
        )
        cursor: CommandCursor[Any] = self._command_cursor(operation, session)
        async with cursor:
            async for info in cursor:
                options: dict[str, Any] = dict(info.get("options") or {})
                return options
        return {}
