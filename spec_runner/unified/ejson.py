"""Extended JSON for test files and for ``$$matchAsDocument``.

Test files use both relaxed and canonical Extended JSON; ``mongio.bson.json_util`` parses either. Until that
module is importable, a small fallback turns the wrappers the test files use into the ``mongio.bson`` types
that exist, and leaves a wrapper whose type is not available yet as the plain document it is.
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import import_module
from typing import Any

from mongio.bson.decimal128 import Decimal128

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def loads(text: str) -> Any:
    """Parse Extended JSON (relaxed or canonical) into driver values; raises ``ValueError`` on bad input."""
    json_util = _json_util()
    if json_util is not None:
        return json_util.loads(text, json_options=json_util.RELAXED_JSON_OPTIONS)
    return json.loads(text, object_pairs_hook=_fallback_hook)


def _json_util() -> Any:
    try:
        return import_module("mongio.bson.json_util")
    except ImportError:
        return None


def _optional_type(module: str, name: str) -> Any:
    try:
        return getattr(import_module(f"mongio.bson.{module}"), name)
    except (ImportError, AttributeError):
        return None


def _number_double(text: str) -> float:
    special = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
    return special[text] if text in special else float(text)


def _int64(text: str) -> Any:
    cls = _optional_type("int64", "Int64")
    return int(text) if cls is None else cls(int(text))


def _date(value: Any) -> Any:
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, dict) and "$numberLong" in value:
        value = int(value["$numberLong"])
    if isinstance(value, int):
        return _EPOCH + timedelta(milliseconds=value)
    raise ValueError(f"bad $date value {value!r}")


def _binary(value: Any) -> Any:
    data = base64.b64decode(value["base64"])
    subtype = int(value["subType"], 16)
    cls = _optional_type("binary", "Binary")
    if cls is not None:
        return cls(data, subtype)
    if subtype == 0:
        return data
    return {"$binary": value}


def _uuid(value: str) -> Any:
    cls = _optional_type("binary", "Binary")
    raw = uuid.UUID(value).bytes
    return {"$uuid": value} if cls is None else cls(raw, 4)


def _wrapped(module: str, name: str, build: Callable[[Any], Any]) -> Callable[[dict[str, Any]], Any]:
    def convert(doc: dict[str, Any]) -> Any:
        cls = _optional_type(module, name)
        return doc if cls is None else build(cls)

    return convert


_SINGLE_KEY: dict[str, Callable[[Any], Any]] = {
    "$numberInt": int,
    "$numberLong": _int64,
    "$numberDouble": _number_double,
    "$numberDecimal": Decimal128,
    "$date": _date,
    "$binary": _binary,
    "$uuid": _uuid,
}


def _fallback_hook(pairs: list[tuple[str, Any]]) -> Any:
    doc = dict(pairs)
    if len(doc) == 1:
        ((key, value),) = doc.items()
        if key in _SINGLE_KEY and not (key == "$binary" and not isinstance(value, dict)):
            return _SINGLE_KEY[key](value)
        if key == "$oid":
            return _wrapped("objectid", "ObjectId", lambda cls: cls(value))(doc)
        if key == "$timestamp":
            return _wrapped("timestamp", "Timestamp", lambda cls: cls(value["t"], value["i"]))(doc)
        if key == "$regularExpression":
            return _wrapped("regex", "Regex", lambda cls: cls(value["pattern"], value["options"]))(doc)
        if key == "$minKey":
            return _wrapped("minmax", "MinKey", lambda cls: cls())(doc)
        if key == "$maxKey":
            return _wrapped("minmax", "MaxKey", lambda cls: cls())(doc)
        if key == "$symbol":
            return _wrapped("deprecated", "Symbol", lambda cls: cls(value))(doc)
        if key == "$code":
            return _wrapped("code", "Code", lambda cls: cls(value))(doc)
    if set(doc) == {"$code", "$scope"}:
        return _wrapped("code", "Code", lambda cls: cls(doc["$code"], doc["$scope"]))(doc)
    return doc
