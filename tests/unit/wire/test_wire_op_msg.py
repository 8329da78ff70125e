"""OP_MSG, the header and the legacy opcodes, encoded and parsed without any socket."""

from __future__ import annotations

import struct
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mongio.bson import decode, encode
from mongio.errors import DocumentTooLarge, ProtocolError
from mongio.wire import (
    COMMAND_OVERHEAD,
    HEADER,
    HEADER_SIZE,
    OP_MSG,
    OP_QUERY,
    OP_REPLY,
    OpMsg,
    OpMsgFlags,
    OpQuery,
    OpReply,
    encode_command,
    encode_op_msg,
    encode_op_query,
    encode_op_reply,
    next_request_id,
    parse_header,
    parse_message,
    parse_op_msg,
    parse_op_reply,
)
from mongio.wire.crc32c import crc32c
from mongio.wire.header import positive_ids

# Unicode category Cs (lone surrogates): strings holding one cannot be encoded as UTF-8.
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)


def op_msg(message: bytes | bytearray) -> OpMsg:
    parsed = parse_message(message)
    assert isinstance(parsed.content, OpMsg)
    return parsed.content


def raw_op_msg(flags: int, sections: bytes, request_id: int = 1) -> bytes:
    payload = struct.pack("<I", flags) + sections
    return HEADER.pack(HEADER_SIZE + len(payload), request_id, 0, OP_MSG) + payload


def kind0(document: dict[str, Any]) -> bytes:
    return b"\x00" + encode(document)


def kind1(identifier: str, documents: list[dict[str, Any]]) -> bytes:
    content = identifier.encode() + b"\x00" + b"".join(encode(d) for d in documents)
    return b"\x01" + struct.pack("<i", 4 + len(content)) + content


# -- encoding ---------------------------------------------------------------------------------------------


def test_command_gets_db_appended_without_touching_the_callers_mapping() -> None:
    command = {"ping": 1, "comment": "x"}
    message = encode_command(77, "admin", command)
    assert command == {"ping": 1, "comment": "x"}
    length, request_id, response_to, opcode = HEADER.unpack_from(message)
    assert (length, request_id, response_to, opcode) == (len(message), 77, 0, OP_MSG)
    parsed = op_msg(message)
    assert parsed.flags == 0
    assert parsed.sequences == {}
    body = decode(parsed.body)
    assert list(body.items()) == [("ping", 1), ("comment", "x"), ("$db", "admin")]


def test_command_that_already_names_its_db_keeps_it_once() -> None:
    message = encode_command(1, "ignored", {"ping": 1, "$db": "mine"})
    assert decode(op_msg(message).body) == {"ping": 1, "$db": "mine"}


def test_document_sequences_round_trip_as_kind_1_sections() -> None:
    documents = [{"_id": i, "x": "y" * i} for i in range(5)]
    pre_encoded = [encode({"q": {"a": 1}, "u": {"$set": {"b": 2}}})]
    message = encode_command(
        5,
        "db",
        {"insert": "coll", "ordered": True},
        document_sequences={"documents": documents, "updates": pre_encoded},
    )
    parsed = op_msg(message)
    assert decode(parsed.body) == {"insert": "coll", "ordered": True, "$db": "db"}
    assert list(parsed.sequences) == ["documents", "updates"]
    assert [decode(d) for d in parsed.sequences["documents"]] == documents
    assert [bytes(d) for d in parsed.sequences["updates"]] == pre_encoded
    # The whole message really is header + flags + kind 0 + two kind 1 sections, back to back.
    expected = raw_op_msg(
        0, kind0({"insert": "coll", "ordered": True, "$db": "db"}) + kind1("documents", documents)
    )
    assert bytes(message[HEADER_SIZE:]).startswith(expected[HEADER_SIZE:])


def test_empty_document_sequence_is_allowed() -> None:
    parsed = op_msg(encode_command(1, "db", {"insert": "c"}, document_sequences={"documents": []}))
    assert parsed.sequences == {"documents": []}


def test_sequence_identifier_with_a_nul_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ProtocolError, match="NUL"):
            encode_command(1, "db", {"insert": "c"}, document_sequences={"doc\x00s": [{"a": 1}]})
        with pytest.raises(ProtocolError, match="NUL"):
            encode_op_msg(1, encode({"insert": "c"}), [("doc\x00s", [encode({"a": 1})])])


def test_many_sequence_identifiers_each_encode_as_their_own_section() -> None:
    # More identifiers than the encoder keeps ready-made section openings for: every one is still right,
    # the second time as the first.
    for _ in range(2):
        for number in range(100):
            identifier = f"seq{number}"
            message = encode_command(1, "db", {"insert": "c"}, document_sequences={identifier: [{"n": number}]})
            parsed = op_msg(message)
            assert list(parsed.sequences) == [identifier]
            assert decode(parsed.sequences[identifier][0]) == {"n": number}


