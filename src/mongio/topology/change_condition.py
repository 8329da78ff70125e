"""``ChangeCondition``: the ``asyncio.Condition`` that server selections wait on for the topology to change.

``asyncio.Condition`` keeps its waiting tasks' futures in a deque, and a wait that ends takes its own future
out of it by searching the deque. A wait that ends because its task was cancelled searches from the front:
when thousands of tasks wait for a server (a deployment out of reach) and are cancelled newest first, as a
request server or a task group may cancel them, every cancellation walks the waiters still ahead of it and
the loop stalls for the square of their number (20,000 waiting selections: 5.4 seconds).

This subclass keeps the futures in a :class:`~mongio.loop_runtime.wait_queue.WaitQueue` instead (the pool's
wait queue too), in arrival order, so ``notify`` still wakes the longest waiting first, and from which a
finished wait removes its own in constant time. The lock and everything else are ``asyncio.Condition``'s
own.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from mongio.backend import new_lock, running_loop, take_uninterrupted
from mongio.loop_runtime.wait_queue import WaitQueue

__all__ = ["ChangeCondition"]


class ChangeCondition(asyncio.Condition):
    """An ``asyncio.Condition`` whose waits end in constant time however many tasks wait (see the module
    docstring); same interface and semantics as Python 3.11's. (A task notified by ``notify(n)`` and cancelled
    before it resumes does not pass the notification on, as later Pythons' conditions do; the topology only
    calls ``notify_all``.)"""

    def __init__(self) -> None:
        # The lock of the running runtime (asyncio's own on asyncio): the condition's futures come from the
        # running loop too, so the condition works on trio as well.
        lock = new_lock()
        super().__init__(lock)  # type: ignore[arg-type]
        self._taken_back = lock
        self._sleeping: WaitQueue[bool] = WaitQueue()

    def __repr__(self) -> str:
        state = "locked" if self.locked() else "unlocked"
        return f"<{type(self).__name__} [{state}, waiters:{self._sleeping.waiting}]>"

    @property
    def waiting(self) -> int:
        """How many tasks wait for a ``notify`` now."""
        return self._sleeping.waiting

    async def wait(self) -> Literal[True]:
        """Release the lock, wait for a ``notify``, take the lock again and return True. The lock is taken
        again however the wait ends, a cancellation included (which is raised once the lock is held)."""
        if not self.locked():
            raise RuntimeError("cannot wait on un-acquired lock")
        woken: asyncio.Future[bool] = running_loop().create_future()
        self._sleeping.join(woken)
        self.release()
        try:
            await woken
            return True
        finally:
            self._sleeping.leave(woken)
            await self._take_lock_back()

    async def _take_lock_back(self) -> None:
        """Acquire the lock after a wait, a cancellation included: the caller's ``async with`` releases it on
        the way out, so it must hold it whatever happened. A cancellation that arrives meanwhile is raised
        once the lock is held (on trio it stays pending)."""
        await take_uninterrupted(self._taken_back)

    def notify(self, n: int = 1) -> None:
        """Wake up to ``n`` waiting tasks, the longest waiting first. The lock must be held."""
        if not self.locked():
            raise RuntimeError("cannot notify on un-acquired lock")
        remaining = n
        for woken in self._sleeping:
            if remaining <= 0:
                return
            woken.set_result(False)
            remaining -= 1

    def notify_all(self) -> None:
        """Wake every waiting task. The lock must be held."""
        self.notify(self._sleeping.waiting)
