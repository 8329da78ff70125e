"""``LoopBound``: what an object holding resources of one event loop offers the runtime that owns that loop.

Pools, server monitors (and their round trip time monitors), SRV pollers, the cursor reaper, the topology
and each connection's protocol hold tasks, futures and sockets of one loop. None of them checks whether
that loop can still run: the :class:`~mongio.loop_runtime.LoopRuntime` decides (the loop was closed
without shutting down, or the process forked), and then calls :meth:`LoopBound.let_go` on what it owns,
which calls it on what those own, down to the protocols.

:func:`loop_gone` is the test itself, written once. The runtime asks it; so does a protocol asked to close
on a loop nobody let go of yet (the garbage collector finalizing a coroutine of a loop closed without
shutting down, whose cleanup closes its connection), which then lets itself go instead.
"""

from __future__ import annotations

import asyncio
import os
from typing import Protocol

__all__ = ["LoopBound", "loop_gone"]


def loop_gone(loop: asyncio.AbstractEventLoop, made_in_pid: int | None = None) -> bool:
    """Whether ``loop`` can never again run anything here: it is closed or, when ``made_in_pid`` is given
    (the process an object was made in), this process is a child forked since (the loop, even one running
    at the fork, is the parent's, and the epoll set under it is shared with the parent)."""
    return loop.is_closed() or (made_in_pid is not None and made_in_pid != os.getpid())


class LoopBound(Protocol):
    """An object whose tasks, waiters or sockets belong to one event loop."""

    def let_go(self) -> None:
        """Let go of everything held on the loop, which will never run again here: tasks and waiters are
        forgotten (not cancelled or failed), sockets are closed directly, and nothing is scheduled on the
        loop. Callable from any thread and more than once; the object is closed afterwards."""
        ...
