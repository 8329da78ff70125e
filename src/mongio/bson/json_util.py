"""MongoDB Extended JSON: BSON values to JSON text and back, per the Extended JSON specification.

Names follow PyMongo's ``bson.json_util``, so ported code changes only its import::

    from mongio.bson import json_util

    text = json_util.dumps({"_id": ObjectId(), "n": Int64(5)})          # relaxed: {"_id": {"$oid": ...}, "n": 5}
    exact = json_util.dumps(doc, json_options=json_util.CANONICAL_JSON_OPTIONS)
    doc = json_util.loads(text)

Nothing here does I/O, so it is safe to call from coroutines (for very large documents, consider
``asyncio.to_thread`` to keep the event loop responsive).

Writing: :data:`RELAXED_JSON_OPTIONS` (the default) keeps JSON numbers and ISO-8601 dates readable,
:data:`CANONICAL_JSON_OPTIONS` wraps every value so it reads back as the same BSON type, and
:data:`LEGACY_JSON_OPTIONS` writes the format of older drivers and mongoexport.

Reading: :func:`loads` accepts canonical and relaxed Extended JSON under any options, plus the older forms
``{"$binary": <base64>, "$type": <hex>}``, ``{"$regex": <pattern>, "$options": <flags>}`` and ``$uuid``,
and ISO-8601 ``$date`` strings with any UTC offset. The legacy number-valued ``{"$date": <ms>}`` and
``{"$numberLong": <number>}`` are accepted only with ``json_mode=JSONMode.LEGACY``, because the
specification makes them errors otherwise. A malformed type wrapper (missing, extra or mistyped keys, bad
hex or base64, out-of-range numbers) raises :class:`~mongio.bson.errors.InvalidExtendedJSON` (a
``ValueError``) naming the wrapper, where it is and what is wrong. Objects whose ``$`` keys are not a type
wrapper (query operators such as ``{"$regex": {...}}`` or ``{"$type": "string"}``) stay documents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from mongio.bson._json_decode import interpret, parse, wrap_raw
from mongio.bson._json_encode import to_json
from mongio.bson._json_options import DatetimeRepresentation, JSONMode, JSONOptions
from mongio.bson.binary import ALL_UUID_SUBTYPES, UUID_SUBTYPE, Binary, UuidRepresentation
from mongio.bson.code import Code
from mongio.bson.codec_options import CodecOptions
from mongio.bson.datetime_ms import EPOCH_AWARE, DatetimeConversion, DatetimeMS
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.errors import InvalidExtendedJSON
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp
from mongio.bson.tz_util import utc

# The BSON types and options are offered here too, as PyMongo's bson.json_util offers them.
__all__ = [
    "ALL_UUID_SUBTYPES",
    "CANONICAL_JSON_OPTIONS",
    "DEFAULT_JSON_OPTIONS",
    "EPOCH_AWARE",
    "LEGACY_JSON_OPTIONS",
    "RELAXED_JSON_OPTIONS",
    "UUID_SUBTYPE",
    "Binary",
    "Code",
    "CodecOptions",
    "DBRef",
    "DatetimeConversion",
    "DatetimeMS",
    "DatetimeRepresentation",
    "Decimal128",
    "Int64",
    "InvalidExtendedJSON",
    "JSONMode",
    "JSONOptions",
    "MaxKey",
    "MinKey",
    "ObjectId",
    "Regex",
    "Timestamp",
    "UuidRepresentation",
    "default",
    "dumps",
    "loads",
    "object_hook",
    "object_pairs_hook",
    "utc",
]

LEGACY_JSON_OPTIONS: Final = JSONOptions(json_mode=JSONMode.LEGACY)
"""The format of older drivers: plain numbers, ``{"$date": <ms>}``, ``{"$binary": ..., "$type": ...}``,
``{"$regex": ..., "$options": ...}``, ``{"$uuid": ...}``."""

CANONICAL_JSON_OPTIONS: Final = JSONOptions(json_mode=JSONMode.CANONICAL)
"""Canonical Extended JSON: every value keeps its BSON type through a round trip."""

RELAXED_JSON_OPTIONS: Final = JSONOptions(json_mode=JSONMode.RELAXED)
"""Relaxed Extended JSON: plain JSON numbers and ISO-8601 dates where they lose no value."""

DEFAULT_JSON_OPTIONS: Final = RELAXED_JSON_OPTIONS
"""The options :func:`dumps` and :func:`loads` use by default (relaxed)."""


def _check_options(json_options: Any) -> None:
    if not isinstance(json_options, JSONOptions):
        raise TypeError(
            f"json_options must be a JSONOptions (e.g. RELAXED_JSON_OPTIONS.with_options(...)), not "
            f"{type(json_options).__name__}"
        )


def dumps(obj: Any, *args: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS, **kwargs: Any) -> str:
    """``obj`` (a document, a list or a single BSON value) as Extended JSON text.

    Other arguments go to ``json.dumps`` (``indent``, ``sort_keys``, ``separators``, ...). Key order is
    kept. Raises ``TypeError`` for a value with no BSON type, ``ValueError`` for a ``uuid.UUID`` when
    ``json_options.uuid_representation`` is UNSPECIFIED, and
    :class:`~mongio.bson.errors.InvalidDocument` for an int beyond 64 bits in canonical format.
    """
    _check_options(json_options)
    return json.dumps(to_json(obj, json_options), *args, **kwargs)


def loads(
    s: str | bytes | bytearray, *args: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS, **kwargs: Any
) -> Any:
    """The value of Extended JSON text: documents become ``json_options.document_class`` instances and
    type wrappers their BSON values (as BSON decoding with the same codec options would give them).

    Other arguments go to ``json.loads``; passing your own ``object_hook`` or ``object_pairs_hook`` replaces
    Extended JSON handling with plain ``json.loads``. Integers no BSON integer holds become floats. Raises
    :class:`~mongio.bson.errors.InvalidExtendedJSON` for a malformed type wrapper and
    ``json.JSONDecodeError`` for text that is not JSON (both are ``ValueError``).
    """
    _check_options(json_options)
    if "object_hook" in kwargs or "object_pairs_hook" in kwargs:
        return json.loads(s, *args, **kwargs)
    return parse(s, json_options, args, dict(kwargs))


def object_pairs_hook(pairs: list[tuple[str, Any]], json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(text, object_pairs_hook=...)``: one JSON object (its values already converted) as
    its BSON value or a document. Unlike :func:`loads` it cannot tell the top-level object apart, so every
    object is read as a nested one."""
    return wrap_raw(interpret(list(pairs), json_options), json_options)


def object_hook(dct: Mapping[str, Any], json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """For ``json.loads(text, object_hook=...)``: like :func:`object_pairs_hook`, given a mapping."""
    return object_pairs_hook(list(dct.items()), json_options)


def default(obj: Any, json_options: JSONOptions = DEFAULT_JSON_OPTIONS) -> Any:
    """The JSON-ready form (dicts, lists, str, int, float, bool, None) of ``obj`` in Extended JSON; usable
    as ``json.dumps(..., default=...)`` for BSON types, though plain ``json`` then writes ints, floats and
    dicts itself (so prefer :func:`dumps`). Raises ``TypeError`` for a value with no BSON type."""
    return to_json(obj, json_options)
