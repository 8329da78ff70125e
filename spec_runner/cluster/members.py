"""What each deployment member presents: its role, its ``hello`` reply, and which commands it refuses.

Pure state and pure functions; the proxies (``proxy.py``) serve them and the deployment (``deployment.py``)
changes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mongio.bson import Int64, ObjectId, Timestamp
from spec_runner.cluster.failpoints import NOT_PRIMARY_NO_SECONDARY_OK, NOT_WRITABLE_PRIMARY, FailCommand
from spec_runner.cluster.faults import FaultPlan


class Role(enum.Enum):
    PRIMARY = "primary"
    SECONDARY = "secondary"
    ARBITER = "arbiter"
    MONGOS = "mongos"


@dataclass
class MemberConfig:
    """How one replica set member is configured (``hidden`` and ``arbiter`` members are never elected)."""

    hidden: bool = False
    arbiter: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    priority: float = 1.0

    @property
    def electable(self) -> bool:
        return not self.hidden and not self.arbiter and self.priority > 0


class Member:
    """One member or mongos: its address, role and everything a control may change.

    Only the harness's event loop touches a member; its ``topology_version`` changes with every change a
    client could see in ``hello``, and ``changed()`` wakes the awaitable ``hello`` requests waiting on it.
    """

    def __init__(
        self, name: str, port: int, role: Role, config: MemberConfig | None = None, *, host: str = "127.0.0.1"
    ) -> None:
        self.name = name
        self.host = host
        """The name the member goes by in ``hello`` replies and URIs; its proxy listens on 127.0.0.1 whatever
        it is."""
        self.port = port
        self.role = role
        self.config = config or MemberConfig()
        self.fail_command = FailCommand()
        self.faults = FaultPlan()
        self.latency = 0.0
        """Seconds added before every reply."""
        self.lag = 0.0
        """Seconds this member's ``lastWriteDate`` trails the primary's (for maxStalenessSeconds)."""
        self.partitioned = False
        self.alive = True
        self.service_id = ObjectId()
        self.process_id = ObjectId()
        self.counter = 0
        self._change = asyncio.Event()
        self._held_with_session: set[asyncio.Event] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"Member({self.name!r}, {self.address}, {self.role.value})"

    @property
    def reachable(self) -> bool:
        """Whether a client can talk to the member now (alive and not partitioned)."""
        return self.alive and not self.partitioned

    @property
    def topology_version(self) -> dict[str, Any]:
        return {"processId": self.process_id, "counter": Int64(self.counter)}

    def changed(self) -> asyncio.Event:
        """An event set at this member's next visible change."""
        return self._change

    def bump(self) -> None:
        """Record a visible change: a new topologyVersion counter, and the waiting hellos answered."""
        self.counter += 1
        event, self._change = self._change, asyncio.Event()
        event.set()

    async def hold(self, seconds: float, *, has_session: bool) -> bool:
        """Hold a command for a ``blockConnection`` fail point's ``seconds``. On the server that block is an
        interruptible wait, so ``killAllSessions`` ends it for a command with a session (``has_session``): then
        True, and the command must not run. Without that, a command a timed-out client left blocked would run
        after the test that set the fail point ended, on the next test's data."""
        if not has_session:
            await asyncio.sleep(seconds)
            return False
        killed = asyncio.Event()
        self._held_with_session.add(killed)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(killed.wait(), seconds)
        finally:
            self._held_with_session.discard(killed)
        return killed.is_set()

    def kill_sessions(self) -> None:
        """``killAllSessions`` reached this member: the commands with a session it holds are interrupted."""
        for killed in self._held_with_session:
            killed.set()

    def restarted(self) -> None:
        """A restart: a new processId, the counter from zero, fail points gone."""
        self.process_id = ObjectId()
        self.counter = 0
        self.fail_command = FailCommand()
        event, self._change = self._change, asyncio.Event()
        event.set()


@dataclass
class ReplicaSetState:
    """What the members of one replica set agree on."""

    name: str
    members: list[Member]
    set_version: int = 1
    term: int = 1
    election_id: ObjectId = field(default_factory=ObjectId)

    @property
    def primary(self) -> Member | None:
        return next((m for m in self.members if m.role is Role.PRIMARY and m.alive), None)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def base_hello(backend: Mapping[str, Any], request: Mapping[str, Any], connection_id: int) -> dict[str, Any]:
    """The limits and versions every member reports: the test server's own."""
    legacy = next(iter(request), "") != "hello"
    reply: dict[str, Any] = {}
    if request.get("helloOk"):
        reply["helloOk"] = True
    for key in (
        "maxBsonObjectSize",
        "maxMessageSizeBytes",
        "maxWriteBatchSize",
        "logicalSessionTimeoutMinutes",
        "minWireVersion",
        "maxWireVersion",
    ):
        if key in backend:
            reply[key] = backend[key]
    reply["localTime"] = _now()
    reply["connectionId"] = connection_id
    reply["readOnly"] = False
    reply["_legacy"] = legacy
    return reply


