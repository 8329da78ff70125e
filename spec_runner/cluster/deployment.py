"""A deployment on loopback: one test server behind proxies, and the controls that change it.

All members share the one test server's data. Nothing is replicated, so there is no replication lag in the
data itself (only in what ``lastWrite`` reports), no rollback after a failover, and no write concern that can
time out waiting for secondaries: a write acknowledged by any member is on every member at once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import weakref
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from mongio.bson import Int64, ObjectId
from spec_runner.cluster.failpoints import is_retryable_write, transaction_key
from spec_runner.cluster.faults import FaultKind, FaultPlan
from spec_runner.cluster.members import (
    Member,
    MemberConfig,
    ReplicaSetState,
    Role,
    mongos_hello,
    replica_set_hello,
)
from spec_runner.cluster.messages import Message, parse_reply_document
from spec_runner.cluster.oidc import MECHANISM as OIDC_MECHANISM
from spec_runner.cluster.oidc import OidcProvider
from spec_runner.cluster.proxy import ExternalSasl, MemberProxy
from spec_runner.loop_thread import LoopThread
from spec_runner.raw_wire import command_once
from spec_runner.server import TestServer, free_port

T = TypeVar("T")

ALL_COMPRESSORS = ("snappy", "zlib", "zstd")
CONTROL_TIMEOUT = 30.0


class Deployment:
    """Members presented by proxies on 127.0.0.1 in front of one shared SecantusDB.

    Build one with ``replica_set()``, ``sharded()`` or ``load_balanced()``; use it as a context manager or
    call ``start()``/``stop()``. Every control is synchronous and safe to call from any thread or event loop.
    """

    def __init__(
        self,
        topology: str,
        *,
        compressors: Sequence[str] = ALL_COMPRESSORS,
        ssl_context: ssl.SSLContext | None = None,
        member_host: str = "127.0.0.1",
    ) -> None:
        self.topology = topology
        self.ssl_context = ssl_context
        """A server-side context: the members then speak TLS only (the test server behind them stays plain)."""
        self.member_host = member_host
        """The host name members go by (they listen on 127.0.0.1 whatever it is): a name that resolves nowhere
        lets a client reach them only through a SOCKS5 proxy that maps it."""
        self.compressors = list(compressors)
        """What the members accept in a hello's ``compression`` list."""
        self.client_compressors: list[str] = []
        """Added to the URIs as ``compressors=``: every client made from them compresses its messages."""
        self.members: list[Member] = []
        self.replica_set: ReplicaSetState | None = None
        self.server: TestServer | None = None
        self.backend_address: tuple[str, int] = ("127.0.0.1", 0)
        self._backend_hello: dict[str, Any] = {}
        self._backend_parameters: dict[str, Any] = {}
        self.oidc: OidcProvider | None = None
        """While running: the identity provider the members accept MONGODB-OIDC tokens of (``oidc_uri``)."""
        self._harness: LoopThread | None = None
        self._proxies: dict[str, MemberProxy] = {}
        # Load balancers: one in front of every mongos, one in front of the first only (the unified format's
        # MULTI_MONGOS_LB_URI and SINGLE_MONGOS_LB_URI).
        self._balancers: list[MemberProxy] = []
        # (session, txnNumber) -> [the mongos running the transaction, whether it committed]
        self._transactions: dict[tuple[str, int], list[Any]] = {}
        self._sessions: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Session -> (txnNumber, reply) of its latest retryable write. The test server re-runs a retried write
        # whose first attempt's client went away (measured in the soak), so the members answer retries from
        # here, as a real server answers them from its transaction table.
        self._writes: dict[str, tuple[int, bytes]] = {}
        self._injected: collections.Counter[FaultKind] = collections.Counter()  # by replaced fault plans
        # Mechanism -> who answers its conversations on $external instead of the test server.
        self._sasl_servers: dict[str, ExternalSasl] = {}

    # -- building ---------------------------------------------------------------------------------------

    def _add(self, name: str, role: Role, config: MemberConfig | None = None) -> Member:
        member = Member(name, free_port(), role, config, host=self.member_host)
        self.members.append(member)
        return member

    def start(self) -> Deployment:
        self.server = TestServer().start()
        self.backend_address = (self.server.host, self.server.port)
        self._backend_hello = command_once(self.server.host, self.server.port, {"hello": 1, "$db": "admin"})
        self._backend_parameters = command_once(
            self.server.host, self.server.port, {"getParameter": "*", "$db": "admin"}
        )
        self.oidc = OidcProvider()
        self.accept_external_auth(OIDC_MECHANISM, self.oidc)
        # The proxies' loop, in a thread of its own, so they keep serving whatever loop (or none) the tests run
        # on, and a test blocked on the driver never stalls the deployment.
        self._harness = LoopThread("cluster-harness", CONTROL_TIMEOUT)
        self._harness.run_blocking(self._start_proxies())
        return self

    async def _start_proxies(self) -> None:
        for member in self.members:
            proxy = MemberProxy(self, [member], ssl_context=self.ssl_context)
            await proxy.start()
            self._proxies[member.name] = proxy
        if self.topology == "load-balanced":
            mongoses = [m for m in self.members if m.role is Role.MONGOS]
            for behind in (mongoses, mongoses[:1]):
                balancer = MemberProxy(self, behind, port=free_port(), balancer=True, ssl_context=self.ssl_context)
                await balancer.start()
                self._balancers.append(balancer)

    def stop(self) -> None:
        if self._harness is not None:
            self._harness.run_blocking(self._stop_proxies())
            self._harness.close()
            self._harness = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.oidc is not None:
            self.accept_external_auth(OIDC_MECHANISM, None)
            self.oidc.close()
            self.oidc = None

    async def _stop_proxies(self) -> None:
        for proxy in [*self._proxies.values(), *self._balancers]:
            await proxy.stop()
        async with asyncio.timeout(CONTROL_TIMEOUT / 2):
            for proxy in [*self._proxies.values(), *self._balancers]:
                await proxy.finish()

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients connect to ------------------------------------------------------------------------

    @property
    def hosts(self) -> list[str]:
        """The seed list: every member but arbiters and hidden ones (every mongos for a sharded cluster)."""
        return [m.address for m in self.members if not m.config.hidden and not m.config.arbiter]

    @property
    def uri(self) -> str:
        """A URI naming the whole deployment (every mongos, the set with ``replicaSet``, or the balancer)."""
        if self.topology == "load-balanced":
            return self._with_options(f"127.0.0.1:{self._balancers[0].port}", loadBalanced="true")
        if self.replica_set is not None:
            return self._with_options(",".join(self.hosts), replicaSet=self.replica_set.name)
        return self._with_options(",".join(self.hosts))

    def _with_options(self, hosts: str, **options: str) -> str:
        if self.client_compressors:
            options["compressors"] = ",".join(self.client_compressors)
        query = "&".join(f"{key}={value}" for key, value in options.items())
        return f"mongodb://{hosts}/" + (f"?{query}" if query else "")

    @property
    def oidc_uri(self) -> str:
        """``single_mongos_uri`` for a client that authenticates with MONGODB-OIDC (``ENVIRONMENT:test``: the
        process's ``OIDC_TOKEN_FILE`` must name ``oidc.token_file``)."""
        assert self.oidc is not None, "start the deployment first"
        separator = "&" if "?" in self.single_mongos_uri else "?"
        return self.single_mongos_uri + separator + "&".join(f"{k}={v}" for k, v in self.oidc.uri_options.items())

    @property
    def single_mongos_uri(self) -> str:
        """A URI naming only the first mongos (``useMultipleMongoses: false``), or a load balancer in front of
        only that one; the whole URI otherwise."""
        if self.topology == "sharded":
            return self._with_options(self.members[0].address)
        if self.topology == "load-balanced":
            return self._with_options(f"127.0.0.1:{self._balancers[1].port}", loadBalanced="true")
        return self.uri

    @property
    def direct_uri(self) -> str:
        """A URI naming one member alone (the primary of a replica set, the first mongos), for a client with
        ``directConnection=true``, which takes a single seed and no ``replicaSet``."""
        if self.topology == "load-balanced":
            return self.single_mongos_uri
        member = self.primary if self.primary is not None else self.members[0]
        return self._with_options(member.address)

    def member(self, which: str | int | Member) -> Member:
        """A member by name, index or address."""
        if isinstance(which, Member):
            return which
        if isinstance(which, int):
            return self.members[which]
        for member in self.members:
            if which in (member.name, member.address):
                return member
        raise KeyError(f"no member {which!r} in {[m.name for m in self.members]}")

    @property
    def primary(self) -> Member | None:
        return None if self.replica_set is None else self.replica_set.primary

    # -- what the proxies ask ---------------------------------------------------------------------------

    def hello(self, member: Member, request: Mapping[str, Any], connection_id: int, load_balanced: bool) -> dict[str, Any]:
        if member.role is Role.MONGOS:
            return mongos_hello(member, self._backend_hello, request, connection_id, load_balanced=load_balanced)
        assert self.replica_set is not None
        return replica_set_hello(member, self.replica_set, self._backend_hello, request, connection_id)

    def extra_reply(self, member: Member, request: Message) -> dict[str, Any] | None:
        """A mongos answers ``config.shards`` with the one shard, a replica set: the test server. ``getParameter:
        "*"`` offers the mechanisms the members answer on ``$external`` themselves."""
        document = request.document
        if self._sasl_servers and document.get("getParameter") == "*" and self._backend_parameters.get("ok") == 1:
            return self._parameters_with_external_auth()
        if member.role is Role.MONGOS and document.get("checkMetadataConsistency") is not None:
            # A consistent cluster: an empty cursor.
            namespace = f"{document.get('$db', 'admin')}.$cmd.checkMetadataConsistency"
            return {"cursor": {"firstBatch": [], "id": Int64(0), "ns": namespace}, "ok": 1.0}
        if member.role is Role.MONGOS and document.get("find") == "shards" and document.get("$db") == "config":
            shard = {"_id": "shard0", "host": f"secantus/{self.backend_address[0]}:{self.backend_address[1]}"}
            cursor = {"firstBatch": [shard], "id": Int64(0), "ns": "config.shards"}
            return {"cursor": cursor, "ok": 1.0}
        return None

    def accept_external_auth(self, mechanism: str, server: ExternalSasl | None) -> None:
        """Make every member answer ``mechanism``'s conversations on ``$external`` with ``server``, as a
        server configured for it would (``None``: forward them to the test server again)."""
        if server is None:
            self._sasl_servers.pop(mechanism, None)
        else:
            self._sasl_servers[mechanism] = server

    def sasl_server(self, mechanism: str) -> ExternalSasl | None:
        return self._sasl_servers.get(mechanism)

    def _parameters_with_external_auth(self) -> dict[str, Any]:
        parameters = dict(self._backend_parameters)
        mechanisms = parameters.get("authenticationMechanisms")
        listed = mechanisms.split(",") if isinstance(mechanisms, str) else list(mechanisms or [])
        parameters["authenticationMechanisms"] = [*listed, *(m for m in self._sasl_servers if m not in listed)]
        return parameters

    def session_lock(self, command: Mapping[str, Any]) -> contextlib.AbstractAsyncContextManager[Any]:
        lsid = command.get("lsid")
        if not isinstance(lsid, Mapping):
            return contextlib.nullcontext()
        key = repr(lsid.get("id"))
        lock = self._sessions.get(key)
        if lock is None:
            lock = self._sessions[key] = asyncio.Lock()
        return lock

    def recorded_write(self, command: Mapping[str, Any]) -> bytes | None:
        key = _retryable_write_key(command)
        if key is None:
            return None
        recorded = self._writes.get(key[0])
        return recorded[1] if recorded is not None and recorded[0] == key[1] else None

    def record_write(self, command: Mapping[str, Any], reply: bytes | None) -> None:
        key = _retryable_write_key(command)
        if key is None or reply is None:
            return
        _flags, document = parse_reply_document(reply)
        if document.get("ok") == 1:
            self._writes[key[0]] = (key[1], reply)  # the latest statement per session, as the server keeps

    def route_transaction(self, member: Member, command: Mapping[str, Any]) -> bool:
        key = transaction_key(command)
        if key is None:
            return True
        name = next(iter(command), "")
        if command.get("startTransaction"):
            self._transactions[key] = [member.name, False]
            return True
        route = self._transactions.get(key)
        if name != "commitTransaction" or route is None:
            return True
        owner, committed = route
        # Another mongos recovers the decision from the recovery token: a transaction that never committed is
        # aborted, as a real cluster's coordinator would.
        return bool(owner == member.name or committed)

    def transaction_committed(self, command: Mapping[str, Any]) -> None:
        key = transaction_key(command)
        if key is not None and key in self._transactions:
            self._transactions[key][1] = True

    # -- controls ---------------------------------------------------------------------------------------

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._harness is None:
            coroutine.close()
            raise RuntimeError("the deployment is not running")
        return self._harness.run_blocking(coroutine)

    def step_down(self, elect: str | int | Member | None = None) -> None:
        """The primary becomes a secondary; with ``elect``, that member then wins an election at once."""
        self._call(self._step_down(None if elect is None else self.member(elect)))

    async def _step_down(self, successor: Member | None) -> None:
        state = self._replica_state()
        old = state.primary
        if old is not None:
            old.role = Role.SECONDARY
        if successor is not None:
            self._make_primary(state, successor)
        self._bump_all()

    def elect(self, which: str | int | Member) -> None:
        """``which`` becomes primary with a new, greater ``electionId`` (the old primary steps down)."""
        candidate = self.member(which)
        self._call(self._elect(candidate))

    async def _elect(self, candidate: Member) -> None:
        state = self._replica_state()
        old = state.primary
        if old is not None and old is not candidate:
            old.role = Role.SECONDARY
        self._make_primary(state, candidate)
        self._bump_all()

    def failover(self) -> Member:
        """Step the primary down and elect the next electable, living member; returns the new primary."""
        state = self._replica_state()
        old = state.primary
        candidates = [m for m in state.members if m.config.electable and m.alive and m is not old]
        if not candidates:
            raise RuntimeError("no other electable member is alive")
        start = 0 if old is None else (state.members.index(old) + 1)
        ordered = sorted(candidates, key=lambda m: (state.members.index(m) - start) % len(state.members))
        self.step_down(elect=ordered[0])
        return ordered[0]

    def _make_primary(self, state: ReplicaSetState, member: Member) -> None:
        if not member.config.electable or not member.alive:
            raise RuntimeError(f"{member.name} cannot be elected (hidden, arbiter, priority 0 or down)")
        for other in state.members:
            if other.role is Role.PRIMARY:
                other.role = Role.SECONDARY
        member.role = Role.PRIMARY
        state.term += 1
        state.election_id = ObjectId()

    def _bump_all(self) -> None:
        for member in self.members:
            member.bump()

    def _replica_state(self) -> ReplicaSetState:
        if self.replica_set is None:
            raise RuntimeError(f"a {self.topology} deployment has no elections")
        return self.replica_set

    def kill(self, which: str | int | Member) -> None:
        """The member stops: its port refuses connections and open ones are dropped. A primary that dies
        leaves the set without one until ``elect`` (or ``failover``)."""
        member = self.member(which)
        self._call(self._kill(member))

    async def _kill(self, member: Member) -> None:
        member.alive = False
        await self._proxies[member.name].stop()
        for balancer in self._balancers:
            await balancer.drop_connections(member)
        if member.role is Role.PRIMARY:
            member.role = Role.SECONDARY
            self._bump_all()

    def restart(self, which: str | int | Member) -> None:
        """A killed member comes back (as a secondary in a replica set) with a new ``topologyVersion``
        processId and no fail points."""
        member = self.member(which)
        self._call(self._restart(member))

    async def _restart(self, member: Member) -> None:
        member.restarted()
        member.alive = True
        await self._proxies[member.name].start()
        self._bump_all()

    def partition(self, which: str | int | Member) -> None:
        """Cut the client off from the member: open connections drop, new ones are closed on arrival (the
        member itself keeps its role; the rest of the set still lists it)."""
        member = self.member(which)
        member.partitioned = True
        self._call(self._proxies[member.name].drop_connections())

    def heal(self, which: str | int | Member | None = None) -> None:
        """End the partition of ``which`` (default: of every member)."""
        for member in self.members if which is None else [self.member(which)]:
            member.partitioned = False

    def set_latency(self, which: str | int | Member, seconds: float) -> None:
        """Delay every reply from the member by ``seconds``."""
        self.member(which).latency = seconds

    def set_lag(self, which: str | int | Member, seconds: float) -> None:
        """Make the member's ``lastWriteDate`` trail by ``seconds`` (its staleness for maxStalenessSeconds)."""
        self.member(which).lag = seconds

    def configure_fail_point(self, which: str | int | Member, command: Mapping[str, Any]) -> None:
        """Apply a ``configureFailPoint: "failCommand"`` command to one member, as if sent to it."""
        member = self.member(which)
        self._call(_configure(member, command))

    def clear_fail_points(self) -> None:
        """Turn off every member's ``failCommand``."""
        for member in self.members:
            self._call(_configure(member, {"configureFailPoint": "failCommand", "mode": "off"}))

    def set_faults(self, which: str | int | Member, plan: FaultPlan) -> None:
        """Replace the member's fault plan (``FaultPlan()`` for none)."""
        member = self.member(which)
        self._injected.update(member.faults.injected)
        member.faults = plan

    def injected_faults(self) -> dict[str, int]:
        """Faults injected since the deployment was built, over every member, by kind."""
        total = collections.Counter(self._injected)
        for member in self.members:
            total.update(member.faults.injected)
        return {kind.value: count for kind, count in total.items() if count}

    def reset(self) -> None:
        """Back to how it was built: every member up and reachable, no latency, lag or fail point, and (for a
        replica set) the first electable member primary."""
        for member in self.members:
            if not member.alive:
                self.restart(member)
            member.partitioned = False
            self.set_faults(member, FaultPlan())
            member.latency = 0.0
            member.lag = 0.0
        self.clear_fail_points()
        if self.replica_set is not None:
            first = next(m for m in self.members if m.config.electable)
            if self.replica_set.primary is not first:
                self.elect(first)

    def compressed_requests(self) -> dict[str, int]:
        """How many requests every proxy received as OP_COMPRESSED, by compressor."""
        total: dict[str, int] = {}
        for proxy in [*self._proxies.values(), *self._balancers]:
            for name, count in proxy.compressed_requests.items():
                total[name] = total.get(name, 0) + count
        return total

    def connection_counts(self) -> dict[str, int]:
        """Open client connections per member's proxy."""
        return {name: proxy.connection_count() for name, proxy in self._proxies.items()}


