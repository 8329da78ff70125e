"""Extended JSON (mongio.bson.json_util): every type wrapper written and read, the errors, the options, the
legacy format, the json arguments, the hooks, and the BSON corpus round trips."""

from __future__ import annotations

import datetime
import decimal
import functools
import json
import math
import pickle
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_runner.model import specs_root

from mongio import bson
from mongio.bson import (
    SON,
    Binary,
    Code,
    CodecOptions,
    DatetimeConversion,
    DatetimeMS,
    DBPointer,
    DBRef,
    Decimal128,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    RawBSONDocument,
    Regex,
    Symbol,
    Timestamp,
    TypeDecoder,
    TypeEncoder,
    TypeRegistry,
    Undefined,
    UuidRepresentation,
    json_util,
)
from mongio.bson.errors import InvalidDocument, InvalidExtendedJSON
from mongio.bson.json_util import (
    CANONICAL_JSON_OPTIONS,
    DEFAULT_JSON_OPTIONS,
    LEGACY_JSON_OPTIONS,
    RELAXED_JSON_OPTIONS,
    DatetimeRepresentation,
    JSONMode,
    JSONOptions,
    dumps,
    loads,
)

CORPUS = specs_root() / "bson-corpus" / "tests"
UTC = datetime.UTC

# The options the BSON corpus asks for: aware UTC datetimes, any BSON datetime, UUIDs left as Binary.
CORPUS_SETTINGS: dict[str, Any] = {
    "tz_aware": True,
    "tzinfo": UTC,
    "uuid_representation": UuidRepresentation.UNSPECIFIED,
    "datetime_conversion": DatetimeConversion.DATETIME_AUTO,
}
CANONICAL = CANONICAL_JSON_OPTIONS.with_options(**CORPUS_SETTINGS)
RELAXED = RELAXED_JSON_OPTIONS.with_options(**CORPUS_SETTINGS)

OID = ObjectId("56e1fc72e0c917e9c4714161")
WHEN = datetime.datetime(2012, 12, 24, 12, 15, 30, 501000, tzinfo=UTC)
WHEN_MS = 1356351330501
A_UUID = uuid.UUID("73ffd264-44b3-4c69-90e8-e7d1dfc035d4")


def compact(obj: Any, options: JSONOptions) -> str:
    return dumps(obj, json_options=options, separators=(",", ":"))


def normalized(text: str) -> str:
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=True)


# --- every wrapper, written and read back ----------------------------------------------------------------

