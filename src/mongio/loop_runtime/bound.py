"""``LoopBound``: what an object holding resources of one event loop offers the runtime that owns that loop.

Pools, server monitors (and their round trip time monitors), SRV pollers, the cursor reaper, the topology
and each connection's protocol hold tasks, futures and sockets of one loop. None of them checks whether
that loop can still run: the :class:`~mongio.loop_runtime.LoopRuntime` decides (the loop was closed
without shutting down, or the process forked), and then calls :meth:`LoopBound.let_go` on what it owns,
which calls it on what those own, down to the protocols.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["LoopBound"]


class LoopBound(Protocol):
    """An object whose tasks, waiters or sockets belong to one event loop."""

    def let_go(self) -> None:
        """Let go of everything held on the loop, which will never run again here: tasks and waiters are
        forgotten (not cancelled or failed), sockets are closed directly, and nothing is scheduled on the
        loop. Callable from any thread and more than once; the object is closed afterwards."""
        ...
