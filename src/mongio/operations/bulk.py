"""Collection-level bulk writes: ``insert``/``update``/``delete`` commands split into batches.

A :class:`BulkWrite` is made once per ``bulk_write`` (or ``insert_many``) call. It checks and encodes every
request up front, groups them (runs of one kind when ordered; all inserts, then all updates, then all deletes
when unordered), and hands out one :class:`WriteBatch` operation at a time::

    bulk = BulkWrite("db", "coll", requests, ordered=True, write_concern=wc)
    while (batch := bulk.next_batch()) is not None:
        await executor.execute(batch, session)   # build() splits, handle_response() merges
    return bulk.result()                         # BulkWriteResult, or raises BulkWriteError

A batch fixes its extent on its first ``build()``, from the limits of the connection it is about to go to
(``maxWriteBatchSize`` statements, ``maxBsonObjectSize`` per document, ``maxMessageSizeBytes`` for the whole
OP_MSG, counted byte for byte as :func:`mongio.wire.encode_command` lays it out, less
:data:`~mongio.operations.base.RESERVED_MESSAGE_BYTES` for the fields the executor adds). A retry of the batch
resends exactly those statements.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple, TypeVar

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions, encode
from mongio.bson._encoder import pack_inserts
from mongio.errors import BulkWriteError, ConfigurationError, DocumentTooLarge, InvalidOperation
from mongio.operations.base import (
    RESERVED_MESSAGE_BYTES,
    Command,
    ConnectionContext,
    DocumentSequence,
    Operation,
    Retryability,
    add_raw_data,
    batch_split_size,
    encode_insert,
    for_server,
)
from mongio.operations.models import (
    KIND_DELETE,
    KIND_INSERT,
    KIND_UPDATE,
    InsertOne,
    WriteModel,
    as_write_model,
    is_multi,
    model_statement,
    validate_let,
    write_kind,
)
from mongio.operations.results import BulkWriteResult
from mongio.options.write_concern import WriteConcern
from mongio.wire.header import HEADER_SIZE
from mongio.wire.op_msg import COMMAND_OVERHEAD, PackedDocuments

__all__ = [
    "BulkWrite",
    "PackedInserts",
    "RequestStatements",
    "Statements",
    "WriteBatch",
    "check_lone_statement",
    "check_unacknowledged_hint",
    "plan_batch",
    "statement_limit",
    "write_message_fixed_size",
]

R = TypeVar("R")

# command name and document sequence identifier of each kind of write
COMMANDS = {
    KIND_INSERT: ("insert", "documents"),
    KIND_UPDATE: ("update", "updates"),
    KIND_DELETE: ("delete", "deletes"),
}

# Wire versions from which the server accepts hint on unacknowledged writes (4.2 for update, 4.4 for delete and
# findAndModify); before them the CRUD spec requires a client-side error, as the server would ignore it silently.
UPDATE_HINT_MIN_WIRE_VERSION = 8
DELETE_HINT_MIN_WIRE_VERSION = 9


class Request(NamedTuple):
    """One prepared statement: where it was in the caller's list, its BSON, the document it was encoded from
    (shown by command monitoring), whether it may touch several documents, and whether it has a hint."""

    position: int
    encoded: bytes
    document: Mapping[str, Any]
    multi: bool
    hint: bool


def prepare(model: WriteModel, index: int, codec_options: CodecOptions) -> tuple[Request, Any]:
    """Encode one model as a statement of its command; returns it and, for an insert, the ``_id``."""
    if isinstance(model, InsertOne):
        encoded, _id = encode_insert(model.document, codec_options)
        return Request(index, encoded, model.document, False, False), _id
    statement = model_statement(model)
    encoded = encode(statement, codec_options=codec_options, max_size=None)
    return Request(index, encoded, statement, is_multi(model), model.has_hint), None


def body_size(body: Mapping[str, Any], database: str, codec_options: CodecOptions) -> int:
    """The encoded size of a command body once ``encode_command`` has appended ``$db`` to it."""
    # $db element: type byte, "$db" and its NUL, the string's int32 length, the name and its NUL.
    return len(encode(body, codec_options=codec_options, max_size=None)) + 10 + len(database.encode())


def write_message_fixed_size(body_bytes: int, identifier: str) -> int:
    """Bytes of an OP_MSG besides its sequence documents: header, flagBits, the kind-0 section and the
    kind-1 section's kind byte, size and identifier, as ``mongio.wire.encode_command`` writes them."""
    return HEADER_SIZE + 4 + 1 + body_bytes + 1 + 4 + len(identifier.encode()) + 1


