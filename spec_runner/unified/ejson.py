"""Extended JSON for test files and for ``$$matchAsDocument``.

Test files use both relaxed and canonical Extended JSON; ``mongio.bson.json_util`` parses either. Until that
module is importable, ``fallback_loads`` reads the canonical and relaxed wrappers into the ``mongio.bson``
types itself (legacy forms such as ``$regex`` are left alone: in test files they are query operators).
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from importlib import import_module
from typing import Any

from mongio.bson.binary import Binary
from mongio.bson.code import Code
from mongio.bson.datetime_ms import DatetimeMS
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def loads(text: str) -> Any:
    """Parse Extended JSON (relaxed or canonical) into driver values; raises ``ValueError`` on bad input."""
    try:
        json_util: Any = import_module("mongio.bson.json_util")
    except ImportError:
        return fallback_loads(text)
    return json_util.loads(text, json_options=json_util.RELAXED_JSON_OPTIONS)


def fallback_loads(text: str) -> Any:
    """Extended JSON read with the standard ``json`` module and the wrappers converted here."""
    return json.loads(text, object_pairs_hook=_hook)


def _number_double(text: str) -> float:
    special = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
    return special[text] if text in special else float(text)


def _date(value: Any) -> Any:
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return _EPOCH + timedelta(milliseconds=int(value))
        except OverflowError:
            return DatetimeMS(int(value))
    raise ValueError(f"bad $date value {value!r}")


def _binary(value: dict[str, Any]) -> Any:
    data = base64.b64decode(value["base64"])
    subtype = int(value["subType"], 16)
    return data if subtype == 0 else Binary(data, subtype)


def _db_pointer(value: Any) -> DBPointer:
    if isinstance(value, DBRef):  # the inner {"$ref", "$id"} was read first
        return DBPointer(value.collection, value.id)
    return DBPointer(value["$ref"], value["$id"])


_SINGLE_KEY: dict[str, Any] = {
    "$numberInt": int,
    "$numberLong": lambda v: Int64(int(v)),
    "$numberDouble": _number_double,
    "$numberDecimal": Decimal128,
    "$date": _date,
    "$uuid": lambda v: Binary(uuid.UUID(v).bytes, 4),
    "$oid": ObjectId,
    "$timestamp": lambda v: Timestamp(v["t"], v["i"]),
    "$regularExpression": lambda v: Regex(v["pattern"], v["options"]),
    "$minKey": lambda v: MinKey(),
    "$maxKey": lambda v: MaxKey(),
    "$symbol": Symbol,
    "$code": Code,
    "$undefined": lambda v: Undefined(),
    "$dbPointer": _db_pointer,
}


def _hook(pairs: list[tuple[str, Any]]) -> Any:
    doc = dict(pairs)
    if len(doc) == 1:
        ((key, value),) = doc.items()
        if key == "$binary" and isinstance(value, dict):
            return _binary(value)
        if key in _SINGLE_KEY:
            return _SINGLE_KEY[key](value)
    if set(doc) == {"$code", "$scope"}:
        return Code(doc["$code"], doc["$scope"])
    if "$ref" in doc and "$id" in doc and isinstance(doc["$ref"], str):
        extra = {k: v for k, v in doc.items() if k not in ("$ref", "$id", "$db")}
        return DBRef(doc["$ref"], doc["$id"], doc.get("$db"), **extra)
    return doc
