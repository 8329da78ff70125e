"""OP_COMPRESSED: each compressor round trip, negotiation, the never-compressed commands, and bad input."""

from __future__ import annotations

import functools
import struct
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import snappy
import zstandard
from benchmarks import hostile_decompress as hostile

from mongio.bson import decode, encode
from mongio.errors import ConfigurationError, ProtocolError
from mongio.wire import (
    COMPRESSOR_IDS,
    HEADER,
    HEADER_SIZE,
    NEVER_COMPRESSED,
    NOOP_ID,
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    SNAPPY_ID,
    SUPPORTED_COMPRESSORS,
    ZLIB_ID,
    ZSTD_ID,
    Compressor,
    OpMsg,
    OpQuery,
    agreed_compressors,
    compress_message,
    decompress_message,
    encode_command,
    encode_op_msg,
    encode_op_query,
    get_compressor,
    may_compress,
    negotiate_compressor,
    parse_message,
)

COMMAND = {"find": "coll", "filter": {"text": "compress me " * 50}, "batchSize": 10}


@pytest.mark.parametrize("name", SUPPORTED_COMPRESSORS)
def test_ordinary_command_is_compressed_and_round_trips(name: str) -> None:
    compressor = get_compressor(name)
    plain = encode_command(11, "db", COMMAND)
    message = encode_command(11, "db", COMMAND, compressor=compressor)
    length, request_id, response_to, opcode = HEADER.unpack_from(message)
    assert (length, request_id, response_to, opcode) == (len(message), 11, 0, OP_COMPRESSED)
    original_opcode, uncompressed_size, compressor_id = struct.unpack_from("<iiB", message, HEADER_SIZE)
    assert original_opcode == OP_MSG
    assert uncompressed_size == len(plain) - HEADER_SIZE
    assert compressor_id == COMPRESSOR_IDS[name]
    assert len(message) < len(plain)  # the repetitive filter really was compressed
    parsed = parse_message(message)
    assert parsed.opcode == OP_MSG
    assert parsed.compressor_id == compressor_id
    assert parsed.request_id == 11
    assert isinstance(parsed.content, OpMsg)
    assert decode(parsed.content.body) == {**COMMAND, "$db": "db"}


@pytest.mark.parametrize("name", SUPPORTED_COMPRESSORS)
def test_compressed_reply_keeps_response_to_and_sequences(name: str) -> None:
    documents = [encode({"i": i, "pad": "p" * 100}) for i in range(20)]
    reply = encode_op_msg(8, encode({"ok": 1}), [("documents", documents)], response_to=99)
    parsed = parse_message(compress_message(reply, get_compressor(name)))
    assert (parsed.request_id, parsed.response_to, parsed.compressor_id) == (8, 99, COMPRESSOR_IDS[name])
    assert isinstance(parsed.content, OpMsg)
    assert [bytes(d) for d in parsed.content.sequences["documents"]] == documents


def test_compressed_op_query_round_trips() -> None:
    message = encode_op_query(3, "admin.$cmd", encode({"buildInfo": 1}))
    parsed = parse_message(compress_message(message, get_compressor("zlib")))
    assert parsed.opcode == OP_QUERY
    assert isinstance(parsed.content, OpQuery)
    assert decode(parsed.content.query) == {"buildInfo": 1}


def test_checksum_of_a_compressed_message_covers_the_uncompressed_form() -> None:
    message = encode_op_msg(4, encode({"ok": 1, "pad": "z" * 64}), response_to=2, checksum=True)
    compressed = compress_message(message, get_compressor("zstd"))
    parsed = parse_message(compressed)
    assert isinstance(parsed.content, OpMsg)
    assert decode(parsed.content.body)["ok"] == 1
    tampered = bytearray(message)
    tampered[-7] = ord("y")  # a "z" of the padding: still valid BSON, only the checksum can tell
    with pytest.raises(ProtocolError, match="checksum mismatch"):
        parse_message(compress_message(tampered, get_compressor("zstd")))


