"""The pool's books kept from its CMAP events, for the cancellation storms: how many connections are open (one
being opened counts) and the most there ever were, check-outs against check-ins, and why connections closed.

After a storm, every check-out must have been checked back in, and every connection the pool ever made must be
either still open or closed with a reason; the storms assert it with ``balance_problems``."""

from __future__ import annotations

from collections import Counter

from mongio.events import (
    ConnectionCheckedInEvent,
    ConnectionCheckedOutEvent,
    ConnectionCheckOutFailedEvent,
    ConnectionClosedEvent,
    ConnectionCreatedEvent,
    ConnectionPoolListener,
)


class PoolBooks(ConnectionPoolListener):
    """Counts kept from one or more pools' connection events."""

    def __init__(self) -> None:
        self.open = 0
        self.most = 0
        self.created = 0
        self.closed_ids: set[int] = set()
        self.closed_reasons: Counter[str] = Counter()
        self.checked_out = 0
        self.checked_in = 0
        self.check_out_failures: Counter[str] = Counter()

    def connection_created(self, event: ConnectionCreatedEvent) -> None:
        self.created += 1
        self.open += 1
        self.most = max(self.most, self.open)

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        self.open -= 1
        self.closed_ids.add(event.connection_id)
        self.closed_reasons[event.reason] += 1

    def connection_checked_out(self, event: ConnectionCheckedOutEvent) -> None:
        self.checked_out += 1

    def connection_checked_in(self, event: ConnectionCheckedInEvent) -> None:
        self.checked_in += 1

    def connection_check_out_failed(self, event: ConnectionCheckOutFailedEvent) -> None:
        self.check_out_failures[event.reason] += 1

    def balance_problems(self, max_pool_size: int) -> list[str]:
        """What does not balance once no operation runs (empty: the books balance)."""
        problems = []
        if self.checked_out != self.checked_in:
            problems.append(f"{self.checked_out} check-outs but {self.checked_in} check-ins")
        if self.most > max_pool_size:
            problems.append(f"{self.most} connections open at once, maxPoolSize is {max_pool_size}")
        if self.open != self.created - len(self.closed_ids):
            problems.append(f"{self.open} open, but {self.created} created and {len(self.closed_ids)} closed")
        return problems

    def summary(self) -> str:
        return (
            f"{self.checked_out} check-outs = {self.checked_in} check-ins, "
            f"check-out failures {dict(self.check_out_failures)}, {self.created} connections created, "
            f"closed {dict(self.closed_reasons)}, at most {self.most} open"
        )
