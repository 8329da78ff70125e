"""The names and attributes of operation and command spans, per the OpenTelemetry specification.

Pure functions of what the executor already holds (the command document, the connection's ids, the reply or
the error): no OpenTelemetry import, so they are tested without the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.errors import OperationFailure
from mongio.events.logs import document_text

__all__ = [
    "SYSTEM",
    "collection_of",
    "command_attributes",
    "cursor_id_of_reply",
    "lsid_text",
    "operation_attributes",
    "query_text",
    "span_summary",
    "status_code",
    "transport_of",
]

SYSTEM = "mongodb"
_ADMIN = "admin"
# What db.query.text leaves out of the command: session and cluster-time plumbing, never the query.
_NOT_QUERY_TEXT = frozenset({"lsid", "$db", "$clusterTime", "signature"})
# Commands whose collection is not the value of their first field.
_COLLECTION_FIELD = {"getMore": "collection"}


def collection_of(command_name: str, body: Mapping[str, Any], database: str) -> str | None:
    """The collection a command works on, or ``None`` for a command on the database itself
    (``listCollections: 1``) and for any command on ``admin``."""
    if database == _ADMIN:
        return None
    value = body.get(_COLLECTION_FIELD.get(command_name, command_name))
    return value if isinstance(value, str) and value else None


def span_summary(name: str, database: str, collection: str | None) -> str:
    """``name db.collection``, or ``name db`` without a collection: an operation span's name and
    ``db.operation.summary``, a command span's ``db.query.summary``."""
    if collection:
        return f"{name} {database}.{collection}"
    return f"{name} {database}"


def operation_attributes(operation_name: str, database: str, collection: str | None) -> dict[str, Any]:
    """An operation span's attributes (its name is their ``db.operation.summary``)."""
    attributes: dict[str, Any] = {
        "db.system.name": SYSTEM,
        "db.namespace": database,
        "db.operation.name": operation_name,
        "db.operation.summary": span_summary(operation_name, database, collection),
    }
    if collection:
        attributes["db.collection.name"] = collection
    return attributes


def transport_of(host: str) -> str:
    """``unix`` for a Unix domain socket path, else ``tcp``."""
    return "unix" if host.endswith(".sock") else "tcp"


def lsid_text(lsid: Any) -> str | None:
    """A logical session id (``{"id": <UUID binary>}``) as the UUID's canonical text, or ``None``."""
    if not isinstance(lsid, Mapping):
        return None
    identifier = lsid.get("id")
    if isinstance(identifier, bytes | bytearray) and len(identifier) == 16:
        hex_text = bytes(identifier).hex()
        return f"{hex_text[:8]}-{hex_text[8:12]}-{hex_text[12:16]}-{hex_text[16:20]}-{hex_text[20:]}"
    return None if identifier is None else str(identifier)


def command_attributes(
    command_name: str,
    database: str,
    body: Mapping[str, Any],
    address: tuple[str, int | None],
    driver_connection_id: int | None,
    server_connection_id: int | None,
) -> dict[str, Any]:
    """A command span's attributes known before it is sent (``db.query.text`` aside: see
    :func:`query_text`)."""
    collection = collection_of(command_name, body, database)
    host, port = address
    attributes: dict[str, Any] = {
        "db.system.name": SYSTEM,
        "db.namespace": database,
        "db.command.name": command_name,
        "db.query.summary": span_summary(command_name, database, collection),
        "server.address": host,
        "network.transport": transport_of(host),
    }
    if collection:
        attributes["db.collection.name"] = collection
    if port is not None:
        attributes["server.port"] = port
    if server_connection_id is not None:
        attributes["db.mongodb.server_connection_id"] = server_connection_id
    if driver_connection_id is not None:
        attributes["db.mongodb.driver_connection_id"] = driver_connection_id
    lsid = lsid_text(body.get("lsid"))
    if lsid is not None:
        attributes["db.mongodb.lsid"] = lsid
    txn_number = body.get("txnNumber")
    if isinstance(txn_number, int):
        attributes["db.mongodb.txn_number"] = int(txn_number)
    cursor_id = _cursor_used(command_name, body)
    if cursor_id:
        attributes["db.mongodb.cursor_id"] = cursor_id
    return attributes


def _cursor_used(command_name: str, body: Mapping[str, Any]) -> int | None:
    """The cursor a getMore continues or a killCursors of one cursor kills."""
    if command_name == "getMore":
        value = body.get("getMore")
    elif command_name == "killCursors":
        cursors = body.get("cursors")
        value = cursors[0] if isinstance(cursors, list) and len(cursors) == 1 else None
    else:
        return None
    return int(value) if isinstance(value, int) else None


def cursor_id_of_reply(reply: Mapping[str, Any]) -> int | None:
    """The id of the cursor a reply opened or kept open (``None`` when it holds none or an exhausted one)."""
    cursor = reply.get("cursor")
    if not isinstance(cursor, Mapping):
        return None
    value = cursor.get("id")
    return int(value) if isinstance(value, int) and value else None


def query_text(document: Mapping[str, Any], max_length: int) -> str:
    """``db.query.text``: the command as the started event shows it, without ``lsid``, ``$db``,
    ``$clusterTime`` and ``signature``, in relaxed Extended JSON cut to ``max_length`` characters (then
    followed by ``...``, as log messages cut documents)."""
    shown = {key: value for key, value in document.items() if key not in _NOT_QUERY_TEXT}
    return document_text(shown, max_length)


def status_code(error: BaseException) -> str | None:
    """``db.response.status_code``: the server's error code as text, or ``None`` for an error with no code
    (a network error, a timeout raised by the driver)."""
    if not isinstance(error, OperationFailure):
        return None
    code = error.code
    return None if code is None else str(code)