def test_flag_bits_are_written() -> None:
    for flags in (
        OpMsgFlags.MORE_TO_COME,
        OpMsgFlags.EXHAUST_ALLOWED,
        OpMsgFlags.MORE_TO_COME | OpMsgFlags.EXHAUST_ALLOWED,
    ):
        message = encode_command(1, "admin", {"hello": 1}, flags=flags)
        assert struct.unpack_from("<I", message, HEADER_SIZE)[0] == flags
        assert op_msg(message).more_to_come == bool(flags & OpMsgFlags.MORE_TO_COME)


def test_the_driver_never_adds_a_checksum() -> None:
    message = encode_command(1, "admin", {"ping": 1})
    assert not struct.unpack_from("<I", message, HEADER_SIZE)[0] & OpMsgFlags.CHECKSUM_PRESENT


def test_request_ids_wrap_to_one_after_the_largest_int32() -> None:
    ids = positive_ids(2**31 - 2)
    assert [next(ids) for _ in range(4)] == [2**31 - 2, 2**31 - 1, 1, 2]


def test_request_ids_are_positive_and_distinct() -> None:
    ids = [next_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(0 < i <= 0x7FFFFFFF for i in ids)


# -- size limits ------------------------------------------------------------------------------------------


def test_command_over_max_bson_size_plus_overhead_is_too_large() -> None:
    limit = 1000
    fits = {"c": "x" * (limit + COMMAND_OVERHEAD - 100)}
    encode_command(1, "db", fits, max_bson_size=limit)
    too_big = {"c": "x" * (limit + COMMAND_OVERHEAD)}
    with pytest.raises(DocumentTooLarge, match="maxBsonObjectSize 1000"):
        encode_command(1, "db", too_big, max_bson_size=limit)


def test_sequence_document_over_max_bson_size_plus_overhead_is_named() -> None:
    # The server's own limit for a document in a command; the batch planning may keep a lower one.
    documents: list[dict[str, Any]] = [{"a": 1}, {"a": "x" * (500 + COMMAND_OVERHEAD)}]
    with pytest.raises(DocumentTooLarge, match=r"document 1 of 'documents'"):
        encode_command(
            1, "db", {"insert": "c"}, document_sequences={"documents": documents}, max_bson_size=500
        )
    exactly = encode({"a": "x" * 10})
    encode_command(
        1, "db", {"insert": "c"}, document_sequences={"documents": [exactly]}, max_bson_size=len(exactly)
    )


def test_message_over_max_message_size_is_too_large() -> None:
    documents = [{"a": "x" * 100}] * 20
    message = encode_command(1, "db", {"insert": "c"}, document_sequences={"documents": documents})
    encode_command(
        1, "db", {"insert": "c"}, document_sequences={"documents": documents}, max_message_size=len(message)
    )
    with pytest.raises(DocumentTooLarge, match="maxMessageSizeBytes"):
        encode_command(
            1,
            "db",
            {"insert": "c"},
            document_sequences={"documents": documents},
            max_message_size=len(message) - 1,
        )


# -- parsing ------------------------------------------------------------------------------------------------


def test_kind_1_before_kind_0_parses() -> None:
    message = raw_op_msg(0, kind1("documents", [{"a": 1}]) + kind0({"insert": "c"}))
    parsed = op_msg(message)
    assert decode(parsed.body) == {"insert": "c"}
    assert [decode(d) for d in parsed.sequences["documents"]] == [{"a": 1}]


def test_unknown_optional_flag_bits_are_ignored() -> None:
    parsed = op_msg(raw_op_msg(1 << 20 | OpMsgFlags.EXHAUST_ALLOWED, kind0({"ok": 1})))
    assert decode(parsed.body) == {"ok": 1}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (raw_op_msg(1 << 2, kind0({"ok": 1})), "required"),
        (raw_op_msg(1 << 15, kind0({"ok": 1})), "required"),
        (raw_op_msg(0, kind1("documents", [{"a": 1}])), "no kind-0"),
        (raw_op_msg(0, kind0({"ok": 1}) + kind0({"ok": 1})), "more than one kind-0"),
        (raw_op_msg(0, kind0({"ok": 1}) + b"\x02" + encode({"x": 1})), "unknown kind 2"),
        (
            raw_op_msg(0, kind0({"ok": 1}) + kind1("d", [{"a": 1}]) + kind1("d", [{"b": 1}])),
            "two document sequences",
        ),
        (raw_op_msg(0, kind0({"ok": 1})[:-3]), "does not fit|cut short"),
        (raw_op_msg(0, b"\x00" + struct.pack("<i", 1000) + b"\x00" * 10), "does not fit"),
        (raw_op_msg(0, b"\x00" + struct.pack("<i", 2) + b"\x00" * 10), "does not fit"),
        (raw_op_msg(0, b"\x00" + struct.pack("<i", 6) + b"\x00\x01"), "not NUL-terminated"),
        (raw_op_msg(0, kind0({"ok": 1}) + b"\x01" + struct.pack("<i", 500) + b"d\x00"), "does not fit"),
        (raw_op_msg(0, kind0({"ok": 1}) + b"\x01" + struct.pack("<i", 7) + b"abc"), "not NUL-terminated"),
        (
            raw_op_msg(0, kind0({"ok": 1}) + b"\x01" + struct.pack("<i", 9) + b"d\x00" + b"\x03\x00\x00\x00"),
            "cut short",
        ),
        (raw_op_msg(0, kind0({"ok": 1}) + b"\x01\x00"), "cut short"),
        (raw_op_msg(0, b""), "too short"),
    ],
)
def test_malformed_op_msg_is_a_protocol_error(message: bytes, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        parse_message(message)


def test_checksum_is_verified_when_present() -> None:
    message = encode_op_msg(9, encode({"ok": 1, "n": 5}), checksum=True)
    flags = struct.unpack_from("<I", message, HEADER_SIZE)[0]
    assert flags & OpMsgFlags.CHECKSUM_PRESENT
    assert struct.unpack_from("<I", message, len(message) - 4)[0] == crc32c(message[:-4])
    assert decode(op_msg(message).body) == {"ok": 1, "n": 5}
    corrupted = bytearray(message)
    corrupted[-10] ^= 0x01  # inside the document, still valid BSON framing
    with pytest.raises(ProtocolError, match="checksum mismatch"):
        parse_message(corrupted)
    wrong_checksum = bytearray(message)
    wrong_checksum[-1] ^= 0xFF
    with pytest.raises(ProtocolError, match="checksum mismatch"):
        parse_message(wrong_checksum)


def test_checksum_needs_the_header_to_verify() -> None:
    message = encode_op_msg(9, encode({"ok": 1}), checksum=True)
    with pytest.raises(ProtocolError, match="no header"):
        parse_op_msg(message[HEADER_SIZE:])
    assert decode(parse_op_msg(message[HEADER_SIZE:], message[:HEADER_SIZE]).body) == {"ok": 1}


def test_header_checks() -> None:
    with pytest.raises(ProtocolError, match="needs 16 bytes"):
        parse_header(b"\x10\x00\x00\x00")
    with pytest.raises(ProtocolError, match="shorter than its own"):
        parse_header(HEADER.pack(15, 1, 0, OP_MSG))
    with pytest.raises(ProtocolError, match="maxMessageSizeBytes"):
        parse_header(HEADER.pack(2000, 1, 0, OP_MSG), max_message_size=1999)
    assert parse_header(HEADER.pack(2000, 3, 4, OP_MSG), max_message_size=2000) == (2000, 3, 4, OP_MSG)


def test_message_length_must_match_its_header() -> None:
    message = encode_command(1, "admin", {"ping": 1})
    with pytest.raises(ProtocolError, match="says"):
        parse_message(bytes(message) + b"\x00")
    with pytest.raises(ProtocolError):
        parse_message(message[:-1])


def test_oversized_message_is_refused_before_parsing() -> None:
    message = encode_command(1, "admin", {"ping": 1, "pad": "x" * 100})
    with pytest.raises(ProtocolError, match="exceeds the maximum message size"):
        parse_message(message, max_message_size=len(message) - 1)


def test_unknown_opcode_is_a_protocol_error() -> None:
    message = HEADER.pack(HEADER_SIZE + 5, 1, 0, 2005) + encode({})
    with pytest.raises(ProtocolError, match="unsupported opcode 2005"):
        parse_message(message)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=0xFFFFFFFF))