@pytest.mark.parametrize(
    "command_name", sorted(NEVER_COMPRESSED | {"isMaster", "ismaster", "saslStart", "HELLO"})
)
@pytest.mark.parametrize("name", SUPPORTED_COMPRESSORS)
def test_never_compressed_commands_stay_uncompressed(command_name: str, name: str) -> None:
    message = encode_command(
        1, "admin", {command_name: 1, "payload": "x" * 200}, compressor=get_compressor(name)
    )
    assert HEADER.unpack_from(message)[3] == OP_MSG
    assert not may_compress(command_name)


def test_the_never_compressed_list_is_the_specifications() -> None:
    assert {
        "hello",
        "ismaster",
        "saslstart",
        "saslcontinue",
        "getnonce",
        "authenticate",
        "createuser",
        "updateuser",
        "copydbsaslstart",
        "copydbgetnonce",
        "copydb",
    } == NEVER_COMPRESSED
    for name in ("ping", "find", "insert", "getMore", "aggregate", "endSessions"):
        assert may_compress(name)


def test_zlib_level_is_used() -> None:
    data = encode_command(1, "db", {"insert": "c", "pad": "abcdefgh" * 4000})
    stored = compress_message(data, get_compressor("zlib", zlib_level=0))
    best = compress_message(data, get_compressor("zlib", zlib_level=9))
    assert len(best) < len(data) < len(stored)
    assert bytes(stored[HEADER_SIZE + 9 :]) == zlib.compress(bytes(data[HEADER_SIZE:]), 0)
    assert parse_message(stored).compressor_id == parse_message(best).compressor_id == ZLIB_ID


@pytest.mark.parametrize("level", [-2, 10])
def test_zlib_level_out_of_range_is_rejected(level: int) -> None:
    with pytest.raises(ConfigurationError, match="zlibCompressionLevel"):
        get_compressor("zlib", zlib_level=level)


def test_unknown_compressor_name_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="snoopy"):
        get_compressor("snoopy")


def test_compressor_ids_are_the_specifications() -> None:
    assert (SNAPPY_ID, ZLIB_ID, ZSTD_ID) == (1, 2, 3)
    assert [Compressor(name).id for name in ("snappy", "zlib", "zstd")] == [1, 2, 3]


@pytest.mark.parametrize(
    ("client", "server", "chosen"),
    [
        (["snappy", "zlib", "zstd"], ["zstd", "zlib"], "zlib"),
        (["zstd", "snappy"], ["snappy", "zstd"], "zstd"),
        (["zlib"], ["snappy"], None),
        (["zlib"], None, None),
        (["zlib"], [], None),
        ([], ["zlib"], None),
    ],
)
def test_negotiation_takes_the_clients_first_that_the_server_has(
    client: list[str], server: list[str] | None, chosen: str | None
) -> None:
    assert negotiate_compressor(client, server) == chosen


def _compressed(opcode: int, size: int, compressor_id: int, data: bytes) -> bytes:
    payload = struct.pack("<iiB", opcode, size, compressor_id) + data
    return HEADER.pack(HEADER_SIZE + len(payload), 1, 0, OP_COMPRESSED) + payload


def _zstd(data: bytes, *, states_size: bool = True) -> bytes:
    params = zstandard.ZstdCompressionParameters.from_level(3, write_content_size=states_size)
    return bytes(zstandard.ZstdCompressor(compression_params=params).compress(data))


