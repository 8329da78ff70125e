"""One nesting limit, ``mongio.bson._limits.MAX_NESTING``, in both decoders and both encoders.

The compiled loops read the limit and its message from ``mongio.bson._limits`` when they are loaded; the Python
loops import them. Each decoder takes a document nested exactly ``MAX_NESTING`` levels inside the outermost one
and refuses one level more, with the same error and message, whatever the recursion limit; each encoder does the
same for nested dicts and lists.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mongio.bson import Code, InvalidBSON, InvalidDocument, _decoder, _encoder, decode, encode
from mongio.bson._limits import MAX_NESTING, NESTED_TOO_DEEPLY

IMPLEMENTATIONS = [
    pytest.param(
        True,
        id="compiled",
        marks=pytest.mark.skipif(
            not _decoder.speedups_available(), reason="the compiled loops are not built or are switched off"
        ),
    ),
    pytest.param(False, id="python"),
]


@pytest.fixture(params=IMPLEMENTATIONS)
def compiled(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Run the test with the compiled loops, then with the Python ones."""
    enabled: bool = request.param
    _decoder.use_speedups(enabled)
    _encoder.use_speedups(enabled)
    try:
        yield enabled
    finally:
        _decoder.use_speedups(True)
        _encoder.use_speedups(True)


def _document(body: bytes) -> bytes:
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def _code_with_scope(scope: bytes) -> bytes:
    code = b"f\x00"
    return struct.pack("<i", 4 + 4 + len(code) + len(scope)) + struct.pack("<i", len(code)) + code + scope


def _wrap_document(inner: bytes) -> bytes:
    return b"\x03a\x00" + inner


def _wrap_array(inner: bytes) -> bytes:
    return b"\x040\x00" + inner


def _wrap_scope(inner: bytes) -> bytes:
    return b"\x0fc\x00" + _code_with_scope(inner)


SHAPES: dict[str, Callable[[int], Callable[[bytes], bytes]]] = {
    "documents": lambda level: _wrap_document,
    "arrays": lambda level: _wrap_array,
    "code scopes": lambda level: _wrap_scope,
    "mixed": lambda level: (_wrap_document, _wrap_array, _wrap_scope)[level % 3],
}


def nested_bytes(levels: int, shape: str) -> bytes:
    """An outermost document with ``levels`` documents, arrays or Code scopes nested inside it."""
    data = _document(b"\x10x\x00" + struct.pack("<i", 1))
    for level in range(levels):
        data = _document(SHAPES[shape](level)(data))
    return data


def nested_value(levels: int, kind: str) -> dict[str, Any]:
    """An outermost dict with ``levels`` dicts, lists or Code scopes nested inside it."""
    if kind == "arrays":
        array: list[Any] = [1]
        for _ in range(levels - 1):
            array = [array]
        return {"a": array}
    value: dict[str, Any] = {"x": 1}
    for _ in range(levels):
        value = {"a": value} if kind == "documents" else {"c": Code("f", value)}
    return value


def _depth(value: dict[str, Any]) -> int:
    """How many documents, arrays or Code scopes nest inside the outermost document (without recursing)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        container, level = pending.pop()
        for item in container.values() if isinstance(container, dict) else container:
            inner = item.scope if isinstance(item, Code) else item
            if isinstance(inner, dict | list):
                pending.append((inner, level + 1))
                deepest = max(deepest, level + 1)
    return deepest


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_both_decoders_take_the_limit_and_refuse_one_level_more(compiled: bool, shape: str) -> None:
    decoded = decode(nested_bytes(MAX_NESTING, shape))
    assert _depth(decoded) == MAX_NESTING
    with pytest.raises(InvalidBSON) as info:
        decode(nested_bytes(MAX_NESTING + 1, shape))
    assert str(info.value) == NESTED_TOO_DEEPLY


def test_the_limit_holds_under_a_raised_recursion_limit(compiled: bool) -> None:
    # Before the limit was shared, the Python loops decoded whatever a raised recursion limit allowed.
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(InvalidBSON) as info:
            decode(nested_bytes(3 * MAX_NESTING, "mixed"))
        with pytest.raises(InvalidDocument, match="nested too deeply"):
            encode(nested_value(3 * MAX_NESTING, "documents"))
    finally:
        sys.setrecursionlimit(previous)
    assert str(info.value) == NESTED_TOO_DEEPLY


@pytest.mark.parametrize("kind", ["documents", "arrays"])
def test_both_encoders_take_the_limit_and_refuse_one_level_more(compiled: bool, kind: str) -> None:
    value = nested_value(MAX_NESTING, kind)
    data = encode(value)
    assert _depth(decode(data)) == MAX_NESTING  # what one encoder writes, either decoder reads
    with pytest.raises(InvalidDocument) as info:
        encode(nested_value(MAX_NESTING + 1, kind))
    assert "nested too deeply" in str(info.value)


def test_code_scopes_too_deep_are_refused_by_both_encoders(compiled: bool) -> None:
    # The compiled loops count a Code's scope as a level; the Python loops leave it to the recursion limit,
    # with the same error.
    assert _depth(decode(encode(nested_value(MAX_NESTING, "code scopes")))) == MAX_NESTING
    too_deep = MAX_NESTING + 1 if compiled else 4 * MAX_NESTING
    # The Python loops' bound is the interpreter's recursion limit: pinned at its default here, since other
    # tests' libraries (hypothesis) may leave it raised.
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(InvalidDocument) as info:
            encode(nested_value(too_deep, "code scopes"))
    finally:
        sys.setrecursionlimit(previous)
    assert "nested too deeply" in str(info.value)


def test_the_limit_is_one_definition_the_compiled_loops_read_when_loaded() -> None:
    # A different limit set before the codec loads is the one both decoders apply.
    if not _decoder.speedups_available():
        pytest.skip("the compiled loops are not built or are switched off")
    code = """
import importlib.util, pathlib, sys
package = pathlib.Path(importlib.util.find_spec("mongio").origin).parent
spec = importlib.util.spec_from_file_location("mongio.bson._limits", package / "bson" / "_limits.py")
limits = importlib.util.module_from_spec(spec)
spec.loader.exec_module(limits)
limits.MAX_NESTING = 7
limits.NESTED_TOO_DEEPLY = "seven levels at most"
sys.modules["mongio.bson._limits"] = limits  # before the codec loads and reads it
from mongio.bson import InvalidBSON, _decoder, decode
from tests.unit.bson.test_bson_nesting import nested_bytes
for compiled in (True, False):
    assert _decoder.use_speedups(compiled) is compiled
    decode(nested_bytes(7, "mixed"))
    try:
        decode(nested_bytes(8, "mixed"))
    except InvalidBSON as exc:
        print(compiled, exc)
"""
    environment = {key: value for key, value in os.environ.items() if key != "MONGIO_NO_SPEEDUPS"}
    environment["PYTHONPATH"] = os.pathsep.join(sys.path)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=environment, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["True seven levels at most", "False seven levels at most"]
