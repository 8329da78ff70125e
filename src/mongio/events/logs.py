"""Log messages of the logging specification, through the standard :mod:`logging` module.

Each specification component logs under its own logger, ``mongio.<component>``; connection pool messages go
to ``mongio.connection`` at ``DEBUG`` level. Turn them on the usual way::

    logging.getLogger("mongio.connection").setLevel(logging.DEBUG)

A record's ``msg`` is a :class:`LogMessage`: formatted it reads as the specification's unstructured text,
and its ``fields`` hold the structured key-value pairs under the specification's names (``message``,
``serverHost``, ``serverPort``, ``driverConnectionId``, ``durationMS``, ...), for handlers that emit
structured logs. Nothing is built when the logger is disabled for ``DEBUG``.

Documents in log messages (commands, replies, server errors) are relaxed Extended JSON cut to the maximum
document length, followed by ``...`` when cut. The length counts characters (Unicode code points, so a cut
never splits one); it is 1000 unless the ``MONGODB_LOG_MAX_DOCUMENT_LENGTH`` environment variable holds a
positive integer, and a publisher given a length of its own uses that instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from mongio.errors import AutoReconnect, OperationFailure

__all__ = [
    "CONNECTION_LOGGER",
    "CONNECTION_LOGGER_NAME",
    "DEFAULT_MAX_DOCUMENT_LENGTH",
    "MAX_DOCUMENT_LENGTH_VARIABLE",
    "LogMessage",
    "document_text",
    "format_error",
    "max_document_length",
    "server_reply",
    "truncate",
]

CONNECTION_LOGGER_NAME = "mongio.connection"
CONNECTION_LOGGER = logging.getLogger(CONNECTION_LOGGER_NAME)
DEFAULT_MAX_DOCUMENT_LENGTH = 1000
MAX_DOCUMENT_LENGTH_VARIABLE = "MONGODB_LOG_MAX_DOCUMENT_LENGTH"
_ELLIPSIS = "..."


class LogMessage:
    """One specification log message: ``str()`` gives its text, ``fields`` its structured form."""

    __slots__ = ("component", "fields", "text")

    def __init__(self, component: str, fields: Mapping[str, Any], text: str) -> None:
        self.component = component
        self.fields: Mapping[str, Any] = fields
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"LogMessage({self.component!r}, {dict(self.fields)!r})"


def max_document_length() -> int:
    """The longest document text a log message shows: ``MONGODB_LOG_MAX_DOCUMENT_LENGTH`` when it holds a
    positive integer, else :data:`DEFAULT_MAX_DOCUMENT_LENGTH` (an unusable value is ignored, never raised).
    Read when a message is built, so a change to the variable applies to the next message."""
    value = os.environ.get(MAX_DOCUMENT_LENGTH_VARIABLE, "")
    try:
        length = int(value)
    except ValueError:
        return DEFAULT_MAX_DOCUMENT_LENGTH
    return length if length > 0 else DEFAULT_MAX_DOCUMENT_LENGTH


def truncate(text: str, limit: int | None = None) -> str:
    """``text`` cut to ``limit`` characters (default :func:`max_document_length`) with ``...`` appended when
    it was cut; the ellipsis does not count toward the limit. A Python string is a sequence of code points, so
    the cut never falls inside one."""
    if limit is None:
        limit = max_document_length()
    if len(text) <= limit:
        return text
    return text[:limit] + _ELLIPSIS


def document_text(document: Mapping[str, Any], limit: int | None = None) -> str:
    """``document`` as log messages show it: relaxed Extended JSON, non-ASCII text as is, cut by
    :func:`truncate`."""
    from mongio.bson import json_util

    try:
        text = json_util.dumps(document, json_options=json_util.RELAXED_JSON_OPTIONS, ensure_ascii=False)
    except Exception:  # a document the Extended JSON encoder cannot show must not break the operation
        text = repr(dict(document))
    return truncate(text, limit)


def server_reply(error: BaseException) -> Mapping[str, Any] | None:
    """The server's reply that ``error`` reports (a command's ``ok: 0`` reply), or ``None`` for an error the
    driver raised on its own (a network error, a timeout)."""
    if isinstance(error, OperationFailure | AutoReconnect):
        details = error.details
        if isinstance(details, Mapping) and details:
            return details
    return None


def format_error(error: BaseException, limit: int | None = None) -> str:
    """An error as log messages show it: its class and message, then the server's reply as document text
    when the error carries one (cut to the maximum document length, as any document in a log message)."""
    name = type(error).__name__
    reply = server_reply(error)
    if reply is None:
        text = str(error)
        return f"{name}: {text}" if text else name
    message = str(error.args[0]) if error.args else ""
    shown = document_text(reply, limit)
    if not message or message == reply.get("errmsg"):
        return f"{name}: {shown}"  # the reply says it all
    return f"{name}: {message}, full error: {shown}"