# (value, canonical Extended JSON, relaxed Extended JSON), each value alone under the key "v".
WRAPPERS: list[tuple[str, Any, str, str]] = [
    ("ObjectId", OID, '{"$oid":"56e1fc72e0c917e9c4714161"}', '{"$oid":"56e1fc72e0c917e9c4714161"}'),
    ("Symbol", Symbol("sym"), '{"$symbol":"sym"}', '{"$symbol":"sym"}'),
    ("string", "é\u0000\n", '"\\u00e9\\u0000\\n"', '"\\u00e9\\u0000\\n"'),
    ("int32", 42, '{"$numberInt":"42"}', "42"),
    ("negative int32", -(1 << 31), '{"$numberInt":"-2147483648"}', "-2147483648"),
    ("int beyond int32", 1 << 40, '{"$numberLong":"1099511627776"}', "1099511627776"),
    ("Int64", Int64(5), '{"$numberLong":"5"}', "5"),
    ("Int64 min", Int64(-(1 << 63)), '{"$numberLong":"-9223372036854775808"}', "-9223372036854775808"),
    ("double 1.0", 1.0, '{"$numberDouble":"1.0"}', "1.0"),
    ("double -1.0", -1.0, '{"$numberDouble":"-1.0"}', "-1.0"),
    ("double -0.0", -0.0, '{"$numberDouble":"-0.0"}', "-0.0"),
    (
        "double with exponent",
        1.2345678921232e18,
        '{"$numberDouble":"1.2345678921232E+18"}',
        "1.2345678921232e+18",
    ),
    ("small double", 1e-7, '{"$numberDouble":"1E-7"}', "1e-07"),
    ("Infinity", math.inf, '{"$numberDouble":"Infinity"}', '{"$numberDouble":"Infinity"}'),
    ("-Infinity", -math.inf, '{"$numberDouble":"-Infinity"}', '{"$numberDouble":"-Infinity"}'),
    ("Decimal128", Decimal128("-1.50E+3"), '{"$numberDecimal":"-1.50E+3"}', '{"$numberDecimal":"-1.50E+3"}'),
    (
        "bytes",
        b"\xff\xff",
        '{"$binary":{"base64":"//8=","subType":"00"}}',
        '{"$binary":{"base64":"//8=","subType":"00"}}',
    ),
    (
        "Binary user-defined",
        Binary(b"\x01\x02\x03\x04\x05", 0x80),
        '{"$binary":{"base64":"AQIDBAU=","subType":"80"}}',
        '{"$binary":{"base64":"AQIDBAU=","subType":"80"}}',
    ),
    (
        "Binary subtype 4",
        Binary(A_UUID.bytes, 4),
        '{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"04"}}',
        '{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"04"}}',
    ),
    ("Code", Code("function() {}"), '{"$code":"function() {}"}', '{"$code":"function() {}"}'),
    (
        "Code with scope",
        Code("x", {"n": 1}),
        '{"$code":"x","$scope":{"n":{"$numberInt":"1"}}}',
        '{"$code":"x","$scope":{"n":1}}',
    ),
    ("Code with empty scope", Code("", {}), '{"$code":"","$scope":{}}', '{"$code":"","$scope":{}}'),
    (
        "Timestamp",
        Timestamp(4294967295, 42),
        '{"$timestamp":{"t":4294967295,"i":42}}',
        '{"$timestamp":{"t":4294967295,"i":42}}',
    ),
    (
        "Regex (options sorted)",
        Regex('ab/"c', "mxi"),
        '{"$regularExpression":{"pattern":"ab/\\"c","options":"imx"}}',
        '{"$regularExpression":{"pattern":"ab/\\"c","options":"imx"}}',
    ),
    ("datetime", WHEN, f'{{"$date":{{"$numberLong":"{WHEN_MS}"}}}}', '{"$date":"2012-12-24T12:15:30.501Z"}'),
    (
        "datetime on a whole second",
        datetime.datetime(1970, 1, 1, tzinfo=UTC),
        '{"$date":{"$numberLong":"0"}}',
        '{"$date":"1970-01-01T00:00:00Z"}',
    ),
    (
        "datetime with a leading zero millisecond",
        datetime.datetime(2012, 12, 24, 12, 15, 30, 1000, tzinfo=UTC),
        '{"$date":{"$numberLong":"1356351330001"}}',
        '{"$date":"2012-12-24T12:15:30.001Z"}',
    ),
    (
        "datetime before 1970",
        datetime.datetime(1960, 12, 24, 12, 15, 30, 499000, tzinfo=UTC),
        '{"$date":{"$numberLong":"-284643869501"}}',
        '{"$date":{"$numberLong":"-284643869501"}}',
    ),
    (
        "last millisecond of 9999",
        datetime.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        '{"$date":{"$numberLong":"253402300799999"}}',
        '{"$date":"9999-12-31T23:59:59.999Z"}',
    ),
    (
        "DatetimeMS after 9999",
        DatetimeMS(253402300800000),
        '{"$date":{"$numberLong":"253402300800000"}}',
        '{"$date":{"$numberLong":"253402300800000"}}',
    ),
    (
        "DBRef",
        DBRef("coll", OID, "db", foo="bar"),
        '{"$ref":"coll","$id":{"$oid":"56e1fc72e0c917e9c4714161"},"$db":"db","foo":"bar"}',
        '{"$ref":"coll","$id":{"$oid":"56e1fc72e0c917e9c4714161"},"$db":"db","foo":"bar"}',
    ),
    (
        "DBRef without a database",
        DBRef("coll", 42),
        '{"$ref":"coll","$id":{"$numberInt":"42"}}',
        '{"$ref":"coll","$id":42}',
    ),
    (
        "DBPointer",
        DBPointer("db.coll", OID),
        '{"$dbPointer":{"$ref":"db.coll","$id":{"$oid":"56e1fc72e0c917e9c4714161"}}}',
        '{"$dbPointer":{"$ref":"db.coll","$id":{"$oid":"56e1fc72e0c917e9c4714161"}}}',
    ),
    ("MinKey", MinKey(), '{"$minKey":1}', '{"$minKey":1}'),
    ("MaxKey", MaxKey(), '{"$maxKey":1}', '{"$maxKey":1}'),
    ("Undefined", Undefined(), '{"$undefined":true}', '{"$undefined":true}'),
    ("null", None, "null", "null"),
    ("true", True, "true", "true"),
    ("array", [1, "a", [2.5]], '[{"$numberInt":"1"},"a",[{"$numberDouble":"2.5"}]]', '[1,"a",[2.5]]'),
    (
        "document",
        {"b": 1, "a": {"$x": 2.5}},
        '{"b":{"$numberInt":"1"},"a":{"$x":{"$numberDouble":"2.5"}}}',
        '{"b":1,"a":{"$x":2.5}}',
    ),
]


def _same(got: Any, expected: Any) -> bool:
    """The same BSON value: equal encodings (so NaN matches NaN, -0.0 differs from 0.0, int32 from int64)."""
    options = CANONICAL.codec_options()
    got_bytes: bytes = bson.encode({"v": got}, codec_options=options)
    return bool(got_bytes == bson.encode({"v": expected}, codec_options=options))


@pytest.mark.parametrize(("name", "value", "canonical", "relaxed"), WRAPPERS, ids=[w[0] for w in WRAPPERS])
def test_wrapper_written_and_read_back(name: str, value: Any, canonical: str, relaxed: str) -> None:
    assert compact({"v": value}, CANONICAL) == f'{{"v":{canonical}}}'
    assert compact({"v": value}, RELAXED) == f'{{"v":{relaxed}}}'
    assert _same(loads(f'{{"v":{canonical}}}', json_options=CANONICAL)["v"], value)
    if canonical == relaxed or not isinstance(value, (int, float)):
        # Relaxed output loses only numeric types; everything else reads back the same.
        assert _same(loads(f'{{"v":{relaxed}}}', json_options=RELAXED)["v"], value)


def test_nan_written_and_read_back() -> None:
    for options in (CANONICAL, RELAXED):
        assert compact({"v": math.nan}, options) == '{"v":{"$numberDouble":"NaN"}}'
        assert math.isnan(loads('{"v":{"$numberDouble":"NaN"}}', json_options=options)["v"])


def test_relaxed_numbers_read_as_the_smallest_bson_type() -> None:
    doc = loads('{"a": 1, "b": 4294967296, "c": 1.0, "d": 1e2, "e": 123456789012345678901234567890}')
    assert bson.encode(doc) == bson.encode(
        {"a": 1, "b": Int64(1 << 32), "c": 1.0, "d": 100.0, "e": 1.2345678901234568e29}
    )
    assert type(doc["c"]) is float and type(doc["d"]) is float and type(doc["e"]) is float


