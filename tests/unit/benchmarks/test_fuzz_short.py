"""A short run of the fuzzer (``python -m benchmarks.fuzz``) over every target, without sanitizers: the
compiled codec, the wire, URI and Extended JSON parsers and the decompressors raise only their expected
errors and hold no memory after a few thousand generated and mutated inputs."""

from __future__ import annotations

import importlib
import random
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from benchmarks import fuzz

from mongio.bson import _decoder
from mongio.connection import connection, protocol
from mongio.wire import compression
from tests.support.protocol_feed import PythonFramingProtocol

_DECOMPRESSORS = {"decompress-zlib": "zlib", "decompress-snappy": "snappy", "decompress-zstd": "zstandard"}


@pytest.mark.parametrize("target", sorted(fuzz.TARGETS))
def test_a_short_fuzz_run_finds_nothing(target: str) -> None:
    if target == "bson-entry" and not _decoder.speedups_available():
        pytest.skip("the compiled extension is not built or is switched off")
    if target in _DECOMPRESSORS:
        pytest.importorskip(_DECOMPRESSORS[target])
    if target in ("framing", "reply", "request") and connection._usual_reply is None:
        pytest.skip("the compiled extensions are not built or are switched off")
    result = fuzz.run_target(target, inputs=3000, seconds=None, seed=11, show=3)
    assert result["inputs"] == 3000
    assert result["findings"] == 0, "\n".join(result["examples"])
    if target in ("framing", "reply", "request"):
        return  # nothing is expected to escape these: test_the_*_target_reaches_every_outcome_...
    # The inputs reach past the first check: some are accepted, some refused.
    assert 0 < result["expected_errors"] < result["inputs"]


@pytest.mark.skipif(
    protocol._compiled is None, reason="the compiled extension is not built or is switched off"
)
def test_the_framing_target_reaches_every_outcome_and_catches_a_framing_that_differs() -> None:
    target = fuzz.Framing(random.Random(5))
    inputs = target.inputs()
    assert _differences(target, inputs, 2000) == 0
    # Replies parsed and refused by the parser, waits refused, reading paused and resumed, connections aborted.
    assert all(count > 0 for count in target.seen.values()), target.seen

    class HoldsOneByteShort(PythonFramingProtocol):  # type: ignore[misc]
        def _hold(self, length: int) -> None:
            super()._hold(length)
            self._held = length - 1

    target.implementations["python"] = HoldsOneByteShort
    assert _differences(target, inputs, 2000) > 0

    class GrowsToTheClaimedLength(PythonFramingProtocol):  # type: ignore[misc]
        def _replace_buffer(self, new: bytearray, start: int, end: int) -> None:
            super()._replace_buffer(bytearray(max(len(new), self._needed)), start, end)

    target.implementations["python"] = GrowsToTheClaimedLength
    assert _differences(target, inputs, 2000) > 0


class _Crashing(fuzz.Target):
    name = "crashing"
    expected = (ValueError,)

    def inputs(self) -> Iterator[Any]:
        while True:
            yield self.rng.randrange(3)

    def run(self, item: Any) -> None:
        if item == 0:
            raise ValueError("expected")
        if item == 1:
            raise KeyError("unexpected")


def test_an_unexpected_error_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(fuzz.TARGETS, "crashing", _Crashing)
    result = fuzz.run_target("crashing", inputs=300, seconds=None, seed=1, show=1)
    assert result["findings"] > 0 and result["expected_errors"] > 0
    assert "KeyError" in result["examples"][0]


def test_mutations_change_the_input_and_stay_bytes() -> None:
    mutator = fuzz.Mutator(random.Random(3))
    seed = bytes(range(40))
    mutated = [mutator.mutate(seed, [seed]) for _ in range(200)]
    assert all(isinstance(item, bytes) for item in mutated)
    assert sum(item != seed for item in mutated) > 150


