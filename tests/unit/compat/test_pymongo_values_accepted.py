"""PyMongo's values where mongio takes its own: PyMongo's ``CodecOptions`` compare equal to mongio's with the same
settings (both ways, in the PyMongo-typed mode too), a parameterised document class (``SON[str, Any]``) is taken
as its class, and ``Database.dereference`` follows PyMongo's ``DBRef``."""

from __future__ import annotations

from typing import Any

import bson as pymongo_bson
import pytest
from bson.codec_options import CodecOptions as PyMongoCodecOptions
from bson.codec_options import TypeRegistry as PyMongoTypeRegistry
from bson.decimal128 import DecimalDecoder

from mongio import MongoClient
from mongio.bson import SON, CodecOptions, decode, encode


def test_pymongo_codec_options_compare_equal_both_ways() -> None:
    registry = PyMongoTypeRegistry([DecimalDecoder()])
    theirs: PyMongoCodecOptions[Any] = PyMongoCodecOptions(tz_aware=True, type_registry=registry)
    client = MongoClient("mongodb://127.0.0.1:1/", connect=False, pymongo_types=True)
    typed = client.get_database("d", codec_options=theirs).codec_options
    for ours in (typed, CodecOptions(tz_aware=True, type_registry=typed.type_registry)):
        assert (theirs == ours, ours == theirs, theirs != ours, ours != theirs) == (True, True, False, False)
    others: list[PyMongoCodecOptions[Any]] = [
        PyMongoCodecOptions(tz_aware=True),
        PyMongoCodecOptions(type_registry=registry),
    ]
    for other in others:
        assert (other == typed, typed == other, other != typed) == (False, False, True)
    # mongio's own two classes still differ: the typed mode decodes to other classes.
    assert typed != typed.codec_options()
    assert CodecOptions() != pymongo_bson.SON() and CodecOptions() != ()


@pytest.mark.parametrize("annotation", [SON[str, Any], dict[str, Any], pymongo_bson.SON[str, Any]])
def test_a_parameterised_document_class_decodes_as_its_class(annotation: Any) -> None:
    options = CodecOptions(document_class=annotation)
    assert options.document_class is annotation.__origin__
    decoded = decode(encode({"a": {"b": 1}}), codec_options=options)
    assert type(decoded) is annotation.__origin__ and type(decoded["a"]) is annotation.__origin__
    with pytest.raises(TypeError, match="document_class must be"):
        CodecOptions(document_class=list[int])


async def test_dereference_takes_pymongo_s_dbref() -> None:
    db = MongoClient("mongodb://127.0.0.1:1/", connect=False).get_database("d")
    with pytest.raises(ValueError, match="another database"):
        await db.dereference(pymongo_bson.DBRef("c", 1, "elsewhere"))
    with pytest.raises(TypeError, match="cannot dereference a dict"):
        await db.dereference({"$ref": "c", "$id": 1})  # type: ignore[arg-type]