def test_key_order_is_kept_everywhere() -> None:
    text = '{"z": 1, "a": {"y": 2, "b": 3}, "m": [{"q": 1, "c": 2}]}'
    assert compact(loads(text), RELAXED) == normalized(text)


# --- reading: the other accepted forms -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ('"2012-12-24T12:15:30.501Z"', WHEN_MS),
        ('"2012-12-24T12:15:30Z"', WHEN_MS - 501),
        ('"2012-12-24t12:15:30.501z"', WHEN_MS),
        ('"2012-12-24T13:15:30.501+01:00"', WHEN_MS),
        ('"2012-12-24T10:45:30.501-0130"', WHEN_MS),
        ('"2012-12-24T14:15:30.501+02"', WHEN_MS),
        ('"2012-12-24T12:15:30.501999Z"', WHEN_MS),
        ('"2012-12-24T12:15:30.5Z"', WHEN_MS - 1),
        ('"2012-12-24T12:15:30.501"', WHEN_MS),
        (f'{{"$numberLong": "{WHEN_MS}"}}', WHEN_MS),
        ('{"$numberLong": "-1"}', -1),
    ],
)
def test_date_forms(text: str, millis: int) -> None:
    options = CANONICAL.with_options(datetime_conversion=DatetimeConversion.DATETIME_MS)
    assert loads(f'{{"d": {{"$date": {text}}}}}', json_options=options)["d"] == DatetimeMS(millis)


def test_legacy_number_forms_need_legacy_mode() -> None:
    assert loads('{"d": {"$date": 1356351330501}}', json_options=LEGACY_JSON_OPTIONS)["d"] == WHEN.replace(
        tzinfo=None
    )
    assert loads('{"n": {"$numberLong": 42}}', json_options=LEGACY_JSON_OPTIONS)["n"] == Int64(42)
    for text in ('{"d": {"$date": 42}}', '{"n": {"$numberLong": 42}}'):
        with pytest.raises(InvalidExtendedJSON, match="LEGACY_JSON_OPTIONS"):
            loads(text)


def test_legacy_binary_and_regex_forms() -> None:
    doc = loads(
        '{"b": {"$type": "80", "$binary": "AQIDBAU="}, "z": {"$binary": "", "$type": "0"}, "r": {"$regex": "a.c", "$options": "mi"}, "p": {"$regex": "^x"}}'
    )
    assert doc == {
        "b": Binary(b"\x01\x02\x03\x04\x05", 0x80),
        "z": b"",
        "r": Regex("a.c", "mi"),
        "p": Regex("^x", ""),
    }
    assert compact(doc["r"], CANONICAL) == '{"$regularExpression":{"pattern":"a.c","options":"im"}}'


def test_binary_subtype_one_hex_digit_and_any_case() -> None:
    doc = loads(
        '{"a": {"$binary": {"subType": "5", "base64": "//8="}}, "b": {"$binary": {"base64": "", "subType": "fF"}}}'
    )
    assert doc == {"a": Binary(b"\xff\xff", 5), "b": Binary(b"", 255)}


@pytest.mark.parametrize(
    "text",
    [
        "73ffd264-44b3-4c69-90e8-e7d1dfc035d4",
        "73FFD264-44B3-4C69-90E8-E7D1DFC035D4",
        "urn:uuid:73ffd264-44b3-4c69-90e8-e7d1dfc035d4",
        "73ffd26444b34c6990e8e7d1dfc035d4",
    ],
)
def test_uuid_forms(text: str) -> None:
    assert loads(f'{{"u": {{"$uuid": "{text}"}}}}', json_options=CANONICAL)["u"] == Binary(A_UUID.bytes, 4)
    standard = CANONICAL.with_options(uuid_representation=UuidRepresentation.STANDARD)
    assert loads(f'{{"u": {{"$uuid": "{text}"}}}}', json_options=standard)["u"] == A_UUID


@pytest.mark.parametrize(
    "text",
    [
        '{"$regex": {"$regularExpression": {"pattern": "p", "options": ""}}, "$options": "ix"}',
        '{"$regex": {"$in": ["a"]}}',
        '{"$type": "string"}',
        '{"$type": 2}',
        '{"$options": "i"}',
        '{"$scope": {}}',
        '{"$key": 1, "$other": "x"}',
        '{"$ref": 1, "$id": 2}',
        '{"$ref": "c"}',
        '{"$ref": "c", "$id": 1, "$db": 2}',
    ],
)
def test_dollar_keys_that_are_not_wrappers_stay_documents(text: str) -> None:
    value = loads(f'{{"x": {text}}}', json_options=CANONICAL)["x"]
    assert isinstance(value, dict)
    assert list(value) == list(json.loads(text))


def test_dbref_shapes() -> None:
    doc = loads('{"r": {"$id": {"$oid": "56e1fc72e0c917e9c4714161"}, "x": 1, "$ref": "c", "$db": "d"}}')
    assert doc["r"] == DBRef("c", OID, "d", x=1)
    assert compact(doc, CANONICAL) == (
        '{"r":{"$ref":"c","$id":{"$oid":"56e1fc72e0c917e9c4714161"},"$db":"d","x":{"$numberInt":"1"}}}'
    )


