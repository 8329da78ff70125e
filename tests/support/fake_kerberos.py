"""A scripted Kerberos library and a scripted GSSAPI server, for the conversation's unit tests.

``FakeKerberos`` stands where python-gssapi does (``KerberosLibrary``): its context "wraps" by prefixing
``b"wrapped:"``, and it records every call with the thread it ran on, so tests can show the loop's thread never
makes one. ``FakeGssapiServer`` is an ``async run_command(db, command)`` answering like a MongoDB server:
the context token, the wrapped security layer offer, then ``done``; ``fault`` picks one misbehaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.connection.auth.gssapi_library import KerberosError, SecurityContext, ServiceName

__all__ = ["WRAP_PREFIX", "FakeContext", "FakeGssapiServer", "FakeKerberos", "FakeResolver"]

WRAP_PREFIX = b"wrapped:"
FIRST_TOKEN = b"ap-req"
SERVER_TOKEN = b"ap-rep"


@dataclass
class FakeContext:
    """``steps`` server tokens complete the context; ``fail`` names the call that raises (``step``, ``unwrap``,
    ``wrap``)."""

    calls: list[tuple[str, int]]
    steps: int = 1
    fail: str | None = None
    taken: int = 0

    @property
    def complete(self) -> bool:
        return self.taken > self.steps

    def _record(self, name: str) -> None:
        self.calls.append((name, threading.get_ident()))
        if self.fail == name:
            raise KerberosError(f"{name} refused by the fake library")

    def step(self, token: bytes | None) -> bytes:
        self._record("step")
        self.taken += 1
        if token is None:
            return FIRST_TOKEN
        # The last step consumes the server's token and has nothing to send back, as Kerberos' AP-REP does.
        return b"" if self.complete else b"more"

    def unwrap(self, message: bytes) -> bytes:
        self._record("unwrap")
        if not message.startswith(WRAP_PREFIX):
            raise KerberosError("the message was not wrapped by this context")
        return message[len(WRAP_PREFIX) :]

    def wrap(self, message: bytes) -> bytes:
        self._record("wrap")
        return WRAP_PREFIX + message


@dataclass
class FakeKerberos:
    """Opens ``FakeContext``s; ``fail="open"`` makes acquiring credentials fail, ``slow`` makes it take that many
    seconds (a KDC that does not answer)."""

    steps: int = 1
    fail: str | None = None
    slow: float = 0.0
    calls: list[tuple[str, int]] = field(default_factory=list)
    opened: list[tuple[str, str | None, ServiceName]] = field(default_factory=list)

    def open_context(self, user: str, password: str | None, service: ServiceName) -> SecurityContext:
        self.calls.append(("open", threading.get_ident()))
        time.sleep(self.slow)
        if self.fail == "open":
            raise KerberosError("Preauthentication failed")
        self.opened.append((user, password, service))
        return FakeContext(self.calls, steps=self.steps, fail=self.fail)


@dataclass
class FakeGssapiServer:
    """``fault``: ``"refuse"`` (saslStart fails, code 18), ``"done-early"`` (saslStart says done),
    ``"no-payload"``, ``"not-done"`` (the last reply leaves the conversation open), ``"endless"`` (tokens
    forever, the offer never comes). ``tokens``: how many context tokens the server sends (saslStart's
included) before the wrapped offer; ``offer`` is that offer unwrapped."""

    offer: bytes = b"\x01\x00\x10\x00"
    tokens: int = 1
    fault: str | None = None
    commands: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def __call__(self, db: str, command: dict[str, Any]) -> Mapping[str, Any]:
        self.commands.append((db, dict(command)))
        if "saslStart" in command:
            if self.fault == "refuse":
                return {"ok": 0, "code": 18, "errmsg": "Authentication failed."}
            if self.fault == "no-payload":
                return {"conversationId": 7, "done": False, "ok": 1}
            return {"conversationId": 7, "payload": SERVER_TOKEN, "done": self.fault == "done-early", "ok": 1}
        continues = sum(1 for _db, sent in self.commands if "saslContinue" in sent)
        if self.fault == "endless" or continues < self.tokens:
            return {"conversationId": 7, "payload": SERVER_TOKEN, "done": False, "ok": 1}
        if continues == self.tokens:
            return {"conversationId": 7, "payload": WRAP_PREFIX + self.offer, "done": False, "ok": 1}
        return {"conversationId": 7, "payload": b"", "done": self.fault != "not-done", "ok": 1}


@dataclass
class FakeResolver:
    """``names`` maps a host to ``(canonical name, address)``, ``reverse_names`` an address to its PTR name;
    anything else fails as the system resolver does. ``lookups`` records each question."""

    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    reverse_names: dict[str, str] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)

    async def forward(self, host: str) -> tuple[str, str]:
        self.lookups.append(f"forward {host}")
        if host not in self.names:
            raise OSError(f"[Errno -2] Name or service not known: {host!r}")
        return self.names[host]

    async def reverse(self, address: str) -> str:
        self.lookups.append(f"reverse {address}")
        if address not in self.reverse_names:
            raise OSError(f"[Errno -2] no PTR record for {address}")
        return self.reverse_names[address]