def statement_limit(context: ConnectionContext, acknowledged: bool) -> int:
    """The largest statement (an insert's document, an update's or delete's statement) sent to the connection's
    server. Unacknowledged: ``max_bson_size``, since the server's refusal would go unseen. Acknowledged:
    ``max_bson_size`` plus the command overhead the server allows (server write commands specification), so a
    statement just over ``max_bson_size`` is the server's to refuse, with a write error of its own; an unordered
    bulk write then still does the rest, as PyMongo's does."""
    return context.max_bson_size + (COMMAND_OVERHEAD if acknowledged else 0)


def plan_batch(
    requests: Sequence[Request],
    start: int,
    fixed_size: int,
    context: ConnectionContext,
    kind_name: str,
    acknowledged: bool = True,
) -> int:
    """The end (exclusive) of the batch starting at ``start``: as many requests as fit the connection's
    ``max_write_batch_size`` and, with the message's fixed part, ``max_message_size`` less the reserve.

    A request over :func:`statement_limit`, or one that cannot fit a message even alone, raises
    ``DocumentTooLarge`` when it would start a batch; otherwise it ends the batch before it, so the requests
    ahead of it are sent.
    """
    stop = min(len(requests), start + context.max_write_batch_size)
    sizes = (len(requests[index].encoded) for index in range(start, stop))
    return start + _fitting(
        sizes, fixed_size, context, kind_name, lambda index: requests[start + index].position, acknowledged
    )


def check_lone_statement(size: int, context: ConnectionContext, kind_name: str, acknowledged: bool = True) -> None:
    """Raise ``DocumentTooLarge``, as :func:`plan_batch` would, when a command's only statement (``size`` bytes,
    first in the caller's list) cannot go to the connection's server."""
    # The common case (a statement under maxBsonObjectSize that fits a message) is told apart without a call;
    # _fitting applies the exact limits to the rest.
    if size > context.max_bson_size or size > context.max_message_size - RESERVED_MESSAGE_BYTES:
        _fitting((size,), 0, context, kind_name, lambda index: 0, acknowledged)


def check_unacknowledged_hint(kind: int, context: ConnectionContext) -> None:
    """Raise ``ConfigurationError`` when an unacknowledged ``update`` or ``delete`` (``kind``) with a hint goes
    to a server that would ignore the hint silently (see :data:`UPDATE_HINT_MIN_WIRE_VERSION`)."""
    minimum = UPDATE_HINT_MIN_WIRE_VERSION if kind == KIND_UPDATE else DELETE_HINT_MIN_WIRE_VERSION
    if context.max_wire_version < minimum:
        raise ConfigurationError(
            f"hint on an unacknowledged {COMMANDS[kind][0]} needs a newer server "
            f"(wire version {minimum}+, this one is {context.max_wire_version})"
        )


def _fitting(
    sizes: Iterable[int],
    fixed_size: int,
    context: ConnectionContext,
    kind_name: str,
    position: Callable[[int], int],
    acknowledged: bool,
) -> int:
    """How many of the statements of ``sizes`` (bytes each, in order) one message takes (see
    :func:`plan_batch`); ``position`` gives a statement's place in the caller's list, for the error."""
    limit = context.max_message_size - RESERVED_MESSAGE_BYTES
    max_statement = statement_limit(context, acknowledged)
    split = batch_split_size(context)
    size = fixed_size
    count = 0
    for doc_size in sizes:
        if doc_size > max_statement:
            if not count:
                allowance = f" plus the {COMMAND_OVERHEAD} bytes of command overhead" if acknowledged else ""
                raise DocumentTooLarge(
                    f"{kind_name} document {position(0)} is {doc_size} bytes, over the server's "
                    f"maxBsonObjectSize of {context.max_bson_size}{allowance}"
                )
            break
        if count and split is not None and size - fixed_size + doc_size > split:
            break
        if size + doc_size > limit:
            if not count:
                raise DocumentTooLarge(
                    f"{kind_name} document {position(0)} of {doc_size} bytes does not fit in one message "
                    f"under the server's maxMessageSizeBytes of {context.max_message_size}"
                )
            break
        size += doc_size
        count += 1
    return count


