"""The process's one fork hook: what a child forked from this process renews before it runs anything.

A child has copies of its parent's objects but only the thread that forked. So, right after ``os.fork()``:

- the ObjectId's random bytes and counter are drawn anew (a child must not mint its parent's ids);
- every connection and socket in the socket record is let go of (they are the parent's, on its loops: the
  child's copies of the sockets are closed and nothing touches the loops, whose epoll sets the two
  processes share), and the record's lock is renewed;
- every object registered with :func:`renew_in_forked_children` renews itself: clients renew their locks,
  server session pools forget the sessions the parent goes on using.

The runtimes are not let go of here: a runtime finds itself stranded (made in another process) at its
client's next use, and lets go of its pools and tasks then, where the client's listeners may be told.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

from mongio.bson.objectid import reset_after_fork as _reset_object_ids
from mongio.loop_runtime.sockets import let_go_after_fork as _let_go_of_the_parents_connections

__all__ = ["RenewedAfterFork", "renew_in_forked_children"]


class RenewedAfterFork(Protocol):
    """An object with state a forked child must not share with its parent (a lock, pooled ids)."""

    def renew_after_fork(self) -> None:
        """Run in the child right after the fork, with no other thread: make the state the child's own."""
        ...


_RENEWED: weakref.WeakSet[RenewedAfterFork] = weakref.WeakSet()


def renew_in_forked_children(renewed: RenewedAfterFork) -> None:
    """Have ``renewed.renew_after_fork()`` called in the child of every fork while ``renewed`` lives (it is
    held weakly)."""
    _RENEWED.add(renewed)


def _after_fork_in_child() -> None:
    _reset_object_ids()
    _let_go_of_the_parents_connections()
    for renewed in list(_RENEWED):
        renewed.renew_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
