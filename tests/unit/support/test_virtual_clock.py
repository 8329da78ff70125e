"""The tests' virtual-clock event loop: timers jump the clock, sockets and threads are still waited for."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.virtual_clock import VirtualClockLoop, on_virtual_clock, run_on_virtual_clock


def running_loop() -> VirtualClockLoop:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualClockLoop)
    return loop


@on_virtual_clock
async def test_timers_fire_in_order_and_move_the_clock_exactly_to_their_deadlines() -> None:
    loop = running_loop()
    start = loop.time()
    fired: list[tuple[str, object]] = []
    loop.call_later(3600, lambda: fired.append(("hour", loop.time() - start)))
    loop.call_later(0.25, lambda: fired.append(("quarter", loop.time() - start)))
    await asyncio.sleep(7200)
    assert fired == [("quarter", pytest.approx(0.25)), ("hour", pytest.approx(3600))]
    assert loop.time() - start == pytest.approx(7200)


@on_virtual_clock
async def test_time_monotonic_reads_the_loop_clock() -> None:
    loop = running_loop()
    assert time.monotonic() == loop.time()
    await asyncio.sleep(5)
    assert time.monotonic() == loop.time()


@on_virtual_clock
async def test_a_loopback_exchange_completes_before_the_clock_moves() -> None:
    loop = running_loop()

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    start = loop.time()
    async with asyncio.timeout(30):  # a pending timer the loop could jump to while the bytes travel
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping\n")
        assert await reader.readline() == b"ping\n"
    assert loop.time() == start
    writer.close()
    await writer.wait_closed()
    server.close()
    await server.wait_closed()


@on_virtual_clock
async def test_the_clock_waits_for_a_thread_at_work() -> None:
    loop = running_loop()

    def work() -> str:
        time.sleep(0.05)  # real time: what the thread does is invisible to the loop
        return "done"

    start = loop.time()
    async with asyncio.timeout(60):  # would fire at once if the clock jumped while the thread works
        assert await asyncio.to_thread(work) == "done"
    assert loop.time() == start


def test_the_clock_does_not_go_back() -> None:
    loop = VirtualClockLoop()
    try:
        now = loop.time()
        loop.advance(1.5)
        assert loop.time() == now + 1.5
        with pytest.raises(ValueError, match="cannot go back"):
            loop.advance(-1)
    finally:
        loop.close()


def test_a_loop_kept_busy_forever_fails_after_the_real_time_limit() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()

        def spin() -> None:  # always a callback ready: the loop is never idle, the clock never moves
            loop.call_soon(spin)

        spin()
        await asyncio.sleep(1)

    with pytest.raises(AssertionError, match="kept it busy"):
        run_on_virtual_clock(main(), real_seconds_limit=0.2)