def test_arbitrary_payloads_only_ever_raise_protocol_error(payload: bytes, flags: int) -> None:
    message = raw_op_msg(flags, payload)
    try:
        parsed = op_msg(message)
    except ProtocolError:
        return
    # Whatever parsed must stay inside the message.
    assert len(parsed.body) >= 5
    assert all(len(d) >= 5 for docs in parsed.sequences.values() for d in docs)


_TEXT = st.characters(exclude_categories=SURROGATES, exclude_characters="\x00")


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(_TEXT, min_size=1, max_size=8).filter(lambda k: k != "$db"),
        st.integers(-(2**31), 2**31 - 1),
        max_size=5,
    ),
    st.lists(st.dictionaries(st.sampled_from("abc"), st.text(_TEXT, max_size=20), max_size=3), max_size=6),
)
def test_encode_then_parse_round_trips(extra: dict[str, int], documents: list[dict[str, str]]) -> None:
    command: dict[str, Any] = {"insert": "c", **extra}
    message = encode_command(3, "db", command, document_sequences={"documents": documents})
    parsed = op_msg(message)
    assert decode(parsed.body) == {**command, "$db": "db"}
    assert [decode(d) for d in parsed.sequences["documents"]] == documents


# -- legacy opcodes --------------------------------------------------------------------------------------