class Statements(ABC):
    """The prepared statements of one command kind: what a batch is planned from, sends, and maps the
    server's per-statement indexes back through."""

    __slots__ = ()

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def plan(
        self, start: int, fixed_size: int, context: ConnectionContext, kind_name: str, acknowledged: bool = True
    ) -> int:
        """The end (exclusive) of the batch starting at ``start`` (see :func:`plan_batch`)."""

    @abstractmethod
    def sequence(self, start: int, end: int) -> DocumentSequence:
        """The document sequence of statements ``start`` to ``end``."""

    def flags(self, start: int, end: int) -> tuple[bool, bool]:
        """Whether any of statements ``start`` to ``end`` may touch several documents, and has a hint."""
        return False, False

    @abstractmethod
    def position(self, index: int) -> int:
        """Where statement ``index`` was in the caller's list."""

    @abstractmethod
    def document(self, index: int) -> Mapping[str, Any]:
        """The document statement ``index`` was encoded from (what a write error reports as ``op``)."""

    @abstractmethod
    def __getitem__(self, index: int) -> Request: ...


class RequestStatements(Statements):
    """Statements prepared one by one, a :class:`Request` each (updates, deletes, and the tests' inserts)."""

    __slots__ = ("_requests",)

    def __init__(self, requests: Sequence[Request]) -> None:
        self._requests = requests

    def __len__(self) -> int:
        return len(self._requests)

    def plan(
        self, start: int, fixed_size: int, context: ConnectionContext, kind_name: str, acknowledged: bool = True
    ) -> int:
        return plan_batch(self._requests, start, fixed_size, context, kind_name, acknowledged)

    def sequence(self, start: int, end: int) -> DocumentSequence:
        batch = self._requests[start:end]
        return DocumentSequence([r.encoded for r in batch], [r.document for r in batch])

    def flags(self, start: int, end: int) -> tuple[bool, bool]:
        batch = self._requests[start:end]
        return any(r.multi for r in batch), any(r.hint for r in batch)

    def position(self, index: int) -> int:
        return self._requests[index].position

    def document(self, index: int) -> Mapping[str, Any]:
        return self._requests[index].document

    def __getitem__(self, index: int) -> Request:
        return self._requests[index]


class PackedInserts(Statements):
    """An ``insert_many``'s documents, encoded back to back in one buffer in one pass: statement ``i`` is
    document ``i`` of the caller's list, and a batch sends its slice of the buffer with one copy."""

    __slots__ = ("_data", "_documents", "_ends", "_positions", "ids")

    def __init__(
        self,
        data: bytearray,
        ends: list[int],
        documents: list[Any],
        ids: list[Any],
        positions: list[int] | None = None,
    ) -> None:
        self._data = data
        self._ends = ends
        self._documents = documents
        self._positions = positions
        self.ids = ids

    @classmethod
    def encode(
        cls, documents: list[Any], codec_options: CodecOptions, positions: list[int] | None = None
    ) -> PackedInserts:
        """Encode ``documents`` for an insert (an ``_id`` generated where missing, as ``insert_one`` does).
        ``positions`` are their places in the caller's list when they are not its first ``len(documents)``."""
        data, ends, ids = pack_inserts(documents, codec_options, lambda document: encode_insert(document, codec_options))
        return cls(data, ends, documents, ids, positions)

    def __len__(self) -> int:
        return len(self._ends)

    def _start_of(self, index: int) -> int:
        return self._ends[index - 1] if index else 0

    def plan(
        self, start: int, fixed_size: int, context: ConnectionContext, kind_name: str, acknowledged: bool = True
    ) -> int:
        ends = self._ends
        stop = min(len(ends), start + context.max_write_batch_size)
        base = self._start_of(start)
        # The ends only grow, so the message's byte limit cuts the batch at a bisection and only the batch's
        # own statements are read; the first is always read, to raise if it cannot go even alone.
        limit = base + context.max_message_size - RESERVED_MESSAGE_BYTES - fixed_size
        cut = min(stop, max(start + 1, bisect_right(ends, limit, start, stop)))
        batch_ends = ends[start:cut]
        sizes = map(operator.sub, batch_ends, chain((base,), batch_ends))
        return start + _fitting(
            sizes, fixed_size, context, kind_name, lambda index: self.position(start + index), acknowledged
        )

    def sequence(self, start: int, end: int) -> DocumentSequence:
        packed = PackedDocuments(memoryview(self._data)[self._start_of(start) : self._ends[end - 1]])
        return DocumentSequence([packed], self._documents[start:end])

    def position(self, index: int) -> int:
        return index if self._positions is None else self._positions[index]

    def document(self, index: int) -> Mapping[str, Any]:
        document: Mapping[str, Any] = self._documents[index]
        return document

    def __getitem__(self, index: int) -> Request:
        start, end = self._start_of(index), self._ends[index]
        return Request(self.position(index), bytes(memoryview(self._data)[start:end]), self._documents[index], False, False)


