"""Every public name of PyMongo's ``bson`` package and of each of its modules exists in ``mongio.bson`` under
the same module name, and the plain data among them (type bytes, constants, tables) has the same value."""

from __future__ import annotations
import __future__

import datetime
import decimal
import importlib
import inspect
import pickle
import pkgutil
import re
import types
import typing
from typing import Any

import bson
import bson.regex
import pytest

import mongio.bson as mb

# (module, name): why mongio.bson does not offer it.
NOT_OFFERED: dict[tuple[str, str], str] = {
    ("json_util", "get_size"): (
        "an undocumented size estimate PyMongo's own command logging uses to truncate documents; nothing in "
        "mongio's API takes or returns it"
    ),
}

PYMONGO_MODULES = sorted(m.name for m in pkgutil.iter_modules(bson.__path__) if not m.name.startswith("_"))


def _public_names(module: types.ModuleType) -> list[str]:
    """Names a user of ``module`` could rely on: its ``__all__``, and the names it shows that are not
    private, not typing helpers, and not classes, functions or modules of another package it imports."""
    names = set(getattr(module, "__all__", ()))
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if getattr(typing, name, object()) is value or isinstance(value, __future__._Feature):
            continue
        if isinstance(value, types.ModuleType):
            if value.__name__.startswith("bson."):
                names.add(name)
            continue
        if (inspect.isclass(value) or inspect.isroutine(value)) and not (
            getattr(value, "__module__", "") or ""
        ).startswith("bson"):
            continue
        names.add(name)
    return sorted(names)


def _pairs() -> list[tuple[str, str]]:
    pairs = [("", name) for name in _public_names(bson)]
    for module_name in PYMONGO_MODULES:
        module = importlib.import_module(f"bson.{module_name}")
        pairs += [(module_name, name) for name in _public_names(module)]
    return pairs


PAIRS = _pairs()


def _module(module_name: str, package: str) -> types.ModuleType:
    return importlib.import_module(f"{package}.{module_name}" if module_name else package)


def test_the_comparison_covers_pymongos_modules_and_names() -> None:
    assert {"binary", "code", "json_util", "max_key", "min_key", "raw_bson", "tz_util"} <= set(
        PYMONGO_MODULES
    )
    assert len(PAIRS) > 150
    assert ("", "BSON") in PAIRS and ("tz_util", "FixedOffset") in PAIRS


@pytest.mark.parametrize("module_name", PYMONGO_MODULES)
def test_every_pymongo_bson_module_exists_in_mongio(module_name: str) -> None:
    module = importlib.import_module(f"mongio.bson.{module_name}")
    assert getattr(mb, module_name) is module  # importing mongio.bson is enough, as with PyMongo's bson


@pytest.mark.parametrize(("module_name", "name"), PAIRS, ids=[f"{m or 'bson'}.{n}" for m, n in PAIRS])
def test_every_public_name_exists_with_the_same_meaning(module_name: str, name: str) -> None:
    if (module_name, name) in NOT_OFFERED:
        assert not hasattr(_module(module_name, "mongio.bson"), name)  # listed, so it must really be absent
        return
    ours = getattr(_module(module_name, "mongio.bson"), name)
    theirs = getattr(_module(module_name, "bson"), name)
    if isinstance(theirs, types.ModuleType):
        assert isinstance(ours, types.ModuleType)
        assert ours.__name__ == f"mongio.bson.{name}"
    elif hasattr(theirs, "_fields"):  # option tuples (CodecOptions, JSONOptions): the same fields
        assert all(hasattr(ours, field) for field in theirs._fields)
    elif isinstance(theirs, (bytes, int, str, tuple, frozenset, datetime.datetime, datetime.timedelta)):
        assert ours == theirs
    elif isinstance(theirs, dict):
        assert dict(ours) == dict(theirs)
    elif inspect.isclass(theirs):
        assert inspect.isclass(ours)
        assert ours.__name__ == theirs.__name__ or ours is getattr(mb, theirs.__name__, None)
    else:
        assert callable(ours) == callable(theirs)


def test_the_not_offered_list_only_holds_names_pymongo_has() -> None:
    assert set(NOT_OFFERED) <= set(PAIRS)