def test_op_query_round_trip() -> None:
    query = encode({"isMaster": 1, "helloOk": True})
    message = encode_op_query(42, "admin.$cmd", query)
    length, request_id, _, opcode = HEADER.unpack_from(message)
    assert (length, request_id, opcode) == (len(message), 42, OP_QUERY)
    parsed = parse_message(message)
    assert isinstance(parsed.content, OpQuery)
    assert parsed.content.full_collection_name == "admin.$cmd"
    assert parsed.content.number_to_return == -1
    assert parsed.content.number_to_skip == 0
    assert decode(parsed.content.query) == {"isMaster": 1, "helloOk": True}


def test_op_reply_round_trip_and_errors() -> None:
    documents = [encode({"ismaster": True, "ok": 1}), encode({"n": 2})]
    message = encode_op_reply(5, 42, documents, cursor_id=7)
    parsed = parse_message(message)
    assert parsed.opcode == OP_REPLY
    assert parsed.response_to == 42
    assert isinstance(parsed.content, OpReply)
    assert parsed.content.cursor_id == 7
    assert [decode(d) for d in parsed.content.documents] == [{"ismaster": True, "ok": 1}, {"n": 2}]
    payload = bytearray(message[HEADER_SIZE:])
    struct.pack_into("<i", payload, 16, 3)  # numberReturned larger than what follows
    with pytest.raises(ProtocolError, match="announces 3 documents"):
        parse_op_reply(payload)
    struct.pack_into("<i", payload, 16, 1)  # fewer: bytes left over
    with pytest.raises(ProtocolError, match="bytes after"):
        parse_op_reply(payload)
    with pytest.raises(ProtocolError, match="too short"):
        parse_op_reply(b"\x00" * 10)


def test_large_packed_documents_are_parts_of_their_own_and_the_message_is_the_same() -> None:
    from mongio.wire.op_msg import LARGE_PACKED_SIZE, PackedDocuments, encode_command_parts

    large = [encode({"_id": n, "s": "x" * (LARGE_PACKED_SIZE // 2)}) for n in range(3)]
    small = [encode({"_id": n}) for n in range(3, 5)]
    packed = bytearray(b"".join(large))
    sequences: dict[str, Any] = {
        "documents": [PackedDocuments(memoryview(packed)), small[0], PackedDocuments(b"".join(small[1:]))],
        "more": [{"a": 1}],
    }
    parts = encode_command_parts(7, "db", {"insert": "c"}, document_sequences=sequences)
    # The large documents are sent from where they are, not copied; the rest is copied around them.
    assert len(parts) == 3 and isinstance(parts[1], memoryview) and parts[1].obj is packed
    message = b"".join(parts)
    body = encode({"insert": "c", "$db": "db"})
    assert message == encode_op_msg(7, body, [("documents", large + small), ("more", [encode({"a": 1})])])
    header = parse_header(message[:HEADER_SIZE])
    assert header.length == len(message)
    parsed = parse_op_msg(message[HEADER_SIZE:])
    assert [decode(document) for document in parsed.sequences["documents"]] == [decode(d) for d in large + small]
    assert [decode(document) for document in parsed.sequences["more"]] == [{"a": 1}]
    with pytest.raises(DocumentTooLarge):
        encode_command_parts(8, "db", {"insert": "c"}, document_sequences=sequences, max_message_size=len(message) - 1)


@pytest.mark.parametrize("length", [1, 63, 64, 65, 200])
def test_sequence_identifiers_of_any_length_parse(length: int) -> None:
    identifier = "i" * length
    documents = [encode({"n": n}) for n in range(3)]
    message = encode_op_msg(1, encode({"ping": 1}), [(identifier, documents)])
    parsed = parse_op_msg(message[HEADER_SIZE:])
    assert list(parsed.sequences) == [identifier]
    assert [bytes(document) for document in parsed.sequences[identifier]] == documents
