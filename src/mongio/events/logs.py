"""Log messages of the logging specification, through the standard :mod:`logging` module.

Each specification component logs under its own logger, ``mongio.<component>``; connection pool messages go
to ``mongio.connection`` at ``DEBUG`` level. Turn them on the usual way::

    logging.getLogger("mongio.connection").setLevel(logging.DEBUG)

A record's ``msg`` is a :class:`LogMessage`: formatted it reads as the specification's unstructured text,
and its ``fields`` hold the structured key-value pairs under the specification's names (``message``,
``serverHost``, ``serverPort``, ``driverConnectionId``, ``durationMS``, ...), for handlers that emit
structured logs. Nothing is built when the logger is disabled for ``DEBUG``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CONNECTION_LOGGER",
    "CONNECTION_LOGGER_NAME",
    "LogMessage",
    "format_error",
]

CONNECTION_LOGGER_NAME = "mongio.connection"
CONNECTION_LOGGER = logging.getLogger(CONNECTION_LOGGER_NAME)


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


def format_error(error: BaseException) -> str:
    """An error as log messages show it: its class and its message (which carries any server reply)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