def test_top_level_object_is_a_document_unless_it_is_a_well_formed_wrapper() -> None:
    assert loads('{"$oid": "56e1fc72e0c917e9c4714161"}') == OID
    assert loads(dumps(WHEN, json_options=CANONICAL), json_options=CANONICAL) == WHEN
    assert loads('{"$oid": 42}') == {"$oid": 42}
    assert loads('{"$binary": "abcdefg"}') == {"$binary": "abcdefg"}
    assert loads('{"$regex": "a", "$options": "i", "$banana": "peel"}') == {
        "$regex": "a",
        "$options": "i",
        "$banana": "peel",
    }
    top = loads('{"$ref": "c", "$id": 1}')
    assert type(top) is dict and top == {"$ref": "c", "$id": 1}
    assert loads('[{"$oid": "56e1fc72e0c917e9c4714161"}, {"$ref": "c", "$id": 1}]') == [OID, DBRef("c", 1)]


def test_deep_nesting() -> None:
    text = '{"a": ' * 200 + '{"$numberInt": "1"}' + "}" * 200
    value: Any = loads(text)
    for _ in range(200):
        value = value["a"]
    assert value == 1
    doc: Any = Int64(1)
    for _ in range(100):
        doc = {"a": doc}
    assert dumps(doc, json_options=CANONICAL, separators=(",", ":")).count('{"a":') == 100


# --- errors ------------------------------------------------------------------------------------------------

