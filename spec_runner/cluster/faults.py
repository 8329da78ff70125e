"""Faults a member's proxy injects into the commands it serves, scripted or at random with a seed.

Unlike ``failCommand`` (which the spec tests drive), these model the network and the server under stress:
a reply lost after the command ran, a reply cut in half, a delay, a member that stops answering, and the
errors of an election, a dropped connection and an overloaded server.
"""

from __future__ import annotations

import collections
import enum
import random
from collections.abc import Iterable
from dataclasses import dataclass

OVERLOAD_CODE = 462  # IngressRequestRateLimitExceeded
OVERLOAD_LABELS = ("SystemOverloadedError", "RetryableError")
STATE_CHANGE_CODE = 11602  # InterruptedDueToReplStateChange


class FaultKind(enum.Enum):
    DROP_BEFORE_REPLY = "drop before reply"
    """The command runs; the connection closes before its reply is sent."""
    DROP_MID_REPLY = "drop mid reply"
    """The command runs; half of its reply is sent, then the connection closes."""
    DELAY = "delay"
    """The reply waits ``seconds`` first."""
    BLACK_HOLE = "black hole"
    """The command is never run nor answered; the connection stays open until the client gives up."""
    NETWORK = "network"
    """The connection closes before the command runs."""
    STATE_CHANGE = "state change"
    """InterruptedDueToReplStateChange, with the labels the server adds."""
    OVERLOAD = "overload"
    """The server turns the command away: code 462 with SystemOverloadedError and RetryableError."""


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    seconds: float = 0.0


_NEVER_FAULTED = frozenset({"hello", "ismaster", "configurefailpoint", "endsessions", "killcursors"})


class FaultPlan:
    """One member's faults: the ``scripted`` ones first, in order, one per command; then, with ``rate`` > 0,
    a fault of a random kind (drawn from ``kinds`` with the seeded generator) for that share of commands.

    Only commands named in ``commands`` (all, when empty) are faulted; handshakes and monitoring never are.
    """

    def __init__(
        self,
        scripted: Iterable[Fault] = (),
        *,
        rate: float = 0.0,
        kinds: Iterable[FaultKind] = tuple(FaultKind),
        seed: int = 0,
        commands: Iterable[str] = (),
        delay: float = 0.05,
    ) -> None:
        self.scripted = collections.deque(scripted)
        self.rate = rate
        self.kinds = list(kinds)
        self.rng = random.Random(seed)
        self.commands = frozenset(commands)
        self.delay = delay
        self.injected: collections.Counter[FaultKind] = collections.Counter()

    def take(self, command_name: str) -> Fault | None:
        """The fault for this command (counted as injected), or ``None``."""
        if command_name.lower() in _NEVER_FAULTED:
            return None
        if self.commands and command_name not in self.commands:
            return None
        fault: Fault | None = None
        if self.scripted:
            fault = self.scripted.popleft()
        elif self.rate > 0 and self.kinds and self.rng.random() < self.rate:
            kind = self.rng.choice(self.kinds)
            fault = Fault(kind, seconds=self.delay if kind is FaultKind.DELAY else 0.0)
        if fault is not None:
            self.injected[fault.kind] += 1
        return fault
