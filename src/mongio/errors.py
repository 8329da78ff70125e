"""The driver's error hierarchy. Names follow PyMongo's ``pymongo.errors`` so ``except`` clauses port as they are.

Every error can carry server error labels (``RetryableWriteError``, ``TransientTransactionError``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mongio.bson.errors import (
    BSONError,
    InvalidBSON,
    InvalidDocument,
    InvalidId,
    InvalidStringData,
)

__all__ = [
    "AuthenticationFailed",
    "AutoReconnect",
    "BSONError",
    "BulkWriteError",
    "ClientClosedError",
    "CollectionInvalid",
    "ConfigurationError",
    "ConnectionFailure",
    "CursorNotFound",
    "DocumentTooLarge",
    "DuplicateKeyError",
    "ExecutionTimeout",
    "InvalidBSON",
    "InvalidDocument",
    "InvalidId",
    "InvalidName",
    "InvalidOperation",
    "InvalidStringData",
    "InvalidURI",
    "MongioError",
    "NetworkTimeout",
    "NotPrimaryError",
    "OperationFailure",
    "OperationTimeoutError",
    "PoolClearedError",
    "PoolClosedError",
    "ProtocolError",
    "PyMongoError",
    "ServerSelectionTimeoutError",
    "WTimeoutError",
    "WaitQueueTimeoutError",
    "WriteConcernError",
    "WriteError",
]


# Server and driver error labels (the strings the specifications give).
SYSTEM_OVERLOADED_ERROR = "SystemOverloadedError"
RETRYABLE_ERROR = "RetryableError"
OVERLOAD_LABELS = (SYSTEM_OVERLOADED_ERROR, RETRYABLE_ERROR)


class MongioError(Exception):
    """Base of every error mongio raises (other than BSON codec errors)."""

    def __init__(self, message: str = "", error_labels: Iterable[str] | None = None) -> None:
        # Not super(): in the PyMongo-typed mode PyMongo's error classes follow this one in the MRO
        # (mongio.pymongo_types), and their constructors must not run over the state set here.
        Exception.__init__(self, message)
        self._message = message
        self._error_labels: set[str] = set(error_labels or ())

    def has_error_label(self, label: str) -> bool:
        return label in self._error_labels

    def _add_error_label(self, label: str) -> None:
        self._error_labels.add(label)

    def _remove_error_label(self, label: str) -> None:
        self._error_labels.discard(label)

    @property
    def error_labels(self) -> frozenset[str]:
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


class InvalidURI(ConfigurationError):
    """A connection string that cannot be parsed."""


class InvalidName(MongioError):
    """A bad database or collection name."""


class CollectionInvalid(MongioError):
    """A collection cannot be created (it exists already) or failed validation."""


class InvalidOperation(MongioError):
    """An operation that is not allowed in the current state (e.g. a closed client, an ended session)."""


class ClientClosedError(InvalidOperation):
    """The client was closed; make a new one."""


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
        return True


class NotPrimaryError(AutoReconnect):
    """The server is no longer primary (or is recovering)."""


class ServerSelectionTimeoutError(AutoReconnect):
    """No suitable server was found within ``serverSelectionTimeoutMS``."""

    @property
    def timeout(self) -> bool:
        return True


class WaitQueueTimeoutError(ConnectionFailure):
    """No connection could be checked out of a pool within ``waitQueueTimeoutMS``."""

    @property
    def timeout(self) -> bool:
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
        return self.__code

    @property
    def details(self) -> Mapping[str, Any] | None:
        """The server's whole reply document."""
        return self.__details

    @property
    def code_name(self) -> str | None:
        return None if self.__details is None else self.__details.get("codeName")

    def __str__(self) -> str:
        details = f", full error: {self.__details}" if self.__details else ""
        return f"{self._message}, code: {self.__code}{details}"


class ExecutionTimeout(OperationFailure):
    """The server stopped the operation at its ``maxTimeMS``."""

    @property
    def timeout(self) -> bool:
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


class OperationTimeoutError(MongioError):
    """The operation's ``timeoutMS`` expired before it could finish.

    ``cause`` is the error of the step that was running when time ran out (server selection, a socket read,
    the server's ``MaxTimeMSExpired``), when there was one; its text is part of this error's message and its
    error labels are copied. ``timeout`` is always true, as on every other timeout error.
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        labels = getattr(cause, "error_labels", None) or ()
        super().__init__(message, labels)
        self.cause = cause

    @property
    def timeout(self) -> bool:
        return True
