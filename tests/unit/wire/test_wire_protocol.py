"""The framing protocol, driven by hand the way a transport drives it: get_buffer, then buffer_updated."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mongio.connection.protocol import _INITIAL_BUFFER_SIZE, MessageProtocol
from mongio.connection.transport import format_address, is_unix_socket
from mongio.errors import AutoReconnect, NetworkTimeout, ProtocolError
from mongio.wire import HEADER, OP_MSG
from tests.support.protocol_feed import feed, framing, make_protocol, message

pytestmark = pytest.mark.usefixtures(framing.__name__)


async def test_message_fed_byte_by_byte_reaches_the_waiter() -> None:
    protocol, _ = make_protocol()
    data = message(7, 300)
    waiter = protocol.wait_message(bytes)
    feed(protocol, data[:-1], chunk=1)
    assert not waiter.done()
    feed(protocol, data[-1:])
    assert waiter.done()
    assert await waiter == data


async def test_parser_sees_the_message_in_place_and_its_result_is_returned() -> None:
    protocol, _ = make_protocol()
    seen: list[int] = []

    def parser(view: memoryview) -> int:
        assert isinstance(view, memoryview)
        seen.append(len(view))
        return int.from_bytes(view[4:8], "little")

    waiter = protocol.wait_message(parser)
    feed(protocol, message(1234, 64))
    assert await waiter == 1234
    assert seen == [64]


async def test_messages_arriving_together_are_delivered_in_order() -> None:
    protocol, _ = make_protocol()
    messages = [message(i, 16 + i * 13) for i in range(1, 6)]
    waiter = protocol.wait_message(bytes)
    feed(protocol, b"".join(messages))
    received = [await waiter]
    for _ in messages[1:]:
        received.append(await protocol.wait_message(bytes))
    assert received == messages


async def test_random_chunking_frames_every_message_exactly() -> None:
    rng = random.Random(5)
    protocol, _ = make_protocol()
    messages = [message(i, rng.choice([16, 17, 100, 4096, 70_000, 300_000])) for i in range(40)]
    stream = b"".join(messages)
    offset = 0
    received: list[bytes] = []
    while offset < len(stream):
        step = rng.choice([1, 7, 16, 1000, 65_536, 200_000])
        feed(protocol, stream[offset : offset + step])
        offset += step
    while len(received) < len(messages):
        received.append(await protocol.wait_message(bytes))
    assert received == messages


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=16, max_value=200_000), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=1, max_value=150_000), min_size=1, max_size=40),
)
def test_any_split_of_any_messages_frames_them_exactly(sizes: list[int], cuts: list[int]) -> None:
    async def run() -> list[bytes]:
        protocol, _ = make_protocol()
        messages = [message(i + 1, size) for i, size in enumerate(sizes)]
        stream = b"".join(messages)
        offset, index = 0, 0
        while offset < len(stream):
            step = cuts[index % len(cuts)]
            feed(protocol, stream[offset : offset + step])
            offset += step
            index += 1
        received = [await protocol.wait_message(bytes) for _ in messages]
        assert received == messages
        assert protocol.get_buffer(-1) and not protocol._held
        return received

    asyncio.run(run())


def _reads(protocol: MessageProtocol, data: bytes, chunk: int) -> Iterator[int]:
    """Feed ``data`` in reads of at most ``chunk`` bytes, yielding the bytes fed so far after each read."""
    for offset in range(0, len(data), chunk):
        feed(protocol, data[offset : offset + chunk])
        yield min(offset + chunk, len(data))


async def test_large_message_grows_the_buffer_with_its_bytes_and_it_shrinks_back_when_idle() -> None:
    protocol, _ = make_protocol()
    big = message(3, 5_000_000)
    waiter = protocol.wait_message(bytes)
    for received in _reads(protocol, big[:-1], 65_536):
        assert protocol._capacity <= max(_INITIAL_BUFFER_SIZE, 2 * received)
    assert protocol._capacity == len(big)  # doubled up to the message's length, not past it
    feed(protocol, big[-1:])
    assert await waiter == big
    assert len(protocol.get_buffer(-1)) <= 1024 * 1024


async def test_the_buffer_grows_in_place_while_nothing_else_holds_it() -> None:
    # Extended where it is (no second buffer beside it, so the peak is the new size), the bytes already
    # received kept.
    protocol, _ = make_protocol()
    big = message(3, 300_000)
    waiter = protocol.wait_message(bytes)
    buffer = protocol._buffer
    feed(protocol, big[:-1])
    assert protocol._buffer is buffer and protocol._capacity > _INITIAL_BUFFER_SIZE
    feed(protocol, big[-1:])
    assert await waiter == big


async def test_a_buffer_still_viewed_elsewhere_grows_into_a_copy() -> None:
    # A slice of the buffer's view still held (a parsed message keeping it, say) forbids resizing it: the
    # bytes move to a new buffer, and the slice keeps the old one valid.
    protocol, _ = make_protocol()
    big = message(3, 300_000)
    waiter = protocol.wait_message(bytes)
    feed(protocol, big[:4096])
    held = protocol._view[:16]
    buffer = protocol._buffer
    feed(protocol, big[4096:-1])
    assert protocol._buffer is not buffer and bytes(held) == big[:16]
    feed(protocol, big[-1:])
    assert await waiter == big


@pytest.mark.parametrize("chunk", [1000, 65_536, 1_000_003])
async def test_a_forged_length_costs_memory_in_proportion_to_the_bytes_that_arrived(chunk: int) -> None:
    # A header claiming 2 GiB, then 1 MiB of data and nothing more: the buffer follows the data.
    protocol, transport = make_protocol(max_message_size=2**31 - 1)
    waiter = protocol.wait_message(bytes)
    forged = HEADER.pack(2**31 - 1, 1, 0, OP_MSG) + bytes(1024 * 1024 - 16)
    for received in _reads(protocol, forged, chunk):
        assert protocol._capacity <= max(_INITIAL_BUFFER_SIZE, 2 * received)
    assert protocol._needed == 2**31 - 1 and not waiter.done() and not transport.aborted


async def test_a_message_behind_another_is_moved_to_the_front_before_the_buffer_grows() -> None:
    protocol, _ = make_protocol()
    first, second = message(1, 3000), message(2, 20_000)
    waiter = protocol.wait_message(bytes)
    feed(protocol, first + second[:1000])
    assert await waiter == first
    waiter = protocol.wait_message(bytes)
    for received in _reads(protocol, second[1000:-1], 700):
        assert protocol._capacity <= max(_INITIAL_BUFFER_SIZE, 2 * (1000 + received))
    feed(protocol, second[-1:])
    assert await waiter == second


@pytest.mark.parametrize("length", [0, 15, -5, 1001, 2**31 - 1, -(2**31)])
async def test_impossible_length_fails_the_waiter_and_aborts(length: int) -> None:
    protocol, transport = make_protocol(max_message_size=1000)
    waiter = protocol.wait_message(bytes)
    feed(protocol, HEADER.pack(length, 1, 0, OP_MSG))
    with pytest.raises(ProtocolError, match=rf"db\.example:27017 sent a message of length {length}; "):
        await waiter
    assert transport.aborted
    assert protocol.lost
    assert protocol._capacity == _INITIAL_BUFFER_SIZE  # refused at its header: no buffer sized for it
    with pytest.raises(AutoReconnect, match=r"db\.example:27017"):
        await protocol.wait_message(bytes)


async def test_parser_error_goes_to_the_waiter() -> None:
    protocol, _ = make_protocol()

    def parser(view: memoryview) -> None:
        raise ProtocolError("bad reply")

    waiter = protocol.wait_message(parser)
    feed(protocol, message(1, 20))
    with pytest.raises(ProtocolError, match="bad reply"):
        await waiter


async def test_connection_lost_fails_the_waiter_naming_the_address() -> None:
    protocol, _ = make_protocol()
    waiter = protocol.wait_message(bytes)
    feed(protocol, message(1, 100)[:50])  # half a reply, then the peer goes away
    protocol.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
    with pytest.raises(AutoReconnect, match=r"db\.example:27017.*reset"):
        await waiter
    assert protocol.lost


async def test_eof_fails_the_waiter() -> None:
    protocol, _ = make_protocol()
    waiter = protocol.wait_message(bytes)
    assert protocol.eof_received() is False
    with pytest.raises(AutoReconnect, match="closed the connection"):
        await waiter


async def test_deadline_fails_the_waiter_with_network_timeout() -> None:
    protocol, _ = make_protocol()
    loop = asyncio.get_running_loop()
    waiter = protocol.wait_message(bytes, deadline=loop.time() + 0.05)
    with pytest.raises(NetworkTimeout, match=r"db\.example:27017"):
        await waiter
    # A message that comes after the timeout is not given to anyone: it is kept aside.
    feed(protocol, message(9, 16))
    assert await protocol.wait_message(bytes) == message(9, 16)


async def test_reply_before_the_deadline_cancels_the_timer() -> None:
    protocol, _ = make_protocol()
    loop = asyncio.get_running_loop()
    waiter = protocol.wait_message(bytes, deadline=loop.time() + 0.05)
    feed(protocol, message(2, 16))
    assert await waiter == message(2, 16)
    await asyncio.sleep(0.1)
    assert not protocol.lost


async def test_only_one_waiter_at_a_time() -> None:
    protocol, _ = make_protocol()
    protocol.wait_message(bytes)
    with pytest.raises(Exception, match="already waiting"):
        protocol.wait_message(bytes)


@pytest.mark.parametrize(
    ("address", "name"),
    [
        (("db.example.com", 27017), "db.example.com:27017"),
        (("10.0.0.1", 1234), "10.0.0.1:1234"),
        (("::1", 27018), "[::1]:27018"),
        (("db.example.com", None), "db.example.com:27017"),
        (("/tmp/mongodb-27017.sock", None), "/tmp/mongodb-27017.sock"),
    ],
)
def test_addresses_are_named_as_in_a_uri(address: tuple[str, int | None], name: str) -> None:
    assert format_address(address) == name
    assert is_unix_socket(address) == name.endswith(".sock")


# -- flow control: a message nobody waits for pauses reading ------------------------------------------------


async def test_message_nobody_waits_for_pauses_reading_until_taken() -> None:
    protocol, transport = make_protocol()
    first, second = message(1, 100), message(2, 200)
    feed(protocol, first)
    assert not transport.is_reading()  # held in the buffer: the server's next replies wait in the socket
    assert await protocol.wait_message(bytes) == first
    assert transport.is_reading()
    waiter = protocol.wait_message(bytes)
    feed(protocol, second)
    assert await waiter == second
    assert transport.is_reading() and transport.pauses == 1


async def test_messages_read_together_are_held_one_at_a_time() -> None:
    protocol, transport = make_protocol()
    messages = [message(i, 64 + i) for i in range(1, 4)]
    partial = message(9, 500)
    feed(protocol, b"".join(messages) + partial[:30])
    for expected in messages:
        assert not transport.is_reading()
        assert await protocol.wait_message(bytes) == expected
    # Only a partial message is left: reading resumes to complete it.
    assert transport.is_reading()
    waiter = protocol.wait_message(bytes)
    feed(protocol, partial[30:])
    assert await waiter == partial


async def test_data_handed_over_while_paused_is_kept_and_framed_later() -> None:
    # A TLS layer may hand over what it had already decrypted after reading paused: it is kept (the buffer
    # grows for it) and framed once the held message is taken.
    protocol, transport = make_protocol()
    messages = [message(i, 3000) for i in range(1, 6)]
    feed(protocol, messages[0])
    assert not transport.is_reading()
    feed(protocol, b"".join(messages[1:]), chunk=1000)
    received = [await protocol.wait_message(bytes) for _ in messages]
    assert received == messages
    assert transport.is_reading()


async def test_held_message_is_parsed_in_place() -> None:
    protocol, _ = make_protocol()
    feed(protocol, message(1, 100))
    seen: list[type] = []

    def parser(view: memoryview) -> bytes:
        seen.append(type(view.obj))
        return bytes(view)

    await protocol.wait_message(parser)
    assert seen == [bytearray]  # a view of the protocol's own buffer, not of a copy made aside


async def test_held_message_is_delivered_even_after_the_peer_closed() -> None:
    protocol, transport = make_protocol()
    last = message(1, 100)
    feed(protocol, last)
    protocol.eof_received()
    assert await protocol.wait_message(bytes) == last
    assert not transport.is_reading()  # lost: reading is not resumed
    with pytest.raises(AutoReconnect):
        await protocol.wait_message(bytes)
