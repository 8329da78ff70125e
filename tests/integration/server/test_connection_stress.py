"""Many tasks cancelled at random points: no connection is ever left half-used or reused after an interruption,
and no reply ever reaches the wrong command."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from mongio.connection import Connection, connect
from mongio.errors import AutoReconnect
from tests.support.loopback_peer import LoopbackPeer, Reply, Request

pytestmark = pytest.mark.slow

TASKS = 1000


def echo_with_jitter(seed: int) -> Any:
    rng = random.Random(seed)

    def handler(request: Request) -> Any:
        token = request.document.get("token")
        if token is None:
            return None
        # Replies come back after 0-4 ms, so cancellations land before, during and after them.
        return Reply({"ok": 1, "token": token}, delay=rng.choice([0, 0, 0.001, 0.002, 0.004]))

    return handler


async def test_a_thousand_tasks_on_their_own_connections_cancelled_at_random() -> None:
    rng = random.Random(1)
    async with LoopbackPeer(echo_with_jitter(2)) as peer:
        loop = asyncio.get_running_loop()
        connections: dict[int, Connection] = {}
        completed: set[int] = set()
        interrupted: set[int] = set()

        async def one(index: int) -> None:
            task = asyncio.current_task()
            assert task is not None
            conn = await connect(peer.address, id=index)
            connections[index] = conn
            if rng.random() < 0.6:
                # Lands inside one of the three commands below, or just after the last.
                loop.call_later(rng.uniform(0, 0.015), task.cancel)
            for step in range(3):
                token = f"{index}-{step}"
                try:
                    reply = await conn.command("admin", {"echo": 1, "token": token})
                except asyncio.CancelledError:
                    interrupted.add(index)
                    raise
                assert reply["token"] == token
            completed.add(index)

        tasks = [asyncio.ensure_future(one(i)) for i in range(TASKS)]
        for task in tasks:
            if rng.random() < 0.15:
                loop.call_later(rng.uniform(0, 0.05), task.cancel)  # mostly while still connecting
        results = await asyncio.gather(*tasks, return_exceptions=True)

        unexpected = [r for r in results if r is not None and not isinstance(r, asyncio.CancelledError)]
        assert unexpected == []
        cancelled = {i for i, r in enumerate(results) if isinstance(r, asyncio.CancelledError)}
        assert interrupted, "no command was interrupted: the test proves nothing"
        assert cancelled - interrupted, "no task was cancelled outside a command: the test proves nothing"
        assert len(completed) > TASKS // 10, "too few tasks finished: the test proves nothing"
        for index in interrupted:
            conn = connections[index]
            assert conn.closed, f"connection {index} was interrupted mid-command and left open"
            with pytest.raises(AutoReconnect, match="cancelled"):
                await conn.command("admin", {"echo": 1, "token": "after"})
        for index in completed:
            conn = connections[index]
            assert not conn.closed and not conn.in_exchange
            assert (await conn.command("admin", {"echo": 1, "token": f"again-{index}"}))[
                "token"
            ] == f"again-{index}"
        for conn in connections.values():
            conn.close()
        assert all(r.document.get("token") != "after" for r in peer.requests)


async def test_a_thousand_tasks_sharing_a_few_connections_cancelled_at_random() -> None:
    rng = random.Random(3)
    async with LoopbackPeer(echo_with_jitter(4)) as peer:
        loop = asyncio.get_running_loop()
        idle: asyncio.Queue[Connection | None] = asyncio.Queue()
        for _ in range(8):
            idle.put_nowait(None)  # made on first use
        made: list[Connection] = []
        interrupted: list[Connection] = []
        interrupted_tokens: set[str] = set()
        sent_on: dict[str, int] = {}
        replies_checked = 0

        async def one(index: int) -> None:
            nonlocal replies_checked
            this_task = asyncio.current_task()
            assert this_task is not None
            conn = await idle.get()
            try:
                if conn is None or conn.closed:
                    conn = await connect(peer.address, id=len(made))
                    made.append(conn)
                if rng.random() < 0.2:
                    # Most of these land inside one of this task's commands.
                    loop.call_later(rng.uniform(0, 0.004), this_task.cancel)
                for step in range(rng.choice([1, 2, 3])):
                    token = f"{index}-{step}"
                    sent_on[token] = conn.id
                    try:
                        reply = await conn.command("admin", {"echo": 1, "token": token})
                    except asyncio.CancelledError:
                        interrupted.append(conn)
                        interrupted_tokens.add(token)
                        raise
                    assert reply["token"] == token
                    replies_checked += 1
            finally:
                idle.put_nowait(None if conn is None or conn.closed else conn)

        tasks = [asyncio.ensure_future(one(i)) for i in range(TASKS)]
        for task in tasks:
            if rng.random() < 0.5:
                loop.call_later(rng.uniform(0, 1.0), task.cancel)
        results = await asyncio.gather(*tasks, return_exceptions=True)

        unexpected = [r for r in results if r is not None and not isinstance(r, asyncio.CancelledError)]
        assert unexpected == []
        assert interrupted, "no command was interrupted: the test proves nothing"
        assert replies_checked > TASKS // 4
        for conn in interrupted:
            assert conn.closed, f"{conn!r} was interrupted and left open"
        # Every connection still in the idle queue is whole: nothing in flight, and it still pairs replies right.
        survivors = [conn for conn in (idle.get_nowait() for _ in range(idle.qsize())) if conn is not None]
        assert len({id(conn) for conn in survivors}) == len(survivors)
        for conn in survivors:
            assert not conn.closed and not conn.in_exchange
            assert (await conn.command("admin", {"echo": 1, "token": f"final-{conn.id}"}))[
                "token"
            ] == f"final-{conn.id}"
        # On the peer's side, one peer connection carried one client connection's commands, and an interrupted
        # command was the last thing it ever carried.
        by_connection: dict[int, list[str]] = {}
        for request in peer.requests:
            token = request.document.get("token")
            if token is not None and not str(token).startswith("final"):
                by_connection.setdefault(request.connection.index, []).append(str(token))
        for tokens in by_connection.values():
            assert len({sent_on[token] for token in tokens}) == 1
            for position, token in enumerate(tokens):
                if token in interrupted_tokens:
                    assert position == len(tokens) - 1, (
                        f"{tokens[position + 1 :]} sent after {token} was interrupted"
                    )
        for conn in made:
            conn.close()
