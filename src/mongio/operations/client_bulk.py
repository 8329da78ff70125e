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
Each ``ops`` entry is encoded once with a namespace index of 0 and only its fixed-width int32 index is
rewritten per batch, so sizes are known before any batch exists.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions, encode
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
)
from mongio.operations.results import ClientBulkWriteResult, DeleteResult, InsertOneResult, UpdateResult
from mongio.options.write_concern import WriteConcern

__all__ = ["ClientBulkWrite", "ClientBulkWriteBatch", "ClientBulkWriteException"]

# Every ops entry starts with int32 length, type byte, a six-letter key ("insert", "update", "delete") and its
# NUL, so the namespace index always sits at this offset.
_NS_INDEX_OFFSET = 4 + 1 + 6 + 1
_INT32 = struct.Struct("<i")
# An insert entry's elements before its document: "insert" as int32 0, then the "document" key of an embedded
# document.
_INSERT_OP_PREFIX = b"\x10insert\x00\x00\x00\x00\x00\x03document\x00"


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


class _Op:
    __slots__ = ("_id", "encoded", "kind", "model", "multi", "namespace")

    def __init__(
        self, model: WriteModel, namespace: str, encoded: bytes, kind: int, multi: bool, _id: Any
    ) -> None:
        self.model = model
        self.namespace = namespace
        self.encoded = encoded
        self.kind = kind
        self.multi = multi
        self._id = _id


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
        self._errors_seen = 0
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
        return Command(for_server(dict(self._bulk._body), context), self._sequences)

    def _plan(self, context: ConnectionContext) -> None:
        bulk = self._bulk
        ops = bulk._ops
        limit = context.max_message_size - (RESERVED_MESSAGE_BYTES + bulk._body_size)
        stop = min(len(ops), self.start + context.max_write_batch_size)
        ns_indexes: dict[str, int] = {}
        ops_seq = DocumentSequence()
        ns_seq = DocumentSequence()
        size = 0
        end = self.start
        while end < stop:
            op = ops[end]
            added = len(op.encoded)
            ns_index = ns_indexes.get(op.namespace)
            if ns_index is None:
                added += _ns_info_size(op.namespace)
            if size + added > limit:
                if end == self.start:
                    raise DocumentTooLarge(
                        f"operation {end} of {len(op.encoded)} bytes cannot fit in a bulkWrite command under "
                        f"the server's maxMessageSizeBytes of {context.max_message_size}"
                    )
                break
            if ns_index is None:
                ns_index = ns_indexes[op.namespace] = len(ns_indexes)
                ns_document = {"ns": op.namespace}
                ns_seq.append_document(encode(ns_document), ns_document)
            encoded = op.encoded
            if ns_index:
                patched = bytearray(encoded)
                _INT32.pack_into(patched, _NS_INDEX_OFFSET, ns_index)
                encoded = bytes(patched)
            ops_seq.append_document(encoded, _OpView(op, ns_index))
            self._multi = self._multi or op.multi
            size += added
            end += 1
        self.end = end
        self._sequences = {"ops": ops_seq, "nsInfo": ns_seq}

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> CursorState:
        bulk = self._bulk
        if not self.acknowledged:
            bulk._finish_batch(self)
            return CursorState(0, "", [])
        bulk._record_summary(self, reply)
        cursor = parse_cursor(reply)
        self.record_results(cursor.batch)
        if cursor.id == 0:
            bulk._finish_batch(self)
        return cursor

    def write_concern_retry_error(self, reply: Mapping[str, Any], labels: Iterable[str]) -> BatchWriteConcernRetry:
        """The error for a reply whose write concern failed in a way that makes the batch go again; nothing is
        recorded, since the retry's reply takes this one's place."""
        error = BatchWriteConcernRetry(self, reply, labels)
        cursor = reply.get("cursor")
        if isinstance(cursor, Mapping) and cursor.get("id"):
            # The server keeps this reply's results cursor even though another reply will take its place.
            self._bulk._superseded.append((error, parse_cursor(reply)))
        return error

    def accept_reply(self, error: BatchWriteConcernRetry) -> CursorState:
        """Take the reply of a write concern error that was not retried (again) as this batch's result: its
        counts, results and write concern error are recorded, and its results cursor is returned to drain
        with ``getMore`` on ``error.address`` as after any other reply."""
        if error.batch is not self:
            raise InvalidOperation("the write concern error belongs to another bulkWrite batch")
        bulk = self._bulk
        bulk._superseded = [entry for entry in bulk._superseded if entry[0] is not error]
        return self.handle_response(dict(error.reply), ServerLimits())

    def record_results(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Record result documents from this batch's cursor (the first batch is recorded by
        ``handle_response``; call this for each ``getMore`` batch)."""
        self._bulk._record_results(self, documents)

    def cursor_exhausted(self) -> None:
        """Tell the bulk write this batch's results cursor is drained (after the last ``getMore``)."""
        self._bulk._finish_batch(self)


class _OpView(Mapping[str, Any]):
    """An ``ops`` entry as command monitoring shows it, built from the model only when someone looks."""

    __slots__ = ("_document", "_ns_index", "_op")

    def __init__(self, op: _Op, ns_index: int) -> None:
        self._op = op
        self._ns_index = ns_index
        self._document: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        if self._document is None:
            model = self._op.model
            if isinstance(model, InsertOne):
                self._document = {"insert": self._ns_index, "document": model.document}
            else:
                self._document = model._client_op(self._ns_index)
        return self._document

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Any:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


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
        ops: list[_Op] = []
        for index, given in enumerate(models):
            model = as_write_model(given)
            namespace = model.namespace
            if namespace is None:
                raise InvalidOperation(
                    f"MongoClient.bulk_write needs a namespace on every write model; model {index} has none"
                )
            _id = None
            if isinstance(model, InsertOne):
                document_bytes, _id = encode_insert(model.document, codec_options)
                # {"insert": 0, "document": <document>} assembled around the already-encoded document.
                size = len(_INSERT_OP_PREFIX) + 4 + len(document_bytes) + 1
                encoded = b"".join((_INT32.pack(size), _INSERT_OP_PREFIX, document_bytes, b"\x00"))
            else:
                encoded = encode(model._client_op(0), codec_options=codec_options, max_size=None)
            ops.append(_Op(model, namespace, encoded, model._kind, model._multi, _id))
        if not ops:
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

    def take_superseded_cursors(self) -> list[tuple[Any, CursorState]]:
        """The open results cursors (server address, cursor) of replies a retry replaced, to kill; each is
        handed out once."""
        superseded, self._superseded = self._superseded, []
        return [(error.address, cursor) for error, cursor in superseded]

    def _finish_batch(self, batch: ClientBulkWriteBatch) -> None:
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
        batch._errors_seen = errors
        concern_error = reply.get("writeConcernError")
        if concern_error:
            self._write_concern_errors.append(dict(concern_error))

    def _record_results(self, batch: ClientBulkWriteBatch, documents: Iterable[Mapping[str, Any]]) -> None:
        ops = self._ops
        for document in documents:
            index = batch.start + int(document["idx"])
            op = ops[index]
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
            if op.kind == KIND_INSERT:
                self._insert_results[index] = InsertOneResult(op._id, True)
            elif op.kind == KIND_UPDATE:
                raw: dict[str, Any] = {"n": document.get("n", 0), "nModified": document.get("nModified", 0)}
                if "upserted" in document:
                    raw["upserted"] = document["upserted"]
                self._update_results[index] = UpdateResult(raw, True, in_client_bulk=True)
            elif op.kind == KIND_DELETE:
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
