"""The compiled round trip of a connection (``mongio/connection/_speedups.c``): it is what the protocol and
the connection use when the extension is built, and it refuses state it cannot work on instead of reading
outside a buffer. Its behaviour is tested against the Python reference in test_wire_protocol.py and
test_reply_waiter.py (both run once per implementation) and by the fuzzer's ``framing``, ``reply`` and
``request`` targets."""

from __future__ import annotations

import gc
import os
import weakref
from typing import Any

import pytest

from mongio.bson import CodecOptions, RawBSONDocument, decode, encode
from mongio.bson._decoder import compiled_in_use, use_speedups
from mongio.connection import connection, protocol
from mongio.errors import DocumentTooLarge
from mongio.wire.op_msg import (
    COMMAND_OVERHEAD,
    LARGE_PACKED_SIZE,
    PackedDocuments,
    encode_command_parts,
    encode_op_msg,
)
from tests.support.protocol_feed import make_protocol

compiled_only = pytest.mark.skipif(
    protocol._compiled is None, reason="the compiled extension is not built or MONGIO_NO_SPEEDUPS is set"
)


# Not skipped when the extension is missing: a build that silently left it out fails here.
@pytest.mark.skipif(bool(os.environ.get("MONGIO_NO_SPEEDUPS")), reason="MONGIO_NO_SPEEDUPS is set")
def test_the_protocol_and_connection_build_on_the_compiled_round_trip() -> None:
    compiled: Any = protocol._compiled
    assert compiled is not None
    framing_class: Any = protocol.MessageProtocol.__mro__[1]
    assert framing_class is compiled.Framing
    assert protocol.MessageProtocol.get_buffer is framing_class.get_buffer
    assert connection._usual_reply is compiled.usual_reply
    assert connection._encode_request is compiled.encode_request


@compiled_only
async def test_a_compiled_protocol_gives_compiled_waiters() -> None:
    made, _ = make_protocol()
    assert type(made.wait_message(bytes)) is protocol._compiled.ReplyWaiter


@compiled_only
async def test_buffer_state_the_framing_cannot_use_is_refused() -> None:
    made, _ = make_protocol()
    waiter = made.wait_message(bytes)
    made._end = 10**9  # past the buffer's end
    with pytest.raises(ValueError, match="outside"):
        made.buffer_updated(16)
    made._start = made._end = 0
    made._buffer = b"not a bytearray"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="bytearray"):
        made.buffer_updated(16)
    assert not waiter.done()


@compiled_only
async def test_a_dropped_protocol_in_a_cycle_through_its_waiter_is_collected() -> None:
    made, _ = make_protocol()
    waiter = made.wait_message(bytes)
    holder = [made]
    waiter.add_done_callback(holder.append)  # protocol -> waiter -> callback -> holder -> protocol
    gone, gone_waiter = weakref.ref(made), weakref.ref(waiter)
    del made, waiter, holder
    gc.collect()
    assert gone() is None and gone_waiter() is None


def _reply(document: dict[str, Any], response_to: int, flags: int = 0) -> memoryview:
    return memoryview(bytes(encode_op_msg(3, encode(document), (), flags, response_to=response_to)))


@compiled_only
def test_the_usual_reply_is_decoded_compiled_and_anything_else_left_to_the_python_parser() -> None:
    usual_reply = connection._usual_reply
    assert usual_reply is not None
    options = CodecOptions()
    decode(encode({}), options)  # the options' decoding context, which the compiled parse reads, is made
    assert usual_reply(_reply({"ok": 1.0, "n": 1}, 7), 7, 7, options) == {"ok": 1.0, "n": 1}
    assert usual_reply(_reply({"ok": 1.0}, 5), 7, 5, options) == {"ok": 1.0}  # the exchange's first request
    assert usual_reply(_reply({"ok": 1.0}, 8), 7, 7, options) is None  # another request's reply
    assert usual_reply(_reply({"ok": 1.0}, 7, flags=2), 7, 7, options) is None  # moreToCome
    assert usual_reply(_reply({"ok": 1.0}, 7), 7, 7, CodecOptions(tz_aware=True)) is None  # no context yet
    raw = CodecOptions(document_class=RawBSONDocument)
    decode(encode({}), raw)
    assert usual_reply(_reply({"ok": 1.0}, 7), 7, 7, raw) is None  # not a dict
    was_compiled = compiled_in_use()
    use_speedups(False)
    try:
        assert usual_reply(_reply({"ok": 1.0}, 7), 7, 7, options) is None  # the Python loops are in use
    finally:
        use_speedups(was_compiled)
    broken = bytearray(_reply({"ok": 1.0, "s": "text"}, 7))
    broken[-3] = 0xFF  # the string's last byte: not UTF-8
    with pytest.raises(UnicodeDecodeError):  # the loops' error, which the connection turns into InvalidBSON
        usual_reply(memoryview(bytes(broken)), 7, 7, options)


@compiled_only
def test_the_usual_request_is_encoded_compiled_and_anything_else_left_to_the_reference() -> None:
    encode_request = connection._encode_request
    assert encode_request is not None
    options = CodecOptions()
    encode({}, codec_options=options)  # the options' encoding context, which the compiled path reads, is made
    limits = (16 * 1024 * 1024, 48_000_000)
    command = {"insert": "c", "ordered": True, "$db": "db"}
    packed = PackedDocuments(encode({"_id": 1}) + encode({"_id": 2}))
    sequences: dict[str, Any] = {"documents": [packed, encode({"_id": 3})]}
    parts = encode_request(9, command, sequences, 0, options, *limits)
    reference = encode_command_parts(9, "db", command, document_sequences=sequences, codec_options=options)
    assert parts is not None and len(parts) == 1
    assert bytes(parts[0]) == b"".join(bytes(part) for part in reference)
    assert encode_request(9, {"ping": 1}, None, 0, options, *limits) is None  # no $db: spliced in by the reference
    assert encode_request(9, command, {"documents": [{"_id": 4}]}, 0, options, *limits) is None  # a mapping
    large = {"documents": [PackedDocuments(bytes(LARGE_PACKED_SIZE))]}
    assert encode_request(9, command, large, 0, options, *limits) is None  # a part of its own
    assert encode_request(9, command, sequences, 0, options, 10, 48_000_000) is None  # a document over the limit
    # The reference allows a statement the command overhead over the limit (the server has the last word).
    encode_command_parts(9, "db", command, document_sequences=sequences, max_bson_size=10)
    over_the_allowance = {"documents": [encode({"x": "a" * (10 + COMMAND_OVERHEAD)})]}
    with pytest.raises(DocumentTooLarge):  # as the reference says
        encode_command_parts(9, "db", command, document_sequences=over_the_allowance, max_bson_size=10)
    assert encode_request(9, command, None, 0, options, 16, 30) is None  # the message over the limit
    assert encode_request(9, command, None, 0, CodecOptions(tz_aware=True), *limits) is None  # no context yet