ERRORS: list[tuple[str, str]] = [
    ('{"$oid": 42}', "Bad $oid at 'x': $oid must be a string"),
    ('{"$oid": "56e1fc72e0c917e9c471416"}', "is not 24 hex digits"),
    ('{"$oid": "56e1fc72e0c917e9c471416g"}', "is not 24 hex digits"),
    (
        '{"$oid": "56e1fc72e0c917e9c4714161", "unrelated": true}',
        "Bad $oid at 'x': unexpected key(s) 'unrelated'",
    ),
    ('{"$oid": "56e1fc72e0c917e9c4714161", "$oid": "56e1fc72e0c917e9c4714161"}', "appears more than once"),
    ('{"$symbol": 1}', "$symbol must be a string"),
    ('{"$numberInt": 42}', "Bad $numberInt at 'x': $numberInt must be a string"),
    ('{"$numberInt": "2147483648"}', "does not fit a 32-bit integer"),
    ('{"$numberInt": "1.0"}', "is not a decimal integer"),
    ('{"$numberInt": "\\u0661"}', "is not a decimal integer"),
    ('{"$numberLong": "9223372036854775808"}', "does not fit a 64-bit integer"),
    ('{"$numberLong": "x"}', "Bad $numberLong at 'x'"),
    ('{"$numberDouble": 42}', "Bad $numberDouble at 'x': $numberDouble must be a string"),
    ('{"$numberDouble": "inf"}', "is not a decimal number, Infinity, -Infinity or NaN"),
    ('{"$numberDouble": " 1.0"}', "is not a decimal number"),
    ('{"$numberDouble": "1e400"}', "out of the range of a double"),
    ('{"$numberDecimal": 42}', "$numberDecimal must be a string"),
    ('{"$numberDecimal": "1.2.3"}', "Bad $numberDecimal at 'x'"),
    ('{"$binary": 0, "$type": "00"}', "Bad $binary at 'x': $binary must be a string"),
    ('{"$binary": "", "$type": 0}', "$type must be a string"),
    ('{"$binary": "//8="}', "needs a $type"),
    ('{"$binary": "//8=", "$type": "00", "unrelated": true}', "unexpected key(s) 'unrelated'"),
    ('{"$binary": {"base64": "//8", "subType": "00"}}', "is not padded base64"),
    ('{"$binary": {"base64": "/ /8=", "subType": "00"}}', "is not padded base64"),
    ('{"$binary": {"base64": "//8=", "subType": "100"}}', "subType must be one or two hex digits"),
    ('{"$binary": {"base64": "//8=", "subType": 0}}', "subType must be a string"),
    ('{"$binary": {"base64": "//8="}}', "missing subType"),
    ('{"$binary": {"base64": "//8=", "subType": "00", "extra": 1}}', "unexpected 'extra'"),
    ('{"$binary": {"base64": "//8=", "subType": "00"}, "$type": "00"}', "$binary must be a string"),
    ('{"$uuid": {"data": "73ffd264-44b3-4c69-90e8-e7d1dfc035d4"}}', "$uuid must be a string"),
    ('{"$uuid": "73ffd264-44b3-4c69-90e8-e7d1dfc035d"}', "is not a UUID"),
    ('{"$uuid": "73ffd264-44b3-4c69-90e8-e7d1dfc035d4aa"}', "is not a UUID"),
    ('{"$uuid": "73ff-d26444b-34c6-990e8e-7d1dfc035d4"}', "is not a UUID"),
    ('{"$uuid": "----d264-44b3-4--9-90e8-e7d1dfc0----"}', "is not a UUID"),
    ('{"$code": 42}', "$code must be a string"),
    ('{"$code": "", "unrelated": true}', "unexpected key(s) 'unrelated' beside $code"),
    ('{"$code": "", "$scope": 42}', "$scope must be an object"),
    ('{"$timestamp": 42}', "Bad $timestamp at 'x': the value must be an object with keys t, i"),
    ('{"$timestamp": {"t": "1", "i": 42}}', "t must be an integer"),
    ('{"$timestamp": {"t": 1, "i": 4.0}}', "i must be an integer"),
    ('{"$timestamp": {"t": 4294967296, "i": 1}}', "t must fit an unsigned 32-bit integer"),
    ('{"$timestamp": {"t": 1, "i": -1}}', "i must fit an unsigned 32-bit integer"),
    ('{"$timestamp": {"i": 1}}', "missing t"),
    ('{"$timestamp": {"t": 1, "i": 1, "x": 1}}', "unexpected 'x'"),
    ('{"$timestamp": {"t": 1, "i": 1}, "x": 1}', "unexpected key(s) 'x' beside $timestamp"),
    ('{"$regularExpression": {"pattern": 42, "options": ""}}', "pattern must be a string"),
    ('{"$regularExpression": {"pattern": "a", "options": 0}}', "options must be a string"),
    ('{"$regularExpression": {"pattern": "a"}}', "missing options"),
    ('{"$regularExpression": {"pattern": "a", "options": "", "unrelated": true}}', "unexpected 'unrelated'"),
    ('{"$regularExpression": {"pattern": "a\\u0000", "options": ""}}', "NUL"),
    ('{"$regularExpression": {"pattern": "a", "options": "i\\u0000"}}', "NUL"),
    (
        '{"$regex": "abc", "$options": "", "unrelated": true}',
        "Bad $regex at 'x': unexpected key(s) 'unrelated'",
    ),
    ('{"$regex": "a", "$options": 0}', "$options must be a string"),
    ('{"$dbPointer": {"$ref": "b"}}', "missing $id"),
    ('{"$dbPointer": {"$ref": "b", "$id": {"$oid": "56e1fc72e0c917e9c4714161"}, "c": 1}}', "unexpected c"),
    (
        '{"$dbPointer": {"$ref": "b", "$id": {"$oid": "56e1fc72e0c917e9c4714161"}, "$db": "d"}}',
        "unexpected $db",
    ),
    ('{"$dbPointer": {"$ref": "b", "$id": 1}}', "$id must be an ObjectId"),
    ('{"$dbPointer": {"$ref": 1, "$id": {"$oid": "56e1fc72e0c917e9c4714161"}}}', "$ref must be a string"),
    ('{"$date": 42}', "Bad $date at 'x': the value must be an ISO-8601 string or"),
    ('{"$date": true}', "the value must be an ISO-8601 string"),
    ('{"$date": {"$numberLong": "1"}, "unrelated": true}', "unexpected key(s) 'unrelated' beside $date"),
    ('{"$date": {"$numberLong": 1}}', "Bad $numberLong at 'x.$date'"),
    ('{"$date": "2012-13-24T12:15:30Z"}', "is not a valid date-time"),
    ('{"$date": "2012-12-24 12:15:30Z"}', "is not an ISO-8601 date-time"),
    ('{"$date": "2012-12-24T12:15:30+25:00"}', "is not a valid date-time"),
    ('{"$date": "2012-12-24T12:15:30+01:60"}', "minutes must be 00 to 59"),
    ('{"$minKey": true}', "Bad $minKey at 'x': the value must be 1"),
    ('{"$minKey": 0}', "the value must be 1"),
    ('{"$maxKey": 1, "unrelated": true}', "unexpected key(s) 'unrelated' beside $maxKey"),
    ('{"$maxKey": 1.0}', "the value must be 1"),
    ('{"$undefined": false}', "the value must be true"),
    ('{"$oid": "56e1fc72e0c917e9c4714161", "$symbol": "s"}', "unexpected key(s) '$symbol' beside $oid"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_malformed_wrappers_raise(text: str, message: str) -> None:
    with pytest.raises(InvalidExtendedJSON) as caught:
        loads(f'{{"x": {text}}}', json_options=CANONICAL)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_errors_name_the_path_inside_arrays() -> None:
    with pytest.raises(InvalidExtendedJSON, match=r"Bad \$numberInt at 'a\.1\.b'"):
        loads('{"a": [1, {"b": {"$numberInt": "x"}}]}')


def test_out_of_range_datetime_needs_a_datetime_conversion_that_can_hold_it() -> None:
    text = '{"d": {"$date": {"$numberLong": "253402300800000"}}}'
    with pytest.raises(InvalidExtendedJSON, match=r"Bad \$date at 'd'.*DATETIME_AUTO"):
        loads(text)
    assert loads(text, json_options=CANONICAL)["d"] == DatetimeMS(253402300800000)
    clamp = RELAXED_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_CLAMP)
    assert loads(text, json_options=clamp)["d"] == datetime.datetime.max.replace(microsecond=999000)


def test_invalid_json_raises_json_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": ')


def test_unserializable_values_raise() -> None:
    with pytest.raises(TypeError, match="set"):
        dumps({"a": {1, 2}})
    with pytest.raises(InvalidDocument, match="int64"):
        dumps({"a": 1 << 64}, json_options=CANONICAL_JSON_OPTIONS)
    assert dumps({"a": 1 << 64}) == '{"a": 18446744073709551616}'


# --- options -----------------------------------------------------------------------------------------------


def test_modes_fix_their_settings() -> None:
    assert (CANONICAL_JSON_OPTIONS.strict_number_long, CANONICAL_JSON_OPTIONS.datetime_representation) == (
        True,
        DatetimeRepresentation.NUMBERLONG,
    )
    assert (RELAXED_JSON_OPTIONS.strict_number_long, RELAXED_JSON_OPTIONS.datetime_representation) == (
        False,
        DatetimeRepresentation.ISO8601,
    )
    assert (LEGACY_JSON_OPTIONS.strict_number_long, LEGACY_JSON_OPTIONS.datetime_representation) == (
        False,
        DatetimeRepresentation.LEGACY,
    )
    assert CANONICAL_JSON_OPTIONS.strict_uuid and RELAXED_JSON_OPTIONS.strict_uuid
    assert not LEGACY_JSON_OPTIONS.strict_uuid
    assert DEFAULT_JSON_OPTIONS == RELAXED_JSON_OPTIONS
    assert (JSONMode.LEGACY, JSONMode.RELAXED, JSONMode.CANONICAL) == (0, 1, 2)
    assert (
        DatetimeRepresentation.LEGACY,
        DatetimeRepresentation.NUMBERLONG,
        DatetimeRepresentation.ISO8601,
    ) == (0, 1, 2)


@pytest.mark.parametrize(
    ("mode", "setting"),
    [
        (JSONMode.RELAXED, {"strict_number_long": True}),
        (JSONMode.RELAXED, {"datetime_representation": DatetimeRepresentation.NUMBERLONG}),
        (JSONMode.RELAXED, {"strict_uuid": False}),
        (JSONMode.CANONICAL, {"strict_number_long": False}),
        (JSONMode.CANONICAL, {"datetime_representation": DatetimeRepresentation.ISO8601}),
        (JSONMode.CANONICAL, {"strict_uuid": False}),
    ],
)
def test_modes_refuse_other_settings(mode: JSONMode, setting: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(setting))):
        JSONOptions(json_mode=mode, **setting)