class WriteCommand(Operation[R]):
    """An ``insert``, ``update`` or ``delete`` command over a run of prepared requests of one kind (a bulk
    write's batch; a write of one statement alone is a lighter operation of :mod:`mongio.operations.crud`)."""

    takes_write_concern = True

    def __init__(
        self,
        database: str,
        collection: str,
        kind: int,
        statements: Statements,
        start: int,
        body: dict[str, Any],
        *,
        write_concern: WriteConcern | None,
        codec_options: CodecOptions,
        fixed_size: int,
    ) -> None:
        super().__init__(database, write_concern=write_concern, codec_options=codec_options)
        self.collection = collection
        self.kind = kind
        self.command_name, self._identifier = COMMANDS[kind]
        self._statements = statements
        self.start = start
        self.end: int | None = None
        self._body = body
        # The bytes of the message besides its statements (see write_message_fixed_size).
        self._fixed_size = fixed_size
        self._sequence: DocumentSequence | None = None
        self._multi = False
        self._hint = False

    @property
    def statements(self) -> Statements:
        """All the statements of the run this command sends part of (its part known after ``build()``)."""
        return self._statements

    @property
    def requests(self) -> Sequence[Request]:
        """The requests this command sends (known after the first ``build()``)."""
        if self.end is None:
            raise InvalidOperation("the batch is not planned until it is built")
        return [self._statements[index] for index in range(self.start, self.end)]

    @property
    def retryability(self) -> Retryability:  # type: ignore[override]
        """A retryable write unless unacknowledged or some statement may touch several documents. Final after
        the first ``build()``, which decides which statements the command carries."""
        if self._multi or not self.acknowledged:
            return Retryability.NONE
        return Retryability.WRITE

    def build(self, context: ConnectionContext) -> Command:
        sequence = self._sequence
        if sequence is None:
            statements = self._statements
            end = statements.plan(self.start, self._fixed_size, context, self.command_name, self.acknowledged)
            sequence = statements.sequence(self.start, end)
            self._multi, self._hint = statements.flags(self.start, end)
            self.end = end
            self._sequence = sequence
        if self._hint and not self.acknowledged:
            check_unacknowledged_hint(self.kind, context)
        return Command(for_server(dict(self._body), context), {self._identifier: sequence})


