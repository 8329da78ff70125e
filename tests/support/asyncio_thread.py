"""The tests' servers written for asyncio (fake KMS, loopback peers, proxies), served on an asyncio loop in a
thread of their own, so that a test running on trio can talk to them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TypeVar

S = TypeVar("S", bound=AbstractAsyncContextManager[object])

__all__ = ["on_asyncio_thread"]


@contextmanager
def on_asyncio_thread(server: S) -> Iterator[S]:
    """Enter ``server`` (``async with``) on a new asyncio loop in a thread, and leave it there at the end."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="asyncio test server", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result(10)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
