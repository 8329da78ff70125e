"""A stand-in for mongocryptd: a query analyser of the tests' own, on loopback, that marks the fields a JSON
schema encrypts (client-side field level encryption, the ``encrypt`` keyword).

libmongocrypt cannot tell which values of a command to encrypt: it sends the command, with the collection's
JSON schema appended (``jsonSchema``, ``isRemoteSchema``), to mongocryptd or crypt_shared, and gets back
``{result: <the command with every value to encrypt replaced by a marking>, hasEncryptedPlaceholders,
schemaRequiresEncryption}``. Neither exists on these machines, so this module answers those requests itself.

A marking is BSON binary subtype 6 whose first byte is 0 (the "intent-to-encrypt" marking of the BSON binary
encrypted specification) followed by the BSON document ``{a: 1 (deterministic) or 2 (random), ki: <key id
UUID> or ka: <key alt name string>, v: <the value>}``: the fields libmongocrypt's marking parser accepts, and
no others.

What it analyses (:func:`analyse`): ``insert`` documents; ``find``, ``count``, ``distinct``, ``delete``,
``aggregate`` (``$match`` stages) and ``findAndModify`` filters, with equality (a literal, ``$eq``, ``$ne``,
``$in``, ``$nin``) on deterministic fields and ``$exists`` on any; ``update`` and ``findAndModify`` updates
(replacement documents, ``$set``, ``$setOnInsert``, ``$unset``); ``explain`` of those; ``create``/``collMod``
validators and ``createIndexes`` partial filter expressions (which must not name encrypted fields). Schemas
nest through ``properties`` (parents typed ``object``), inherit ``keyId``/``algorithm`` from the nearest
``encryptMetadata``, and give ``keyId`` as an array of one UUID or as a JSON pointer into the document (its
value becomes the key alt name).

Errors follow what mongocryptd answers where the specification's test files quote it (``Invalid schema
containing the 'encrypt' keyword.``, ``Cannot encrypt element of type: ...``, ``Invalid match expression
operator on encrypted field ...``). What the stand-in cannot analyse (Queryable Encryption's
``encryptionInformation``, ``patternProperties``, pipeline stages other than ``$match``, ``$expr``, ...)
is answered with an error of code :data:`UNSUPPORTED_CODE` whose message starts with
:data:`UNSUPPORTED_PREFIX` and names the construct, so a test that needs it shows why at once.

Serving: :class:`QueryAnalyser` is the wire server (``async with``; an
:class:`~tests.support.backends.AsyncioServer`, served from an asyncio loop in a thread when the test runs on
trio), answering ``hello``/``isMaster`` as mongocryptd does (``iscryptd: true``); :class:`AnalyserThread` runs one on an event loop of its own thread,
for a process whose tests each run their own loop (the spec runner under pytest).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_runner.loop_thread import LoopThread

from mongio.bson import encode
from mongio.bson.binary import Binary
from mongio.bson.timestamp import Timestamp
from tests.support.backends import AsyncioServer
from tests.support.loopback_peer import HandlerResult, LoopbackPeer, Request

__all__ = [
    "DETERMINISTIC",
    "RANDOM",
    "UNSUPPORTED_CODE",
    "UNSUPPORTED_PREFIX",
    "AnalyserThread",
    "AnalysisError",
    "EncryptedField",
    "ObjectSchema",
    "QueryAnalyser",
    "UnsupportedConstruct",
    "analyse",
    "bson_type_name",
    "marking",
    "parse_schema",
]

DETERMINISTIC = "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic"
RANDOM = "AEAD_AES_256_CBC_HMAC_SHA_512-Random"
_ALGORITHM_NUMBERS = {DETERMINISTIC: 1, RANDOM: 2}
_FLE1_MARKING = 0  # the first byte of an intent-to-encrypt marking
_ENCRYPTED_SUBTYPE = 6
_UUID_SUBTYPE = 4

ANALYSIS_ERROR_CODE = 2
"""The code of an error in what the command or schema asks (BadValue)."""
UNSUPPORTED_CODE = 115
"""The code of a construct the stand-in cannot analyse (CommandNotSupported)."""
UNSUPPORTED_PREFIX = "the stand-in query analyser cannot analyse"

# BSON element type bytes -> the type aliases of $type / bsonType.
_TYPE_NAMES = {
    0x01: "double",
    0x02: "string",
    0x03: "object",
    0x04: "array",
    0x05: "binData",
    0x06: "undefined",
    0x07: "objectId",
    0x08: "bool",
    0x09: "date",
    0x0A: "null",
    0x0B: "regex",
    0x0C: "dbPointer",
    0x0D: "javascript",
    0x0E: "symbol",
    0x0F: "javascriptWithScope",
    0x10: "int",
    0x11: "timestamp",
    0x12: "long",
    0x13: "decimal",
    0x7F: "maxKey",
    0xFF: "minKey",
}
_NEVER_ENCRYPTED = frozenset({"minKey", "maxKey", "undefined", "null"})
_NOT_DETERMINISTIC = frozenset({"double", "decimal", "bool", "object", "array", "javascriptWithScope"})

# Keywords that describe a schema's shape for encryption; a local schema (schemaMap) may hold only these,
# since the server never checks a local schema's validation keywords.
_STRUCTURAL_KEYWORDS = frozenset({"properties", "bsonType", "type", "encrypt", "encryptMetadata", "title", "description"})
# Keywords under which an encrypted field cannot be (arrays, alternatives).
_INVALID_PARENTS = frozenset({"items", "additionalItems", "anyOf", "allOf", "oneOf", "not", "dependencies"})
# Keywords mongocryptd follows but the stand-in does not.
_UNFOLLOWED_PARENTS = frozenset({"patternProperties", "additionalProperties"})
_INVALID_SCHEMA = "Invalid schema containing the 'encrypt' keyword."


class AnalysisError(Exception):
    """What the analyser answers with ``ok: 0``: the message names the problem."""

    code = ANALYSIS_ERROR_CODE
    code_name = "BadValue"

    def reply(self) -> dict[str, Any]:
        return {"ok": 0, "errmsg": str(self), "code": self.code, "codeName": self.code_name}


class UnsupportedConstruct(AnalysisError):
    """A construct mongocryptd would analyse and the stand-in does not."""

    code = UNSUPPORTED_CODE
    code_name = "CommandNotSupported"

    def __init__(self, construct: str) -> None:
        super().__init__(f"{UNSUPPORTED_PREFIX} {construct}")
        self.construct = construct


# --- schemas ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncryptedField:
    """One field the schema encrypts: how, and with which key (a UUID, or a JSON pointer to a key alt name)."""

    path: str
    algorithm: str
    key_id: Binary | None = None
    key_pointer: str | None = None
    bson_types: tuple[str, ...] = ()

    @property
    def deterministic(self) -> bool:
        return self.algorithm == DETERMINISTIC


@dataclass(frozen=True)
class ObjectSchema:
    """An object level of a schema: its fields that are encrypted or hold encrypted fields below them."""

    path: str = ""
    children: Mapping[str, ObjectSchema | EncryptedField] = field(default_factory=dict)

    @property
    def requires_encryption(self) -> bool:
        return bool(self.children)

    def lookup(self, dotted: str) -> ObjectSchema | EncryptedField | None:
        """What the schema says of a dotted path: an encrypted field, an object holding some, or None."""
        node: ObjectSchema | EncryptedField = self
        for part in dotted.split("."):
            if isinstance(node, EncryptedField):
                raise AnalysisError(f"Invalid operation on path below the encrypted field '{node.path}': '{dotted}'")
            child = node.children.get(part)
            if child is None:
                return None
            node = child
        return node

    def encrypted_fields(self) -> Iterator[EncryptedField]:
        for child in self.children.values():
            if isinstance(child, EncryptedField):
                yield child
            else:
                yield from child.encrypted_fields()


@dataclass(frozen=True)
class _Metadata:
    """``keyId`` and ``algorithm`` inherited from the nearest ``encryptMetadata``."""

    key_id: Any = None
    algorithm: Any = None

    def under(self, schema: Mapping[str, Any]) -> _Metadata:
        found = schema.get("encryptMetadata")
        if found is None:
            return self
        if not isinstance(found, Mapping):
            raise AnalysisError("'encryptMetadata' must be a document")
        unknown = set(found) - {"keyId", "algorithm"}
        if unknown:
            raise AnalysisError(f"'encryptMetadata' has unknown field(s) {sorted(unknown)}")
        return _Metadata(found.get("keyId", self.key_id), found.get("algorithm", self.algorithm))


def _contains_encrypt(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "encrypt" in value or any(_contains_encrypt(child) for child in value.values())
    if isinstance(value, list):
        return any(_contains_encrypt(child) for child in value)
    return False


def _declared_types(schema: Mapping[str, Any]) -> tuple[str, ...] | None:
    for keyword in ("bsonType", "type"):
        if keyword in schema:
            value = schema[keyword]
            return tuple(value) if isinstance(value, list) else (str(value),)
    return None


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def parse_schema(schema: Mapping[str, Any], *, remote: bool) -> ObjectSchema:
    """The encrypted fields of a collection's JSON schema; ``remote``: the server's own (its validator), else a
    local schema (``schemaMap``), which may hold no validation keywords."""
    declared = _declared_types(schema)
    if declared is not None and declared != ("object",) and _contains_encrypt(schema):
        raise AnalysisError(_INVALID_SCHEMA)
    return _object_level(schema, "", _Metadata(), remote)


def _object_level(schema: Mapping[str, Any], path: str, inherited: _Metadata, remote: bool) -> ObjectSchema:
    metadata = inherited.under(schema)
    _check_keywords(schema, path, remote)
    if "encrypt" in schema:  # at the top level: the document itself
        raise AnalysisError(_INVALID_SCHEMA)
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise AnalysisError(f"'properties' at '{path or '<root>'}' must be a document")
    children: dict[str, ObjectSchema | EncryptedField] = {}
    for name, child in properties.items():
        if not isinstance(child, Mapping):
            raise AnalysisError(f"the schema of '{_joined(path, name)}' must be a document")
        child_path = _joined(path, name)
        if "encrypt" in child:
            if child_path == "_id":
                raise AnalysisError(_INVALID_SCHEMA)
            children[name] = _encrypted_field(child, child_path, metadata.under(child))
        elif _contains_encrypt(child):
            if _declared_types(child) != ("object",):
                raise AnalysisError(_INVALID_SCHEMA)
            children[name] = _object_level(child, child_path, metadata, remote)
    return ObjectSchema(path, children)


def _check_keywords(schema: Mapping[str, Any], path: str, remote: bool) -> None:
    for keyword, value in schema.items():
        if keyword in _STRUCTURAL_KEYWORDS:
            continue
        if keyword in _INVALID_PARENTS and _contains_encrypt(value):
            raise AnalysisError(_INVALID_SCHEMA)
        if keyword in _UNFOLLOWED_PARENTS and _contains_encrypt(value):
            raise UnsupportedConstruct(f"'encrypt' under '{keyword}' (at '{path or '<root>'}')")
        if not remote:
            raise AnalysisError(f"JSON schema keyword '{keyword}' is only allowed with a remote schema")


def _encrypted_field(schema: Mapping[str, Any], path: str, metadata: _Metadata) -> EncryptedField:
    siblings = set(schema) - {"encrypt", "title", "description"}
    if siblings:
        raise AnalysisError(f"'encrypt' cannot be used in conjunction with '{sorted(siblings)[0]}'")
    spec = schema["encrypt"]
    if not isinstance(spec, Mapping):
        raise AnalysisError(f"'encrypt' at '{path}' must be a document")
    unknown = set(spec) - {"keyId", "algorithm", "bsonType"}
    if unknown:
        raise AnalysisError(f"'encrypt' at '{path}' has unknown field(s) {sorted(unknown)}")
    algorithm = spec.get("algorithm", metadata.algorithm)
    if algorithm not in _ALGORITHM_NUMBERS:
        raise AnalysisError(f"'encrypt' at '{path}' needs an algorithm of {sorted(_ALGORITHM_NUMBERS)}, got {algorithm!r}")
    bson_types = _bson_types(spec.get("bsonType"), path)
    for type_name in bson_types:
        _check_type_allowed(type_name, algorithm)
    key_id = spec.get("keyId", metadata.key_id)
    if isinstance(key_id, str):
        if not key_id.startswith("/"):
            raise AnalysisError(f"the keyId of '{path}' must be an array of one UUID or a JSON pointer, got {key_id!r}")
        if algorithm == DETERMINISTIC:
            raise AnalysisError(
                f"the deterministically encrypted field '{path}' cannot take its keyId from a JSON pointer"
            )
        return EncryptedField(path, algorithm, key_pointer=key_id, bson_types=bson_types)
    if (
        not isinstance(key_id, list)
        or len(key_id) != 1
        or not isinstance(key_id[0], Binary)
        or key_id[0].subtype != _UUID_SUBTYPE
    ):
        raise AnalysisError(f"the keyId of '{path}' must be an array of one UUID or a JSON pointer, got {key_id!r}")
    return EncryptedField(path, algorithm, key_id=key_id[0], bson_types=bson_types)


def _bson_types(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    names = tuple(value) if isinstance(value, list) else (value,)
    for name in names:
        if name not in _TYPE_NAMES.values():
            raise AnalysisError(f"the bsonType {name!r} of '{path}' is not a BSON type")
    return tuple(str(name) for name in names)


def _check_type_allowed(type_name: str, algorithm: str) -> None:
    if type_name in _NEVER_ENCRYPTED:
        raise AnalysisError(f"Cannot encrypt element of type: {type_name}")
    if algorithm == DETERMINISTIC and type_name in _NOT_DETERMINISTIC:
        raise AnalysisError(f"Cannot use deterministic encryption for element of type: {type_name}")


# --- markings --------------------------------------------------------------------------------------------


def bson_type_name(value: Any) -> str:
    """The ``$type`` alias of the BSON type ``value`` encodes to (``int`` and ``long`` told apart)."""
    return _TYPE_NAMES[encode({"v": value})[4]]


def marking(value: Any, algorithm: str, *, key_id: Binary | None = None, key_alt_name: str | None = None) -> Binary:
    """An intent-to-encrypt marking of ``value`` (exactly one of ``key_id``, ``key_alt_name``)."""
    if (key_id is None) == (key_alt_name is None):
        raise ValueError("a marking names its key by id or by alt name, exactly one of them")
    body: dict[str, Any] = {"a": _ALGORITHM_NUMBERS[algorithm]}
    if key_id is not None:
        body["ki"] = key_id
    else:
        body["ka"] = key_alt_name
    body["v"] = value
    return Binary(bytes([_FLE1_MARKING]) + bytes(encode(body)), _ENCRYPTED_SUBTYPE)


class _Marker:
    """Marks the values of one command, counting what it marked."""

    def __init__(self, schema: ObjectSchema) -> None:
        self.schema = schema
        self.marked = 0

    def value(self, field_: EncryptedField, value: Any, document: Mapping[str, Any] | None) -> Binary:
        """The marking of ``value`` for ``field_``; ``document`` (the whole document being written) resolves a
        JSON pointer keyId, and is None where there is no whole document (a query, an update operator)."""
        type_name = bson_type_name(value)
        if field_.bson_types and type_name not in field_.bson_types:
            wanted = ", ".join(field_.bson_types)
            raise AnalysisError(
                f"Cannot encrypt element of type {type_name} because schema requires that type is one of: [ {wanted} ]"
            )
        _check_type_allowed(type_name, field_.algorithm)
        self.marked += 1
        if field_.key_id is not None:
            return marking(value, field_.algorithm, key_id=field_.key_id)
        assert field_.key_pointer is not None
        if document is None:
            raise UnsupportedConstruct(
                f"a value for '{field_.path}' outside a whole document: its keyId is a JSON pointer into one"
            )
        return marking(value, field_.algorithm, key_alt_name=_key_alt_name(document, field_))

    # -- documents (insert, replacement, $set values) --

    def document(self, document: Mapping[str, Any], *, root: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``document`` with every field the schema encrypts marked."""
        return self._object(document, self.schema, root if root is not None else document, top=True)

    def _object(
        self, document: Mapping[str, Any], schema: ObjectSchema, root: Mapping[str, Any] | None, *, top: bool = False
    ) -> dict[str, Any]:
        marked: dict[str, Any] = {}
        for name, value in document.items():
            node = schema.children.get(name)
            if isinstance(node, EncryptedField):
                if top and isinstance(value, Timestamp) and value.time == 0 and value.inc == 0:
                    raise AnalysisError(
                        "A command that inserts cannot supply Timestamp(0, 0) for an encrypted top-level field "
                        f"at path: '{node.path}'"
                    )
                marked[name] = self.value(node, value, root)
            elif isinstance(node, ObjectSchema) and isinstance(value, Mapping):
                marked[name] = self._object(value, node, root)
            elif isinstance(node, ObjectSchema) and isinstance(value, list):
                raise UnsupportedConstruct(f"an array at '{node.path}', where the schema has encrypted fields below")
            else:
                marked[name] = value
        return marked

    # -- filters --

    def filter(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """A match expression with the values compared to deterministic fields marked."""
        marked: dict[str, Any] = {}
        for key, value in query.items():
            if key in ("$and", "$or", "$nor"):
                if not isinstance(value, list):
                    raise AnalysisError(f"{key} must be an array")
                marked[key] = [self.filter(item) for item in value]
            elif key in ("$text", "$where"):
                raise AnalysisError(f"Unsupported match expression operator for encryption: {key}")
            elif key == "$comment":
                marked[key] = value
            elif key.startswith("$"):
                raise UnsupportedConstruct(f"the top-level match expression {key}")
            else:
                marked[key] = self._predicate(key, value)
        return marked

    def _predicate(self, path: str, value: Any) -> Any:
        node = self.schema.lookup(path)
        if node is None:
            return value
        if isinstance(node, ObjectSchema):
            raise UnsupportedConstruct(f"a comparison to '{path}', which holds encrypted fields")
        if isinstance(value, Mapping) and value and all(str(key).startswith("$") for key in value):
            return {operator: self._operator(node, operator, argument) for operator, argument in value.items()}
        return {"$eq": self._operator(node, "$eq", value)}

    def _operator(self, node: EncryptedField, operator: str, argument: Any) -> Any:
        if operator in ("$eq", "$ne"):
            if argument is None:
                raise AnalysisError(f"Illegal equality to null predicate for encrypted field: '{node.path}'")
            return self._equality(node, argument)
        if operator in ("$in", "$nin"):
            if not isinstance(argument, list):
                raise AnalysisError(f"{operator} needs an array")
            if any(item is None for item in argument):
                raise AnalysisError(f"Illegal equality to null inside $in against an encrypted field: '{node.path}'")
            return [self._equality(node, item) for item in argument]
        if operator == "$exists":
            return argument
        raise AnalysisError(f"Invalid match expression operator on encrypted field '{node.path}': {operator}")

    def _equality(self, node: EncryptedField, value: Any) -> Binary:
        if not node.deterministic:
            raise AnalysisError(
                f"Cannot query on fields encrypted with the randomized encryption algorithm: '{node.path}'"
            )
        return self.value(node, value, None)

    def refuse_encrypted_names(self, expression: Mapping[str, Any], what: str) -> None:
        """A validator or partial filter expression: naming an encrypted field at all is an error."""
        for key, value in expression.items():
            if key in ("$and", "$or", "$nor") and isinstance(value, list):
                for item in value:
                    if isinstance(item, Mapping):
                        self.refuse_encrypted_names(item, what)
            elif key == "$jsonSchema":
                continue  # the schema itself (a create's remote schema)
            elif key.startswith("$"):
                raise UnsupportedConstruct(f"{key} in a {what}")
            elif self.schema.lookup(key) is not None:
                raise AnalysisError(f"Comparison to encrypted fields not supported in a {what}: '{key}'")

    def refuse_encrypted_sort(self, sort: Any) -> None:
        for key in sort or {}:
            if self.schema.lookup(str(key)) is not None:
                raise UnsupportedConstruct(f"a sort on '{key}', which is encrypted or holds encrypted fields")

    # -- updates --

    def update(self, update: Any) -> Any:
        if isinstance(update, list):
            raise UnsupportedConstruct("an update pipeline")
        if not isinstance(update, Mapping):
            raise AnalysisError("an update must be a document or a pipeline")
        if not any(str(key).startswith("$") for key in update):
            return self.document(update)  # a replacement
        return {operator: self._update_operator(operator, fields) for operator, fields in update.items()}

    def _update_operator(self, operator: str, fields: Any) -> Any:
        if not isinstance(fields, Mapping):
            raise AnalysisError(f"{operator} needs a document")
        if operator in ("$set", "$setOnInsert"):
            return {path: self._set_value(path, value) for path, value in fields.items()}
        touched = [path for path in fields if self._touches_encrypted(path)]
        if not touched:
            return fields
        if operator == "$unset":
            return fields
        refusals = {
            "$inc": "$inc and $mul not allowed on encrypted values",
            "$mul": "$inc and $mul not allowed on encrypted values",
            "$max": "$max and $min not allowed on encrypted values",
            "$min": "$max and $min not allowed on encrypted values",
        }
        if operator in refusals:
            raise AnalysisError(refusals[operator])
        if operator in ("$currentDate", "$pop", "$pull", "$pullAll", "$push", "$addToSet"):
            raise AnalysisError(f"{operator} not allowed on encrypted values")
        raise UnsupportedConstruct(f"the update operator {operator} on '{touched[0]}'")

    def _touches_encrypted(self, path: str) -> bool:
        try:
            return self.schema.lookup(_without_positional(path)) is not None
        except AnalysisError:
            return True  # a path below an encrypted field

    def _set_value(self, path: str, value: Any) -> Any:
        node: ObjectSchema | EncryptedField = self.schema
        for part in path.split("."):
            if isinstance(node, EncryptedField):
                if part == "$":
                    raise AnalysisError("Cannot encrypt fields below '$' positional update operator")
                if part.startswith("$["):
                    raise AnalysisError("Array update operations not allowed on encrypted values")
                raise AnalysisError(f"Invalid operation on path below the encrypted field '{node.path}': '{path}'")
            child = node.children.get(part)
            if child is None:
                return value  # a field the schema does not encrypt
            node = child
        if isinstance(node, EncryptedField):
            if node.key_pointer is not None:
                raise UnsupportedConstruct(f"a {bson_type_name(value)} set on '{path}', whose keyId is a JSON pointer")
            return self.value(node, value, None)
        if not isinstance(value, Mapping):
            raise UnsupportedConstruct(f"setting '{path}', which holds encrypted fields, to a {bson_type_name(value)}")
        return self._object(value, node, None)


def _without_positional(path: str) -> str:
    return ".".join(part for part in path.split(".") if part != "$" and not part.startswith("$["))


def _key_alt_name(document: Mapping[str, Any], field_: EncryptedField) -> str:
    assert field_.key_pointer is not None
    value: Any = document
    for token in field_.key_pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(value, Mapping) or token not in value:
            raise AnalysisError(
                f"the keyId JSON pointer {field_.key_pointer!r} of '{field_.path}' points to no field of the document"
            )
        value = value[token]
    if not isinstance(value, str):
        raise AnalysisError(
            f"the keyId JSON pointer {field_.key_pointer!r} of '{field_.path}' must point to a string, "
            f"not a {bson_type_name(value)}"
        )
    return value


# --- commands --------------------------------------------------------------------------------------------

_SCHEMA_FIELDS = ("jsonSchema", "isRemoteSchema")
_TRANSPORT_FIELDS = ("$db",)


def analyse(command: Mapping[str, Any]) -> dict[str, Any]:
    """mongocryptd's answer to one command libmongocrypt sent (with its ``jsonSchema``/``isRemoteSchema``):
    ``{ok: 1, result, hasEncryptedPlaceholders, schemaRequiresEncryption}``. Raises :class:`AnalysisError`."""
    if "encryptionInformation" in command or _nested_encryption_information(command):
        raise UnsupportedConstruct("Queryable Encryption (encryptionInformation): it marks JSON schemas only")
    if "csfleEncryptionSchemas" in command:
        raise UnsupportedConstruct("several collections' schemas (csfleEncryptionSchemas)")
    if "jsonSchema" not in command:
        raise AnalysisError("the command carries no jsonSchema to analyse it with")
    raw_schema = command["jsonSchema"]
    if not isinstance(raw_schema, Mapping):
        raise AnalysisError("jsonSchema must be a document")
    schema = parse_schema(raw_schema, remote=bool(command.get("isRemoteSchema", False)))
    stripped = {key: value for key, value in command.items() if key not in _SCHEMA_FIELDS + _TRANSPORT_FIELDS}
    marker = _Marker(schema)
    result = _mark_command(marker, stripped) if schema.requires_encryption else stripped
    return {
        "ok": 1,
        "result": result,
        "hasEncryptedPlaceholders": marker.marked > 0,
        "schemaRequiresEncryption": schema.requires_encryption,
    }


def _nested_encryption_information(command: Mapping[str, Any]) -> bool:
    """Queryable Encryption's schema where it nests: in an explained command, or in each namespace of a client
    ``bulkWrite`` (``nsInfo``)."""
    explained = command.get("explain")
    if isinstance(explained, Mapping) and "encryptionInformation" in explained:
        return True
    namespaces = command.get("nsInfo")
    return isinstance(namespaces, Sequence) and any(
        isinstance(namespace, Mapping) and "encryptionInformation" in namespace for namespace in namespaces
    )


def _mark_command(marker: _Marker, command: Mapping[str, Any]) -> dict[str, Any]:
    name = next(iter(command), "")
    handler = _COMMANDS.get(name)
    if handler is None:
        raise UnsupportedConstruct(f"the command {name!r}")
    return handler(marker, dict(command))


def _insert(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    command["documents"] = [marker.document(document) for document in command.get("documents") or ()]
    return command


def _find(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    if "filter" in command:
        command["filter"] = marker.filter(command["filter"])
    marker.refuse_encrypted_sort(command.get("sort"))
    return command


def _count(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    if "query" in command:
        command["query"] = marker.filter(command["query"])
    return command


def _distinct(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    node = marker.schema.lookup(str(command.get("key", "")))
    if isinstance(node, EncryptedField) and node.key_pointer is not None:
        raise AnalysisError("The distinct key is not allowed to be marked for encryption with a non-UUID keyId")
    return _count(marker, command)


def _delete(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    command["deletes"] = [
        {**statement, "q": marker.filter(statement.get("q") or {})} for statement in command.get("deletes") or ()
    ]
    return command


def _update(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    statements = []
    for statement in command.get("updates") or ():
        marked = dict(statement)
        marked["q"] = marker.filter(statement.get("q") or {})
        marked["u"] = marker.update(statement.get("u"))
        statements.append(marked)
    command["updates"] = statements
    return command


def _find_and_modify(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    if "query" in command:
        command["query"] = marker.filter(command["query"])
    if "update" in command:
        command["update"] = marker.update(command["update"])
    marker.refuse_encrypted_sort(command.get("sort"))
    return command


_PASSING_STAGES = frozenset({"$limit", "$skip", "$count"})


def _aggregate(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    pipeline = []
    for stage in command.get("pipeline") or ():
        name = next(iter(stage), "")
        if name == "$match":
            pipeline.append({"$match": marker.filter(stage[name])})
        elif name == "$sort":
            marker.refuse_encrypted_sort(stage[name])
            pipeline.append(stage)
        elif name in _PASSING_STAGES:
            pipeline.append(stage)
        else:
            raise UnsupportedConstruct(f"the aggregation stage {name} on a collection with encrypted fields")
    command["pipeline"] = pipeline
    return command


def _explain(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    explained = command.get("explain")
    if not isinstance(explained, Mapping):
        raise AnalysisError("explain needs a command document")
    inner = {key: value for key, value in explained.items() if key not in _TRANSPORT_FIELDS}
    command["explain"] = _mark_command(marker, inner)
    return command


def _create(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    validator = command.get("validator")
    if isinstance(validator, Mapping):
        marker.refuse_encrypted_names(validator, "validator")
    return command


def _create_indexes(marker: _Marker, command: dict[str, Any]) -> dict[str, Any]:
    for index in command.get("indexes") or ():
        expression = index.get("partialFilterExpression") if isinstance(index, Mapping) else None
        if isinstance(expression, Mapping):
            marker.refuse_encrypted_names(expression, "partialFilterExpression")
    return command


_COMMANDS = {
    "insert": _insert,
    "find": _find,
    "count": _count,
    "distinct": _distinct,
    "delete": _delete,
    "update": _update,
    "findAndModify": _find_and_modify,
    "aggregate": _aggregate,
    "explain": _explain,
    "create": _create,
    "collMod": _create,
    "createIndexes": _create_indexes,
}


# --- serving ---------------------------------------------------------------------------------------------

MAX_WIRE_VERSION = 25
"""What the stand-in's hello reports: mongocryptd 8.0's wire version, new enough for libmongocrypt to send it
``create`` and ``createIndexes`` (17) and too old for several schemas in one command (26), which it does not
analyse."""


_KEPT = 256


def hello_reply(request: Request) -> dict[str, Any]:
    """mongocryptd's hello: a standalone that says it is a query analyser."""
    name = request.command_name.lower()
    return {
        "isWritablePrimary" if name == "hello" else "ismaster": True,
        "iscryptd": True,
        "maxBsonObjectSize": 16 * 1024 * 1024,
        "maxMessageSizeBytes": 48_000_000,
        "maxWriteBatchSize": 100_000,
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "ok": 1,
    }


class QueryAnalyser(AsyncioServer):
    """The stand-in mongocryptd on 127.0.0.1 (a free port): ``async with QueryAnalyser() as analyser``, then
    give ``analyser.uri`` as ``mongocryptdURI`` (with ``mongocryptdBypassSpawn``). :attr:`analysed` keeps the
    last commands it was asked to mark (with their schemas), :attr:`refused` the last error replies it gave."""

    def __init__(self) -> None:
        # A run-long analyser answers thousands of commands: the peer records none, and this keeps the last few.
        self._peer = LoopbackPeer(self._answer, record_requests=False)
        self.analysed: deque[dict[str, Any]] = deque(maxlen=_KEPT)
        self.refused: deque[dict[str, Any]] = deque(maxlen=_KEPT)

    @property
    def uri(self) -> str:
        return self._peer.uri

    async def start(self) -> QueryAnalyser:
        await self._peer.start()
        return self

    async def stop(self) -> None:
        await self._peer.stop()

    def _answer(self, request: Request) -> HandlerResult:
        name = request.command_name.lower()
        if name in ("hello", "ismaster"):
            return hello_reply(request)
        command = _with_sequences(request.document, request.sequences)
        self.analysed.append(command)
        try:
            return analyse(command)
        except AnalysisError as exc:
            reply = exc.reply()
            self.refused.append(reply)
            return reply


def _with_sequences(document: Mapping[str, Any], sequences: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """The command with its OP_MSG document sequences as the array fields they stand for."""
    merged = dict(document)
    for name, documents in sequences.items():
        merged[name] = list(documents)
    return merged


class AnalyserThread:
    """A :class:`QueryAnalyser` served by an event loop of its own thread, so that clients on any loop (one per
    test under pytest) can use it. ``start()`` blocks until it listens (call it in a worker thread from async
    code); ``stop()`` stops the analyser, then the loop, then joins the thread."""

    def __init__(self) -> None:
        self._loop_thread: LoopThread | None = None
        self._analyser = QueryAnalyser()

    @property
    def uri(self) -> str:
        return self._analyser.uri

    @property
    def running(self) -> bool:
        """Whether its thread still runs (False once stopped)."""
        return self._loop_thread is not None and self._loop_thread.running

    def start(self, timeout: float = 10.0) -> str:
        self._loop_thread = LoopThread("query-analyser", timeout)
        self._loop_thread.run_blocking(self._analyser.start())
        return self.uri

    def stop(self) -> None:
        loop_thread, self._loop_thread = self._loop_thread, None
        if loop_thread is None:
            return
        try:
            loop_thread.run_blocking(self._analyser.stop())
        finally:
            loop_thread.close()
