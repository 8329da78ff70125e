"""Resetting a context variable where the reset may run outside the context that set it.

A task destroyed with the loop it pended on (a loop closed without shutting down) has its coroutine closed
later by the garbage collector, in whatever context is current then. The coroutine's ``finally`` blocks and
``with`` exits still run, and a ``ContextVar.reset`` among them raises ``ValueError`` (the token "was
created in a different Context"). That context is gone with the task, so there is nothing to restore: the
error is dropped in that case alone.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TypeVar

__all__ = ["reset"]

T = TypeVar("T")


def reset(var: ContextVar[T], token: Token[T]) -> None:
    """``var.reset(token)``, quietly doing nothing when a coroutine being closed resets it from another
    context."""
    try:
        var.reset(token)
    except ValueError as error:
        # Raised inside the finally block that the closing's GeneratorExit runs, which is its context.
        if not isinstance(error.__context__, GeneratorExit):
            raise