def _retryable_write_key(command: Mapping[str, Any]) -> tuple[str, int] | None:
    lsid = command.get("lsid")
    name = next(iter(command), "")
    if not is_retryable_write(command) or name in ("commitTransaction", "abortTransaction"):
        return None
    if not isinstance(lsid, Mapping):
        return None
    return repr(lsid.get("id")), int(command["txnNumber"])


async def _configure(member: Member, command: Mapping[str, Any]) -> None:
    member.fail_command.configure(command)


# -- builders -----------------------------------------------------------------------------------------------


def replica_set(
    members: int | Iterable[MemberConfig] = 3,
    *,
    name: str = "rs0",
    compressors: Sequence[str] = ALL_COMPRESSORS,
    ssl_context: ssl.SSLContext | None = None,
    member_host: str = "127.0.0.1",
) -> Deployment:
    """A replica set: the first electable member primary, the rest secondaries (``MemberConfig`` for
    arbiters, hidden and tagged members); with ``ssl_context`` (server-side), its members speak TLS only;
    ``member_host`` is the host name they go by (see ``Deployment.member_host``)."""
    configs = [MemberConfig() for _ in range(members)] if isinstance(members, int) else list(members)
    deployment = Deployment(
        "replicaset", compressors=compressors, ssl_context=ssl_context, member_host=member_host
    )
    for index, config in enumerate(configs):
        role = Role.ARBITER if config.arbiter else Role.SECONDARY
        deployment._add(f"{name}-{index}", role, config)
    state = ReplicaSetState(name=name, members=deployment.members)
    deployment.replica_set = state
    first = next((m for m in deployment.members if m.config.electable), None)
    if first is None:
        raise ValueError("a replica set needs an electable member")
    first.role = Role.PRIMARY
    return deployment


