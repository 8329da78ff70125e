"""The asyncio proxy that presents one deployment member on its own loopback port.

Every client connection gets its own connection to the shared test server. ``hello`` is answered here from
the member's state (streamed when the client asks for the awaitable form), ``configureFailPoint:
"failCommand"`` is kept here per member, a non-primary refuses what the server's secondaries refuse, and
everything else is forwarded. Replies are compressed when the request was (OP_COMPRESSED), which the test
server itself cannot do.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import ssl
from collections.abc import Mapping
from typing import Any, Protocol

from mongio.bson import Int64
from spec_runner.cluster.failpoints import (
    CODE_NAMES,
    NO_SUCH_TRANSACTION,
    RETRYABLE_WRITE_CODES,
    FailAction,
    in_transaction,
    is_retryable_write,
)
from spec_runner.cluster.faults import OVERLOAD_CODE, OVERLOAD_LABELS, STATE_CHANGE_CODE, Fault, FaultKind
from spec_runner.cluster.members import Member, Role, refusal
from spec_runner.cluster.messages import (
    Message,
    build_reply,
    build_request,
    compress,
    parse,
    parse_reply_document,
    read_message,
    request_id_of,
    retarget,
    uncompressed,
)

_HELLO_NAMES = frozenset({"hello", "ismaster"})
_SASL_NAMES = frozenset({"saslstart", "saslcontinue"})
_connection_ids = itertools.count(1)


class ExternalSasl(Protocol):
    """A SASL mechanism the members answer themselves on ``$external`` (the test server has only SCRAM):
    ``start`` answers ``saslStart`` and returns the conversation's state, ``finish`` answers each
    ``saslContinue`` that follows with it, until a reply is ``done`` or refuses (see
    :mod:`spec_runner.cluster.aws_sasl`, :mod:`spec_runner.cluster.oidc`, :mod:`spec_runner.cluster.gssapi_sasl`).
    A hello's ``speculativeAuthenticate`` is the same ``saslStart``, given to ``start``; its reply goes back in
    the hello's, unless it refuses."""

    def start(self, command: Mapping[str, Any]) -> tuple[dict[str, Any], Any]: ...

    def finish(self, state: Any, command: Mapping[str, Any]) -> dict[str, Any]: ...


class Presenter(Protocol):
    """What a proxy asks of the deployment it belongs to."""

    backend_address: tuple[str, int]
    compressors: list[str]

    def hello(self, member: Member, request: Mapping[str, Any], connection_id: int, load_balanced: bool) -> dict[str, Any]:
        ...

    def extra_reply(self, member: Member, request: Message) -> dict[str, Any] | None:
        """A reply the deployment gives itself instead of forwarding (``None``: forward)."""
        ...

    def sasl_server(self, mechanism: str) -> ExternalSasl | None:
        """Who answers a conversation of ``mechanism`` on ``$external`` (``None``: forward it)."""
        ...

    def session_lock(self, command: Mapping[str, Any]) -> contextlib.AbstractAsyncContextManager[Any]:
        """Held while ``command`` runs on the test server: one lock per session (none without one)."""
        ...

    def recorded_write(self, command: Mapping[str, Any]) -> bytes | None:
        """The reply of the retryable write ``command`` repeats (same session and txnNumber), if it ran."""
        ...

    def record_write(self, command: Mapping[str, Any], reply: bytes | None) -> None:
        """Remember a retryable write's successful reply, as the server's transaction table does."""
        ...

    def route_transaction(self, member: Member, command: Mapping[str, Any]) -> bool:
        """Record which mongos runs a transaction; False when ``command`` (a commit through another mongos
        of a transaction not committed) finds no transaction to commit."""
        ...

    def transaction_committed(self, command: Mapping[str, Any]) -> None:
        ...