def command_body(
    kind: int,
    collection: str,
    ordered: bool,
    bypass_document_validation: bool | None,
    comment: Any,
    let: Mapping[str, Any] | None,
    raw_data: bool | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {COMMANDS[kind][0]: collection, "ordered": ordered}
    if bypass_document_validation is not None and kind != KIND_DELETE:
        body["bypassDocumentValidation"] = bypass_document_validation
    if comment is not None:
        body["comment"] = comment
    if let is not None and kind != KIND_INSERT:
        body["let"] = validate_let(let)
    if raw_data is not None:
        add_raw_data(body, raw_data)
    return body


class WriteBatch(WriteCommand[None]):
    """One command of a :class:`BulkWrite` (made by :meth:`BulkWrite.next_batch`, with the command body of its
    kind and that body's fixed message size); its reply is merged into the bulk's result."""

    def __init__(
        self,
        bulk: BulkWrite,
        kind: int,
        statements: Statements,
        start: int,
        body: dict[str, Any],
        fixed_size: int,
    ) -> None:
        super().__init__(
            bulk.database,
            bulk.collection,
            kind,
            statements,
            start,
            body,
            write_concern=bulk.write_concern,
            codec_options=bulk.codec_options,
            fixed_size=fixed_size,
        )
        self._bulk = bulk

    def use_transaction_write_concern(self) -> None:
        super().use_transaction_write_concern()
        self._bulk.use_transaction_write_concern()

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> None:
        self._bulk.merge_reply(self, reply)

    def write_concern_retry_error(self, reply: Mapping[str, Any], labels: Iterable[str]) -> BulkWriteError:
        """The error for a reply whose write concern failed in a way that makes the command go again: the
        bulk's result as it would be with this reply merged, labelled with ``labels``. The bulk itself is
        left as it was, since the retry's reply takes this one's place (raised as it is when no retry
        follows, which ends the bulk write)."""
        merged = self._bulk.result_with(self, reply)
        merged["writeErrors"].sort(key=lambda error: error["index"])
        error = BulkWriteError(merged)
        for label in labels:
            error.add_error_label(label)
        return error


def _check_options(ordered: Any, let: Any) -> None:
    if not isinstance(ordered, bool):
        raise TypeError(f"ordered must be True or False, not {ordered!r}")
    validate_let(let)


def _grouped(
    requests: Iterable[WriteModel], ordered: bool, codec_options: CodecOptions
) -> tuple[list[tuple[int, Statements]], list[Any]]:
    """The requests prepared and grouped by command kind, and the ``_id`` of each insert among them.

    Updates and deletes are encoded one by one as they come; each run of inserts is encoded at the end in one
    pass (see :class:`PackedInserts`)."""
    # Ordered: consecutive runs of one kind, so the server applies them in the caller's order.
    # Unordered: one run per kind, for the fewest commands. A run holds its statements' positions in the
    # caller's list and, for inserts, the documents, else the prepared requests.
    runs: list[tuple[int, list[int], list[Any]]] = []
    by_kind: dict[int, tuple[int, list[int], list[Any]]] = {}
    for index, given in enumerate(requests):
        model = as_write_model(given)
        item: Any
        if isinstance(model, InsertOne):
            kind, item = KIND_INSERT, model.document
        else:
            kind, item = write_kind(model), prepare(model, index, codec_options)[0]
        if ordered:
            if not runs or runs[-1][0] != kind:
                runs.append((kind, [], []))
            run = runs[-1]
        else:
            run = by_kind.setdefault(kind, (kind, [], []))
        run[1].append(index)
        run[2].append(item)
    if not ordered:
        runs = [by_kind[kind] for kind in (KIND_INSERT, KIND_UPDATE, KIND_DELETE) if kind in by_kind]
    if not runs:
        raise InvalidOperation("No operations to execute")
    groups: list[tuple[int, Statements]] = []
    inserted_ids: list[Any] = []
    for kind, positions, items in runs:
        if kind == KIND_INSERT:
            packed = PackedInserts.encode(items, codec_options, positions)
            inserted_ids += packed.ids
            groups.append((kind, packed))
        else:
            groups.append((kind, RequestStatements(items)))
    return groups, inserted_ids


class BulkWrite:
    """The plan and the running result of one collection-level bulk write (see the module docstring)."""

    def __init__(
        self,
        database: str,
        collection: str,
        requests: Iterable[WriteModel] | PackedInserts,
        *,
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        comment: Any = None,
        let: Mapping[str, Any] | None = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        _check_options(ordered, let)
        self.database = database
        self.collection = collection
        self.ordered = ordered
        self.write_concern = write_concern
        self.codec_options = codec_options
        self.acknowledged = write_concern is None or write_concern.acknowledged
        if isinstance(requests, PackedInserts):
            groups: list[tuple[int, Statements]] = [(KIND_INSERT, requests)]
            self.inserted_ids: list[Any] = requests.ids
        else:
            groups, self.inserted_ids = _grouped(requests, ordered, codec_options)
        self._groups = groups
        self._group = 0
        self._position = 0
        self._stopped = False
        self._bodies: dict[int, tuple[dict[str, Any], int]] = {}
        for kind in {kind for kind, _ in groups}:
            body = command_body(kind, collection, ordered, bypass_document_validation, comment, let, raw_data)
            fixed = write_message_fixed_size(body_size(body, database, codec_options), COMMANDS[kind][1])
            self._bodies[kind] = (body, fixed)
        self._result: dict[str, Any] = {
            "writeErrors": [],
            "writeConcernErrors": [],
            "nInserted": 0,
            "nUpserted": 0,
            "nMatched": 0,
            "nModified": 0,
            "nRemoved": 0,
            "upserted": [],
        }

    @classmethod
    def for_insert_many(
        cls,
        database: str,
        collection: str,
        documents: Iterable[Any],
        *,
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        comment: Any = None,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> BulkWrite:
        """The bulk write behind ``insert_many``; its ``inserted_ids`` make the ``InsertManyResult``."""
        if isinstance(documents, Mapping) or not isinstance(documents, Iterable):
            raise TypeError("documents must be a non-empty list")
        _check_options(ordered, None)
        listed = documents if type(documents) is list else list(documents)
        if not listed:
            raise InvalidOperation("No operations to execute")
        return cls(
            database,
            collection,
            PackedInserts.encode(listed, codec_options),
            ordered=ordered,
            bypass_document_validation=bypass_document_validation,
            comment=comment,
            raw_data=raw_data,
            write_concern=write_concern,
            codec_options=codec_options,
        )

    def use_transaction_write_concern(self) -> None:
        """The bulk write runs inside a transaction: acknowledged, whatever the collection's write concern
        (see :meth:`Operation.use_transaction_write_concern`); its result and errors are then reported."""
        self.write_concern = None
        self.acknowledged = True

    @property
    def done(self) -> bool:
        return self._stopped or self._group >= len(self._groups)

    def next_batch(self) -> WriteBatch | None:
        """The next command to run, or None when the bulk write is complete (or stopped by an ordered error)."""
        if self.done:
            return None
        kind, statements = self._groups[self._group]
        body, fixed_size = self._bodies[kind]
        return WriteBatch(self, kind, statements, self._position, body, fixed_size)

    def result_with(self, batch: WriteBatch, reply: Mapping[str, Any]) -> dict[str, Any]:
        """The result this bulk write would have with ``batch``'s ``reply`` merged, the bulk itself left as it
        was (its position, group and result unchanged)."""
        saved = (self._result, self._group, self._position, self._stopped)
        # Merging only adds to the counts and appends to the lists, so copies of the lists keep it apart.
        self._result = {key: list(value) if isinstance(value, list) else value for key, value in saved[0].items()}
        try:
            self.merge_reply(batch, reply)
            return self._result
        finally:
            self._result, self._group, self._position, self._stopped = saved

    def merge_reply(self, batch: WriteBatch, reply: Mapping[str, Any]) -> None:
        """Take ``batch``'s ``reply`` into the result (counts, upserts, write errors with their indexes in the
        caller's list) and move past the batch; an ordered bulk write stops at a write error."""
        end = batch.end if batch.end is not None else batch.start + 1
        statements = batch.statements
        if end >= len(statements):
            self._group += 1
            self._position = 0
        else:
            self._position = end
        if not self.acknowledged:
            return
        result = self._result
        n = int(reply.get("n", 0))
        start = batch.start
        if batch.kind == KIND_INSERT:
            result["nInserted"] += n
        elif batch.kind == KIND_DELETE:
            result["nRemoved"] += n
        else:
            upserted = reply.get("upserted")
            if upserted:
                result["nUpserted"] += len(upserted)
                result["nMatched"] += n - len(upserted)
                for item in upserted:
                    result["upserted"].append(
                        {"index": statements.position(start + item["index"]), "_id": item.get("_id")}
                    )
            else:
                result["nMatched"] += n
            result["nModified"] += int(reply.get("nModified", 0))
        write_errors = reply.get("writeErrors")
        if write_errors:
            for error in write_errors:
                remapped = dict(error)
                index = start + error["index"]
                remapped["index"] = statements.position(index)
                remapped["op"] = statements.document(index)
                result["writeErrors"].append(remapped)
            if self.ordered:
                self._stopped = True
        concern_error = reply.get("writeConcernError")
        if concern_error:
            result["writeConcernErrors"].append(dict(concern_error))

    def result(self) -> BulkWriteResult:
        """The merged result; raises ``BulkWriteError`` (its ``details`` the merged result, write error
        indexes into the caller's request list) when any write or write concern failed."""
        result = self._result
        if result["writeErrors"] or result["writeConcernErrors"]:
            result["writeErrors"].sort(key=lambda error: error["index"])
            raise BulkWriteError(result)
        return BulkWriteResult(result, self.acknowledged)

    @property
    def partial_result(self) -> dict[str, Any]:
        """The merged result so far (for reporting after an error that stopped the bulk write)."""
        return self._result
