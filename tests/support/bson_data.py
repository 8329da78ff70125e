"""Inputs for the BSON tests: the specification's corpus cases, Hypothesis strategies for documents of every
supported type and for element-shaped garbage, and an exact-type view of a value for comparing decodings."""

from __future__ import annotations

import datetime
import json
import math
import struct
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from hypothesis import strategies as st
from spec_runner.model import specs_root

from mongio.bson import (
    Binary,
    Code,
    CodecOptions,
    DatetimeConversion,
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
    Undefined,
    UuidRepresentation,
)

CORPUS = specs_root() / "bson-corpus" / "tests"


def corpus_cases() -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(file name, "valid" or "decodeErrors", case) for every case of the BSON corpus, if it is there."""
    if not CORPUS.is_dir():
        return
    for path in sorted(CORPUS.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        for case in spec.get("valid", []):
            yield path.name, "valid", case
        for case in spec.get("decodeErrors", []):
            yield path.name, "decodeErrors", case


CORPUS_OPTIONS = CodecOptions(
    tz_aware=True,
    tzinfo=datetime.UTC,
    uuid_representation=UuidRepresentation.UNSPECIFIED,
    datetime_conversion=DatetimeConversion.DATETIME_AUTO,
)


# Unicode category Cs (lone surrogates): strings holding one cannot be encoded as UTF-8.
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)


# Keys: any Unicode without NUL or surrogates. A leading "$" is left out so that no generated document
# happens to have the DBRef shape (which decodes to a DBRef, by design).
keys = st.text(st.characters(exclude_categories=SURROGATES, exclude_characters="\x00"), max_size=8).filter(
    lambda key: not key.startswith("$")
)


texts = st.text(st.characters(exclude_categories=SURROGATES), max_size=20)


cstrings = st.text(st.characters(exclude_categories=SURROGATES, exclude_characters="\x00"), max_size=10)


uint32 = st.integers(0, 2**32 - 1)


datetimes = st.datetimes(
    min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31, 23, 59, 59)
).map(
    # BSON keeps milliseconds.
    lambda value: value.replace(microsecond=value.microsecond // 1000 * 1000)
)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.floats(allow_nan=False),
    st.sampled_from([-0.0, float("inf"), float("-inf")]),
    texts,
    st.binary(max_size=20),
    st.builds(Binary, st.binary(max_size=20), st.integers(1, 255)),
    st.binary(min_size=12, max_size=12).map(ObjectId),
    datetimes,
    st.builds(Regex, cstrings, st.sets(st.sampled_from("ilmsux")).map(lambda flags: "".join(sorted(flags)))),
    st.builds(Code, texts),
    st.builds(Timestamp, uint32, uint32),
    st.binary(min_size=16, max_size=16).map(Decimal128.from_bid),
    st.just(MinKey()),
    st.just(MaxKey()),
    st.builds(Symbol, texts),
    st.just(Undefined()),
    st.builds(DBPointer, texts, st.binary(min_size=12, max_size=12).map(ObjectId)),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    documents = st.dictionaries(keys, children, max_size=5)
    return st.one_of(
        st.lists(children, max_size=5),
        documents,
        st.builds(Code, texts, documents),
        st.builds(DBRef, cstrings, children, st.none() | cstrings),
    )


values = st.recursive(scalars, _containers, max_leaves=25)


documents = st.dictionaries(keys, values, max_size=8)


# Element-shaped garbage: a real type byte and a terminated name, then arbitrary value bytes. This reaches
# each type's value reader far more often than uniformly random bytes do.
_TYPE_BYTES = [*range(0x01, 0x14), 0x7F, 0xFF, 0x00, 0x20]


garbage_elements = st.lists(
    st.tuples(
        st.sampled_from(_TYPE_BYTES),
        st.binary(max_size=3).filter(lambda k: b"\x00" not in k),
        st.binary(max_size=24),
    ).map(lambda parts: bytes([parts[0]]) + parts[1] + b"\x00" + parts[2]),
    max_size=4,
).map(b"".join)


def exact_shape(value: Any) -> Any:
    """A value with its exact types spelled out, so that 1, 1.0, True and Int64(1) never compare equal."""
    if isinstance(value, RawBSONDocument):
        return ("raw", value.raw)
    if isinstance(value, dict):
        return (type(value).__name__, [(key, exact_shape(item)) for key, item in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [exact_shape(item) for item in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, repr(value))
