"""OP_COMPRESSED: each compressor round trip, negotiation, the never-compressed commands, and bad input."""

from __future__ import annotations

import struct
import zlib

import pytest

from mongio.bson import decode, encode
from mongio.errors import ConfigurationError, ProtocolError
from mongio.wire import (
    COMPRESSOR_IDS,
    HEADER,
    HEADER_SIZE,
    NEVER_COMPRESSED,
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
    compress_message,
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


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (_compressed(OP_MSG, 10, 9, b"xxxx"), "unknown compressor id 9"),
        (_compressed(OP_MSG, 10, ZLIB_ID, b"not zlib data"), "does not decompress"),
        (_compressed(OP_MSG, 10, SNAPPY_ID, b"\xff\xff\xff\xff\xff"), "does not decompress"),
        (_compressed(OP_MSG, 10, ZSTD_ID, b"not zstd"), "does not decompress"),
        (_compressed(OP_MSG, 100, ZLIB_ID, zlib.compress(b"\x00" * 50)), "decompressed to 50 bytes"),
        (_compressed(OP_MSG, 10, ZLIB_ID, zlib.compress(b"\x00" * 50)), "decompressed to 11 bytes"),
        (_compressed(OP_MSG, 60_000_000, ZLIB_ID, zlib.compress(b"\x00" * 50)), "maximum message size"),
        (_compressed(OP_MSG, -1, ZLIB_ID, b""), "maximum message size"),
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
