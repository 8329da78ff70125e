"""Driving the framing protocol by hand, the way a transport drives it (get_buffer, then buffer_updated),
over a transport that records what is written; with the compiled framing and with its Python reference.

A test module that takes the ``framing`` fixture (module-scoped, so Hypothesis's tests may use it too) runs
once per implementation: ``make_protocol`` and ``waiter_class`` then give that implementation's classes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from mongio.connection import protocol as protocol_module
from mongio.connection.protocol import MessageProtocol
from mongio.connection.reply_waiter import ReplyWaiter
from mongio.wire import HEADER, HEADER_SIZE, OP_MSG

__all__ = ["FRAMINGS", "FakeTransport", "feed", "framing", "make_protocol", "message", "waiter_class"]


_compiled = protocol_module._compiled
# MessageProtocol with the Python framing and ReplyWaiter, whatever the extension provides (without the
# extension, MessageProtocol itself).
PythonFramingProtocol: Any = (
    MessageProtocol
    if _compiled is None
    else type("PythonFramingProtocol", (protocol_module._FramingInPython, MessageProtocol), {})
)
# Each implementation: its protocol class and its ReplyWaiter class.
FRAMINGS: dict[str, tuple[Any, Any]] = (
    {"python": (MessageProtocol, ReplyWaiter)}
    if _compiled is None
    else {
        "compiled": (MessageProtocol, _compiled.ReplyWaiter),
        "python": (PythonFramingProtocol, ReplyWaiter),
    }
)
_chosen = next(iter(FRAMINGS))


@pytest.fixture(scope="module", params=sorted(FRAMINGS))
def framing(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the module's tests with the named implementation."""
    global _chosen
    _chosen = request.param
    try:
        yield request.param
    finally:
        _chosen = next(iter(FRAMINGS))


def waiter_class() -> Any:
    """The ReplyWaiter class of the implementation under test."""
    return FRAMINGS[_chosen][1]


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
        del buffer  # an event loop drops the view it read into before asking for the next one
        offset += count


def make_protocol(max_message_size: int = 48_000_000) -> tuple[MessageProtocol, FakeTransport]:
    protocol = FRAMINGS[_chosen][0]("db.example:27017", max_message_size)
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport
