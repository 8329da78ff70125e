"""The reply waiter: a reply read by the loop resumes its task inside that same read callback, and every other
way of finishing (time-out, lost connection, cancellation, a reply taken while a task runs) behaves as an
asyncio Future does."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, cast

import pytest

from mongio.connection.reply_waiter import ReplyWaiter
from mongio.errors import InvalidOperation, NetworkTimeout, ProtocolError
from tests.support.protocol_feed import feed, framing, make_protocol, message, waiter_class

pytestmark = pytest.mark.usefixtures(framing.__name__)

request_name: contextvars.ContextVar[str] = contextvars.ContextVar("request_name", default="none")


async def test_reply_read_by_the_loop_resumes_the_task_within_the_same_callback() -> None:
    protocol, _ = make_protocol()
    loop = asyncio.get_running_loop()
    steps: list[str] = []

    async def receive() -> None:
        reply = await protocol.wait_message(bytes)
        steps.append(f"task resumed with {len(reply)} bytes")

    task = asyncio.create_task(receive())
    await asyncio.sleep(0)  # the task now waits

    def read_callback() -> None:
        feed(protocol, message(3, 40))
        steps.append("read callback returned")

    loop.call_soon(read_callback)
    await task
    assert steps == ["task resumed with 40 bytes", "read callback returned"]


async def test_reply_taken_while_a_task_runs_resumes_its_waiter_on_the_next_turn() -> None:
    protocol, _ = make_protocol()
    steps: list[str] = []

    async def receive() -> None:
        await protocol.wait_message(bytes)
        steps.append("waiter resumed")

    task = asyncio.create_task(receive())
    await asyncio.sleep(0)
    feed(protocol, message(3, 40))  # from inside this test's own task: no other task may step here
    steps.append("feeding task continued")
    await task
    assert steps == ["feeding task continued", "waiter resumed"]


async def test_messages_read_together_reach_a_task_that_waits_again_in_order_within_one_callback() -> None:
    protocol, transport = make_protocol()
    loop = asyncio.get_running_loop()
    messages = [message(i, 16 + 9 * i) for i in range(1, 5)]
    received: list[bytes] = []
    after_callback: list[int] = []

    async def exhaust_reader() -> None:
        for index in range(len(messages)):
            received.append(await protocol.wait_message(bytes))
            transport.write(b"ack %d" % index)  # the resumed task uses the connection from inside the read

    task = asyncio.create_task(exhaust_reader())
    await asyncio.sleep(0)

    def read_callback() -> None:
        feed(protocol, b"".join(messages))
        after_callback.append(len(received))

    loop.call_soon(read_callback)
    await task
    assert received == messages
    assert after_callback == [len(messages)]
    assert transport.written == [b"ack %d" % index for index in range(len(messages))]
    assert transport.reading  # nothing was held: each message found its waiter


async def test_parser_error_is_raised_in_the_task_resumed_within_the_callback() -> None:
    protocol, _ = make_protocol()
    loop = asyncio.get_running_loop()

    def parser(view: memoryview) -> Any:
        raise ValueError(f"cannot parse {len(view)} bytes")

    task = asyncio.create_task(asyncio.wait_for(protocol.wait_message(parser), None))
    await asyncio.sleep(0)
    loop.call_soon(feed, protocol, message(1, 20))
    with pytest.raises(ValueError, match="cannot parse 20 bytes"):
        await task


async def test_task_resumed_within_the_callback_keeps_its_own_context() -> None:
    protocol, _ = make_protocol()
    loop = asyncio.get_running_loop()
    seen: list[str] = []

    async def receive() -> None:
        request_name.set("the task's")
        await protocol.wait_message(bytes)
        seen.append(request_name.get())
        request_name.set("changed after the reply")

    task = asyncio.create_task(receive())
    await asyncio.sleep(0)

    def read_callback() -> None:
        feed(protocol, message(2, 30))
        seen.append(request_name.get())

    loop.call_soon(read_callback)
    await task
    assert seen == ["the task's", "none"]
    assert request_name.get() == "none"


async def test_cancelled_waiter_raises_cancelled_error_and_the_reply_waits_for_the_next_task() -> None:
    protocol, transport = make_protocol()
    waiter = protocol.wait_message(bytes)

    async def receive() -> bytes:
        return await waiter

    receiver = asyncio.create_task(receive())
    await asyncio.sleep(0)
    receiver.cancel("operation abandoned")
    with pytest.raises(asyncio.CancelledError, match="operation abandoned"):
        await receiver
    assert waiter.cancelled()

    feed(protocol, message(5, 24))
    assert not transport.reading  # held: its waiter was cancelled
    assert await protocol.wait_message(bytes) == message(5, 24)


async def test_lost_connection_resumes_the_task_on_a_later_turn_and_a_time_out_fails_it() -> None:
    loop = asyncio.get_running_loop()
    steps: list[str] = []

    async def receive(protocol: Any, deadline: float | None = None) -> None:
        try:
            await protocol.wait_message(bytes, deadline)
        except (NetworkTimeout, ProtocolError) as exc:
            steps.append(f"task resumed with {type(exc).__name__}")

    # Lost: the error is set from a loop callback (outside any task), yet the task resumes on a later turn.
    protocol, _ = make_protocol()
    task = asyncio.create_task(receive(protocol))
    await asyncio.sleep(0)

    def lose_connection() -> None:
        protocol.abort(ProtocolError("garbled"))
        steps.append("abort returned")

    loop.call_soon(lose_connection)
    await task
    assert steps == ["abort returned", "task resumed with ProtocolError"]

    # Timed out: the protocol's timer fails the waiter.
    steps.clear()
    protocol, _ = make_protocol()
    await receive(protocol, loop.time() + 0.01)
    assert steps == ["task resumed with NetworkTimeout"]


async def test_waiter_follows_the_future_protocol() -> None:
    loop = asyncio.get_running_loop()
    waiter: ReplyWaiter[int] = waiter_class()(loop)
    assert asyncio.isfuture(cast(Any, waiter))  # the duck-typed check asyncio's Task makes
    assert waiter.get_loop() is loop
    with pytest.raises(asyncio.InvalidStateError):
        waiter.result()
    with pytest.raises(asyncio.InvalidStateError):
        waiter.exception()

    calls: list[Any] = []
    waiter.add_done_callback(calls.append)
    with pytest.raises(InvalidOperation, match="one task"):
        waiter.add_done_callback(calls.append)
    waiter.set_result(7)
    assert calls == []  # set_result schedules, as a Future does
    await asyncio.sleep(0)
    assert calls == [waiter]
    assert waiter.result() == 7
    assert waiter.exception() is None
    with pytest.raises(asyncio.InvalidStateError):
        waiter.set_result(8)
    assert not waiter.cancel()

    late: list[Any] = []
    waiter.add_done_callback(late.append)  # on a finished waiter: called on the next turn
    await asyncio.sleep(0)
    assert late == [waiter]

    removed: ReplyWaiter[int] = waiter_class()(loop)
    removed.add_done_callback(calls.append)
    assert removed.remove_done_callback(calls.append) == 1
    assert removed.remove_done_callback(calls.append) == 0
    removed.deliver(1)
    await asyncio.sleep(0)
    assert calls == [waiter]

    failed: ReplyWaiter[int] = waiter_class()(loop)
    failed.set_exception(KeyError("k"))
    assert isinstance(failed.exception(), KeyError)
    with pytest.raises(KeyError):
        await failed


async def test_awaiting_a_finished_waiter_gives_its_result_as_one_value() -> None:
    loop = asyncio.get_running_loop()
    for value in ((1, 2), KeyError("a value, not raised"), None):
        waiter = waiter_class()(loop)
        waiter.set_result(value)
        assert await waiter is value
        steps = waiter.__await__()
        with pytest.raises(StopIteration) as stopped:
            next(steps)
        assert stopped.value.value is value


async def test_a_pending_waiter_yields_itself_once_to_the_task_then_refuses_to_go_on() -> None:
    loop = asyncio.get_running_loop()
    waiter = waiter_class()(loop)
    steps = waiter.__await__()
    assert next(steps) is waiter
    assert waiter._asyncio_future_blocking is True
    with pytest.raises(asyncio.InvalidStateError):
        next(steps)  # resumed while still pending: no result to give


async def test_a_cancelled_waiter_raises_cancelled_error_with_its_message() -> None:
    loop = asyncio.get_running_loop()
    waiter = waiter_class()(loop)
    assert waiter.cancel("stop here")
    assert waiter.cancelled() and waiter.done()
    with pytest.raises(asyncio.CancelledError, match="stop here"):
        waiter.result()
    with pytest.raises(asyncio.CancelledError):
        await waiter
