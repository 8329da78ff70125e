"""Driving the framing protocol by hand, the way a transport drives it (get_buffer, then buffer_updated),
over a transport that records what is written."""

from __future__ import annotations

import asyncio
from typing import Any

from mongio.connection.protocol import MessageProtocol
from mongio.wire import HEADER, HEADER_SIZE, OP_MSG

__all__ = ["FakeTransport", "feed", "make_protocol", "message"]


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False
        self.closed = False
        self.reading = True
        self.pauses = 0

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.aborted or self.closed


def message(request_id: int, size: int) -> bytes:
    body = bytes((request_id + i) % 251 for i in range(size - HEADER_SIZE))
    return HEADER.pack(size, request_id, 0, OP_MSG) + body


def feed(protocol: MessageProtocol, data: bytes, chunk: int | None = None) -> None:
    """Hand ``data`` to the protocol as a transport would, at most ``chunk`` bytes per read."""
    offset = 0
    while offset < len(data):
        buffer = protocol.get_buffer(-1)
        assert len(buffer) > 0
        count = min(len(buffer), len(data) - offset, chunk or len(data))
        buffer[:count] = data[offset : offset + count]
        protocol.buffer_updated(count)
        offset += count


def make_protocol(max_message_size: int = 48_000_000) -> tuple[MessageProtocol, FakeTransport]:
    protocol = MessageProtocol("db.example:27017", max_message_size)
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport
