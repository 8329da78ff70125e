"""The tests' servers written for asyncio (fake KMS, loopback peers, proxies), served on an asyncio loop in a
thread of their own for a synchronous test that drives the driver through ``trio.run`` (several runs, one
server): entered and left there, whatever runs in between."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TypeVar

from spec_runner.loop_thread import LoopThread

S = TypeVar("S", bound=AbstractAsyncContextManager[object])

__all__ = ["on_asyncio_thread"]


@contextmanager
def on_asyncio_thread(server: S) -> Iterator[S]:
    """Enter ``server`` (``async with``) on a new asyncio loop in a thread, and leave it there at the end."""
    loop_thread = LoopThread("asyncio test server", 10.0)
    try:
        loop_thread.run_blocking(server.__aenter__())
        try:
            yield server
        finally:
            loop_thread.run_blocking(server.__aexit__(None, None, None))
    finally:
        loop_thread.close()
