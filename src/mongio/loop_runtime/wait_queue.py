"""``WaitQueue``: futures waiting in arrival order, served oldest first, each leaving in constant time.

The pool's check-outs and the topology's server selections wait on futures. When thousands of tasks wait
(a deployment out of reach, a pool at ``maxPoolSize``) and are cancelled at once, newest first as a task
group or a request server may cancel them, each cancelled wait must leave the queue without a pass over the
waiters ahead of it, or the loop stalls for the square of their number (20,000 waiters: seconds).
``asyncio.Condition`` searches its deque for the leaving waiter, which costs just that.

Here a waiter that leaves is only taken out of a set; its entry in the arrival-order deque stays until a
pass over the front meets it, or until such entries outnumber the live waiters, when the deque is compacted
(so leaving costs constant time on average, and the deque is never more than twice the waiters plus a
constant). A waiter whose future is done (resolved, or cancelled with its task) is passed over as gone.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["WaitQueue"]

T = TypeVar("T")

# How many entries of waiters that left the deque may hold beyond twice the live waiters before it is
# compacted.
_COMPACT_AFTER = 32


class WaitQueue(Generic[T]):
    """Waiting futures in arrival order. Not thread-safe: used from one event loop.

    A waiter :meth:`join` s the queue and, however its wait ends without it being served (cancelled, timed
    out), :meth:`leave` s it. The server either serves the oldest waiter (:meth:`oldest` and
    :meth:`serve_oldest`), wakes waiters without taking them out (iterating), or empties the queue
    (:meth:`drain`).
    """

    __slots__ = ("_order", "_waiting", "waiting")

    def __init__(self) -> None:
        self._order: deque[asyncio.Future[T]] = deque()
        self._waiting: set[asyncio.Future[T]] = set()
        self.waiting = 0
        """How many waiters are still waiting (to be read only). A plain attribute rather than ``len()``: the
        pool reads it at every check-out and check-in, where calling ``__len__`` would cost more than the
        rest of the test."""

    def __iter__(self) -> Iterator[asyncio.Future[T]]:
        """The waiters still waiting whose futures are not done yet, oldest first (for waking them in place;
        resolving a future during the iteration is fine, joining or leaving the queue is not)."""
        waiting = self._waiting
        return (waiter for waiter in self._order if waiter in waiting and not waiter.done())

    def join(self, waiter: asyncio.Future[T]) -> None:
        """Put ``waiter`` at the end of the queue."""
        self._order.append(waiter)
        self._waiting.add(waiter)
        self.waiting = len(self._waiting)

    def leave(self, waiter: asyncio.Future[T]) -> None:
        """Take ``waiter`` out of the queue (if still in it) in constant time on average."""
        waiting = self._waiting
        waiting.discard(waiter)
        self.waiting = len(waiting)
        order = self._order
        if len(order) > 2 * len(waiting) + _COMPACT_AFTER:
            # In place: a pass over the queue further up the stack may hold this same deque.
            live = [entry for entry in order if entry in waiting and not entry.done()]
            order.clear()
            order.extend(live)

    def oldest(self) -> asyncio.Future[T] | None:
        """The oldest waiter still waiting, left in the queue; entries of waiters gone are dropped on the
        way."""
        order, waiting = self._order, self._waiting
        while order:
            waiter = order[0]
            if waiter in waiting and not waiter.done():
                return waiter
            order.popleft()
        return None

    def serve_oldest(self, result: T) -> bool:
        """Take the oldest waiter still waiting out of the queue and resolve it with ``result``; False when
        nobody waits. (The pass of :meth:`oldest` written out: this runs at every check-in a waiter takes.)"""
        order, waiting = self._order, self._waiting
        while order:
            waiter = order.popleft()
            if waiter in waiting and not waiter.done():
                waiting.discard(waiter)
                self.waiting = len(waiting)
                waiter.set_result(result)
                return True
        return False

    def drain(self) -> list[asyncio.Future[T]]:
        """Empty the queue; returns the waiters that were still waiting, oldest first."""
        order, waiting = self._order, self._waiting
        self._order, self._waiting = deque(), set()
        self.waiting = 0
        return [waiter for waiter in order if waiter in waiting and not waiter.done()]
