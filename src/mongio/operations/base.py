"""What every operation is: arguments in, one command out, the server's reply in, a result out.

An operation does no I/O. The executor selects a server, checks a connection out, calls :meth:`Operation.build`
with that connection's limits, adds the fields it owns (``lsid``, ``txnNumber``, ``$clusterTime``,
``readConcern``, ``writeConcern``, ``$readPreference``, ``maxTimeMS`` from a deadline, ``$db``), sends the
command and hands the ``ok: 1`` reply to :meth:`Operation.handle_response`. A retry calls ``build`` again with
the new connection: everything that can be checked or computed once is done when the operation is made, so a
build is a few dictionary stores.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions, RawBSONDocument, encode
from mongio.bson._encoder import encode_into
from mongio.bson.lazy_batch import DocumentBatch
from mongio.error_classification import write_concern_error, write_error_class
from mongio.errors import DocumentTooLarge, InvalidOperation
from mongio.wire.header import DEFAULT_MAX_BSON_SIZE, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_MAX_WRITE_BATCH_SIZE
from mongio.wire.op_msg import PackedDocuments

if TYPE_CHECKING:
    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import _ServerMode
    from mongio.options.write_concern import WriteConcern

__all__ = [
    "DEFAULT_MAX_WRITE_BATCH_SIZE",
    "RAW_DATA_MIN_WIRE_VERSION",
    "RESERVED_MESSAGE_BYTES",
    "Command",
    "ConnectionContext",
    "CursorState",
    "DocumentSequence",
    "Operation",
    "Retryability",
    "ServerLimits",
    "add_raw_data",
    "check_write_concern_reply",
    "check_write_reply",
    "encode_insert",
    "for_server",
    "parse_cursor",
]

R = TypeVar("R")

# Room left in every message for the fields the executor adds after build(): lsid, txnNumber, $clusterTime
# (with its signature), readConcern with afterClusterTime, writeConcern, $readPreference, maxTimeMS, $db,
# apiVersion. The client bulkWrite spec allows exactly this much for the same purpose; the collection-level
# write commands use the same allowance so one number governs every split.
RESERVED_MESSAGE_BYTES = 1000

# MongoDB 8.2 is the first server to take the rawData option; the CRUD and index specifications forbid
# sending it to older ones, so it is dropped for them at build time.
RAW_DATA_MIN_WIRE_VERSION = 27

_INT32 = struct.Struct("<i")
# The element that puts a generated ObjectId first: type 0x07, the key "_id" and its NUL.
_OID_ELEMENT_PREFIX = b"\x07_id\x00"
# A document's length placeholder and the start of its ObjectId ``_id`` element; the element is 17 bytes.
_ID_ELEMENT_HEAD = b"\x00\x00\x00\x00" + _OID_ELEMENT_PREFIX
_ID_ELEMENT_SIZE = 4 + len(_OID_ELEMENT_PREFIX) + 12


class Retryability(enum.Enum):
    """Whether the executor may retry an operation once after a retryable error."""

    NONE = 0
    READ = 1
    WRITE = 2


class ConnectionContext(Protocol):
    """What ``build`` and ``handle_response`` need to know about the connection the command goes to.

    A checked-out connection satisfies this directly (its handshake fills in these attributes).
    """

    @property
    def max_wire_version(self) -> int: ...

    @property
    def max_bson_size(self) -> int: ...

    @property
    def max_message_size(self) -> int: ...

    @property
    def max_write_batch_size(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """A :class:`ConnectionContext` with the server defaults; for tests and for callers without a connection."""

    max_wire_version: int = 21
    max_bson_size: int = DEFAULT_MAX_BSON_SIZE
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_write_batch_size: int = DEFAULT_MAX_WRITE_BATCH_SIZE


@dataclass(frozen=True, slots=True)
class EncryptedWriteLimits:
    """A :class:`ConnectionContext` for a client with automatic encryption: the connection's limits, and
    write batches cut once their statements pass ``split_size`` bytes before encryption (which makes them
    larger). A statement over ``split_size`` still goes, alone (the client-side encryption specification's
    "Size limits for Write Commands")."""

    connection: ConnectionContext
    split_size: int

    @property
    def max_wire_version(self) -> int:
        return self.connection.max_wire_version

    @property
    def max_bson_size(self) -> int:
        return self.connection.max_bson_size

    @property
    def max_message_size(self) -> int:
        return self.connection.max_message_size

    @property
    def max_write_batch_size(self) -> int:
        return self.connection.max_write_batch_size


def batch_split_size(context: ConnectionContext) -> int | None:
    """The bytes of statements after which a write batch planned for ``context`` is cut although the message
    could take more (automatic encryption's limit), or None: only the message's limits count."""
    return context.split_size if isinstance(context, EncryptedWriteLimits) else None


class DocumentSequence(list[bytes | PackedDocuments]):
    """An OP_MSG document sequence: the encoded documents (what the wire sends) and the documents they were
    encoded from (what command monitoring shows as the command's array), kept side by side so neither has to
    be recomputed from the other."""

    __slots__ = ("_documents",)

    def __init__(self, encoded: Sequence[bytes | PackedDocuments] = (), documents: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(encoded)
        # Taken as given: a list the caller made for this sequence, or a view that builds each document only
        # when someone looks (command monitoring, tracing), made a list then.
        self._documents: Sequence[Mapping[str, Any]] = documents

    @property
    def documents(self) -> list[Mapping[str, Any]]:
        """The documents the encoded ones were made from, in order."""
        documents = self._documents
        if type(documents) is not list:
            documents = self._documents = list(documents)
        return documents

    def encoded_documents(self) -> list[bytes | memoryview]:
        """The encoded documents one by one, those packed together split apart (for tests and tools)."""
        split: list[bytes | memoryview] = []
        for part in self:
            if not isinstance(part, PackedDocuments):
                split.append(part)
                continue
            view = memoryview(part.data)
            position = 0
            while position < len(view):
                size = int.from_bytes(view[position : position + 4], "little")
                split.append(view[position : position + size])
                position += size
        return split


class Command(NamedTuple):
    """A built command: the body document (without ``$db``) and its document sequences, if any.

    The body is a fresh dict on every build, so the executor may add its own fields to it.
    """

    body: dict[str, Any]
    sequences: dict[str, DocumentSequence] | None = None


class CursorState(NamedTuple):
    """What a cursor needs from a ``find``/``aggregate``/``listX`` reply or a ``getMore`` reply. ``batch`` is
    a :class:`~mongio.bson.lazy_batch.DocumentBatch` only for an operation with ``lazy_batch`` set."""

    id: int
    namespace: str
    batch: list[Any] | DocumentBatch
    post_batch_resume_token: Any = None
    at_cluster_time: Any = None

    @property
    def database(self) -> str:
        return self.namespace.partition(".")[0]

    @property
    def collection(self) -> str:
        return self.namespace.partition(".")[2]

    @property
    def alive(self) -> bool:
        """True while the server holds more results (the cursor id is not zero)."""
        return self.id != 0


def parse_cursor(reply: Mapping[str, Any], batch_field: str = "firstBatch") -> CursorState:
    """The cursor part of a reply: ``{cursor: {id, ns, firstBatch | nextBatch, postBatchResumeToken}}``;
    :class:`~mongio.errors.InvalidOperation` when the reply holds no cursor (a command that is not a cursor
    command, given to ``cursor_command``)."""
    try:
        cursor = reply["cursor"]
        batch = cursor.get(batch_field)  # also what refuses a cursor field that is not a document
        if batch is None:
            batch = cursor.get("nextBatch" if batch_field == "firstBatch" else "firstBatch", [])
        # Membership tests rather than get() calls: a find_one parses one cursor reply per call. A snapshot
        # read's atClusterTime is in the cursor, or else beside it.
        holder = cursor if "atClusterTime" in cursor else reply
        fields = (
            int(cursor["id"]) if "id" in cursor else 0,
            str(cursor["ns"]) if "ns" in cursor else "",
            batch,
            cursor["postBatchResumeToken"] if "postBatchResumeToken" in cursor else None,  # noqa: SIM401 (no call)
            holder["atClusterTime"] if "atClusterTime" in holder else None,  # noqa: SIM401
        )
        # _make: the named tuple's own constructor from its fields, a call cheaper than a class call.
        return CursorState._make(fields)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise InvalidOperation(f"the reply is not a cursor: {reply!r}") from exc


class Operation(Generic[R]):
    """The base of every operation.

    Attributes the executor reads:

    - ``command_name`` and ``database``: what is run where (``database`` gets ``$db``).
    - ``retryability``: :class:`Retryability`; a write is retryable only when acknowledged and
      single-document per statement.
    - ``read_preference``: the read preference to select a server with and to send as ``$readPreference``
      (None: the primary, and nothing is sent).
    - ``read_concern`` / ``write_concern``: the concerns the executor places in the command (unless a
      transaction says otherwise), meaningful only when ``takes_read_concern`` / ``takes_write_concern``.
    - ``codec_options``: how to decode this operation's reply.
    """

    command_name: str = ""
    operation_name: str = ""
    """The driver operation's name in tracing spans when it is not the command's (``createCollection`` for
    ``create``); empty: the command's name."""
    retryability: Retryability = Retryability.NONE
    takes_read_concern: bool = False
    takes_write_concern: bool = False
    ignores_namespace_not_found: bool = False
    """When True, a ``NamespaceNotFound`` (code 26) command error is not an error: the executor returns
    :meth:`empty_result` instead (``listIndexes`` of a missing collection, ``drop`` of one)."""
    transaction_command: str | None = None
    """``"commitTransaction"`` or ``"abortTransaction"`` for the two commands that end a transaction: they go
    to the transaction's server, carry its recovery token and are retried as writes even with
    ``retryWrites`` off."""
    has_write_stage: bool = False
    """True for an aggregation whose pipeline writes (``$out``/``$merge``): it selects a server as a write
    unless every server may take it on a secondary, and its read preference is still sent."""
    exhaust: bool = False
    """True for the ``getMore`` of an exhaust cursor: the executor sends it with ``exhaustAllowed`` where the
    server and the context allow, and a reply saying more follow (``moreToCome``) leaves the connection with
    the cursor's :class:`~mongio.execution.connection_pin.ConnectionPin`."""
    lazy_batch: bool = False
    """True for a cursor command whose documents a cursor hands out one by one: the executor may then receive
    the reply with its batch as a :class:`~mongio.bson.lazy_batch.DocumentBatch`, decoded document by document
    as taken (not when command events or a span need the reply whole)."""
    is_user_command: bool = False
    """True for the caller's own command document (``runCommand``): the executor sends it as given (no
    causal ``readConcern`` added, its ``wtimeout`` kept), checks its read preference inside a transaction, and
    retries it only after an overload."""

    def __init__(
        self,
        database: str,
        read_preference: _ServerMode | None = None,
        read_concern: ReadConcern | None = None,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        # Positional or by name: a find calls it with positions, the cheaper call (one find per find_one).
        self.database = database
        self.read_preference = read_preference
        self.read_concern = read_concern
        self.write_concern = write_concern
        self.codec_options = codec_options

    @property
    def acknowledged(self) -> bool:
        """False when the write concern is ``w: 0``: the executor then sends with moreToCome and passes ``{}``
        to :meth:`handle_response`."""
        return self.write_concern is None or self.write_concern.acknowledged

    def use_transaction_write_concern(self) -> None:
        """The operation runs inside a transaction: its own write concern (the collection's, say ``w: 0``)
        does not apply there, since the transaction's goes on commit and abort only, so the command is
        acknowledged and its result reports what the server answered (transactions specification,
        TransactionOptions writeConcern). The executor calls this before the first attempt."""
        self.write_concern = None

    @property
    def may_use_secondary(self) -> bool:
        """True when the read preference lets the operation run on a secondary."""
        return self.read_preference is not None and self.read_preference.mode != 0

    def build(self, context: ConnectionContext) -> Command:
        raise NotImplementedError

    def handle_response(self, reply: dict[str, Any], context: ConnectionContext) -> R:
        raise NotImplementedError

    def write_concern_retry_error(self, reply: Mapping[str, Any], labels: Iterable[str]) -> Exception | None:
        """The error to raise when an acknowledged retryable write's ``reply`` carries a retryable write
        concern error (``labels`` are its error labels): one that keeps what the reply reports, raised so
        the executor sends the write again. ``None`` (the default): the write concern error itself."""
        return None

    def retrying(self, *, after_overload: bool) -> None:
        """The executor is about to send the command again (``after_overload``: the server was overloaded).
        Nothing to do by default; a commit asks for ``w: "majority"`` from then on."""

    def empty_result(self) -> R:
        """The result when the namespace does not exist (only for ``ignores_namespace_not_found``)."""
        raise NotImplementedError

    def command_flag(self, name: str) -> bool:
        """Whether the command's cursor has the option ``name`` (``tailable``, ``awaitData``), which its cursor
        reads: from the caller's own command document, or implied by the command (a ``$changeStream``
        aggregate). False by default."""
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.command_name} on {self.database!r}>"


def add_raw_data(body: dict[str, Any], raw_data: bool | None) -> None:
    """Put ``rawData`` in a command body being assembled, if given (checked to be a bool)."""
    if raw_data is not None:
        if not isinstance(raw_data, bool):
            raise TypeError(f"raw_data must be True, False or None, not {raw_data!r}")
        body["rawData"] = raw_data


def for_server(body: dict[str, Any], context: ConnectionContext) -> dict[str, Any]:
    """A freshly copied body made fit for the connection's server: without ``rawData`` before MongoDB 8.2."""
    if "rawData" in body and context.max_wire_version < RAW_DATA_MIN_WIRE_VERSION:
        del body["rawData"]
    return body


def check_write_reply(reply: Mapping[str, Any]) -> None:
    """Raise the error a single-statement write's reply reports: its write error (``DuplicateKeyError`` for a
    duplicate key), else its write concern error (which keeps the reply's top-level error labels, the ones
    retryable writes look at)."""
    write_errors = reply.get("writeErrors")
    if write_errors:
        error = write_errors[-1]
        code = error.get("code")
        raise write_error_class(code)(str(error.get("errmsg", "write error")), code, error)
    check_write_concern_reply(reply)


def check_write_concern_reply(reply: Mapping[str, Any]) -> None:
    """Raise the reply's write concern error, if it has one: ``WTimeoutError`` when it timed out, else
    ``WriteConcernError``, keeping the reply's top-level error labels (the ones retryable writes look at)."""
    error = write_concern_error(reply)
    if error is not None:
        raise error


def encode_insert(document: Any, codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS) -> tuple[bytes, Any]:
    """Encode a document for insertion; returns the BSON and its ``_id``.

    A mutable mapping without ``_id`` gets a new ObjectId, stored in it (as PyMongo does, so the caller can read
    ``doc["_id"]`` afterwards) and encoded as the first field so the server need not move it. A
    ``RawBSONDocument`` is sent as it is.
    """
    if type(document) is RawBSONDocument:
        return document.raw, document.get("_id")
    # The exact-type tests spare the common dict the slower ABC checks.
    is_dict = type(document) is dict
    if not is_dict and not isinstance(document, Mapping):
        raise TypeError(
            f"document must be a mapping (dict, SON, RawBSONDocument...), not {type(document).__name__}"
        )
    if "_id" in document:
        return encode(document, codec_options=codec_options, max_size=None), document["_id"]
    oid = codec_options.new_object_id()
    # The _id element goes first, then the document's own elements: the document is appended whole and its
    # length prefix cut out, instead of building a reordered copy of it.
    out = bytearray(_ID_ELEMENT_HEAD)
    out += oid.binary
    encode_into(out, document, codec_options)
    del out[_ID_ELEMENT_SIZE : _ID_ELEMENT_SIZE + 4]
    _INT32.pack_into(out, 0, len(out))
    if is_dict or isinstance(document, MutableMapping):
        document["_id"] = oid
    return bytes(out), oid


def check_document_size(size: int, index: int, context: ConnectionContext) -> None:
    if size > context.max_bson_size:
        raise DocumentTooLarge(
            f"document {index} is {size} bytes, over the server's maxBsonObjectSize of {context.max_bson_size}"
        )
