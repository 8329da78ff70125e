"""``MongoClient.bulk_write``: the ``bulkWrite`` command on ``admin``, over any mix of namespaces.

A :class:`ClientBulkWrite` checks and encodes every model once, then hands out one
:class:`ClientBulkWriteBatch` at a time. A batch's reply opens a results cursor; the caller drains it with
``getMore`` (same session, same server) and feeds each batch of result documents to
:meth:`ClientBulkWriteBatch.record_results`::

    bulk = ClientBulkWrite(models, ordered=True, verbose_results=False, write_concern=wc)
    try:
        while (batch := bulk.next_batch()) is not None:
            cursor = await executor.execute(batch, session)
            if cursor.id:
                while cursor.id:
                    cursor = await executor.execute(GetMore(cursor.database, cursor.collection, cursor.id), ...)
                    batch.record_results(cursor.batch)
                batch.cursor_exhausted()
    except MongioError as exc:
        bulk.raise_top_level(exc)      # wraps it in ClientBulkWriteException once anything was observed
    return bulk.result()               # or raises ClientBulkWriteException

Batches follow the bulk write spec: at most ``maxWriteBatchSize`` operations, and the ``ops`` and ``nsInfo``
documents together within ``maxMessageSizeBytes`` less 1000 bytes and less the command document's own size.
All the ``ops`` entries are encoded in one pass over the models, back to back in one buffer (generated
``_id`` s included), each with the index of its namespace among all the bulk write's namespaces. A batch sends
its slice of that buffer as it is when its own ``nsInfo`` numbering is the same (always, with one namespace),
else a copy with the fixed-width int32 indexes rewritten; sizes are known before any batch exists.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, overload

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions, encode
from mongio.bson._encoder import encode_into, insert_appender, refusals_as_invalid_document
from mongio.errors import (
    ClientBulkWriteException,
    DocumentTooLarge,
    InvalidOperation,
    WriteConcernError,
)
from mongio.operations.base import (
    RESERVED_MESSAGE_BYTES,
    Command,
    ConnectionContext,
    CursorState,
    DocumentSequence,
    Operation,
    Retryability,
    ServerLimits,
    add_raw_data,
    batch_split_size,
    encode_insert,
    for_server,
    parse_cursor,
)
from mongio.operations.models import (
    KIND_DELETE,
    KIND_INSERT,
    KIND_UPDATE,
    InsertOne,
    WriteModel,
    as_write_model,
    client_bulk_op,
    write_kind,
)
from mongio.operations.results import ClientBulkWriteResult, DeleteResult, InsertOneResult, UpdateResult
from mongio.options.write_concern import WriteConcern
from mongio.wire.op_msg import PackedDocuments

__all__ = ["ClientBulkWrite", "ClientBulkWriteBatch", "ClientBulkWriteException"]

# Every ops entry starts with int32 length, type byte, a six-letter key ("insert", "update", "delete") and its
# NUL, so the namespace index always sits at this offset.
_NS_INDEX_OFFSET = 4 + 1 + 6 + 1
_INT32 = struct.Struct("<i")

def _insert_op_head(ns_index: int) -> bytes:
    """An insert entry up to its document: a length to fill in, "insert" as the int32 namespace index, then
    the "document" key of an embedded document."""
    return b"\x00\x00\x00\x00\x10insert\x00" + _INT32.pack(ns_index) + b"\x03document\x00"


class BatchWriteConcernRetry(WriteConcernError):
    """A batch's ``ok: 1`` reply whose write concern error sends the batch again (see
    :meth:`ClientBulkWriteBatch.write_concern_retry_error`). When no retry follows, the bulk write does not end
    on it: the caller hands it to :meth:`ClientBulkWriteBatch.accept_reply`, which records the reply (its write
    concern error into ``write_concern_errors``) and returns its results cursor to drain."""

    def __init__(self, batch: ClientBulkWriteBatch, reply: Mapping[str, Any], labels: Iterable[str]) -> None:
        concern = reply.get("writeConcernError") or {}
        details = dict(reply)
        details["errorLabels"] = list(labels)
        super().__init__(str(concern.get("errmsg", "write concern error")), concern.get("code"), details)
        self.batch = batch
        self.reply = reply
        # The server that sent the reply, which alone can continue its results cursor.
        self.address = batch.address


def _ns_info_size(namespace: str) -> int:
    # {"ns": <string>}: length, type, "ns\0", string length, the string and its NUL, the document's NUL.
    return 4 + 1 + 3 + 4 + len(namespace.encode()) + 1 + 1


class ClientBulkWriteBatch(Operation[CursorState]):
    """One ``bulkWrite`` command of a :class:`ClientBulkWrite`."""

    command_name = "bulkWrite"
    takes_write_concern = True

    def __init__(self, bulk: ClientBulkWrite, start: int) -> None:
        super().__init__("admin", write_concern=bulk.write_concern, codec_options=bulk.codec_options)
        self._bulk = bulk
        self.start = start
        self.end: int | None = None
        self._sequences: dict[str, DocumentSequence] | None = None
        self._multi = False
        self._first_error_idx: int | None = None
        # The server of the connection the latest attempt was built for.
        self.address: Any = None

    @property
    def retryability(self) -> Retryability:  # type: ignore[override]
        """Retryable unless unacknowledged or a statement is multi; final after the first ``build()``."""
        if self._multi or not self.acknowledged:
            return Retryability.NONE
        return Retryability.WRITE

    def use_transaction_write_concern(self) -> None:
        super().use_transaction_write_concern()
        self._bulk.use_transaction_write_concern()

    def build(self, context: ConnectionContext) -> Command:
        if self._sequences is None:
            self._plan(context)
        self.address = getattr(context, "address", None)
        return Command(for_server(self._bulk.command_body(), context), self._sequences)

    def _plan(self, context: ConnectionContext) -> None:
        plan = self._bulk.plan_batch(self.start, context)
        self._multi = plan.multi
        self.end = plan.end
        self._sequences = plan.sequences

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        return self._bulk.record_reply(self, reply)

    def write_concern_retry_error(self, reply: Mapping[str, Any], labels: Iterable[str]) -> BatchWriteConcernRetry:
        """The error for a reply whose write concern failed in a way that makes the batch go again; nothing is
        recorded, since the retry's reply takes this one's place."""
        error = BatchWriteConcernRetry(self, reply, labels)
        cursor = reply.get("cursor")
        if isinstance(cursor, Mapping) and cursor.get("id"):
            # The server keeps this reply's results cursor even though another reply will take its place.
            self._bulk.supersede(error, parse_cursor(reply))
        return error

    def accept_reply(self, error: BatchWriteConcernRetry) -> CursorState:
        """Take the reply of a write concern error that was not retried (again) as this batch's result: its
        counts, results and write concern error are recorded, and its results cursor is returned to drain
        with ``getMore`` on ``error.address`` as after any other reply."""
        if error.batch is not self:
            raise InvalidOperation("the write concern error belongs to another bulkWrite batch")
        self._bulk.unsupersede(error)
        return self.handle_response(dict(error.reply), ServerLimits())

    def record_results(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Record result documents from this batch's cursor (the first batch is recorded by
        ``handle_response``; call this for each ``getMore`` batch)."""
        self._bulk.record_results(self, documents)

    def cursor_exhausted(self) -> None:
        """Tell the bulk write this batch's results cursor is drained (after the last ``getMore``)."""
        self._bulk.finish_batch(self)


