"""``Database``: collections, commands and database-level aggregation.

::

    db = client.shop                      # or client["shop"], client.get_database("shop")
    await db.command("ping")
    names = await db.list_collection_names()
    orders = db.orders                    # a Collection; no I/O
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NoReturn

from mongio.api_base import ChangeStreamSource, DerivedScope
from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions, DBRef
from mongio.bson._type_marker import type_marker
from mongio.collection import Collection
from mongio.cursor import CommandCursor
from mongio.encrypted_collections import (
    SAFE_CONTENT_INDEX,
    CreateStateCollection,
    asks_the_server,
    encrypted_fields_of,
    state_collection_names,
    takes_encrypted_fields,
)
from mongio.errors import CollectionInvalid, InvalidName, OperationFailure
from mongio.operations.collections import Create, Drop, ListCollections
from mongio.operations.run_command import RunCommand, RunCursorCommand, command_document
from mongio.options.read_preference import as_read_preference
from mongio.typings import DocumentType as _D  # the document type (PyMongo's _DocumentType)

if TYPE_CHECKING:
    from mongio.change_stream import DatabaseChangeStream
    from mongio.client import MongoClient
    from mongio.options.protocols import (
        CodecOptionsLike,
        DBRefLike,
        ReadConcernLike,
        ReadPreferenceLike,
        WriteConcernLike,
    )
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import ReadPreferenceMode
    from mongio.options.write_concern import WriteConcern
    from mongio.sessions.client_session import ClientSession

__all__ = ["CollectionInvalid", "Database"]

_INVALID_DATABASE_CHARACTERS = frozenset(' ."$/\\\x00')


class Database(DerivedScope, ChangeStreamSource["DatabaseChangeStream[_D]"], Generic[_D]):
    """A database of a :class:`~mongio.client.MongoClient`: ``client.shop`` or ``client["shop"]``.

    Making one does no I/O. It carries codec options, read preference, read concern and write concern,
    inherited from the client unless given, and passes them on to its collections.
    """

    def __init__(
        self,
        client: MongoClient[_D],
        name: str,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        timeout: float | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if not name:
            raise InvalidName("database name cannot be empty")
        if _INVALID_DATABASE_CHARACTERS.intersection(name):
            raise InvalidName(
                f"database names cannot contain spaces, '.', '$', '/', '\\\\', '\"' or NUL: {name!r}"
            )
        self._client = client
        self._name = name
        # The client's, for good: every operation of this database and its collections runs there.
        self._executor = client.executor
        # Each option given, else the client's; a timeout only when given (None: the client's timeoutMS,
        # which its executor applies after a session's default).
        self._inherit_options(client, None, codec_options, read_preference, write_concern, read_concern, timeout)

    # -- identity and options ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The database's name."""
        return self._name

    @property
    def client(self) -> MongoClient[_D]:
        """The client this database belongs to."""
        return self._client

    def _with_options(
        self,
        codec_options: CodecOptions,
        read_preference: ReadPreferenceMode | ReadPreferenceLike,
        write_concern: WriteConcern | WriteConcernLike,
        read_concern: ReadConcern | ReadConcernLike,
        timeout: float | None,
    ) -> Database[_D]:
        return Database(
            self._client, self._name, codec_options, read_preference, write_concern, read_concern, timeout
        )

    def _change_stream_origin(self) -> tuple[type[DatabaseChangeStream[_D]], MongoClient[_D], str, str | None]:
        from mongio.change_stream import DatabaseChangeStream  # on first use: most programs never watch

        return DatabaseChangeStream, self._client, self._name, None

    def get_collection(
        self,
        name: str,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        timeout: float | None = None,
    ) -> Collection[_D]:
        """The collection ``name``, with options of its own where given (the database's otherwise).

        ``orders = db.get_collection("orders", write_concern=WriteConcern(w="majority"))``; ``timeout``
        (seconds, 0 for no limit) is its own ``timeoutMS``.
        """
        return Collection(
            self,
            name,
            codec_options=codec_options,
            read_preference=read_preference,
            write_concern=write_concern,
            read_concern=read_concern,
            timeout=timeout,
        )

    def __getattr__(self, name: str) -> Collection[_D]:
        """``db.orders`` is the collection ``orders``."""
        if name.startswith("_"):
            raise AttributeError(
                f"Database has no attribute {name!r}. To access the {name} collection, use database[{name!r}]."
            )
        return self.get_collection(name)

    def __getitem__(self, name: str) -> Collection[_D]:
        return self.get_collection(name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Database):
            return self._client == other.client and self._name == other.name
        return NotImplemented

    def __hash__(self) -> int:
        return hash((id(self._client), self._name))

    def __bool__(self) -> bool:
        raise NotImplementedError(
            "Database objects do not implement truth value testing or bool(). "
            "Compare with None instead: database is not None"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"'Database' object is not callable. If you meant to call the '{self._name}' method on a "
            "'MongoClient' object it is failing because no such method exists."
        )

    # Not iterable: without this, iter() would fall back on __getitem__ and ``for x in db`` would make
    # collections "0", "1", ... for ever. Use list_collection_names() to see its collections.
    __iter__ = None

    def __next__(self) -> NoReturn:
        """Raises ``TypeError``: a database is not iterable (``list_collection_names()`` lists it)."""
        raise TypeError("'Database' object is not iterable")

    next = __next__

    def __repr__(self) -> str:
        return f"Database({self._client!r}, {self._name!r})"

    # -- commands ---------------------------------------------------------------------------------------------

    async def command(
        self,
        command: str | Mapping[str, Any],
        value: Any = 1,
        check: bool = True,
        allowable_errors: Sequence[str | int] | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Run a command and return the server's reply.

        ``command`` is a name (``"ping"`` runs ``{"ping": 1}``; ``value`` replaces the 1 and ``kwargs`` add
        fields) or a whole command document. It runs on the primary unless ``read_preference`` says
        otherwise, is never retried and gets no read or write concern added. With ``check=False`` a failed
        command's reply is returned instead of raising; ``allowable_errors`` lists error messages or codes
        to return rather than raise. Under a client-side operation timeout (``timeoutMS``, or a
        :func:`mongio.timeout` block) a ``maxTimeMS`` in the command is replaced by the time left minus the
        server's round-trip time; the rest of the document (a ``writeConcern``'s ``wtimeout`` included) is
        sent as given.

        ::

            await db.command("ping")
            stats = await db.command("collStats", "orders")
            await db.command({"create": "logs", "capped": True, "size": 2**20})
        """
        if comment is not None:
            kwargs["comment"] = comment
        operation = RunCommand(
            self._name,
            command,
            value,
            read_preference=None if read_preference is None else as_read_preference(read_preference),
            # The database's own options are not used (as in PyMongo), but a PyMongo-typed client's mode is.
            codec_options=self._codec_options.resolve(codec_options or DEFAULT_CODEC_OPTIONS),
            **kwargs,
        )
        try:
            reply: dict[str, Any] = await self._run(operation, session)
        except OperationFailure as error:
            details = error.details
            if details is None:
                raise
            if not check or (
                allowable_errors
                and (error.code in allowable_errors or str(details.get("errmsg", "")) in allowable_errors)
            ):
                return dict(details)
            raise
        return reply

    def cursor_command(
        self,
        command: str | Mapping[str, Any],
        value: Any = 1,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        max_await_time_ms: int | None = None,
        **kwargs: Any,
    ) -> CommandCursor[Any]:
        """Run a command whose reply is a cursor (``find``, ``aggregate``, ``listCollections``...) and iterate
        it with ``getMore`` as needed. The command runs when the cursor is awaited or iterated. ``comment``
        and ``max_await_time_ms`` go on the ``getMore`` commands (put a comment for the command itself in
        the command document).

        ::

            async for doc in db.cursor_command("find", "orders", filter={"qty": 1}, batchSize=100):
                ...
        """
        # comment is for the getMores only (run-command spec): the command document carries its own.
        timeout_mode = kwargs.pop("timeout_mode", None)
        body = command_document(command, value, **kwargs)
        cursor_document = body.get("cursor")
        batch_size = 0
        if isinstance(cursor_document, Mapping):
            batch_size = int(cursor_document.get("batchSize") or 0)
        operation = RunCursorCommand(
            self._name,
            body,
            batch_size=batch_size,
            max_await_time_ms=max_await_time_ms,
            comment=comment,
            read_preference=None if read_preference is None else as_read_preference(read_preference),
            codec_options=self._codec_options.resolve(codec_options),
        )
        return self._command_cursor(
            operation,
            session,
            batch_size=operation.batch_size,
            max_await_time_ms=max_await_time_ms,
            comment=operation.comment,
            timeout_mode=timeout_mode,
        )

    # -- collections ------------------------------------------------------------------------------------------

    async def create_collection(
        self,
        name: str,
        codec_options: CodecOptions | CodecOptionsLike | None = None,
        read_preference: ReadPreferenceMode | ReadPreferenceLike | None = None,
        write_concern: WriteConcern | WriteConcernLike | None = None,
        read_concern: ReadConcern | ReadConcernLike | None = None,
        session: ClientSession | None = None,
        check_exists: bool = True,
        **kwargs: Any,
    ) -> Collection[_D]:
        """Create a collection (or a view) explicitly and return it. Options as PyMongo takes them:
        ``capped``, ``size``, ``max``, ``validator``, ``timeseries``, ``expireAfterSeconds``, ``viewOn``,
        ``pipeline``, ``collation``, ``clusteredIndex``, ``changeStreamPreAndPostImages``, ``comment``...

        With ``check_exists`` (the default) an existing collection raises :class:`CollectionInvalid`.

        A Queryable Encryption collection (``encrypted_fields=``, or an entry of the client's
        ``encrypted_fields_map``) is created with what it needs, as the client-side encryption specification
        says: its state collections ``enxcol_.<name>.esc`` and ``enxcol_.<name>.ecoc`` first (on MongoDB 7.0
        or later, else ``ConfigurationError`` before anything is sent), then the collection with its
        ``encryptedFields``, then the index on ``__safeContent__``; the first step that fails stops the rest.

        ``logs = await db.create_collection("logs", capped=True, size=2**20)``
        """
        if check_exists and name in await self.list_collection_names(session=session, filter={"name": name}):
            raise CollectionInvalid(f"collection {name} already exists")
        collection = self.get_collection(name, codec_options, read_preference, write_concern, read_concern)
        comment = kwargs.pop("comment", None)
        encrypted_fields = encrypted_fields_of(self._client, self._name, name, takes_encrypted_fields(kwargs))
        if encrypted_fields is not None:
            for state in state_collection_names(name, encrypted_fields):
                await self._run(
                    CreateStateCollection(
                        self._name,
                        state,
                        write_concern=collection.write_concern,
                        codec_options=collection.codec_options,
                    ),
                    session,
                )
            kwargs["encryptedFields"] = encrypted_fields
        operation = Create(
            self._name,
            name,
            comment=comment,
            write_concern=collection.write_concern,
            codec_options=collection.codec_options,
            **kwargs,
        )
        await self._run(operation, session)
        if encrypted_fields is not None:
            await collection.create_index(SAFE_CONTENT_INDEX, session=session)
        return collection

    async def drop_collection(
        self,
        name_or_collection: str | Collection[Any],
        session: ClientSession | None = None,
        comment: Any = None,
        encrypted_fields: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Drop a collection (no error if it does not exist); returns the server's reply.

        A Queryable Encryption collection's state collections are dropped first: its ``encryptedFields`` come
        from ``encrypted_fields=``, else the client's ``encrypted_fields_map``, else (for a client with
        automatic encryption) the server's ``listCollections``.
        """
        name = name_or_collection.name if isinstance(name_or_collection, Collection) else name_or_collection
        if not isinstance(name, str):
            raise TypeError("name_or_collection must be a str or a Collection")
        if encrypted_fields is not None and not isinstance(encrypted_fields, Mapping):
            raise TypeError(f"encrypted_fields must be a mapping, not {type(encrypted_fields).__name__}")
        found = encrypted_fields_of(self._client, self._name, name, encrypted_fields)
        if found is None and asks_the_server(self._client):
            found = await self._server_encrypted_fields(name, session)
        if found is not None:
            for state in state_collection_names(name, found):
                await self._run(self._drop(state, None), session)
        reply: dict[str, Any] = await self._run(self._drop(name, comment), session)
        return reply

    def _drop(self, name: str, comment: Any) -> Drop:
        return Drop(
            self._name,
            name,
            comment=comment,
            write_concern=self._write_concern,
            codec_options=self._codec_options,
        )

    async def _server_encrypted_fields(
        self, name: str, session: ClientSession | None
    ) -> Mapping[str, Any] | None:
        """The ``encryptedFields`` the server holds for the collection (None when it has none, or no such
        collection)."""
        async for info in self.list_collections(session=session, filter={"name": name}):
            options = info.get("options")
            fields = options.get("encryptedFields") if isinstance(options, Mapping) else None
            return fields if isinstance(fields, Mapping) else None
        return None

    def list_collections(
        self,
        session: ClientSession | None = None,
        filter: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> CommandCursor[dict[str, Any]]:
        """A cursor over the collections' descriptions (``name``, ``type``, ``options``, ``info``...).
        Takes ``nameOnly``, ``authorizedCollections``, ``batchSize`` and the internal ``rawData`` (see
        :class:`~mongio.collection.Collection`).

        ``async for info in db.list_collections(filter={"type": "view"}): ...``
        """
        return self._list_collections(session, filter, comment, kwargs, "list_collections")

    def _list_collections(
        self,
        session: ClientSession | None,
        filter: Mapping[str, Any] | None,
        comment: Any,
        kwargs: dict[str, Any],
        method: str,
        item: Callable[[Mapping[str, Any]], Any] | None = None,
    ) -> CommandCursor[Any]:
        timeout_mode = kwargs.pop("timeout_mode", None)
        options: dict[str, Any] = {}
        for key, value in kwargs.items():
            name = {
                "nameOnly": "name_only",
                "name_only": "name_only",
                "authorizedCollections": "authorized_collections",
                "authorized_collections": "authorized_collections",
                "batchSize": "batch_size",
                "batch_size": "batch_size",
                "rawData": "raw_data",
                "raw_data": "raw_data",
            }.get(key)
            if name is None:
                raise TypeError(f"{method}() got an unexpected keyword argument {key!r}")
            options[name] = value
        operation = ListCollections(
            self._name,
            filter=filter,
            comment=comment,
            codec_options=self._codec_options,
            **options,
        )
        return self._command_cursor(
            operation,
            session,
            item,
            batch_size=options.get("batch_size") or 0,
            comment=comment,
            timeout_mode=timeout_mode,
        )

    async def list_collection_names(
        self,
        session: ClientSession | None = None,
        filter: Mapping[str, Any] | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> list[str]:
        """The names of the database's collections and views.

        ``names = await db.list_collection_names(filter={"type": "collection"})``
        """
        # nameOnly is much cheaper for the server; it can be used unless the filter looks at more than names.
        if filter is None or set(filter) <= {"name"}:
            kwargs.setdefault("nameOnly", True)
        cursor = self.list_collections(session=session, filter=filter, comment=comment, **kwargs)
        return [str(info["name"]) async for info in cursor]

    def list_collection_objects(
        self,
        filter: Mapping[str, Any] | None = None,
        session: ClientSession | None = None,
        comment: Any = None,
        **kwargs: Any,
    ) -> CommandCursor[Collection[_D]]:
        """A cursor over a :class:`~mongio.collection.Collection` for each of the database's collections and
        views, each with this database's options (as ``db[name]`` would give). An addition to PyMongo's API
        (the enumerate-collections specification's optional method).

        Runs ``listCollections`` with ``nameOnly`` unless ``filter`` looks at more than ``name``; takes
        ``batchSize``, ``authorizedCollections`` and ``timeout_mode`` as :meth:`list_collections` does.
        Retried like the other reads. Close it (or read it to the end) as any other cursor::

            async for collection in db.list_collection_objects(filter={"name": {"$regex": "^log"}}):
                await collection.delete_many({"expired": True})
        """
        if filter is None or set(filter) <= {"name"}:
            kwargs.setdefault("nameOnly", True)

        def collection(info: Mapping[str, Any]) -> Collection[_D]:
            return self.get_collection(str(info["name"]))

        return self._list_collections(session, filter, comment, kwargs, "list_collection_objects", collection)

    async def validate_collection(
        self,
        name_or_collection: str | Collection[Any],
        scandata: bool = False,
        full: bool = False,
        session: ClientSession | None = None,
        background: bool | None = None,
        comment: Any = None,
    ) -> dict[str, Any]:
        """Run ``validate`` on a collection; raises :class:`CollectionInvalid` if the server finds it
        invalid, else returns the server's report."""
        name = name_or_collection.name if isinstance(name_or_collection, Collection) else name_or_collection
        if not isinstance(name, str):
            raise TypeError("name_or_collection must be a str or a Collection")
        fields: dict[str, Any] = {"scandata": scandata, "full": full}
        if background is not None:
            fields["background"] = background
        reply = await self.command("validate", name, session=session, comment=comment, **fields)
        if not reply.get("valid", False):
            raise CollectionInvalid(f"{name} invalid: {reply.get('errors') or reply}")
        return reply

    def aggregate(
        self, pipeline: Sequence[Mapping[str, Any]], session: ClientSession | None = None, **kwargs: Any
    ) -> CommandCursor[_D]:
        """Run a database-level aggregation (``{aggregate: 1}``), for stages such as ``$currentOp``,
        ``$listLocalSessions`` or ``$documents``; a cursor over the results.

        ``async for op in client.admin.aggregate([{"$currentOp": {}}]): ...``
        """
        let = kwargs.pop("let", None)
        comment = kwargs.pop("comment", None)
        return self._aggregate(self._name, None, pipeline, session, let, comment, kwargs)

    async def dereference(
        self, dbref: DBRef | DBRefLike, session: ClientSession | None = None, comment: Any = None, **kwargs: Any
    ) -> Any:
        """The document a :class:`~mongio.bson.DBRef` (or PyMongo's ``bson.DBRef``) points to, or None. The
        DBRef's database, if it names one, must be this database."""
        if not isinstance(dbref, DBRef) and type_marker(dbref) != DBRef._type_marker:
            raise TypeError(f"cannot dereference a {type(dbref).__name__}")
        if dbref.database is not None and dbref.database != self._name:
            raise ValueError(
                f"trying to dereference a DBRef that points to another database ({dbref.database!r} not "
                f"{self._name!r})"
            )
        return await self[dbref.collection].find_one(
            {"_id": dbref.id}, session=session, comment=comment, **kwargs
        )
