"""The PyMongo-typed mode (``mongio.pymongo_types``): documents decode to PyMongo's ``bson`` values, exactly as
PyMongo's own decoder makes them from the same bytes; the application's decoders still apply; children of a
typed object stay typed; PyMongo's ``CodecOptions`` are accepted; mongio's errors become PyMongo's too.

PyMongo's decoder is the reference: every valid document of the BSON corpus is decoded by both and the
values compared with their types, through the compiled and the Python element loops."""

from __future__ import annotations

import datetime
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import bson as pymongo_bson
import bson.codec_options as pymongo_codec_options
import pytest

from mongio.bson import CodecOptions, DatetimeConversion, TypeDecoder, TypeRegistry, _decoder, decode, encode
from mongio.bson.codec_options import as_codec_options
from mongio.bson.objectid import ObjectId
from mongio.pymongo_types import typed_codec_options
from tests.support.bson_data import CORPUS, corpus_cases

TYPED = typed_codec_options(CodecOptions())


@pytest.fixture(params=["compiled", "python"])
def element_loops(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and not _decoder.speedups_available():
        pytest.skip("the compiled decoder loops are not built or are switched off")
    _decoder.use_speedups(request.param == "compiled")
    try:
        yield request.param
    finally:
        _decoder.use_speedups(True)


def _same(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two decoded values differ in type or value (NaN equal to NaN), by key path."""
    if type(ours) is not type(theirs):
        return [f"{path}: {type(ours).__module__}.{type(ours).__name__} != {type(theirs).__name__}"]
    if isinstance(ours, dict):
        if list(ours) != list(theirs):
            return [f"{path}: keys {list(ours)} != {list(theirs)}"]
        return [problem for key in ours for problem in _same(ours[key], theirs[key], f"{path}.{key}")]
    if isinstance(ours, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items != {len(theirs)}"]
        return [problem for i, (a, b) in enumerate(zip(ours, theirs)) for problem in _same(a, b, f"{path}.{i}")]
    if isinstance(ours, float) and ours != ours and theirs != theirs:
        return []
    if isinstance(ours, pymongo_bson.DBRef):
        return _same(ours.as_doc().to_dict(), theirs.as_doc().to_dict(), path)
    if isinstance(ours, pymongo_bson.Code) and (ours.scope is not None or theirs.scope is not None):
        return _same(ours.scope, theirs.scope, f"{path}.$scope") + (
            [] if str(ours) == str(theirs) else [f"{path}: code {ours!r} != {theirs!r}"]
        )
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the specifications checkout is not beside the repository")
def test_corpus_decodes_as_pymongo_decodes_it(element_loops: str) -> None:
    """Both decoders with their defaults (naive UTC datetimes, UUID representation unspecified)."""
    compared, differences = 0, []
    for file, kind, case in corpus_cases():
        if kind != "valid":
            continue
        data = bytes.fromhex(case["canonical_bson"])
        try:
            expected = pymongo_bson.decode(data)
        except Exception:  # out of PyMongo's datetime range and the like: nothing to compare with
            continue
        compared += 1
        differences += [f"{file} {case['description']}{p}" for p in _same(decode(data, TYPED), expected)]
    assert compared > 300
    assert differences == []


def test_values_are_pymongo_classes_at_every_depth(element_loops: str) -> None:
    oid = ObjectId()
    data = encode({"_id": oid, "n": {"list": [oid, {"deep": oid}]}, "when": datetime.datetime(2024, 1, 2)})
    document = decode(data, TYPED)
    assert type(document["_id"]) is pymongo_bson.ObjectId
    assert document["_id"] == pymongo_bson.ObjectId(str(oid))
    assert type(document["n"]["list"][0]) is pymongo_bson.ObjectId
    assert type(document["n"]["list"][1]["deep"]) is pymongo_bson.ObjectId
    assert type(document["when"]) is datetime.datetime
    plain = decode(data)
    assert type(plain["_id"]) is ObjectId


def test_regex_flags_are_a_plain_int_as_pymongo_decodes_them(element_loops: str) -> None:
    data = pymongo_bson.encode({"r": pymongo_bson.Regex("^a", "imx")})
    ours, theirs = decode(data, TYPED)["r"], pymongo_bson.decode(data)["r"]
    assert type(ours) is pymongo_bson.Regex and type(ours.flags) is int
    assert (ours.pattern, ours.flags) == (theirs.pattern, theirs.flags)


def test_pymongo_raw_documents_are_given_pymongo_options(element_loops: str) -> None:
    from bson.raw_bson import RawBSONDocument as PyMongoRaw

    options = typed_codec_options(CodecOptions(document_class=PyMongoRaw, tz_aware=True))
    data = pymongo_bson.encode({"a": {"b": pymongo_bson.ObjectId()}, "when": datetime.datetime(2020, 1, 2)})
    document = decode(data, options)
    assert type(document) is PyMongoRaw and document.raw == data
    assert type(document["a"]) is PyMongoRaw and type(document["a"]["b"]) is pymongo_bson.ObjectId
    assert document["when"].tzinfo is not None  # the settings went with the options


class _UpperCode(TypeDecoder):
    bson_type = pymongo_bson.Code

    def transform_bson(self, value: Any) -> Any:
        return str(value).upper()


def test_an_application_decoder_for_a_pymongo_class_applies_after_the_conversion(element_loops: str) -> None:
    registry = TypeRegistry([_UpperCode()])
    options = typed_codec_options(CodecOptions(type_registry=registry))
    data = pymongo_bson.encode({"c": pymongo_bson.Code("f()"), "i": pymongo_bson.Int64(7)})
    document = decode(data, options)
    assert document == {"c": "F()", "i": 7}
    assert type(document["i"]) is pymongo_bson.Int64


def test_aware_datetimes_are_in_pymongo_utc_object_as_pymongo_decodes_them(element_loops: str) -> None:
    moment = datetime.datetime(2024, 2, 29, 12, 30, 15, 123000, tzinfo=datetime.UTC)
    data = encode({"at": moment})
    typed = decode(data, typed_codec_options(CodecOptions(tz_aware=True)))["at"]
    theirs: Any = pymongo_bson.decode(data, pymongo_codec_options.CodecOptions(tz_aware=True))["at"]
    assert typed == moment and typed.tzinfo is pymongo_bson.tz_util.utc
    assert typed.tzinfo == theirs.tzinfo  # PyMongo's utc is equal only to itself
    assert typed_codec_options(CodecOptions(tz_aware=True)).tzinfo is None  # the option still reads as given
    assert decode(data, CodecOptions(tz_aware=True))["at"].tzinfo is datetime.UTC  # outside the mode, as before
    tokyo = datetime.timezone(datetime.timedelta(hours=9))
    given = decode(data, typed_codec_options(CodecOptions(tz_aware=True, tzinfo=tokyo)))["at"]
    assert given.tzinfo is tokyo and given == moment


def test_pymongo_codec_options_are_accepted_with_their_settings_and_codecs() -> None:
    class Celsius(pymongo_codec_options.TypeDecoder):
        bson_type = float

        def transform_bson(self, value: Any) -> Any:
            return ("celsius", value)

    theirs: pymongo_codec_options.CodecOptions[dict[str, Any]] = pymongo_codec_options.CodecOptions(
        tz_aware=True,
        uuid_representation=pymongo_bson.STANDARD,
        type_registry=pymongo_codec_options.TypeRegistry([Celsius()]),
        datetime_conversion=pymongo_codec_options.DatetimeConversion.DATETIME_AUTO,
    )
    ours = as_codec_options(theirs)
    assert type(ours) is CodecOptions
    assert ours.tz_aware and ours.uuid_representation == 4
    assert ours.datetime_conversion == DatetimeConversion.DATETIME_AUTO
    value = uuid.uuid4()
    assert decode(encode({"t": 21.5, "u": value}, codec_options=ours), ours) == {"t": ("celsius", 21.5), "u": value}
    with pytest.raises(TypeError, match="codec_options must be a CodecOptions, not dict"):
        as_codec_options({"tz_aware": True})


class _Fahrenheit:
    def __init__(self, degrees: float) -> None:
        self.degrees = degrees


class _FahrenheitAsCelsius(pymongo_codec_options.TypeEncoder):
    python_type = _Fahrenheit

    def transform_python(self, value: Any) -> Any:
        return (value.degrees - 32) / 1.8


@pytest.mark.parametrize("typed", [True, False])
def test_a_pymongo_type_registry_is_taken_as_the_client_type_registry(typed: bool) -> None:
    from mongio import MongoClient

    theirs = pymongo_codec_options.TypeRegistry([_FahrenheitAsCelsius()])
    client = MongoClient(type_registry=theirs, connect=False, pymongo_types=typed)
    ours = client.codec_options.type_registry
    assert ours == theirs and theirs == ours  # equal both ways, by the same codecs
    assert ours != pymongo_codec_options.TypeRegistry() and ours != pymongo_codec_options.TypeRegistry(
        [_FahrenheitAsCelsius()]
    )  # another codec object is another codec
    assert decode(encode({"t": _Fahrenheit(212.0)}, codec_options=client.codec_options)) == {"t": 100.0}


def _run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_without_the_mode_nothing_imports_pymongo() -> None:
    """In a fresh interpreter: a client, a codec round trip and an error, and neither package is imported."""
    out = _run_python(
        """
        import sys
        import mongio
        from mongio.bson import decode, encode, ObjectId
        client = mongio.MongoClient("mongodb://127.0.0.1:1/", connect=False)
        decode(encode({"_id": ObjectId()}), client.codec_options)
        try:
            mongio.MongoClient("mongodb://127.0.0.1:1/?w=bad&wtimeoutMS=-1", connect=False)
        except Exception:
            pass
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("bson", "pymongo")))
        """
    )
    assert out.strip() == "[]"


def test_children_of_a_typed_client_stay_typed_whatever_options_they_are_given() -> None:
    """In a fresh interpreter, since a typed client changes the error classes for the whole process."""
    out = _run_python(
        """
        import bson.codec_options
        from mongio import MongoClient
        from mongio.bson import CodecOptions
        from mongio.pymongo_types import PyMongoTypedCodecOptions as Typed

        client = MongoClient("mongodb://127.0.0.1:1/?pymongoTypes=true", connect=False)
        database = client.get_database("d", codec_options=CodecOptions(tz_aware=True))
        collection = database.get_collection("c", codec_options=bson.codec_options.CodecOptions(tz_aware=False))
        print(isinstance(client.codec_options, Typed), isinstance(database.codec_options, Typed))
        print(database.codec_options.tz_aware, isinstance(collection.codec_options, Typed))
        print(collection.codec_options.tz_aware, isinstance(collection.with_options().codec_options, Typed))
        plain = MongoClient("mongodb://127.0.0.1:1/", connect=False)
        print(type(plain.get_database("d", codec_options=CodecOptions(tz_aware=True)).codec_options).__name__)
        keyword = MongoClient("mongodb://127.0.0.1:1/", pymongo_types=True, connect=False)
        print(isinstance(keyword.codec_options, Typed), type(keyword.codec_options.new_object_id()).__module__)
        """
    )
    assert out.splitlines() == ["True True", "True True", "False True", "CodecOptions", "True bson.objectid"]


def test_errors_become_pymongo_errors_once_the_mode_is_on() -> None:
    """In a fresh interpreter, since the change is for the whole process."""
    out = _run_python(
        """
        import bson.errors, pymongo.errors
        import mongio, mongio.errors as m
        from mongio.bson import errors as bson_errors
        before = isinstance(m.DuplicateKeyError("dup", 11000), pymongo.errors.DuplicateKeyError)
        mongio.MongoClient("mongodb://127.0.0.1:1/", pymongo_types=True, connect=False)
        error = m.DuplicateKeyError("dup", 11000, {"errmsg": "dup", "errorLabels": ["L"]})
        print(before)
        print(isinstance(error, pymongo.errors.DuplicateKeyError), isinstance(error, pymongo.errors.OperationFailure))
        print(error.code, error.details, sorted(error.error_labels), str(error))
        timeout = m.NetworkTimeout("slow")
        print(isinstance(timeout, pymongo.errors.AutoReconnect), timeout.timeout)
        print(isinstance(bson_errors.InvalidDocument("x"), bson.errors.InvalidDocument))
        print(isinstance(m.BulkWriteError({"writeErrors": []}), pymongo.errors.BulkWriteError))
        client_bulk = m.ClientBulkWriteException(None, [{"idx": 0, "code": 11000}], [], None)
        print(isinstance(client_bulk, pymongo.errors.ClientBulkWriteException), client_bulk.write_errors)
        import gridfs.errors
        from mongio.gridfs import errors as grid_errors
        print(isinstance(grid_errors.NoFile("gone"), gridfs.errors.NoFile), isinstance(grid_errors.CorruptGridFile("x"), gridfs.errors.GridFSError))
        """
    )
    assert out.splitlines() == [
        "False",
        "True True",
        "11000 {'errmsg': 'dup', 'errorLabels': ['L']} ['L'] dup, code: 11000, full error: {'errmsg': 'dup', 'errorLabels': ['L']}",
        "True True",
        "True",
        "True",
        "True [{'idx': 0, 'code': 11000}]",
        "True True",
    ]
