"""The cursor reaper: cursors dropped while open are queued from finalizers (any thread, any context) and
killed by one background task on the client's loop, which close() stops after sending what is queued."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Sequence
from typing import Any

from mongio.cursor_reaper import CursorReaper

A = ("a.example", 27017)
B = ("b.example", 27017)

_AMBIENT: contextvars.ContextVar[str] = contextvars.ContextVar("_AMBIENT", default="none")


class Killer:
    """Records each killCursors call; ``gate`` (when given) holds every call until it is set."""

    def __init__(self, fail_first: int = 0, gate: asyncio.Event | None = None) -> None:
        self.calls: list[tuple[Any, str, list[int]]] = []
        self.contexts: list[str] = []
        self.attempts = 0
        self.fail_first = fail_first
        self.gate = gate
        self.called = asyncio.Event()
        self.changed = asyncio.Condition()

    async def __call__(self, address: Any, namespace: str, cursor_ids: Sequence[int]) -> None:
        self.contexts.append(_AMBIENT.get())
        self.called.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.fail_first:
                self.fail_first -= 1
                raise ConnectionError("server gone")
            self.calls.append((address, namespace, list(cursor_ids)))
        finally:
            self.attempts += 1
            async with self.changed:
                self.changed.notify_all()

    async def finished(self, attempts: int) -> None:
        """Wait until ``attempts`` calls have returned or failed."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.attempts >= attempts), 5)


def reaper_tasks() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name() == "mongio-cursor-reaper"]


async def a_few_turns() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_queued_cursors_are_killed_per_server_and_namespace_by_one_task() -> None:
    killer = Killer()
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    reaper.abandon(A, "db.one", 11)
    reaper.abandon(A, "db.one", 12)
    reaper.abandon(B, "db.one", 13)
    reaper.abandon(A, "db.two", 14)
    assert reaper.pending == 4
    assert killer.calls == []  # nothing is sent from the caller: it may be a finalizer
    await killer.finished(3)
    assert sorted(killer.calls) == [(A, "db.one", [11, 12]), (A, "db.two", [14]), (B, "db.one", [13])]
    assert len(reaper_tasks()) == 1
    reaper.abandon(B, "db.one", 15)
    await killer.finished(4)
    assert killer.calls[-1] == (B, "db.one", [15])
    assert len(reaper_tasks()) == 1  # the same task, woken again
    await reaper.close(1.0)
    assert reaper_tasks() == []


async def test_nothing_is_queued_before_the_client_starts_or_without_a_cursor() -> None:
    killer = Killer()
    reaper = CursorReaper(killer)
    reaper.abandon(A, "db.c", 5)  # no loop bound yet: the server's idle timeout takes care of it
    reaper.bind(asyncio.get_running_loop())
    reaper.abandon(A, "db.c", 0)
    reaper.abandon(None, "db.c", 6)
    assert reaper.pending == 0
    await a_few_turns()
    assert killer.calls == [] and reaper_tasks() == []
    await reaper.close(1.0)


async def test_a_cursor_dropped_in_another_thread_is_killed_on_the_loop() -> None:
    killer = Killer()
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    thread = threading.Thread(target=reaper.abandon, args=(A, "db.c", 21))
    thread.start()
    await asyncio.to_thread(thread.join)
    await killer.finished(1)
    assert killer.calls == [(A, "db.c", [21])]
    await reaper.close(1.0)


async def test_the_task_does_not_inherit_the_context_of_the_code_that_dropped_the_cursor() -> None:
    killer = Killer()
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    token = _AMBIENT.set("inside a timeout block")
    try:
        reaper.abandon(A, "db.c", 31)
    finally:
        _AMBIENT.reset(token)
    token = _AMBIENT.set("still inside")
    try:
        await killer.finished(1)
    finally:
        _AMBIENT.reset(token)
    assert killer.contexts == ["none"]
    await reaper.close(1.0)


async def test_a_failed_kill_is_dropped_and_the_task_keeps_serving() -> None:
    killer = Killer(fail_first=1)
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    reaper.abandon(A, "db.c", 41)
    await killer.finished(1)
    assert killer.calls == []
    reaper.abandon(A, "db.c", 42)
    await killer.finished(2)
    assert killer.calls == [(A, "db.c", [42])]
    await reaper.close(1.0)


async def test_close_sends_what_is_queued_then_refuses_more() -> None:
    killer = Killer()
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    reaper.abandon(A, "db.c", 51)
    reaper.abandon(A, "db.c", 52)
    await reaper.close(1.0)  # before the task had a turn
    assert killer.calls == [(A, "db.c", [51, 52])]
    reaper.abandon(A, "db.c", 53)
    assert reaper.pending == 0
    await a_few_turns()
    assert killer.attempts == 1 and reaper_tasks() == []


async def test_close_lets_the_task_finish_a_kill_in_flight() -> None:
    gate = asyncio.Event()
    killer = Killer(gate=gate)
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    reaper.abandon(A, "db.c", 61)
    await asyncio.wait_for(killer.called.wait(), 5)
    reaper.abandon(B, "db.c", 62)  # queued while the first kill is in flight
    closing = asyncio.create_task(reaper.close(5.0))
    await asyncio.sleep(0)
    assert not closing.done()
    gate.set()
    await closing
    assert sorted(killer.calls) == [(A, "db.c", [61]), (B, "db.c", [62])]
    assert reaper_tasks() == []


async def test_close_gives_up_on_a_server_that_does_not_answer() -> None:
    killer = Killer(gate=asyncio.Event())  # never answers
    reaper = CursorReaper(killer)
    reaper.bind(asyncio.get_running_loop())
    reaper.abandon(A, "db.c", 71)
    await asyncio.wait_for(killer.called.wait(), 5)
    await reaper.close(0.01)
    assert killer.calls == []
    assert reaper.pending == 0
    assert reaper_tasks() == []