class BatchPlan(NamedTuple):
    """The extent of one ``bulkWrite`` command: its end (exclusive), its ``ops`` and ``nsInfo`` document
    sequences, and whether any of its operations may touch several documents."""

    end: int
    sequences: dict[str, DocumentSequence]
    multi: bool


class _PackedOps:
    """Every ``ops`` entry of a client bulk write, encoded in one pass into one buffer: entry ``i`` ends at
    ``ends[i]`` and names namespace ``ns_ids[i]`` (its index in ``namespaces``, in order of first use). Beside
    the caller's models nothing is kept per entry but those two numbers and the insert's ``_id``. Made with
    the models, which it encodes as it is made."""

    __slots__ = ("_data", "_ends", "_ids", "_models", "_multi", "_namespaces", "_ns_ids", "_ns_sizes")

    def __init__(self, models: Iterable[WriteModel], codec_options: CodecOptions) -> None:
        self._data = bytearray()
        self._ends: list[int] = []
        self._ns_ids = array("i")
        self._ids: list[Any] = []
        self._models: list[WriteModel] = []
        self._multi: list[int] = []  # the entries that may touch several documents, in order
        self._namespaces: list[str] = []
        self._ns_sizes: list[int] = []
        self._encode(models, codec_options)

    def _encode(self, models: Iterable[WriteModel], codec_options: CodecOptions) -> None:
        data, ends, ns_ids, ids, kept, multi = (
            self._data, self._ends, self._ns_ids, self._ids, self._models, self._multi
        )
        namespaces, ns_sizes = self._namespaces, self._ns_sizes
        # Per namespace: its index and an insert entry's head naming it.
        known: dict[str, tuple[int, bytes]] = {}
        append_insert = insert_appender(codec_options, lambda document: encode_insert(document, codec_options))
        with refusals_as_invalid_document():
            for index, given in enumerate(models):
                model = given if type(given) is InsertOne else as_write_model(given)
                namespace = model.namespace
                entry = known.get(namespace)  # type: ignore[arg-type]
                if entry is None:
                    if namespace is None:
                        raise InvalidOperation(
                            "MongoClient.bulk_write needs a namespace on every write model; "
                            f"model {index} has none"
                        )
                    entry = known[namespace] = (len(known), _insert_op_head(len(known)))
                    namespaces.append(namespace)
                    ns_sizes.append(_ns_info_size(namespace))
                start = len(data)
                if isinstance(model, InsertOne):
                    data += entry[1]
                    ids.append(append_insert(data, model.document))
                    data.append(0)
                    _INT32.pack_into(data, start, len(data) - start)
                else:
                    op = client_bulk_op(model, entry[0])
                    encode_into(data, op, codec_options)
                    ids.append(None)
                    if op["multi"]:
                        multi.append(index)
                ends.append(len(data))
                ns_ids.append(entry[0])
                kept.append(model)

    def __len__(self) -> int:
        return len(self._ends)

    def model(self, index: int) -> WriteModel:
        return self._models[index]

    def inserted_id(self, index: int) -> Any:
        return self._ids[index]

    def size(self, index: int) -> int:
        """The encoded size of entry ``index``."""
        return self._ends[index] - (self._ends[index - 1] if index else 0)

    def any_multi(self, start: int, end: int) -> bool:
        """Whether any of entries ``start`` to ``end`` may touch several documents."""
        return bisect_left(self._multi, start) < bisect_left(self._multi, end)

    def plan(self, start: int, stop: int, limit: int, max_message_size: int) -> tuple[int, list[int]]:
        """The end (exclusive, at most ``stop``) of the batch from ``start`` whose entries and ``nsInfo``
        documents fit ``limit`` bytes, and the namespaces it uses (their indexes, in order of first use in
        the batch). Raises ``DocumentTooLarge`` when even entry ``start`` does not fit."""
        ends = self._ends
        base = ends[start - 1] if start else 0
        if len(self._namespaces) == 1:
            # One namespace: the sizes only grow, so the limit cuts the batch at a bisection.
            end = bisect_right(ends, base + limit - self._ns_sizes[0], start, stop)
            used = [0]
        else:
            end, used = self._plan_namespaces(start, stop, base, limit)
        if end == start:
            raise DocumentTooLarge(
                f"operation {start} of {self.size(start)} bytes cannot fit in a bulkWrite command under the "
                f"server's maxMessageSizeBytes of {max_message_size}"
            )
        return end, used

    def _plan_namespaces(self, start: int, stop: int, base: int, limit: int) -> tuple[int, list[int]]:
        # The spec's greedy loop: an entry's first use of a namespace in the batch adds its nsInfo document.
        ends, ns_ids, ns_sizes = self._ends, self._ns_ids, self._ns_sizes
        seen: set[int] = set()
        used: list[int] = []
        ns_bytes = 0
        end = start
        while end < stop:
            ns_id = ns_ids[end]
            added = 0 if ns_id in seen else ns_sizes[ns_id]
            if ends[end] - base + ns_bytes + added > limit:
                break
            if added:
                seen.add(ns_id)
                used.append(ns_id)
                ns_bytes += added
            end += 1
        return end, used

    def shown(self, index: int, local: Mapping[int, int] | None) -> Mapping[str, Any]:
        """Entry ``index`` as a document (for command monitoring), its namespace numbered by ``local`` (global
        index to the batch's) when given."""
        ns_id = self._ns_ids[index]
        ns_index = ns_id if local is None else local[ns_id]
        model = self._models[index]
        if isinstance(model, InsertOne):
            return {"insert": ns_index, "document": model.document}
        return client_bulk_op(model, ns_index)

    def sequences(self, start: int, end: int, used: list[int]) -> tuple[DocumentSequence, DocumentSequence]:
        """The ``ops`` and ``nsInfo`` document sequences of entries ``start`` to ``end``, which use the
        namespaces ``used`` (see :meth:`plan`)."""
        base = self._ends[start - 1] if start else 0
        data: bytearray | memoryview = memoryview(self._data)[base : self._ends[end - 1]]
        renumbered = used != list(range(len(used)))
        if renumbered:
            # Entries name their namespace by its place in this batch's nsInfo: rewrite the indexes in a copy.
            local = {ns_id: position for position, ns_id in enumerate(used)}
            data = bytearray(data)
            offset = 0
            ends, ns_ids = self._ends, self._ns_ids
            for index in range(start, end):
                _INT32.pack_into(data, offset + _NS_INDEX_OFFSET, local[ns_ids[index]])
                offset = ends[index] - base
        ns_documents = [{"ns": self._namespaces[ns_id]} for ns_id in used]
        ops = DocumentSequence([PackedDocuments(data)], _OpsView(self, start, end, used if renumbered else None))
        ns_info = DocumentSequence([encode(document) for document in ns_documents], ns_documents)
        return ops, ns_info