def test_bson_class_encodes_and_decodes_as_pymongos() -> None:
    document = {"a": 1, "b": [mb.Int64(2), "x"], "c": {"d": None}}
    data = mb.BSON.encode(document)
    assert isinstance(data, mb.BSON) and isinstance(data, bytes)
    assert bytes(data) == bson.BSON.encode(document)
    assert data.decode() == document
    assert mb.BSON(bson.BSON.encode(document)).decode() == document
    with pytest.raises(mb.InvalidDocument):
        mb.BSON.encode({"$a": 1}, check_keys=True)
    options = mb.CodecOptions(document_class=mb.SON)
    assert type(data.decode(options)) is mb.SON


def test_list_names_and_buffer_views() -> None:
    names = mb.gen_list_name()
    assert [next(names) for _ in range(1003)][-3:] == [b"1000\x00", b"1001\x00", b"1002\x00"]
    ours, theirs = mb.gen_list_name(), bson.gen_list_name()
    assert [next(ours) for _ in range(1500)] == [next(theirs) for _ in range(1500)]
    source = bytearray(b"abc")
    data, view = mb.get_data_and_view(source)
    assert data is source and view.tobytes() == b"abc"
    data, view = mb.get_data_and_view(memoryview(source))
    source[0] = ord("z")
    assert data == b"abc" and view.tobytes() == b"abc"


def test_tz_util_fixed_offsets_behave_as_pymongos() -> None:
    zone = mb.tz_util.FixedOffset(90, "plus-ninety")
    theirs = bson.tz_util.FixedOffset(90, "plus-ninety")
    moment = datetime.datetime(2020, 5, 1, 12, 0, tzinfo=zone)
    assert zone.utcoffset(None) == theirs.utcoffset(None) == datetime.timedelta(minutes=90)
    assert zone.tzname(None) == "plus-ninety" and zone.dst(None) == datetime.timedelta(0)
    assert moment == datetime.datetime(2020, 5, 1, 12, 0, tzinfo=theirs)
    copied = pickle.loads(pickle.dumps(zone))
    assert copied.utcoffset(None) == zone.utcoffset(None) and copied.tzname(None) == "plus-ninety"
    assert mb.utc.utcoffset(None) == datetime.timedelta(0) and mb.utc.tzname(None) == "UTC"
    assert mb.encode({"t": moment}) == bson.encode({"t": moment})


def test_regex_str_flags_to_int_matches_pymongos() -> None:
    for letters in ("", "i", "imx", "ilmsux", "su"):
        assert mb.regex.str_flags_to_int(letters) == bson.regex.str_flags_to_int(letters)
    assert mb.regex.str_flags_to_int("im") == re.I | re.M


def test_decimal_codecs_convert_decimals() -> None:
    registry = mb.TypeRegistry([mb.decimal128.DecimalEncoder(), mb.decimal128.DecimalDecoder()])
    options = mb.CodecOptions(type_registry=registry)
    data = mb.encode({"d": decimal.Decimal("1.10")}, codec_options=options)
    assert data == mb.encode({"d": mb.Decimal128("1.10")})
    value: Any = mb.decode(data, options)["d"]
    assert type(value) is decimal.Decimal and str(value) == "1.10"


def test_module_aliases_hold_mongios_classes() -> None:
    assert mb.max_key.MaxKey is mb.MaxKey and mb.min_key.MinKey is mb.MinKey
    assert mb.raw_bson.RawBSONDocument is mb.RawBSONDocument
    assert mb.raw_bson.DEFAULT is mb.raw_bson.DEFAULT_RAW_BSON_OPTIONS
    assert mb.raw_bson.DEFAULT.document_class is mb.RawBSONDocument
    assert mb.datetime_ms.CodecOptions is mb.CodecOptions
    assert mb.datetime_ms.DEFAULT_CODEC_OPTIONS is mb.DEFAULT_CODEC_OPTIONS
    with pytest.raises(AttributeError):
        _ = mb.datetime_ms.NotThere
    assert mb.json_util.ObjectId is mb.ObjectId
    assert mb.RE_TYPE is re.Pattern