def writable_key(reply: dict[str, Any], writable: bool) -> None:
    legacy = reply.pop("_legacy")
    reply["ismaster" if legacy else "isWritablePrimary"] = writable


def replica_set_hello(
    member: Member, state: ReplicaSetState, backend: Mapping[str, Any], request: Mapping[str, Any], connection_id: int
) -> dict[str, Any]:
    """A replica set member's ``hello``: the set as this member sees it."""
    reply = base_hello(backend, request, connection_id)
    writable_key(reply, member.role is Role.PRIMARY)
    visible = [m for m in state.members if not m.config.hidden and not m.config.arbiter]
    reply["hosts"] = [m.address for m in visible]
    arbiters = [m.address for m in state.members if m.config.arbiter]
    if arbiters:
        reply["arbiters"] = arbiters
    reply["setName"] = state.name
    reply["setVersion"] = state.set_version
    reply["me"] = member.address
    primary = state.primary
    if primary is not None:
        reply["primary"] = primary.address
    reply["secondary"] = member.role is Role.SECONDARY
    if member.config.arbiter:
        reply["arbiterOnly"] = True
    if member.config.hidden:
        reply["hidden"] = True
        reply["passive"] = True
    if member.config.tags:
        reply["tags"] = dict(member.config.tags)
    if member.role is Role.PRIMARY:
        reply["electionId"] = state.election_id
    if not member.config.arbiter:
        written = _now() - datetime.timedelta(seconds=member.lag)
        optime = {"ts": Timestamp(int(written.timestamp()), 1), "t": Int64(state.term)}
        reply["lastWrite"] = {
            "opTime": optime,
            "lastWriteDate": written,
            "majorityOpTime": optime,
            "majorityWriteDate": written,
        }
    reply["topologyVersion"] = member.topology_version
    reply["ok"] = 1.0
    return reply


def mongos_hello(
    member: Member, backend: Mapping[str, Any], request: Mapping[str, Any], connection_id: int, *, load_balanced: bool
) -> dict[str, Any]:
    """A mongos's ``hello`` (``msg: "isdbgrid"``); behind a load balancer with this mongos's ``serviceId``."""
    reply = base_hello(backend, request, connection_id)
    writable_key(reply, True)
    reply["msg"] = "isdbgrid"
    if load_balanced:
        reply["serviceId"] = member.service_id
    reply["topologyVersion"] = member.topology_version
    reply["ok"] = 1.0
    return reply


# Commands every data-bearing member runs whatever its state.
_ANY_STATE = frozenset(
    {
        "hello", "ismaster", "ping", "buildinfo", "getparameter", "endsessions", "killsessions",
        "killallsessions", "getmore", "killcursors", "saslstart", "saslcontinue", "authenticate",
        "connectionstatus", "serverstatus", "currentop", "getlog", "getcmdlineopts", "hostinfo",
        "listcommands", "whatsmyuri", "getlasterror", "configurefailpoint", "logout",
    }
)  # fmt: skip
_WRITES = frozenset(
    {
        "insert", "update", "delete", "findandmodify", "bulkwrite", "create", "drop", "dropdatabase",
        "createindexes", "dropindexes", "collmod", "renamecollection", "committransaction",
        "aborttransaction", "createuser", "dropuser", "updateuser", "dropallusersfromdatabase",
        "createrole", "droprole", "converttocapped", "clonecollectionascapped", "applyops",
    }
)  # fmt: skip


def refusal(member: Member, command: Mapping[str, Any]) -> dict[str, Any] | None:
    """The error a non-primary answers ``command`` with (``None``: it runs the command).

    A secondary refuses writes with NotWritablePrimary and reads without a secondary-ok read preference with
    NotPrimaryNoSecondaryOk, as the server does; an arbiter holds no data.
    """
    if member.role in (Role.PRIMARY, Role.MONGOS):
        return None
    name = next(iter(command), "").lower()
    if name in _ANY_STATE:
        return None
    if member.role is Role.ARBITER or member.config.arbiter:
        return _error(NOT_PRIMARY_NO_SECONDARY_OK, "NotPrimaryNoSecondaryOk", "an arbiter holds no data")
    if name in _WRITES or _writes_output(command) or command.get("autocommit") is False:
        return _error(NOT_WRITABLE_PRIMARY, "NotWritablePrimary", "not primary")
    mode = str((command.get("$readPreference") or {}).get("mode", "primary"))
    if mode == "primary":
        return _error(NOT_PRIMARY_NO_SECONDARY_OK, "NotPrimaryNoSecondaryOk", "not primary and secondaryOk=false")
    return None


def _writes_output(command: Mapping[str, Any]) -> bool:
    name = next(iter(command), "")
    if name != "aggregate":
        return False
    pipeline = command.get("pipeline") or []
    return any(isinstance(stage, Mapping) and ("$out" in stage or "$merge" in stage) for stage in pipeline)


def _error(code: int, code_name: str, message: str) -> dict[str, Any]:
    return {"ok": 0.0, "code": code, "codeName": code_name, "errmsg": message}