def test_bad_option_values_raise() -> None:
    with pytest.raises(ValueError, match="json_mode"):
        JSONOptions(json_mode=7)
    with pytest.raises(ValueError, match="datetime_representation"):
        JSONOptions(json_mode=JSONMode.LEGACY, datetime_representation=9)
    with pytest.raises(TypeError, match="unknown option"):
        RELAXED_JSON_OPTIONS.with_options(indent=2)
    plain: Any = CodecOptions()
    with pytest.raises(TypeError, match="json_options must be a JSONOptions"):
        dumps({}, json_options=plain)
    with pytest.raises(TypeError, match="json_options must be a JSONOptions"):
        loads("{}", json_options=plain)


def test_options_are_codec_options_and_derive_settings_from_a_new_mode() -> None:
    options = RELAXED_JSON_OPTIONS.with_options(json_mode=JSONMode.CANONICAL, tz_aware=True)
    assert isinstance(options, CodecOptions) and isinstance(options, JSONOptions)
    assert options.json_mode is JSONMode.CANONICAL and options.strict_number_long and options.tz_aware
    assert options.tzinfo == UTC
    assert options == JSONOptions(json_mode=JSONMode.CANONICAL, tz_aware=True)
    assert options != CANONICAL_JSON_OPTIONS
    legacy = JSONOptions(json_mode=JSONMode.LEGACY, strict_number_long=True)
    assert legacy.with_options(tz_aware=True).strict_number_long
    assert LEGACY_JSON_OPTIONS.with_options(json_mode=JSONMode.CANONICAL).strict_number_long
    with pytest.raises(ValueError, match=r"strict_number_long=True cannot be used with JSONMode\.RELAXED"):
        legacy.with_options(json_mode=JSONMode.RELAXED)
    assert pickle.loads(pickle.dumps(legacy)) == legacy
    assert options.codec_options() == CodecOptions(tz_aware=True, tzinfo=UTC)
    assert "json_mode" in repr(options)


def test_strict_number_long_in_legacy_mode() -> None:
    doc = {"a": Int64(5), "b": 5}
    assert compact(doc, LEGACY_JSON_OPTIONS) == '{"a":5,"b":5}'
    strict = JSONOptions(json_mode=JSONMode.LEGACY, strict_number_long=True)
    assert compact(doc, strict) == '{"a":{"$numberLong":"5"},"b":5}'


@pytest.mark.parametrize(
    ("representation", "expected"),
    [
        (DatetimeRepresentation.LEGACY, f'{{"$date":{WHEN_MS}}}'),
        (DatetimeRepresentation.NUMBERLONG, f'{{"$date":{{"$numberLong":"{WHEN_MS}"}}}}'),
        (DatetimeRepresentation.ISO8601, '{"$date":"2012-12-24T12:15:30.501Z"}'),
    ],
)
def test_datetime_representation(representation: DatetimeRepresentation, expected: str) -> None:
    options = JSONOptions(json_mode=JSONMode.LEGACY, datetime_representation=representation)
    assert compact(WHEN, options) == expected
    eastern = WHEN.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))
    assert compact(eastern, options) == expected
    assert compact(WHEN.replace(tzinfo=None), options) == expected
    assert loads(expected, json_options=options) == WHEN.replace(tzinfo=None)


def test_datetime_read_options() -> None:
    text = '{"d": {"$date": "2012-12-24T12:15:30.501Z"}}'
    assert loads(text)["d"] == WHEN.replace(tzinfo=None) and loads(text)["d"].tzinfo is None
    zone = datetime.timezone(datetime.timedelta(hours=9))
    aware = loads(text, json_options=RELAXED_JSON_OPTIONS.with_options(tz_aware=True, tzinfo=zone))["d"]
    assert aware == WHEN and aware.utcoffset() == datetime.timedelta(hours=9)
    ms = RELAXED_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_MS)
    assert loads(text, json_options=ms)["d"] == DatetimeMS(WHEN_MS)