_SKIPPABLE_ZSTD_FRAME = struct.pack("<II", 0x184D2A50, 2**31 - 1) + b"x" * 8
_FIFTY = bytes(range(50))


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (_compressed(OP_MSG, 10, 9, b"xxxx"), "unknown compressor id 9"),
        (_compressed(OP_MSG, 10, ZLIB_ID, b"not zlib data"), "does not decompress"),
        (_compressed(OP_MSG, 100, ZLIB_ID, zlib.compress(b"\x00" * 50)), "decompressed to 50 bytes"),
        (_compressed(OP_MSG, 10, ZLIB_ID, zlib.compress(b"\x00" * 50)), "more than the 10 bytes"),
        (_compressed(OP_MSG, 50, ZLIB_ID, zlib.compress(_FIFTY)[:-3]), "zlib stream ends early"),
        (_compressed(OP_MSG, 50, ZLIB_ID, zlib.compress(_FIFTY) + b"\x00"), "1 bytes after the end of its zlib"),
        (_compressed(OP_MSG, 10, SNAPPY_ID, b"\xff\xff\xff\xff\xff"), "does not start with a valid length"),
        (_compressed(OP_MSG, 10, SNAPPY_ID, b""), "does not start with a valid length"),
        (_compressed(OP_MSG, 49, SNAPPY_ID, snappy.compress(_FIFTY)), "snappy data states 50 .* header says 49"),
        (_compressed(OP_MSG, 51, SNAPPY_ID, snappy.compress(_FIFTY)), "snappy data states 50 .* header says 51"),
        (_compressed(OP_MSG, 50, SNAPPY_ID, snappy.compress(_FIFTY)[:-2]), "does not decompress"),
        (_compressed(OP_MSG, 10, ZSTD_ID, b"not zstd"), "does not start with a zstd frame"),
        (_compressed(OP_MSG, 10, ZSTD_ID, _SKIPPABLE_ZSTD_FRAME + _zstd(b"x" * 10)), "not start with a zstd frame"),
        (_compressed(OP_MSG, 49, ZSTD_ID, _zstd(_FIFTY)), "zstd frame states 50 .* header says 49"),
        (_compressed(OP_MSG, 49, ZSTD_ID, _zstd(_FIFTY, states_size=False)), "more than the 49 bytes"),
        (_compressed(OP_MSG, 51, ZSTD_ID, _zstd(_FIFTY, states_size=False)), "decompressed to 50 bytes"),
        (_compressed(OP_MSG, 50, ZSTD_ID, _zstd(_FIFTY) + _zstd(_FIFTY)), "unused data"),
        (_compressed(OP_MSG, 50, NOOP_ID, _FIFTY[:49]), "decompressed to 49 bytes"),
        (_compressed(OP_MSG, 60_000_000, ZLIB_ID, zlib.compress(b"\x00" * 50)), "maximum message size"),
        (_compressed(OP_MSG, 48_000_000 - 15, ZLIB_ID, zlib.compress(b"\x00" * 50)), "maximum message size"),
        (_compressed(OP_MSG, -1, ZLIB_ID, b""), "claims -1 uncompressed bytes"),
        (_compressed(OP_MSG, -(2**31), ZSTD_ID, b""), "claims -2147483648 uncompressed bytes"),
        (HEADER.pack(HEADER_SIZE + 4, 1, 0, OP_COMPRESSED) + b"\x00" * 4, "too short"),
        (_compressed(2005, 5, 0, encode({})), "unsupported opcode 2005"),
    ],
)
def test_bad_compressed_messages_are_protocol_errors(message: bytes, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        parse_message(message)


def test_noop_compressor_id_is_understood() -> None:
    inner = encode_op_msg(1, encode({"ok": 1}))[HEADER_SIZE:]
    parsed = parse_message(_compressed(OP_MSG, len(inner), 0, bytes(inner)))
    assert parsed.compressor_id == 0
    assert isinstance(parsed.content, OpMsg)
    assert decode(parsed.content.body) == {"ok": 1}


def test_noop_is_refused_where_it_was_not_negotiated() -> None:
    inner = encode_op_msg(1, encode({"ok": 1}))[HEADER_SIZE:]
    with pytest.raises(ProtocolError, match=r"compressor noop \(id 0\), which the handshake did not negotiate"):
        parse_message(_compressed(OP_MSG, len(inner), NOOP_ID, bytes(inner)), accepted_compressors={ZLIB_ID})


# -- only what the handshake agreed to --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client", "server", "agreed"),
    [
        (["snappy", "zlib", "zstd"], ["zstd", "zlib"], ("zlib", "zstd")),
        (["zstd"], ["zstd", "snappy", "zlib"], ("zstd",)),
        (["zlib"], ["snappy"], ()),
        (["zlib"], None, ()),
        ([], ["zlib"], ()),
    ],
)
def test_the_agreed_compressors_are_the_clients_the_server_also_lists(
    client: list[str], server: list[str] | None, agreed: tuple[str, ...]
) -> None:
    assert agreed_compressors(client, server) == agreed


