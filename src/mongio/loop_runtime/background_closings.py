"""The closings that ``client.close()`` left running in the background on each event loop (Motor's idiom: no
``await``), so that nothing of them is left pending when that loop stops.

A closing left in the background needs its loop to run until it is done. When a loop that stopped is run
again only to close something of mongio's (``client.close()`` called where no loop runs, which runs the idle
loop: Motor's test harness does this for its own client after each test), that run also waits for the
loop's background closings, so that they finish before the loop is closed. Each task is owned by the
client that started it; this index holds it weakly.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

__all__ = ["finish_background_closings", "track_background_closing"]

_lock = threading.Lock()
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakSet[asyncio.Task[None]]] = (
    weakref.WeakKeyDictionary()
)


def track_background_closing(task: asyncio.Task[None]) -> None:
    """Index a closing task that runs on its loop without anyone waiting for it."""
    with _lock:
        _by_loop.setdefault(task.get_loop(), weakref.WeakSet()).add(task)


async def finish_background_closings() -> None:
    """Wait until the running loop's background closings are done (their errors are their own)."""
    loop = asyncio.get_running_loop()
    with _lock:
        pending = [task for task in _by_loop.get(loop, ()) if not task.done()]
    if pending:
        await asyncio.wait(pending)
