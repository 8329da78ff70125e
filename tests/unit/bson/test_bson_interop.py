"""mongio's BSON types against PyMongo's: equal values are equal and hash alike, different ones are not,
and what cannot be made symmetric (PyMongo's ``__eq__`` answers False itself) is what the differences file
says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import bson
import bson.binary
import bson.code
import bson.datetime_ms
import bson.dbref
import bson.decimal128
import bson.int64
import bson.max_key
import bson.min_key
import bson.objectid
import bson.raw_bson
import bson.regex
import bson.timestamp
import pytest
import yaml

import mongio.bson as mb

OID = b"\x65\x00\x00\x01" + bytes(range(8))
OTHER_OID = b"\x65\x00\x00\x02" + bytes(range(8))

# (name, mongio value, the same value from PyMongo, a different value from PyMongo)
PAIRS: list[tuple[str, Any, Any, Any]] = [
    ("ObjectId", mb.ObjectId(OID), bson.objectid.ObjectId(OID), bson.objectid.ObjectId(OTHER_OID)),
    ("Binary", mb.Binary(b"ab", 0x80), bson.binary.Binary(b"ab", 0x80), bson.binary.Binary(b"ab", 0x81)),
    (
        "Binary-uuid",
        mb.Binary(bytes(16), 4),
        bson.binary.Binary(bytes(16), 4),
        bson.binary.Binary(bytes(16), 3),
    ),
    ("Code", mb.Code("f()"), bson.code.Code("f()"), bson.code.Code("g()")),
    (
        "Code-scope",
        mb.Code("f()", {"a": 1}),
        bson.code.Code("f()", {"a": 1}),
        bson.code.Code("f()", {"a": 2}),
    ),
    (
        "Decimal128",
        mb.Decimal128("1.10"),
        bson.decimal128.Decimal128("1.10"),
        bson.decimal128.Decimal128("1.1"),
    ),
    ("Int64", mb.Int64(5), bson.int64.Int64(5), bson.int64.Int64(6)),
    ("Regex", mb.Regex("a.c", "mi"), bson.regex.Regex("a.c", re.I | re.M), bson.regex.Regex("a.c", re.I)),
    ("Regex-letters", mb.Regex("x", "u"), bson.regex.Regex("x", "u"), bson.regex.Regex("y", "u")),
    ("Timestamp", mb.Timestamp(10, 2), bson.timestamp.Timestamp(10, 2), bson.timestamp.Timestamp(10, 3)),
    (
        "DBRef",
        mb.DBRef("c", mb.ObjectId(OID), "db", x=1),
        bson.dbref.DBRef("c", bson.objectid.ObjectId(OID), "db", x=1),
        bson.dbref.DBRef("c", bson.objectid.ObjectId(OID), "db", x=2),
    ),
    ("DBRef-plain", mb.DBRef("c", 1), bson.dbref.DBRef("c", 1), bson.dbref.DBRef("c", 1, "db")),
    ("MinKey", mb.MinKey(), bson.min_key.MinKey(), bson.max_key.MaxKey()),
    ("MaxKey", mb.MaxKey(), bson.max_key.MaxKey(), bson.min_key.MinKey()),
    ("DatetimeMS", mb.DatetimeMS(-7), bson.datetime_ms.DatetimeMS(-7), bson.datetime_ms.DatetimeMS(7)),
    (
        "RawBSONDocument",
        mb.RawBSONDocument(bson.encode({"a": 1})),
        bson.raw_bson.RawBSONDocument(bson.encode({"a": 1})),
        bson.raw_bson.RawBSONDocument(bson.encode({"a": 2})),
    ),
]
IDS = [name for name, *_ in PAIRS]

# PyMongo's __eq__ of these answers False for anything not its own class instead of NotImplemented, so
# ``pymongo_value == mongio_value`` is False whatever mongio does (short of subclassing PyMongo's types).
ONE_WAY = {"Binary", "Binary-uuid", "Code", "Code-scope", "MinKey", "MaxKey", "DatetimeMS"}


def _hash(value: Any) -> int | None:
    try:
        return hash(value)
    except TypeError:
        return None


@pytest.mark.parametrize(("name", "ours", "theirs", "different"), PAIRS, ids=IDS)
def test_a_mongio_value_equals_pymongos_same_value(name: str, ours: Any, theirs: Any, different: Any) -> None:
    assert ours == theirs
    assert (ours != theirs) is False
    assert ours != different
    assert (ours == different) is False
    assert ours != object()


@pytest.mark.parametrize(("name", "ours", "theirs", "different"), PAIRS, ids=IDS)
def test_pymongos_value_equals_mongios_unless_pymongo_answers_itself(
    name: str, ours: Any, theirs: Any, different: Any
) -> None:
    if name in ONE_WAY:
        assert (theirs == ours) is False  # recorded in compat/differences.yaml
    else:
        assert theirs == ours
        assert (theirs != ours) is False
    assert (different == ours) is False


@pytest.mark.parametrize(("name", "ours", "theirs", "different"), PAIRS, ids=IDS)
def test_equal_values_hash_alike_where_pymongo_hashes(
    name: str, ours: Any, theirs: Any, different: Any
) -> None:
    theirs_hash = _hash(theirs)
    if theirs_hash is not None:  # PyMongo's Code, Decimal128, Regex and RawBSONDocument are unhashable
        assert _hash(ours) == theirs_hash
        assert {theirs: 1}.get(ours) == 1 or name in ONE_WAY


@pytest.mark.parametrize(("name", "ours", "theirs", "different"), PAIRS, ids=IDS)
def test_pymongo_encodes_a_mongio_value_as_it_encodes_its_own(
    name: str, ours: Any, theirs: Any, different: Any
) -> None:
    if name.startswith("Regex"):
        with pytest.raises(TypeError):  # mongio's flags are letters; recorded in compat/differences.yaml
            bson.encode({"v": ours})
        converted = bson.regex.Regex(ours.pattern, ours.flags)  # the documented workaround
        assert bson.encode({"v": converted}) == mb.encode({"v": ours})
    else:
        assert bson.encode({"v": ours}) == bson.encode({"v": theirs}) == mb.encode({"v": ours})
    assert mb.encode({"v": theirs}) == bson.encode({"v": theirs})


def test_objectids_convert_both_ways() -> None:
    theirs = bson.objectid.ObjectId(OID)
    ours = mb.ObjectId(theirs)  # type: ignore[arg-type]  # typed for mongio's own; PyMongo's is taken too
    assert ours.binary == OID
    assert type(ours) is mb.ObjectId
    # PyMongo's constructor takes only its own ObjectId, bytes or str: pass the text or the bytes.
    with pytest.raises(TypeError):
        bson.objectid.ObjectId(ours)  # type: ignore[arg-type]
    assert bson.objectid.ObjectId(str(ours)) == theirs
    assert bson.objectid.ObjectId(ours.binary) == theirs
    assert mb.ObjectId.is_valid(theirs)


def test_objectids_and_timestamps_order_against_pymongos() -> None:
    assert mb.ObjectId(OID) < bson.objectid.ObjectId(OTHER_OID)
    assert bson.objectid.ObjectId(OID) < mb.ObjectId(OTHER_OID)
    mixed: list[Any] = [mb.ObjectId(OTHER_OID), bson.objectid.ObjectId(OID)]
    assert sorted(mixed)[0] == mb.ObjectId(OID)
    assert mb.Timestamp(1, 2) < bson.timestamp.Timestamp(1, 3)
    assert mb.Timestamp(1, 2) >= bson.timestamp.Timestamp(1, 2)
    assert mb.DatetimeMS(1) > bson.datetime_ms.DatetimeMS(0)
    assert mb.MinKey() < bson.max_key.MaxKey()
    assert not mb.MinKey() < bson.min_key.MinKey()


def test_a_mongio_objectid_in_a_set_of_pymongo_ones() -> None:
    ids = {bson.objectid.ObjectId(OID), bson.objectid.ObjectId(OTHER_OID)}
    assert mb.ObjectId(OID) in ids
    assert mb.ObjectId() not in ids


DIFFERENCES = Path(mb.__file__).parent.parent / "compat" / "differences.yaml"


def test_the_differences_file_lists_each_difference_with_what_to_do() -> None:
    entries = yaml.safe_load(DIFFERENCES.read_text())["bson"]
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids))
    interop = {
        "regex-flags",
        "one-way-equality",
        "pymongo-objectid-constructor",
        "hashable-types",
        "decoded-types",
        "unknown-type-marker",
        "deprecated-type-markers",
        "encode-size-limit",
    }
    assert interop <= set(ids)
    for entry in entries:
        assert set(entry) >= {"id", "api", "pymongo", "mongio", "why"}, entry
        if entry["id"] in interop:
            assert entry["workaround"].strip(), entry
