"""The compiled per-reply path of a connection (``mongio/connection/_speedups.c``): it is what the protocol
uses when the extension is built, and it refuses state it cannot work on instead of reading outside a buffer.
Its behaviour is tested against the Python reference in test_wire_protocol.py and test_reply_waiter.py (both
run once per implementation) and by the fuzzer's ``framing`` target."""

from __future__ import annotations

import gc
import os
import weakref
from typing import Any

import pytest

from mongio.connection import protocol
from tests.support.protocol_feed import make_protocol

pytestmark = pytest.mark.skipif(
    protocol._compiled is None, reason="the compiled extension is not built or MONGIO_NO_SPEEDUPS is set"
)


@pytest.mark.skipif(bool(os.environ.get("MONGIO_NO_SPEEDUPS")), reason="MONGIO_NO_SPEEDUPS is set")
def test_the_protocol_builds_on_the_compiled_framing() -> None:
    compiled: Any = protocol._compiled
    assert compiled is not None
    framing_class: Any = protocol.MessageProtocol.__mro__[1]
    assert framing_class is compiled.Framing
    assert protocol.MessageProtocol.get_buffer is framing_class.get_buffer


async def test_a_compiled_protocol_gives_compiled_waiters() -> None:
    made, _ = make_protocol()
    assert type(made.wait_message(bytes)) is protocol._compiled.ReplyWaiter


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


async def test_a_dropped_protocol_in_a_cycle_through_its_waiter_is_collected() -> None:
    made, _ = make_protocol()
    waiter = made.wait_message(bytes)
    holder = [made]
    waiter.add_done_callback(holder.append)  # protocol -> waiter -> callback -> holder -> protocol
    gone, gone_waiter = weakref.ref(made), weakref.ref(waiter)
    del made, waiter, holder
    gc.collect()
    assert gone() is None and gone_waiter() is None
