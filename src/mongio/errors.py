"""The driver's error hierarchy. Names follow PyMongo's ``pymongo.errors`` so ``except`` clauses port as they are.

Every error can carry server error labels (``RetryableWriteError``, ``TransientTransactionError``, ...).
What an error means (retryable, a network error, a state change...) is decided in
:mod:`mongio.error_classification`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson.errors import (
    BSONError,
    InvalidBSON,
    InvalidDocument,
    InvalidId,
    InvalidStringData,
)

if TYPE_CHECKING:
    from mongio.operations.results import ClientBulkWriteResult

__all__ = [
    "AuthenticationFailed",
    "AutoReconnect",
    "BSONError",
    "BulkWriteError",
    "ClientBulkWriteException",
    "ClientClosedError",
    "CollectionInvalid",
    "ConfigurationError",
    "ConnectionCheckoutOperationTimeout",
    "ConnectionFailure",
    "CursorNotFound",
    "DocumentTooLarge",
    "DuplicateKeyError",
    "EncryptedCollectionError",
    "EncryptionError",
    "EventLoopMismatchError",
    "ExecutionOperationTimeout",
    "ExecutionTimeout",
    "InvalidBSON",
    "InvalidDocument",
    "InvalidId",
    "InvalidName",
    "InvalidOperation",
    "InvalidOptionValueError",
    "InvalidStringData",
    "InvalidURI",
    "MongioError",
    "NetworkOperationTimeout",
    "NetworkTimeout",
    "NotPrimaryError",
    "OperationFailure",
    "OperationTimeoutError",
    "PoolClearedError",
    "PoolClosedError",
    "PortOutOfRangeError",
    "ProtocolError",
    "PyMongoError",
    "ServerSelectionOperationTimeout",
    "ServerSelectionTimeoutError",
    "WTimeoutError",
    "WaitQueueTimeoutError",
    "WriteConcernError",
    "WriteConcernOperationTimeout",
    "WriteError",
]


# The codes the errors below are built with (a timeout's stand-in reply, a client bulk write's error). The
# codes and labels errors are told apart by are in mongio.error_classification.
MAX_TIME_MS_EXPIRED = 50
MULTIPLE_ERRORS_OCCURRED = 65


class MongioError(Exception):
    """Base of every error mongio raises (other than BSON codec errors)."""

    def __init__(self, message: str = "", error_labels: Iterable[str] | None = None) -> None:
        # Not super(): in the PyMongo-typed mode PyMongo's error classes follow this one in the MRO
        # (mongio.pymongo_types), and their constructors must not run over the state set here.
        Exception.__init__(self, message)
        self._message = message
        self._error_labels: set[str] = set(error_labels or ())

    # Load-balanced mode: the serviceId of the connection whose establishment failed after its handshake
    # (authentication), which tells the pool whose connections to clear; ``None`` otherwise.
    _service_id: Any = None

    # attribute_to_service, failed_service_id, add_error_label and remove_error_label are public within the
    # package, not API (PyMongo keeps its label methods private): the modules that classify errors and
    # establish connections call them; tests/docs/public_api.py declares them package-internal.

    def attribute_to_service(self, service_id: Any) -> None:
        """Record that this error ended the establishment of a connection to load-balanced ``service_id``
        after its hello had named the service."""
        self._service_id = service_id

    @property
    def failed_service_id(self) -> Any:
        """The service set by :meth:`attribute_to_service`, or None."""
        return self._service_id

    def has_error_label(self, label: str) -> bool:
        """Whether the error carries this label (e.g. ``"TransientTransactionError"``)."""
        return label in self._error_labels

    def add_error_label(self, label: str) -> None:
        """Give the error ``label`` (a label the driver decides, such as ``"RetryableWriteError"``)."""
        self._error_labels.add(label)

    def remove_error_label(self, label: str) -> None:
        """Take ``label`` off the error, if it has it."""
        self._error_labels.discard(label)

    # PyMongo's names of the two label methods, for code ported from PyMongo that calls them.
    _add_error_label = add_error_label
    _remove_error_label = remove_error_label

    @property
    def error_labels(self) -> frozenset[str]:
        """The error's labels, from the server's reply or added by the driver."""
        return frozenset(self._error_labels)

    @property
    def timeout(self) -> bool:
        """True when this error is the result of a timeout."""
        return False


PyMongoError = MongioError  # the PyMongo name, so ported except clauses keep working


class ProtocolError(MongioError):
    """The server sent something the wire protocol does not allow."""


class ConfigurationError(MongioError):
    """A bad option, URI or combination of settings; the message names the option and the value."""


class InvalidOptionValueError(ConfigurationError, ValueError):
    """A client option given a value it does not accept (``MongoClient(maxPoolSize=-1)``); also a
    :class:`ValueError`, as PyMongo raises for it, so that ``except ValueError`` written for PyMongo and
    ``except ConfigurationError`` both catch it."""


class InvalidURI(ConfigurationError):
    """A connection string that cannot be parsed."""


class PortOutOfRangeError(InvalidURI, ValueError):
    """A host's port outside 1-65535 (``"h:1234567"``); also a :class:`ValueError`, as PyMongo raises for it,
    so that both ``except ValueError`` written for PyMongo and ``except InvalidURI`` catch it."""


class InvalidName(MongioError):
    """A bad database or collection name."""


class CollectionInvalid(MongioError):
    """A collection cannot be created (it exists already) or failed validation."""


class InvalidOperation(MongioError):
    """An operation that is not allowed in the current state (e.g. a closed client, an ended session)."""


class ClientClosedError(InvalidOperation):
    """The client was closed; make a new one."""


class EventLoopMismatchError(InvalidOperation):
    """An object bound to one event loop (a session, an open cursor, a change stream) was used from
    another. The client itself works on any loop; these objects hold state of the loop they were used on
    first. The message names both loops."""


class ConnectionFailure(MongioError):
    """The server could not be reached or the connection broke."""


class AutoReconnect(ConnectionFailure):
    """A network error; the operation may succeed if tried again."""

    def __init__(
        self,
        message: str = "",
        errors: Mapping[str, Any] | list[Any] | None = None,
        error_labels: Iterable[str] | None = None,
    ) -> None:
        super().__init__(message, error_labels)
        self.errors = errors if errors is not None else []

    @property
    def details(self) -> Mapping[str, Any] | list[Any]:
        """The server's error document when there is one (e.g. a state-change reply), as PyMongo gives it."""
        return self.errors


class NetworkTimeout(AutoReconnect):
    """A network operation timed out."""

    @property
    def timeout(self) -> bool:
        """Always true: this error is a timeout."""
        return True


class NotPrimaryError(AutoReconnect):
    """The server is no longer primary (or is recovering)."""


class ServerSelectionTimeoutError(AutoReconnect):
    """No suitable server was found within ``serverSelectionTimeoutMS``."""

    @property
    def timeout(self) -> bool:
        """Always true: this error is a timeout."""
        return True


class WaitQueueTimeoutError(ConnectionFailure):
    """No connection could be checked out of a pool within ``waitQueueTimeoutMS``."""

    @property
    def timeout(self) -> bool:
        """Always true: this error is a timeout."""
        return True


class DocumentTooLarge(InvalidDocument):
    """A document exceeds the server's ``maxBsonObjectSize``."""


class OperationFailure(MongioError):
    """The server answered a command with ``ok: 0``."""

    def __init__(
        self,
        error: str,
        code: int | None = None,
        details: Mapping[str, Any] | None = None,
        max_wire_version: int | None = None,
    ) -> None:
        labels = (details or {}).get("errorLabels", ())
        super().__init__(error, labels)
        self.__code = code
        self.__details = details
        self.__max_wire_version = max_wire_version

    @property
    def code(self) -> int | None:
        """The server's error code, or ``None`` when the reply had none."""
        return self.__code

    @property
    def details(self) -> Mapping[str, Any] | None:
        """The server's whole reply document."""
        return self.__details

    @property
    def code_name(self) -> str | None:
        """The server's name for the error code (``codeName``), or ``None``."""
        return None if self.__details is None else self.__details.get("codeName")

    def __str__(self) -> str:
        details = f", full error: {self.__details}" if self.__details else ""
        return f"{self._message}, code: {self.__code}{details}"