@pytest.mark.parametrize(
    ("name", "accepted", "negotiated"),
    [("zstd", {ZLIB_ID}, "zlib"), ("snappy", set(), "none"), ("zlib", {SNAPPY_ID, ZSTD_ID}, "snappy, zstd")],
)
def test_a_compressor_the_handshake_did_not_agree_to_is_refused_before_decompressing(
    name: str, accepted: set[int], negotiated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = compress_message(encode_op_msg(3, encode({"ok": 1})), Compressor(name))
    attempts: list[str] = []
    monkeypatch.setattr(zlib, "decompressobj", lambda *args: attempts.append("zlib"))
    monkeypatch.setattr(snappy, "uncompress", lambda *args: attempts.append("snappy"))
    monkeypatch.setattr(zstandard, "ZstdDecompressor", lambda **kwargs: attempts.append("zstd"))
    expected = rf"compressor {name} \(id {COMPRESSOR_IDS[name]}\), which the handshake did not negotiate"
    with pytest.raises(ProtocolError, match=rf"{expected} \(negotiated: {negotiated}\)"):
        parse_message(message, accepted_compressors=accepted)
    assert attempts == []


def test_any_agreed_compressor_is_accepted() -> None:
    reply = encode_op_msg(3, encode({"ok": 1, "pad": "p" * 100}), response_to=2)
    for name in ("zlib", "zstd"):
        parsed = parse_message(compress_message(reply, Compressor(name)), accepted_compressors={ZLIB_ID, ZSTD_ID})
        assert parsed.compressor_id == COMPRESSOR_IDS[name]
        assert isinstance(parsed.content, OpMsg) and decode(parsed.content.body)["pad"] == "p" * 100


# -- bombs: nothing is inflated past the declared size ---------------------------------------------------

GiB = 1 << 30
MiB = 1 << 20


@functools.cache
def _bomb(kind: str) -> bytes:
    """Compressed data that inflates to about 1 GiB of zeros (snappy: 900 MiB, which is 44 MB compressed,
    under the usual message limit)."""
    if kind == "zlib":
        return hostile.zlib_bomb(GiB)
    if kind == "snappy":
        return hostile.snappy_bomb(900 * MiB)
    return hostile.zstd_bomb(GiB, states_size=kind == "zstd")


_BOMB_IDS = {"zlib": ZLIB_ID, "snappy": SNAPPY_ID, "zstd": ZSTD_ID, "zstd-without-size": ZSTD_ID}


@pytest.fixture
def zstd_bounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The output bound each zstd decompression is given. (A wrapper: python-zstandard's decompressor
    crashes the interpreter when subclassed.)"""
    bounds: list[int] = []
    real = zstandard.ZstdDecompressor

    class Recording:
        def __init__(self, **options: Any) -> None:
            self._inner = real(**options)

        def decompress(self, data: Any, max_output_size: int = 0, **options: Any) -> bytes:
            bounds.append(max_output_size)
            return bytes(self._inner.decompress(data, max_output_size=max_output_size, **options))

    monkeypatch.setattr(zstandard, "ZstdDecompressor", Recording)
    return bounds


@pytest.fixture
def snappy_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    uncompress = snappy.uncompress

    def recording(data: Any) -> bytes:
        calls.append(len(data))
        return bytes(uncompress(data))

    monkeypatch.setattr(snappy, "uncompress", recording)
    return calls


def _peak_allocation_while(parse: Callable[[], object]) -> int:
    """The peak of Python's allocations (the C libraries' outputs included) while ``parse`` runs and fails."""
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError) as refused:
            parse()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "OP_COMPRESSED message" in str(refused.value)
    return peak


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("zlib", "decompresses to more than the 200 bytes its header says"),
        ("snappy", "snappy data states 943718400 uncompressed bytes, its header says 200"),
        ("zstd", "zstd frame states 1073741824 uncompressed bytes, its header says 200"),
        ("zstd-without-size", "does not decompress"),
    ],
)
def test_a_bomb_is_refused_having_inflated_no_more_than_its_declared_size(
    kind: str, error: str, zstd_bounds: list[int], snappy_calls: list[int]
) -> None:
    message = hostile.op_compressed(_BOMB_IDS[kind], 200, _bomb(kind))
    assert len(message) < 48_000_000
    with pytest.raises(ProtocolError, match=error):
        parse_message(message, 48_000_000, {_BOMB_IDS[kind]})
    # Each allocates what it is told: snappy and a zstd frame that states its size, the size they state.
    assert snappy_calls == []
    assert zstd_bounds == ([201] if kind == "zstd-without-size" else [])
    peak = _peak_allocation_while(lambda: parse_message(message, 48_000_000, {_BOMB_IDS[kind]}))
    assert peak < MiB  # the bomb inflates to 900 MiB or more


@pytest.mark.parametrize("kind", ["zlib", "zstd-without-size"])
def test_a_bomb_declaring_the_limit_stops_inflating_at_the_limit(kind: str, zstd_bounds: list[int]) -> None:
    limit = 4 * MiB
    message = hostile.op_compressed(_BOMB_IDS[kind], limit - HEADER_SIZE, _bomb(kind))
    with pytest.raises(ProtocolError, match=r"more than|does not decompress"):
        parse_message(message, limit, {_BOMB_IDS[kind]})
    peak = _peak_allocation_while(lambda: parse_message(message, limit, {_BOMB_IDS[kind]}))
    assert limit < peak < 2 * limit  # the bound once, as one buffer, however far the data goes
    assert zstd_bounds in ([], [limit - HEADER_SIZE + 1, limit - HEADER_SIZE + 1])


def test_a_snappy_preamble_agreeing_with_the_header_is_what_gets_inflated(snappy_calls: list[int]) -> None:
    declared = 4 * MiB
    data = hostile.snappy_bomb(64 * MiB, stated=declared)
    with pytest.raises(ProtocolError, match=r"\(snappy\) does not decompress"):
        parse_message(hostile.op_compressed(SNAPPY_ID, declared, data), 48_000_000, {SNAPPY_ID})
    assert snappy_calls == [len(data)]


def test_zstd_frames_without_a_size_get_a_bounded_window() -> None:
    data = hostile.zstd_bomb(MiB, states_size=False, window_log=27)
    assert zstandard.get_frame_parameters(data).window_size == 128 * MiB
    with pytest.raises(ProtocolError, match="too much memory"):
        parse_message(hostile.op_compressed(ZSTD_ID, MiB, data), 48_000_000, {ZSTD_ID})
    # A frame that states its size is decompressed in one pass, whatever window it names.
    stated = hostile.zstd_bomb(MiB, states_size=True, window_log=27)
    assert len(decompress_message(hostile.op_compressed(ZSTD_ID, MiB, stated), 48_000_000, {ZSTD_ID})[2]) == MiB


@pytest.mark.parametrize("size", [0, 1, 3 * MiB + 5])
def test_zlib_inflates_a_large_message_step_by_step_to_its_exact_size(size: int) -> None:
    payload = bytes(index * 7 % 251 for index in range(size))
    message = hostile.op_compressed(ZLIB_ID, size, zlib.compress(payload))
    assert decompress_message(message, 48_000_000, {ZLIB_ID}) == (OP_MSG, ZLIB_ID, payload)
    longer = hostile.op_compressed(ZLIB_ID, size, zlib.compress(payload + b"!"))
    with pytest.raises(ProtocolError, match=f"more than the {size} bytes"):
        decompress_message(longer, 48_000_000, {ZLIB_ID})