def test_sanitizer_logs_count_errors_and_only_the_extensions_leaks(tmp_path: Any) -> None:
    (tmp_path / "asan.1").write_text(
        "==1==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 45 byte(s) in 1 object(s) allocated from:\n"
        "    #1 0x1 in PyBytes_FromStringAndSize Objects/bytesobject.c:136\n"
        "    #2 0x2 in read_elements src/mongio/bson/_speedups.c:984\n\n"
        "Direct leak of 64 byte(s) in 1 object(s) allocated from:\n"
        "    #1 0x3 in PyMem_RawMalloc Objects/obmalloc.c:586\n"
    )
    (tmp_path / "ubsan.2").write_text(
        "src/mongio/bson/_speedups.c:10:5: runtime error: signed integer overflow\n"
    )
    reports = fuzz._sanitizer_reports(tmp_path)
    assert len(reports["leaks"]) == 1 and "read_elements" in reports["leaks"][0]
    assert len(reports["errors"]) == 1 and "runtime error" in reports["errors"][0]


@pytest.mark.skipif(connection._usual_reply is None, reason="the compiled extensions are not built or are switched off")
def test_the_reply_target_reaches_every_outcome_and_catches_a_parse_that_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = fuzz.Reply(random.Random(5))
    inputs = target.inputs()
    assert _differences(target, inputs, 2000) == 0
    # Replies the compiled parse decoded, replies it left to the Python parser, and replies refused.
    assert all(count > 100 for count in target.seen.values()), target.seen

    usual_reply = connection._usual_reply
    assert usual_reply is not None

    def drops_the_last_field(*args: Any) -> Any:
        reply = usual_reply(*args)
        if reply:
            reply.popitem()
        return reply

    monkeypatch.setattr(connection, "_usual_reply", drops_the_last_field)
    assert _differences(target, inputs, 300) > 0


@pytest.mark.skipif(connection._encode_request is None, reason="the compiled extensions are not built or are switched off")
def test_the_request_target_reaches_every_outcome_and_catches_an_encoding_that_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = fuzz.Request(random.Random(5))
    inputs = target.inputs()
    assert _differences(target, inputs, 2000) == 0
    # Requests encoded compiled, requests left to the reference, and refusals.
    assert all(count > 50 for count in target.seen.values()), target.seen

    encode_request = target.encode_request

    def flags_dropped(request_id: int, command: Any, sequences: Any, flags: int, *rest: Any) -> Any:
        return encode_request(request_id, command, sequences, 0, *rest)

    target.encode_request = flags_dropped
    assert _differences(target, inputs, 300) > 0


def _differences(target: fuzz.Target, inputs: Iterator[Any], count: int) -> int:
    """How many of the next ``count`` inputs the target found the compiled code and its reference to differ on."""
    found = 0
    for _ in range(count):
        try:
            target.run(next(inputs))
        except AssertionError:
            found += 1
    return found


def _unbounded_zlib(data: Any, size: int) -> bytes:
    return zlib.decompress(data)


def _unbounded_snappy(data: Any, size: int) -> bytes:
    return bytes(importlib.import_module("snappy").uncompress(data))


def _zstd_trusting_max_output_size(data: Any, size: int, context: Any) -> bytes:
    # What python-zstandard does with a frame that states its content size: allocates that, whatever the bound.
    zstandard = importlib.import_module("zstandard")
    return bytes(zstandard.ZstdDecompressor().decompress(data, max_output_size=size + 1))


@pytest.mark.parametrize(
    ("target", "inflate", "unbounded"),
    [
        ("decompress-zlib", "_inflate_zlib", _unbounded_zlib),
        ("decompress-snappy", "_inflate_snappy", _unbounded_snappy),
        ("decompress-zstd", "_inflate_zstd", _zstd_trusting_max_output_size),
    ],
)
def test_the_decompress_targets_reach_every_outcome_and_catch_an_unbounded_decompressor(
    target: str, inflate: str, unbounded: Callable[..., bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(_DECOMPRESSORS[target])
    made = fuzz.TARGETS[target](random.Random(5))
    assert isinstance(made, fuzz.Decompress)
    inputs = made.inputs()
    assert _findings(made, inputs, 1500) == 0
    # Exact sizes returned, forged sizes and corrupt data refused, compressors not agreed to refused.
    assert all(count > 0 for count in made.seen.values()), made.seen

    monkeypatch.setattr(compression, inflate, unbounded)
    assert _findings(made, inputs, 1500) > 0


def _findings(target: fuzz.Target, inputs: Iterator[Any], count: int) -> int:
    """How many of the next ``count`` inputs broke the target's invariant (its expected errors are not)."""
    found = 0
    for _ in range(count):
        try:
            target.run(next(inputs))
        except target.expected:
            pass
        except AssertionError:
            found += 1
    return found