class _OpsView(Sequence[Mapping[str, Any]]):
    """A batch's ``ops`` entries as command monitoring shows them, each built from its model only when someone
    looks."""

    __slots__ = ("_end", "_local", "_ops", "_start")

    def __init__(self, ops: _PackedOps, start: int, end: int, used: list[int] | None) -> None:
        self._ops = ops
        self._start = start
        self._end = end
        self._local = None if used is None else {ns_id: position for position, ns_id in enumerate(used)}

    def __len__(self) -> int:
        return self._end - self._start

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("ops entry index out of range")
        return self._ops.shown(self._start + index, self._local)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (self[index] for index in range(len(self)))


class ClientBulkWrite:
    """The plan and running result of one ``MongoClient.bulk_write`` call (see the module docstring)."""

    def __init__(
        self,
        models: Iterable[WriteModel],
        *,
        ordered: bool = True,
        bypass_document_validation: bool | None = None,
        comment: Any = None,
        let: Mapping[str, Any] | None = None,
        verbose_results: bool = False,
        raw_data: bool | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        if not isinstance(ordered, bool):
            raise TypeError(f"ordered must be True or False, not {ordered!r}")
        acknowledged = write_concern is None or write_concern.acknowledged
        if not acknowledged and verbose_results:
            raise InvalidOperation("Cannot request unacknowledged write concern and verbose results")
        if not acknowledged and ordered:
            raise InvalidOperation("Cannot request unacknowledged write concern and ordered writes")
        self.ordered = ordered
        self.verbose_results = verbose_results
        self.write_concern = write_concern
        self.codec_options = codec_options
        self.acknowledged = acknowledged
        ops = _PackedOps(models, codec_options)
        if not len(ops):
            raise InvalidOperation("MongoClient.bulk_write needs at least one write model")
        self._ops = ops
        body: dict[str, Any] = {"bulkWrite": 1, "errorsOnly": not verbose_results, "ordered": ordered}
        if bypass_document_validation is not None:
            body["bypassDocumentValidation"] = bypass_document_validation
        if comment is not None:
            body["comment"] = comment
        if let is not None:
            if not isinstance(let, Mapping):
                raise TypeError(f"let must be a mapping, not {type(let).__name__}")
            body["let"] = let
        add_raw_data(body, raw_data)
        self._body = body
        self._body_size = len(encode(body, codec_options=codec_options, max_size=None))
        self._position = 0
        self._stopped = False
        self._any_success = False
        self._summary = {"nInserted": 0, "nUpserted": 0, "nMatched": 0, "nModified": 0, "nDeleted": 0}
        self._insert_results: dict[int, InsertOneResult] = {}
        self._update_results: dict[int, UpdateResult] = {}
        self._delete_results: dict[int, DeleteResult] = {}
        self._write_errors: list[dict[str, Any]] = []
        self._write_concern_errors: list[dict[str, Any]] = []
        self._pending: ClientBulkWriteBatch | None = None
        self._superseded: list[tuple[BatchWriteConcernRetry, CursorState]] = []

    def use_transaction_write_concern(self) -> None:
        """The bulk write runs inside a transaction: acknowledged, whatever the client's write concern."""
        self.write_concern = None
        self.acknowledged = True

    @property
    def done(self) -> bool:
        return self._stopped or self._position >= len(self._ops)

    def next_batch(self) -> ClientBulkWriteBatch | None:
        """The next ``bulkWrite`` command, or None when done (or stopped by an ordered write error)."""
        if self._pending is not None:
            raise InvalidOperation("the previous bulkWrite batch's results were not recorded yet")
        if self.done:
            return None
        self._pending = ClientBulkWriteBatch(self, self._position)
        return self._pending

    def supersede(self, error: BatchWriteConcernRetry, cursor: CursorState) -> None:
        """Remember the open results cursor of a reply whose write concern error makes its batch go again,
        to kill once the retry's reply takes its place."""
        self._superseded.append((error, cursor))

    def unsupersede(self, error: BatchWriteConcernRetry) -> None:
        """Forget the cursor of ``error``'s reply: no retry followed, so that reply is the batch's result."""
        self._superseded = [entry for entry in self._superseded if entry[0] is not error]

    def take_superseded_cursors(self) -> list[tuple[Any, CursorState]]:
        """The open results cursors (server address, cursor) of replies a retry replaced, to kill; each is
        handed out once."""
        superseded, self._superseded = self._superseded, []
        return [(error.address, cursor) for error, cursor in superseded]

    def command_body(self) -> dict[str, Any]:
        """The ``bulkWrite`` command document every batch sends (a copy, for one attempt to complete)."""
        return dict(self._body)

    def plan_batch(self, start: int, context: ConnectionContext) -> BatchPlan:
        """The batch from operation ``start`` on a connection of ``context``'s limits: at most
        ``maxWriteBatchSize`` operations whose ``ops`` and ``nsInfo`` documents fit
        ``maxMessageSizeBytes`` less the reserve and the command document."""
        ops = self._ops
        limit = context.max_message_size - (RESERVED_MESSAGE_BYTES + self._body_size)
        stop = min(len(ops), start + context.max_write_batch_size)
        split = batch_split_size(context)
        if split is not None and split - self._body_size < limit:
            end, used = self._plan_split(start, stop, split - self._body_size, limit, context.max_message_size)
        else:
            end, used = ops.plan(start, stop, limit, context.max_message_size)
        ops_sequence, ns_sequence = ops.sequences(start, end, used)
        return BatchPlan(end, {"ops": ops_sequence, "nsInfo": ns_sequence}, ops.any_multi(start, end))

    def _plan_split(
        self, start: int, stop: int, split_limit: int, limit: int, max_message_size: int
    ) -> tuple[int, list[int]]:
        """:meth:`plan_batch`'s cut under automatic encryption: the batch stops at ``split_limit`` bytes, but
        an operation larger than that alone still goes, alone, within the message's ``limit``."""
        ops = self._ops
        try:
            return ops.plan(start, stop, split_limit, max_message_size)
        except DocumentTooLarge:
            return ops.plan(start, start + 1, limit, max_message_size)

    def record_reply(self, batch: ClientBulkWriteBatch, reply: Mapping[str, Any]) -> CursorState:
        """Record ``batch``'s reply (its counts, write concern error and first results) and return its results
        cursor, to drain with ``getMore`` (the batch is finished once the cursor is exhausted)."""
        if not self.acknowledged:
            self.finish_batch(batch)
            return CursorState(0, "", [])
        self._record_summary(batch, reply)
        cursor = parse_cursor(reply)
        self.record_results(batch, cursor.batch)
        if cursor.id == 0:
            self.finish_batch(batch)
        return cursor

    def finish_batch(self, batch: ClientBulkWriteBatch) -> None:
        """``batch`` is over (its results cursor drained): the next batch starts after it, unless an ordered
        bulk write stops at a write error."""
        if self._pending is batch:
            self._pending = None
            self._position = batch.end if batch.end is not None else len(self._ops)
            if self.ordered and self._write_errors:
                self._stopped = True

    def _record_summary(self, batch: ClientBulkWriteBatch, reply: Mapping[str, Any]) -> None:
        summary = self._summary
        for key in summary:
            summary[key] += int(reply.get(key, 0))
        errors = int(reply.get("nErrors", 0))
        count = (batch.end or batch.start) - batch.start
        if errors < count and (not self.ordered or errors == 0):
            self._any_success = True
        concern_error = reply.get("writeConcernError")
        if concern_error:
            self._write_concern_errors.append(dict(concern_error))

    def record_results(self, batch: ClientBulkWriteBatch, documents: Iterable[Mapping[str, Any]]) -> None:
        """Record result documents of ``batch``'s results cursor (their ``idx`` counted from the batch's
        start): write errors, and each operation's result when the results are verbose."""
        ops = self._ops
        for document in documents:
            index = batch.start + int(document["idx"])
            if document.get("ok") != 1:
                error = dict(document)
                error["idx"] = index
                self._write_errors.append(error)
                if self.ordered and index > batch.start:
                    # An ordered batch stops at its first error: everything before it succeeded.
                    self._any_success = True
                continue
            self._any_success = True
            if not self.verbose_results:
                continue
            kind = write_kind(ops.model(index))
            if kind == KIND_INSERT:
                self._insert_results[index] = InsertOneResult(ops.inserted_id(index), True)
            elif kind == KIND_UPDATE:
                raw: dict[str, Any] = {"n": document.get("n", 0), "nModified": document.get("nModified", 0)}
                if "upserted" in document:
                    raw["upserted"] = document["upserted"]
                self._update_results[index] = UpdateResult(raw, True, in_client_bulk=True)
            elif kind == KIND_DELETE:
                self._delete_results[index] = DeleteResult({"n": document.get("n", 0)}, True)

    def _result(self) -> ClientBulkWriteResult:
        api_result: dict[str, Any] = dict(self._summary)
        if self.verbose_results:
            api_result["insertResults"] = self._insert_results
            api_result["updateResults"] = self._update_results
            api_result["deleteResults"] = self._delete_results
        return ClientBulkWriteResult(api_result, self.acknowledged, self.verbose_results)

    def result(self) -> ClientBulkWriteResult:
        """The merged result; raises ``ClientBulkWriteException`` if any write or write concern failed."""
        if self._write_errors or self._write_concern_errors:
            raise ClientBulkWriteException(
                None,
                sorted(self._write_errors, key=lambda error: int(error["idx"])),
                self._write_concern_errors,
                self._result() if self._any_success else None,
            )
        return self._result()

    def raise_top_level(self, error: BaseException) -> None:
        """Re-raise a top-level error (a command error, a network error, a failed ``getMore``...): inside a
        ``ClientBulkWriteException`` when results or errors were already observed, as it is otherwise."""
        self._stopped = True
        self._pending = None
        if self._write_errors or self._write_concern_errors or self._any_success:
            raise ClientBulkWriteException(
                error,
                sorted(self._write_errors, key=lambda e: int(e["idx"])),
                self._write_concern_errors,
                self._result() if self._any_success else None,
            ) from error
        raise error
