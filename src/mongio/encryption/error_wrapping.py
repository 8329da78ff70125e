"""How the failures of an encryption step reach the application: as :class:`~mongio.errors.EncryptionError`
(the client-side encryption specification asks that they be told apart from the command's own errors), except
BSON errors (the value cannot be encoded) and timeouts, which keep their own class."""

from __future__ import annotations

from types import TracebackType

from mongio.bson.errors import BSONError
from mongio.errors import EncryptionError, MongioError

__all__ = ["as_encryption_errors"]


class _AsEncryptionErrors:
    """A class rather than a generator context manager: it wraps every value and command encrypted."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, EncryptionError | BSONError):
            return
        if isinstance(exc, MongioError) and exc.timeout:
            return
        raise EncryptionError(exc) from exc


as_encryption_errors = _AsEncryptionErrors()
"""``with as_encryption_errors:`` around an encryption step."""