class ClientConnection:
    """One client connection to a proxy, and its own connection to the test server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, member: Member) -> None:
        self.reader = reader
        self.writer = writer
        self.member = member
        self.connection_id = next(_connection_ids)
        self.app_name: str | None = None
        self.compressor: str | None = None
        self.load_balanced = False
        self.closed = False
        self.exchanging = False
        self.sasl: tuple[ExternalSasl, Any] | None = None
        """The conversation a member answers itself: who answers it and its state after ``saslStart``."""
        self._backend: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def note_handshake(self, request: Mapping[str, Any], offered: list[str]) -> list[str]:
        """Remember the handshake's appName and loadBalanced; returns the compressors both sides know."""
        client = request.get("client")
        if isinstance(client, Mapping):
            application = client.get("application")
            if isinstance(application, Mapping) and "name" in application:
                self.app_name = str(application["name"])
        if request.get("loadBalanced"):
            self.load_balanced = True
        wanted = [str(name) for name in request.get("compression") or ()]
        common = [name for name in wanted if name in offered]
        if common and self.compressor is None:
            self.compressor = common[0]
        return common

    async def backend(self, address: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._backend is None:
            self._backend = await asyncio.open_connection(*address)
        return self._backend

    async def send(self, data: bytes) -> None:
        if self.member.latency:
            await asyncio.sleep(self.member.latency)
        self.writer.write(data)
        await self.writer.drain()

    def close(self) -> None:
        """Close the client's side; the test server's side too, unless a command still runs there (it is
        closed once the reply is in)."""
        self.closed = True
        self.writer.close()
        if not self.exchanging:
            self.close_backend()

    def close_backend(self) -> None:
        if self._backend is not None:
            self._backend[1].close()
            self._backend = None


class MemberProxy:
    """Listens on one member's port; ``stop``/``start`` are the member's death and restart."""

    def __init__(
        self,
        presenter: Presenter,
        members: list[Member],
        *,
        port: int | None = None,
        balancer: bool = False,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.presenter = presenter
        self._ssl_context = ssl_context
        """A server-side context: clients then connect with TLS (the test server behind stays plain)."""
        self.members = members
        """The member(s) behind this port: one, or for a load balancer every mongos, in turn."""
        self._turn = itertools.cycle(range(len(members)))
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], ClientConnection] = {}
        self._exchanges: set[asyncio.Future[list[bytes]]] = set()
        self.compressed_requests: collections.Counter[str] = collections.Counter()
        """Requests that came as OP_COMPRESSED, by compressor."""
        self.port = members[0].port if port is None else port
        self.balancer = balancer
        """A load balancer: a hello that says loadBalanced gets the serviceId of the mongos behind it (a
        mongos reached directly never sends one)."""

    @property
    def member(self) -> Member:
        return self.members[0]

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True, ssl=self._ssl_context
        )

    async def stop(self) -> None:
        """Stop listening and drop every connection (what the client sees when a member dies)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        await self.drop_connections()

    async def finish(self) -> None:
        """Wait for the commands still running on the test server (before the harness shuts down)."""
        while self._exchanges:
            done = self._exchanges.copy()
            await asyncio.wait(done)
            self._exchanges -= done

    async def drop_connections(self, member: Member | None = None) -> None:
        chosen = [task for task, conn in self._connections.items() if member is None or conn.member is member]
        for task in chosen:
            self._connections[task].close()
            task.cancel()
        await asyncio.gather(*chosen, return_exceptions=True)

    def connection_count(self) -> int:
        return len(self._connections)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        member = self.members[next(self._turn)]
        connection = ClientConnection(reader, writer, member)
        self._connections[task] = connection
        try:
            while member.reachable:
                request = parse(await read_message(reader))
                if request.compressor_name is not None:
                    self.compressed_requests[request.compressor_name] += 1
                if not await self._handle(connection, request):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            connection.close()
            self._connections.pop(task, None)

    async def _handle(self, connection: ClientConnection, request: Message) -> bool:
        """Answer one request; False to close the connection."""
        member = connection.member
        if not member.reachable:
            return False  # it died or was cut off while the request was on its way
        name = request.command_name.lower()
        document = request.document
        if name in _HELLO_NAMES:
            connection.note_handshake(document, self.presenter.compressors)
        if name == "killallsessions":
            member.kill_sessions()  # then forwarded: the server kills what it runs itself
        action = None
        if name != "configurefailpoint":
            action = member.fail_command.action_for(document, connection.app_name)
        if action is not None:
            if action.block_seconds and await member.hold(action.block_seconds, has_session="lsid" in document):
                return await self._answer(connection, request, _interrupted())
            if _ends_transaction(document, action):
                await self._abort_on_backend(connection, document)
            if action.close_connection:
                return False
            if action.error is not None:
                return await self._answer(connection, request, action.error)
        if name in _HELLO_NAMES:
            return await self._hello(connection, request)
        if name == "configurefailpoint" and document.get("configureFailPoint") == "failCommand":
            member.fail_command.configure(document)
            return await self._answer(connection, request, {"ok": 1.0})
        fault = member.faults.take(request.command_name)
        if fault is not None:
            outcome = await self._inject(connection, request, fault)
            if outcome is not None:
                return outcome
        refused = refusal(member, document)
        if refused is not None:
            return await self._answer(connection, request, labelled_refusal(member, document, refused))
        if name in _SASL_NAMES and document.get("$db") == "$external":
            answered = self._sasl(connection, name, document)
            if answered is not None:
                return await self._answer(connection, request, answered)
        own = self.presenter.extra_reply(member, request)
        if own is not None:
            return await self._answer(connection, request, own)
        if member.role is Role.MONGOS and not self.presenter.route_transaction(member, document):
            await self._abort_on_backend(connection, document)
            return await self._answer(connection, request, _no_such_transaction())
        return await self._forward(connection, request, action, fault)

    def _sasl(self, connection: ClientConnection, name: str, command: Mapping[str, Any]) -> dict[str, Any] | None:
        """The member's own answer to a conversation on ``$external`` (``None``: the test server's)."""
        if name == "saslstart":
            return self._sasl_start(connection, command)
        if connection.sasl is None:
            return None
        server, state = connection.sasl
        reply = server.finish(state, command)
        if reply.get("done") or not reply.get("ok"):
            connection.sasl = None  # GSSAPI takes several saslContinues; the end or a refusal closes it
        return reply

    def _sasl_start(self, connection: ClientConnection, command: Mapping[str, Any]) -> dict[str, Any] | None:
        server = self.presenter.sasl_server(str(command.get("mechanism")))
        if server is None:
            return None
        reply, state = server.start(command)
        connection.sasl = (server, state)
        return reply

    def _speculative(self, connection: ClientConnection, hello: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``speculativeAuthenticate`` of a handshake's reply: its ``saslStart`` answered by the member when
        it answers that mechanism on ``$external``; nothing when refused, as servers do."""
        speculative = hello.get("speculativeAuthenticate")
        if not isinstance(speculative, Mapping) or speculative.get("db") != "$external":
            return None
        reply = self._sasl_start(connection, {**speculative, "$db": "$external"})
        if reply is None or not reply.get("ok"):
            connection.sasl = None
            return None
        return {key: value for key, value in reply.items() if key != "ok"}

    async def _answer(self, connection: ClientConnection, request: Message, document: dict[str, Any]) -> bool:
        if not request.more_to_come:
            await connection.send(build_reply(request, document, compressor=request.compressor_name))
        return True

    async def _inject(self, connection: ClientConnection, request: Message, fault: Fault) -> bool | None:
        """Apply a fault before the command runs: the answer to return, or ``None`` to go on and forward."""
        kind = fault.kind
        if kind is FaultKind.NETWORK:
            return False
        if kind is FaultKind.DELAY:
            await asyncio.sleep(fault.seconds)
            return None
        if kind is FaultKind.BLACK_HOLE:
            while await connection.reader.read(65536):
                pass  # swallow whatever else comes until the client hangs up
            return False
        if kind is FaultKind.STATE_CHANGE:
            error = {"ok": 0.0, "code": STATE_CHANGE_CODE, "codeName": "InterruptedDueToReplStateChange",
                     "errmsg": "operation was interrupted (injected)"}  # fmt: skip
            return await self._answer(connection, request, labelled_refusal(connection.member, request.document, error))
        if kind is FaultKind.OVERLOAD:
            error = {"ok": 0.0, "code": OVERLOAD_CODE, "codeName": "IngressRequestRateLimitExceeded",
                     "errmsg": "the server is overloaded (injected)", "errorLabels": list(OVERLOAD_LABELS)}  # fmt: skip
            return await self._answer(connection, request, error)
        return None  # the drops happen once the command ran

    async def _act_on_hello(self, connection: ClientConnection, request: Message, action: FailAction) -> bool:
        """A fail point fired on a streamed hello; False when it ends the stream (connection or error)."""
        if action.block_seconds:
            await asyncio.sleep(action.block_seconds)
        if action.close_connection:
            return False
        if action.error is not None:
            await connection.send(build_reply(request, action.error))
            return False
        return True

    async def _abort_on_backend(self, connection: ClientConnection, command: Mapping[str, Any]) -> None:
        """End the transaction ``command`` belongs to on the test server (the reply does not matter)."""
        abort = {
            "abortTransaction": 1,
            "lsid": command["lsid"],
            "txnNumber": command.get("txnNumber"),
            "autocommit": False,
            "$db": "admin",
        }
        reader, writer = await connection.backend(self.presenter.backend_address)
        writer.write(build_request(abort, {}, 0))
        await writer.drain()
        await read_message(reader)

    async def _hello(self, connection: ClientConnection, request: Message) -> bool:
        """``hello``; the awaitable form (``topologyVersion`` + ``maxAwaitTimeMS``) waits for the member's next
        change or the time given, and with ``exhaustAllowed`` keeps streaming (``moreToCome``)."""
        member = connection.member
        document = request.document
        known = document.get("topologyVersion")
        max_await = document.get("maxAwaitTimeMS")
        previous: int | None = None
        while True:
            if known is not None and max_await is not None and _same_version(known, member.topology_version):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(float(max_await) / 1000):
                        await member.changed().wait()
            if not member.reachable:
                return False
            if previous is not None:
                # Each reply of the stream is the command run again: the fail point is consulted each time.
                action = member.fail_command.action_for(document, connection.app_name)
                if action is not None and not await self._act_on_hello(connection, request, action):
                    return False
            load_balanced = connection.load_balanced and self.balancer
            reply = self.presenter.hello(member, document, connection.connection_id, load_balanced)
            speculative = self._speculative(connection, document) if previous is None else None
            if speculative is not None:
                reply["speculativeAuthenticate"] = speculative
            common = [name for name in document.get("compression") or () if name in self.presenter.compressors]
            if common:
                reply["compression"] = common
            streaming = known is not None and max_await is not None and request.exhaust_allowed
            data = build_reply(request, reply, more_to_come=streaming, response_to=previous)
            await connection.send(data)
            if not streaming:
                return True
            previous = request_id_of(data)
            known = reply["topologyVersion"]

    async def _forward(
        self, connection: ClientConnection, request: Message, action: FailAction | None, fault: Fault | None
    ) -> bool:
        """Run the command on the test server and relay its reply(ies); False when a fault closed the
        connection."""
        member = connection.member
        document = request.document
        rewrite = member.role is Role.MONGOS and "recoveryToken" in document
        if rewrite:
            document = {key: value for key, value in document.items() if key != "recoveryToken"}
            outgoing = build_request(document, request.sequences, request.flags)
        else:
            outgoing = request.plain
        replies = await self._exchange(connection, outgoing, document, request.more_to_come)
        previous = request.request_id
        for reply in replies:
            reply = retarget(reply, previous)
            flags, changed = self._rewrite_reply(member, document, reply, action)
            if changed is not None:
                data = build_reply(
                    request, changed, more_to_come=bool(flags & 2), compressor=request.compressor_name,
                    response_to=previous,
                )  # fmt: skip
            else:
                data = compress(reply, request.compressor_name)
            if fault is not None and fault.kind is FaultKind.DROP_BEFORE_REPLY:
                return False
            if fault is not None and fault.kind is FaultKind.DROP_MID_REPLY:
                await connection.send(data[: len(data) // 2])
                return False
            await connection.send(data)
            previous = request_id_of(data)
        return True

    async def _exchange(
        self, connection: ClientConnection, outgoing: bytes, command: Mapping[str, Any], more_to_come: bool
    ) -> list[bytes]:
        """Send ``outgoing`` to the test server and read its reply (all of a stream); shielded, so a client
        that goes away (a killed member) does not stop a command the server is already running."""
        exchange = asyncio.ensure_future(self._run_on_backend(connection, outgoing, command, more_to_come))
        self._exchanges.add(exchange)
        exchange.add_done_callback(_consume)
        return await asyncio.shield(exchange)

    async def _run_on_backend(
        self, connection: ClientConnection, outgoing: bytes, command: Mapping[str, Any], more_to_come: bool
    ) -> list[bytes]:
        # One command per session at a time, as the server's session check-out does: a retry must not run
        # beside the attempt it repeats (the test server would apply both).
        async with self.presenter.session_lock(command):
            recorded = self.presenter.recorded_write(command)
            if recorded is not None:
                return [recorded]  # a retry of a write that ran: its result, not a second run
            reader, writer = await connection.backend(self.presenter.backend_address)
            connection.exchanging = True
            try:
                writer.write(outgoing)
                await writer.drain()
                replies: list[bytes] = []
                streaming = not more_to_come  # a request with moreToCome gets no reply
                while streaming:
                    reply = uncompressed(await read_message(reader))
                    replies.append(reply)
                    streaming = bool(int.from_bytes(reply[16:20], "little") & 2)  # an exhaust stream goes on
                self.presenter.record_write(command, replies[0] if replies else None)
                return replies
            finally:
                connection.exchanging = False
                if connection.closed:
                    connection.close_backend()

    def _rewrite_reply(
        self, member: Member, command: Mapping[str, Any], reply: bytes, action: FailAction | None
    ) -> tuple[int, dict[str, Any] | None]:
        """(reply flags, the changed reply document or ``None`` when it goes through as is)."""
        in_transaction = command.get("autocommit") is False or next(iter(command), "") in (
            "commitTransaction",
            "abortTransaction",
        )
        needs_token = member.role is Role.MONGOS and in_transaction
        if action is None and not needs_token:
            return int.from_bytes(reply[16:20], "little"), None
        flags, document = parse_reply_document(reply)
        if needs_token and document.get("ok") == 1 and next(iter(command), "") == "commitTransaction":
            self.presenter.transaction_committed(command)
        if needs_token and document.get("ok") == 1:
            document["recoveryToken"] = {"recoveryShardId": "shard0", "txnNumber": command.get("txnNumber", Int64(0))}
        if action is not None and document.get("ok") == 1:
            if action.write_concern_error is not None:
                document["writeConcernError"] = action.write_concern_error
            if action.error_labels:
                labels = list(document.get("errorLabels") or [])
                document["errorLabels"] = labels + [label for label in action.error_labels if label not in labels]
        elif action is not None and action.error_labels:
            document["errorLabels"] = list(action.error_labels)
        return flags, document


def _consume(exchange: asyncio.Future[list[bytes]]) -> None:
    """Retrieve an exchange's error, so one whose client left is not reported as never retrieved."""
    if not exchange.cancelled():
        exchange.exception()


def _ends_transaction(command: Mapping[str, Any], action: FailAction) -> bool:
    """Whether a fail point's failure of ``command`` aborts its transaction: a dropped connection does, and so
    does an error the server calls transient (what TransientTransactionError tells the client); any other
    error leaves the transaction open."""
    if not in_transaction(command) or next(iter(command), "") in ("commitTransaction", "abortTransaction"):
        return False
    if action.close_connection:
        return True
    return action.error is not None and "TransientTransactionError" in action.error.get("errorLabels", ())


def _interrupted() -> dict[str, Any]:
    return {"ok": 0.0, "code": _INTERRUPTED, "codeName": CODE_NAMES[_INTERRUPTED], "errmsg": "operation was interrupted"}


_INTERRUPTED = 11601


def _no_such_transaction() -> dict[str, Any]:
    return {
        "ok": 0.0,
        "code": NO_SUCH_TRANSACTION,
        "codeName": "NoSuchTransaction",
        "errmsg": "the transaction was not found through this mongos's recovery token (it never committed)",
        "errorLabels": ["TransientTransactionError"],
    }


def labelled_refusal(member: Member, command: Mapping[str, Any], error: dict[str, Any]) -> dict[str, Any]:
    """A state-change error as the server sends it: with the member's ``topologyVersion`` and the labels
    the server adds (RetryableWriteError on a retryable write, TransientTransactionError inside a
    transaction)."""
    error = {**error, "topologyVersion": member.topology_version}
    labels = []
    if is_retryable_write(command) and error["code"] in RETRYABLE_WRITE_CODES:
        labels.append("RetryableWriteError")
    if command.get("autocommit") is False and next(iter(command), "") != "commitTransaction":
        labels.append("TransientTransactionError")
    if labels:
        error["errorLabels"] = labels
    return error


def _same_version(known: Any, current: Mapping[str, Any]) -> bool:
    if not isinstance(known, Mapping):
        return False
    return known.get("processId") == current["processId"] and int(known.get("counter", -1)) == int(current["counter"])