class ExecutionTimeout(OperationFailure):
    """The server stopped the operation at its ``maxTimeMS``."""

    @property
    def timeout(self) -> bool:
        """Always true: this error is a timeout."""
        return True


class CursorNotFound(OperationFailure):
    """The server no longer has the cursor."""


class WriteError(OperationFailure):
    """A write failed on the server."""


class DuplicateKeyError(WriteError):
    """A write would have duplicated a unique index key."""


class WriteConcernError(OperationFailure):
    """The write happened but its write concern was not satisfied."""


class WTimeoutError(WriteConcernError):
    """The write concern was not satisfied within its ``wtimeout`` (``errInfo.wtimeout`` is true)."""

    @property
    def timeout(self) -> bool:
        """Always true: this error is a timeout."""
        return True


class BulkWriteError(OperationFailure):
    """One or more writes of a bulk write failed; ``details`` holds the partial result."""

    def __init__(self, results: Mapping[str, Any]) -> None:
        super().__init__("batch op errors occurred", 65, results)


class AuthenticationFailed(OperationFailure):
    """Authentication did not succeed: the server refused the credential, or its answers could not be trusted
    (a wrong server signature, a nonce that does not extend ours, too few iterations).

    The message names the user, the database and the mechanism; it never holds the password or anything
    derived from it, and ``details`` keeps only the reply's ok/errmsg/code/codeName/errorLabels.
    """

    _SAFE_REPLY_FIELDS = ("ok", "errmsg", "code", "codeName", "errorLabels")

    def __init__(self, message: str, code: int | None = 18, details: Mapping[str, Any] | None = None) -> None:
        safe = None if details is None else {k: details[k] for k in self._SAFE_REPLY_FIELDS if k in details}
        super().__init__(message, code, safe)


class PoolClosedError(MongioError):
    """A connection was requested from a closed pool (the client was closed)."""

    def __init__(self, message: str, address: tuple[str, int | None]) -> None:
        super().__init__(message)
        self.address = address


class PoolClearedError(AutoReconnect):
    """The pool was cleared (or has not been marked ready yet) while a connection was being checked out,
    or a connection in use was interrupted by a clear. Safe to retry; it says nothing new about the
    server's state, so error handling must not mark the server Unknown because of it."""

    def __init__(self, message: str, address: tuple[str, int | None]) -> None:
        super().__init__(message)
        self.address = address


