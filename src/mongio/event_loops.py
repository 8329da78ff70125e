"""Binding an object to the event loop it is first used on, and the error when another loop uses it.

A client works on any event loop, but some objects carry the state of one exchange with the server on one
loop (a session, an open cursor, a change stream). Each keeps the loop it was first used on and calls
:func:`bind_to_running_loop` before using it again; from another loop that raises
:class:`~mongio.errors.EventLoopMismatchError` naming both loops.
"""

from __future__ import annotations

import asyncio
import threading

from mongio.backend import running_loop
from mongio.errors import EventLoopMismatchError

__all__ = ["bind_to_running_loop", "describe_loop"]


def describe_loop(loop: asyncio.AbstractEventLoop) -> str:
    """A loop as an error message names it: its class, identity and state."""
    state = "closed" if loop.is_closed() else ("running" if loop.is_running() else "not running")
    return f"{type(loop).__name__} at {id(loop):#x} ({state})"


def bind_to_running_loop(
    bound: asyncio.AbstractEventLoop | None, what: str, remedy: str
) -> asyncio.AbstractEventLoop:
    """The running loop, after checking that ``what`` (e.g. ``"this cursor"``), bound to ``bound`` when that
    is not ``None``, may be used on it; ``remedy`` ends the error message (what to do instead)."""
    loop = running_loop()
    if bound is None or bound is loop:
        return loop
    raise EventLoopMismatchError(
        f"{what} belongs to the event loop {describe_loop(bound)} and cannot be used from the event loop "
        f"{describe_loop(loop)} in thread {threading.current_thread().name!r}: its state is tied to the "
        f"first loop. The client itself works on any loop: {remedy}"
    )
