"""The per-loop runtime: the one owner of what a client keeps on an event loop, and of what happens to it
when that loop closes or the process forks.

- :mod:`~mongio.loop_runtime.runtime`: :class:`LoopRuntime` (one client's topology and cursor reaper on
  one loop) and :class:`LoopRuntimes` (a client's runtimes, by loop), which decide when to let go of a loop.
- :mod:`~mongio.loop_runtime.bound`: :class:`LoopBound`, the one method (``let_go``) through which the
  runtime lets go of what lives on a loop that will never run again, and :func:`loop_gone`, the one test
  of whether a loop can still run.
- :mod:`~mongio.loop_runtime.sockets`: the record of the sockets and connections opened on each loop.
- :mod:`~mongio.loop_runtime.fork`: the process's one fork hook.
- :mod:`~mongio.loop_runtime.wait_queue`: fair, cancellation-safe waiting (the pool's wait queue and the
  topology's change condition).

See ``docs/design/loop-lifetime.md``.
"""

from mongio.loop_runtime.bound import LoopBound
from mongio.loop_runtime.runtime import LoopRuntime, LoopRuntimes, cancel_from_anywhere

__all__ = ["LoopBound", "LoopRuntime", "LoopRuntimes", "cancel_from_anywhere"]