class ClientBulkWriteException(OperationFailure):
    """A client-level bulk write failed in part or in whole (PyMongo's name, attributes and base class: an
    ``OperationFailure`` with code 65, MultipleErrorsOccurred).

    ``error`` is the top-level error that stopped it (None when only individual writes or write concerns
    failed), ``write_errors`` the failed writes (dicts with ``idx`` the index of the model), at most one when
    ordered, ``write_concern_errors`` one entry per command whose write concern failed, and
    ``partial_result`` what was done before it stopped (None when nothing is known to have succeeded).
    ``details`` holds the write errors, the write concern errors and the top-level error's labels.
    """

    def __init__(
        self,
        error: BaseException | None,
        write_errors: list[dict[str, Any]],
        write_concern_errors: list[dict[str, Any]],
        partial_result: ClientBulkWriteResult | None,
    ) -> None:
        labels = sorted(error.error_labels) if isinstance(error, MongioError) else []
        details: dict[str, Any] = {
            "writeErrors": write_errors,
            "writeConcernErrors": write_concern_errors,
            "errorLabels": labels,
        }
        super().__init__(
            self._describe(error, write_errors, write_concern_errors), MULTIPLE_ERRORS_OCCURRED, details
        )
        # Read-only properties, as PyMongo's are (and must be: in the PyMongo-typed mode PyMongo's class,
        # whose properties would refuse instance attributes of these names, is among the bases).
        self.__error = error
        self.__write_errors = write_errors
        self.__write_concern_errors = write_concern_errors
        self.__partial_result = partial_result

    @property
    def error(self) -> BaseException | None:
        """The top-level error that stopped the bulk write, or None."""
        return self.__error

    @property
    def write_errors(self) -> list[dict[str, Any]]:
        """The failed writes, each with ``idx``, the index of its model."""
        return self.__write_errors

    @property
    def write_concern_errors(self) -> list[dict[str, Any]]:
        """One entry per command whose write concern failed."""
        return self.__write_concern_errors

    @property
    def partial_result(self) -> ClientBulkWriteResult | None:
        """What was done before the bulk write stopped, or None when nothing is known to have succeeded."""
        return self.__partial_result

    @staticmethod
    def _describe(
        error: BaseException | None, write_errors: list[dict[str, Any]], concern_errors: list[dict[str, Any]]
    ) -> str:
        parts = []
        if error is not None:
            parts.append(f"top-level error: {error}")
        if write_errors:
            parts.append(f"{len(write_errors)} write error(s), first: {write_errors[0].get('errmsg')!r}")
        if concern_errors:
            parts.append(f"{len(concern_errors)} write concern error(s)")
        return "bulk write failed: " + "; ".join(parts)


