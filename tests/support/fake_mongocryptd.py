"""A minimal stand-in for mongocryptd on loopback, for the driver side of automatic encryption: it answers
``hello`` like a standalone and each marking command with libmongocrypt's intent-to-encrypt markings
(BSON binary subtype 6, type byte 0, then ``{"a": algorithm, "ki": key id, "v": value}``) for the
top-level fields the command's ``jsonSchema`` names with ``encrypt``: the documents of an ``insert`` and the
equality values of a ``find`` filter. Every other command comes back unchanged. It records the commands it
was asked to mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongio.bson import encode
from mongio.bson.binary import Binary
from tests.support.loopback_peer import LoopbackPeer, Request, default_reply

__all__ = ["FakeMongocryptd", "marking"]

_ALGORITHMS = {
    "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic": 1,
    "AEAD_AES_256_CBC_HMAC_SHA_512-Random": 2,
}
# What mongocryptd does not echo: the schema it was given, and the database the message named.
_NOT_ECHOED = ("jsonSchema", "isRemoteSchema", "$db")


def marking(value: Any, algorithm: str, key_id: Binary) -> Binary:
    """The intent-to-encrypt marking of ``value``."""
    body = encode({"a": _ALGORITHMS[algorithm], "ki": key_id, "v": value})
    return Binary(b"\x00" + bytes(body), 6)


def _encrypted_fields(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    properties = schema.get("properties") or {}
    return {name: spec["encrypt"] for name, spec in properties.items() if "encrypt" in spec}


def _mark_document(
    document: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], bool]:
    marked: dict[str, Any] = {}
    any_marked = False
    for name, value in document.items():
        spec = fields.get(name)
        if spec is not None and not isinstance(value, Mapping):
            marked[name] = marking(value, spec["algorithm"], spec["keyId"][0])
            any_marked = True
        else:
            marked[name] = value
    return marked, any_marked


def mark(command: Mapping[str, Any]) -> dict[str, Any]:
    """mongocryptd's answer to a marking command."""
    schema = command.get("jsonSchema") or {}
    fields = _encrypted_fields(schema)
    result = {name: value for name, value in command.items() if name not in _NOT_ECHOED}
    placeholders = False
    name = next(iter(command))
    if name == "insert":
        documents = []
        for document in command.get("documents", ()):
            marked, any_marked = _mark_document(document, fields)
            documents.append(marked)
            placeholders = placeholders or any_marked
        result["documents"] = documents
    elif name == "find" and isinstance(command.get("filter"), Mapping):
        result["filter"], placeholders = _mark_document(command["filter"], fields)
    return {
        "ok": 1,
        "result": result,
        "hasEncryptedPlaceholders": placeholders,
        "schemaRequiresEncryption": bool(fields),
    }


class FakeMongocryptd(LoopbackPeer):
    """The stand-in: ``async with FakeMongocryptd() as analyser:``, then ``mongocryptd_uri=analyser.uri``;
    ``marked`` lists the commands it marked (as it received them)."""

    def __init__(self) -> None:
        super().__init__(self._analyse)
        self.marked: list[dict[str, Any]] = []

    async def __aenter__(self) -> FakeMongocryptd:
        await super().__aenter__()
        return self

    def _analyse(self, request: Request) -> Mapping[str, Any]:
        if request.command_name.lower() in ("hello", "ismaster"):
            reply = default_reply(request, self)
            reply["iscryptd"] = True
            return reply
        self.marked.append(request.document)
        return mark(request.document)
