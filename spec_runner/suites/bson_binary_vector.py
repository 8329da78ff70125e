"""BSON Binary Vector (subtype 9): every case of every tests/*.json, through ``Binary.from_vector`` / ``as_vector``.

Valid cases encode ``{test_key: Binary.from_vector(vector, dtype, padding)}`` to exactly the canonical
BSON, and decode the canonical BSON back to the same numbers, dtype and padding. Invalid cases must fail
to encode (when they give a vector) and fail to decode into a vector (when they give BSON).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from spec_runner.model import RunContext, SpecCase, Suite, relative_file, unique_names

NAME = "bson-binary-vector"

_SPECIAL_DOUBLES = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _number(value: Any) -> Any:
    """A vector element: a JSON number, or Extended JSON ``{"$numberDouble": ...}`` for the specials."""
    if isinstance(value, dict) and set(value) == {"$numberDouble"}:
        text = value["$numberDouble"]
        return _SPECIAL_DOUBLES[text] if text in _SPECIAL_DOUBLES else float(text)
    return value


def _as_float32(value: float) -> float:
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def _same_numbers(got: list[Any], expected: list[Any], is_float32: bool) -> bool:
    if len(got) != len(expected):
        return False
    for a, b in zip(got, expected):
        # FLOAT32 elements come back rounded to single precision; compare with the input rounded alike.
        want = _as_float32(b) if is_float32 else b
        if is_float32 and math.isnan(want):
            if not math.isnan(a):
                return False
        elif a != want or type(a) is not type(want):
            return False
    return True


def _check(spec: dict[str, Any], case: dict[str, Any]) -> None:
    from mongio import bson
    from mongio.bson import Binary, BinaryVector, BinaryVectorDtype, InvalidBSON, InvalidVector

    key = spec["test_key"]
    dtype = BinaryVectorDtype(bytes((int(case["dtype_hex"], 16),)))
    padding = case.get("padding", 0)
    vector = [_number(v) for v in case["vector"]] if "vector" in case else None
    canonical = bytes.fromhex(case["canonical_bson"]) if "canonical_bson" in case else None

    if case["valid"]:
        assert vector is not None and canonical is not None, "a valid case needs a vector and canonical_bson"
        binary = Binary.from_vector(vector, dtype, padding)
        encoded = bson.encode({key: binary})
        assert encoded == canonical, (
            f"encoding:\n  got      {encoded.hex().upper()}\n  expected {canonical.hex().upper()}"
        )
        decoded = bson.decode(canonical)[key]
        assert isinstance(decoded, Binary) and decoded.subtype == bson.VECTOR_SUBTYPE, f"decoded {decoded!r}"
        unpacked = decoded.as_vector()
        assert isinstance(unpacked, BinaryVector)
        assert unpacked.dtype is dtype, f"dtype {unpacked.dtype} != {dtype}"
        assert unpacked.padding == padding, f"padding {unpacked.padding} != {padding}"
        float32 = dtype is BinaryVectorDtype.FLOAT32
        assert _same_numbers(unpacked.data, vector, float32), f"data {unpacked.data} != {vector}"
        # The vector object itself round-trips too.
        assert Binary.from_vector(unpacked) == decoded
        return

    assert vector is not None or canonical is not None, "an invalid case needs a vector or canonical_bson"
    if vector is not None:
        try:
            produced = Binary.from_vector(vector, dtype, padding)
        except InvalidVector:
            pass
        else:
            raise AssertionError(
                f"encoding {vector} as {dtype.name} with padding {padding} gave {produced!r}"
            )
    if canonical is not None:
        try:
            value = bson.decode(canonical)[key].as_vector()
        except (InvalidVector, InvalidBSON):
            pass
        else:
            raise AssertionError(f"decoding {case['canonical_bson']} gave the vector {value!r}")


def _bind(spec: dict[str, Any], case: dict[str, Any]) -> Callable[[RunContext], None]:
    return lambda _context: _check(spec, case)


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    for path in sorted(tests_dir.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        file = relative_file(tests_dir, path)
        cases = spec.get("tests", [])
        names = unique_names([str(case["description"]) for case in cases])
        for name, case in zip(names, cases):
            yield SpecCase(suite=NAME, file=file, name=name, run=_bind(spec, case))


SUITE = Suite(name=NAME, collect=collect)