@pytest.mark.parametrize(
    ("representation", "subtype", "stored"),
    [
        (UuidRepresentation.STANDARD, "04", A_UUID.bytes),
        (UuidRepresentation.PYTHON_LEGACY, "03", A_UUID.bytes),
        (UuidRepresentation.JAVA_LEGACY, "03", A_UUID.bytes[7::-1] + A_UUID.bytes[15:7:-1]),
        (
            UuidRepresentation.CSHARP_LEGACY,
            "03",
            A_UUID.bytes[3::-1] + A_UUID.bytes[5:3:-1] + A_UUID.bytes[7:5:-1] + A_UUID.bytes[8:],
        ),
    ],
)
def test_uuid_representations(representation: UuidRepresentation, subtype: str, stored: bytes) -> None:
    import base64

    for mode in (JSONMode.CANONICAL, JSONMode.RELAXED):
        options = JSONOptions(json_mode=mode, uuid_representation=representation)
        text = compact({"u": A_UUID}, options)
        encoded = base64.b64encode(stored).decode()
        assert text == f'{{"u":{{"$binary":{{"base64":"{encoded}","subType":"{subtype}"}}}}}}'
        assert loads(text, json_options=options)["u"] == A_UUID
        # Under UNSPECIFIED the same text reads as the stored Binary.
        assert loads(text, json_options=CANONICAL)["u"] == Binary(stored, int(subtype))


def test_uuid_needs_a_representation_or_the_legacy_uuid_form() -> None:
    with pytest.raises(ValueError, match="UNSPECIFIED"):
        dumps({"u": A_UUID})
    assert (
        compact({"u": A_UUID}, LEGACY_JSON_OPTIONS)
        == '{"u":{"$uuid":"73ffd264-44b3-4c69-90e8-e7d1dfc035d4"}}'
    )
    standard = LEGACY_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.STANDARD)
    assert loads(dumps({"u": A_UUID}, json_options=standard), json_options=standard)["u"] == A_UUID
    strict = JSONOptions(
        json_mode=JSONMode.LEGACY, strict_uuid=True, uuid_representation=UuidRepresentation.STANDARD
    )
    assert compact(A_UUID, strict) == '{"$binary":"c//SZESzTGmQ6OfR38A11A==","$type":"04"}'


def test_document_class() -> None:
    text = '{"b": {"y": 1, "x": {"$code": "c", "$scope": {"s": 1}}}, "a": 2}'
    doc = loads(text, json_options=RELAXED_JSON_OPTIONS.with_options(document_class=SON))
    assert type(doc) is SON and type(doc["b"]) is SON and type(doc["b"]["x"].scope) is SON
    assert list(doc) == ["b", "a"]
    raw = loads(text, json_options=RELAXED_JSON_OPTIONS.with_options(document_class=RawBSONDocument))
    assert isinstance(raw, RawBSONDocument)
    assert raw.raw == bson.encode({"b": {"y": 1, "x": Code("c", {"s": 1})}, "a": 2})
    assert compact(raw, RELAXED) == normalized(text)


class _Celsius:
    def __init__(self, degrees: float) -> None:
        self.degrees = degrees


class _CelsiusEncoder(TypeEncoder):
    python_type = _Celsius

    def transform_python(self, value: Any) -> Any:
        return value.degrees


class _DecimalDecoder(TypeDecoder):
    bson_type = Decimal128

    def transform_bson(self, value: Any) -> Any:
        return value.to_decimal()


def test_type_registry() -> None:
    options = RELAXED_JSON_OPTIONS.with_options(
        type_registry=TypeRegistry([_CelsiusEncoder(), _DecimalDecoder()], fallback_encoder=str)
    )
    assert compact({"t": _Celsius(21.5), "f": decimal.Decimal("1.5")}, options) == '{"t":21.5,"f":"1.5"}'
    assert loads('{"d": {"$numberDecimal": "1.50"}}', json_options=options) == {"d": decimal.Decimal("1.50")}
    with pytest.raises(TypeError):
        dumps({"t": _Celsius(1)})


# --- the legacy format -------------------------------------------------------------------------------------


def test_legacy_output() -> None:
    doc = {
        "_id": OID,
        "i": 1,
        "l": Int64(1 << 40),
        "f": 1.5,
        "nan": math.nan,
        "d": WHEN,
        "b": b"\x01",
        "u": Binary(b"\x02", 0x80),
        "r": Regex("a", "xi"),
        "t": Timestamp(1, 2),
        "c": Code("c", {"x": 1}),
        "m": MinKey(),
        "n": Decimal128("1"),
    }
    assert compact(doc, LEGACY_JSON_OPTIONS) == (
        '{"_id":{"$oid":"56e1fc72e0c917e9c4714161"},"i":1,"l":1099511627776,"f":1.5,"nan":NaN,'
        f'"d":{{"$date":{WHEN_MS}}},"b":{{"$binary":"AQ==","$type":"00"}},"u":{{"$binary":"Ag==","$type":"80"}},'
        '"r":{"$regex":"a","$options":"ix"},"t":{"$timestamp":{"t":1,"i":2}},"c":{"$code":"c","$scope":{"x":1}},'
        '"m":{"$minKey":1},"n":{"$numberDecimal":"1"}}'
    )
    back = loads(dumps(doc, json_options=LEGACY_JSON_OPTIONS), json_options=LEGACY_JSON_OPTIONS)
    assert math.isnan(back.pop("nan")) and back.pop("d") == WHEN.replace(tzinfo=None)
    assert back.pop("l") == 1 << 40 and back.pop("r") == Regex("a", "ix")
    expected = {k: v for k, v in doc.items() if k not in ("nan", "d", "l", "r")}
    assert back == expected


# --- json arguments, hooks and default ---------------------------------------------------------------------