class EncryptionError(MongioError):
    """An error of client-side field level encryption (PyMongo's name and base): libmongocrypt's own
    errors, and the failures of the steps it asked for (a KMS exchange, a key vault read, on-demand
    credentials) while encrypting, decrypting or making and rewrapping data keys. ``cause`` is the
    underlying error. Messages name the problem, never key material or the values encrypted."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.__cause = cause

    @property
    def cause(self) -> Exception:
        """The error that caused this one."""
        return self.__cause

    @property
    def timeout(self) -> bool:
        """Whether the cause was a timeout."""
        return bool(getattr(self.__cause, "timeout", False))


class EncryptedCollectionError(EncryptionError):
    """Creating an encrypted collection failed (PyMongo's name): ``encrypted_fields`` holds the
    ``encryptedFields`` with the data keys made before the failure, so they can be reused or deleted."""

    def __init__(self, cause: Exception, encrypted_fields: Mapping[str, Any]) -> None:
        super().__init__(cause)
        self.__encrypted_fields = encrypted_fields

    @property
    def encrypted_fields(self) -> Mapping[str, Any]:
        """The ``encryptedFields`` the collection was being created with."""
        return self.__encrypted_fields


class OperationTimeoutError(MongioError):
    """The operation's ``timeoutMS`` expired before it could finish.

    ``cause`` is the error of the step that was running when time ran out (server selection, a socket read,
    the server's ``MaxTimeMSExpired``), when there was one; its text is part of this error's message and its
    error labels are copied. ``timeout`` is always true, as on every other timeout error.

    What is raised is one of its subclasses, which also derive from the error PyMongo raises for a timeout
    in that step, so ``except`` clauses written for PyMongo catch it: :class:`ServerSelectionOperationTimeout`
    (a :class:`ServerSelectionTimeoutError`), :class:`ConnectionCheckoutOperationTimeout`
    (a :class:`WaitQueueTimeoutError`), :class:`NetworkOperationTimeout` (a :class:`NetworkTimeout`, so an
    :class:`AutoReconnect`), :class:`WriteConcernOperationTimeout` (a :class:`WTimeoutError`) and
    :class:`ExecutionOperationTimeout` (an :class:`ExecutionTimeout`: the server's ``MaxTimeMSExpired``, or
    time that ran out between steps).
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        MongioError.__init__(self, message, _labels_of(cause))
        self.cause = cause

    @property
    def timeout(self) -> bool:
        """Always true: this error is a timeout."""
        return True


def _labels_of(cause: BaseException | None) -> Iterable[str]:
    labels: Iterable[str] = getattr(cause, "error_labels", None) or ()
    return labels


class ServerSelectionOperationTimeout(OperationTimeoutError, ServerSelectionTimeoutError):
    """``timeoutMS`` expired while selecting a server."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        ServerSelectionTimeoutError.__init__(self, message, error_labels=_labels_of(cause))
        self.cause = cause


class ConnectionCheckoutOperationTimeout(OperationTimeoutError, WaitQueueTimeoutError):
    """``timeoutMS`` expired while waiting for a pooled connection."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        WaitQueueTimeoutError.__init__(self, message, _labels_of(cause))
        self.cause = cause


class NetworkOperationTimeout(OperationTimeoutError, NetworkTimeout):
    """``timeoutMS`` expired while talking to the server (connecting, writing or reading)."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        NetworkTimeout.__init__(self, message, error_labels=_labels_of(cause))
        self.cause = cause


def _timeout_reply(message: str, cause: BaseException | None) -> tuple[int | None, Mapping[str, Any]]:
    if isinstance(cause, OperationFailure) and cause.details is not None:
        return cause.code, cause.details
    labels = sorted(_labels_of(cause))
    reply: dict[str, Any] = {"ok": 0, "errmsg": message, "code": MAX_TIME_MS_EXPIRED}
    if labels:
        reply["errorLabels"] = labels
    return MAX_TIME_MS_EXPIRED, reply


class ExecutionOperationTimeout(OperationTimeoutError, ExecutionTimeout):
    """``timeoutMS`` expired on the server (``MaxTimeMSExpired``), or before a step could start (too little
    time left to send the command, or to run the next attempt). ``code`` is 50 unless the server's reply
    gave another."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        code, reply = _timeout_reply(message, cause)
        ExecutionTimeout.__init__(self, message, code, reply)
        for label in _labels_of(cause):  # labels the driver added to the cause are not in its reply
            self.add_error_label(label)
        self.cause = cause


class WriteConcernOperationTimeout(OperationTimeoutError, WTimeoutError):
    """``timeoutMS`` expired while the server waited for the write concern."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        code, reply = _timeout_reply(message, cause)
        WTimeoutError.__init__(self, message, code, reply)
        for label in _labels_of(cause):  # labels the driver added to the cause are not in its reply
            self.add_error_label(label)
        self.cause = cause


# The first entry whose error class the cause is an instance of names the timeout error to raise.
_TIMEOUT_CLASS_FOR_CAUSE: tuple[tuple[type[BaseException], type[OperationTimeoutError]], ...] = (
    (ServerSelectionTimeoutError, ServerSelectionOperationTimeout),
    (WaitQueueTimeoutError, ConnectionCheckoutOperationTimeout),
    (WriteConcernError, WriteConcernOperationTimeout),
    (OperationFailure, ExecutionOperationTimeout),
    (ConnectionFailure, NetworkOperationTimeout),
    (OSError, NetworkOperationTimeout),
    (TimeoutError, NetworkOperationTimeout),
)


def operation_timeout_error(message: str, cause: BaseException | None = None) -> OperationTimeoutError:
    """The :class:`OperationTimeoutError` for a timeout whose step failed with ``cause`` (``None``: time ran
    out between steps), of the subclass that matches the error PyMongo raises there."""
    for cause_class, error_class in _TIMEOUT_CLASS_FOR_CAUSE:
        if isinstance(cause, cause_class):
            return error_class(message, cause)
    return ExecutionOperationTimeout(message, cause)