def sharded(mongoses: int = 2, *, compressors: Sequence[str] = ALL_COMPRESSORS) -> Deployment:
    """A sharded cluster of ``mongoses`` routers in front of one shard (the test server)."""
    deployment = Deployment("sharded", compressors=compressors)
    for index in range(mongoses):
        deployment._add(f"mongos-{index}", Role.MONGOS)
    return deployment


def load_balanced(mongoses: int = 2, *, compressors: Sequence[str] = ALL_COMPRESSORS) -> Deployment:
    """A load balancer (its own port, connections dealt to the mongoses in turn) in front of ``mongoses``
    routers; each connection's ``hello`` carries the ``serviceId`` of the mongos behind it."""
    deployment = Deployment("load-balanced", compressors=compressors)
    for index in range(mongoses):
        deployment._add(f"mongos-{index}", Role.MONGOS)
    return deployment


def build_deployment(topology: str) -> Deployment:
    """The deployment the spec runner uses for ``topology``: a three-member replica set, two mongoses, or a
    load balancer in front of two mongoses."""
    if topology == "replicaset":
        return replica_set()
    if topology == "sharded":
        return sharded()
    if topology == "load-balanced":
        return load_balanced()
    raise ValueError(f"the cluster harness builds replicaset, sharded and load-balanced, not {topology!r}")