def test_json_arguments_pass_through() -> None:
    doc = {"b": Int64(1), "a": [1]}
    assert dumps(doc, indent=2, sort_keys=True) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
    assert (
        dumps(doc, json_options=CANONICAL_JSON_OPTIONS)
        == '{"b": {"$numberLong": "1"}, "a": [{"$numberInt": "1"}]}'
    )
    assert dumps({"é": "☆"}, ensure_ascii=False) == '{"é": "☆"}'
    assert loads('{"a": 1.5}', parse_float=decimal.Decimal) == {"a": decimal.Decimal("1.5")}
    assert loads(b'{"a": {"$numberInt": "1"}}') == {"a": 1}
    # A hook of one's own replaces Extended JSON handling altogether, as with plain json.
    assert loads('{"a": {"$numberInt": "1"}}', object_hook=dict) == {"a": {"$numberInt": "1"}}


def test_hooks_for_plain_json_loads() -> None:
    text = (
        '{"d": {"$date": {"$numberLong": "1356351330501"}}, "p": {"$dbPointer": {"$ref": "b", '
        '"$id": {"$oid": "56e1fc72e0c917e9c4714161"}}}, "c": {"$code": "x", "$scope": {"n": {"$numberLong": "1"}}}}'
    )
    hook = functools.partial(json_util.object_hook, json_options=CANONICAL)
    pairs_hook = functools.partial(json_util.object_pairs_hook, json_options=CANONICAL)
    expected = {"d": WHEN, "p": DBPointer("b", OID), "c": Code("x", {"n": Int64(1)})}
    assert json.loads(text, object_hook=hook) == expected
    assert json.loads(text, object_pairs_hook=pairs_hook) == expected
    assert loads(text, json_options=CANONICAL) == expected
    with pytest.raises(InvalidExtendedJSON):
        json.loads('{"a": {"$oid": 1}}', object_hook=hook)


def test_default() -> None:
    assert json_util.default(OID) == {"$oid": str(OID)}
    assert json_util.default(Int64(3), CANONICAL_JSON_OPTIONS) == {"$numberLong": "3"}
    assert json.dumps({"x": OID, "r": re.compile("a", re.I)}, default=json_util.default) == (
        '{"x": {"$oid": "56e1fc72e0c917e9c4714161"}, "r": {"$regularExpression": {"pattern": "a", "options": "i"}}}'
    )
    with pytest.raises(TypeError, match="object"):
        json_util.default(object())


# --- round trips -------------------------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1).map(Int64),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(max_size=20),
    st.builds(Binary, st.binary(max_size=20), st.integers(1, 255).filter(lambda s: s not in (2, 3, 4))),
    st.builds(Timestamp, st.integers(0, (1 << 32) - 1), st.integers(0, (1 << 32) - 1)),
    st.integers(-(1 << 63), (1 << 63) - 1).map(DatetimeMS),
    st.builds(ObjectId, st.binary(min_size=12, max_size=12)),
    st.text(alphabet="imsx", max_size=4).map(lambda flags: Regex("p", flags)),
)
_KEYS = st.text(max_size=8).filter(lambda key: "\x00" not in key and not key.startswith("$"))
_DOCUMENTS = st.recursive(
    st.dictionaries(_KEYS, _SCALARS, max_size=5),
    lambda children: st.dictionaries(
        _KEYS, st.one_of(_SCALARS, children, st.lists(_SCALARS | children, max_size=4)), max_size=5
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_DOCUMENTS)
def test_canonical_round_trip_keeps_bson_bytes(document: dict[str, Any]) -> None:
    options = CANONICAL_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_MS)
    back = loads(dumps(document, json_options=options), json_options=options)
    assert bson.encode(back) == bson.encode(document)


@settings(max_examples=200, deadline=None)
@given(_DOCUMENTS)
def test_relaxed_round_trip_keeps_values(document: dict[str, Any]) -> None:
    options = RELAXED_JSON_OPTIONS.with_options(datetime_conversion=DatetimeConversion.DATETIME_MS)
    text = dumps(document, json_options=options)
    assert dumps(loads(text, json_options=options), json_options=options) == text


def _corpus_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(Path(CORPUS).glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8")).get("valid", []):
            yield f"{path.name}: {case['description']}", case


@pytest.mark.skipif(not Path(CORPUS).is_dir(), reason="the BSON corpus is not at MONGO_SPECS")
def test_corpus_extended_json_round_trips() -> None:
    checked = 0
    for name, case in _corpus_cases():
        cej = normalized(case["canonical_extjson"])
        native = bson.decode(bytes.fromhex(case["canonical_bson"]), codec_options=CANONICAL.codec_options())
        assert normalized(dumps(native, json_options=CANONICAL)) == cej, name
        assert (
            normalized(
                dumps(loads(case["canonical_extjson"], json_options=CANONICAL), json_options=CANONICAL)
            )
            == cej
        ), name
        if not case.get("lossy"):
            assert bson.encode(loads(case["canonical_extjson"], json_options=CANONICAL)) == bytes.fromhex(
                case["canonical_bson"]
            ), name
        if "degenerate_extjson" in case:
            from_dej = loads(case["degenerate_extjson"], json_options=CANONICAL)
            assert normalized(dumps(from_dej, json_options=CANONICAL)) == cej, name
        if "relaxed_extjson" in case:
            rej = normalized(case["relaxed_extjson"])
            assert normalized(dumps(native, json_options=RELAXED)) == rej, name
            assert (
                normalized(dumps(loads(case["relaxed_extjson"], json_options=RELAXED), json_options=RELAXED))
                == rej
            ), name
        checked += 1
    assert checked > 0
