"""Reading the Extended JSON of test files without json_util (the fallback reader)."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

from spec_runner.unified.ejson import fallback_loads, loads

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


def test_numbers() -> None:
    value = fallback_loads(
        '{"i": {"$numberInt": "-5"}, "l": {"$numberLong": "9223372036854775807"}, "d": {"$numberDouble": "-Infinity"},'
        ' "n": {"$numberDouble": "NaN"}, "x": {"$numberDecimal": "1.50"}, "plain": 3, "f": 2.5}'
    )
    assert value["i"] == -5 and type(value["i"]) is int
    assert value["l"] == 2**63 - 1 and isinstance(value["l"], Int64)
    assert value["d"] == -math.inf and math.isnan(value["n"])
    assert value["x"] == Decimal128("1.50")
    assert value["plain"] == 3 and value["f"] == 2.5


def test_dates() -> None:
    value = fallback_loads(
        '[{"$date": "2020-01-01T00:00:00.123Z"}, {"$date": {"$numberLong": "1577836800123"}},'
        ' {"$date": {"$numberLong": "-9223372036854775808"}}]'
    )
    moment = datetime(2020, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert value[:2] == [moment, moment]
    assert value[2] == DatetimeMS(-(2**63))


def test_binary_and_uuid() -> None:
    value = fallback_loads(
        '[{"$binary": {"base64": "AQI=", "subType": "00"}}, {"$binary": {"base64": "AQI=", "subType": "80"}},'
        ' {"$uuid": "c8edabc3-f738-4ca3-b68d-ab92a91478a3"}]'
    )
    assert value[0] == b"\x01\x02" and not isinstance(value[0], Binary)
    assert isinstance(value[1], Binary) and value[1].subtype == 0x80
    assert value[2] == Binary(uuid.UUID("c8edabc3-f738-4ca3-b68d-ab92a91478a3").bytes, 4)


def test_other_types() -> None:
    value = fallback_loads(
        '{"o": {"$oid": "57e193d7a9cc81b4027498b5"}, "t": {"$timestamp": {"t": 1, "i": 2}},'
        ' "r": {"$regularExpression": {"pattern": "^a", "options": "i"}}, "min": {"$minKey": 1},'
        ' "max": {"$maxKey": 1}, "s": {"$symbol": "sym"}, "c": {"$code": "x"},'
        ' "cs": {"$code": "x", "$scope": {"y": 1}}, "u": {"$undefined": true},'
        ' "ref": {"$ref": "coll", "$id": 1, "$db": "db"},'
        ' "ptr": {"$dbPointer": {"$ref": "db.coll", "$id": {"$oid": "57e193d7a9cc81b4027498b5"}}}}'
    )
    oid = ObjectId("57e193d7a9cc81b4027498b5")
    assert value["o"] == oid
    assert value["t"] == Timestamp(1, 2)
    assert value["r"] == Regex("^a", "i")
    assert isinstance(value["min"], MinKey) and isinstance(value["max"], MaxKey)
    assert value["s"] == Symbol("sym") and isinstance(value["s"], Symbol)
    assert value["c"] == Code("x") and value["c"].scope is None
    assert value["cs"].scope == {"y": 1}
    assert isinstance(value["u"], Undefined)
    assert value["ref"] == DBRef("coll", 1, "db")
    assert value["ptr"] == DBPointer("db.coll", oid)


def test_query_operators_and_placeholders_stay_documents() -> None:
    text = '{"x": {"$regex": "^a", "$options": "i"}, "k": {"$$placeholder": 1}, "q": {"$gt": {"$numberInt": "1"}}}'
    assert fallback_loads(text) == {
        "x": {"$regex": "^a", "$options": "i"},
        "k": {"$$placeholder": 1},
        "q": {"$gt": 1},
    }


def test_loads_reads_relaxed_and_canonical() -> None:
    value = loads('{"a": {"$numberLong": "1"}, "b": 1, "c": {"$oid": "57e193d7a9cc81b4027498b5"}}')
    assert value["a"] == 1 and isinstance(value["a"], Int64)
    assert value["b"] == 1
    assert value["c"] == ObjectId("57e193d7a9cc81b4027498b5")
