"""What a ClientSession owns for the executor: its transaction's pinning, what it takes from replies, which
operations run inside its transaction, and its abandonment with a garbage-collected cursor."""

from __future__ import annotations

from typing import Any

from mongio.bson.timestamp import Timestamp
from mongio.operations.base import Operation
from mongio.operations.run_command import RunCommand
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import Primary
from mongio.options.write_concern import WriteConcern
from mongio.sessions.client_session import ClientSession, SessionOptions
from mongio.sessions.operation_session import EXECUTOR_METHODS, OperationSession
from mongio.sessions.server_session import ServerSession, ServerSessionPool

MONGOS_A = ("a.example", 27017)
MONGOS_B = ("b.example", 27017)


def is_acknowledged(operation: Any) -> bool:
    """Whether the operation is acknowledged now (read through a call: the checker would keep an earlier
    narrowing)."""
    return bool(operation.acknowledged)


class FakeExecutor:
    tracing = None  # the client does not trace

    def __init__(self) -> None:
        self.pool = ServerSessionPool()
        self.released: list[ServerSession] = []

    def acquire_server_session(self) -> ServerSession:
        return self.pool.acquire(30)

    def release_server_session(self, server_session: ServerSession) -> None:
        self.released.append(server_session)

    def sessions_known_unsupported(self) -> bool:
        return False


class FakeClient:
    read_concern = ReadConcern()
    write_concern = WriteConcern()
    read_preference = Primary()

    def __init__(self) -> None:
        self.executor = FakeExecutor()


class FakePool:
    def __init__(self) -> None:
        self.checked_in: list[object] = []
        self.pinned: dict[object, str] = {}

    def pin(self, conn: object, purpose: str) -> None:
        self.pinned[conn] = purpose

    def check_in(self, conn: object) -> None:
        self.pinned.pop(conn, None)
        self.checked_in.append(conn)


def session(**options: Any) -> ClientSession:
    return ClientSession(FakeClient(), SessionOptions(**options))  # type: ignore[arg-type]


class Insert(Operation[Any]):
    command_name = "insert"
    takes_write_concern = True


def test_the_session_provides_every_method_the_executor_contract_declares() -> None:
    declared: OperationSession = session()  # the type checker compares ClientSession with the Protocol
    assert {"begin_operation", "take_from_reply", "pin_transaction", "holds", "unpin"} <= EXECUTOR_METHODS
    missing = sorted(name for name in EXECUTOR_METHODS if not callable(getattr(declared, name, None)))
    assert not missing, f"ClientSession lacks {missing}"


def test_a_transaction_stays_pinned_to_its_first_server_and_connection_until_unpinned() -> None:
    s = session()
    s.start_transaction()
    pool, other_pool, conn = FakePool(), FakePool(), object()
    s.pin_transaction(MONGOS_A, pool, conn)
    s.pin_transaction(MONGOS_B, other_pool, object())  # a later command does not move the pin
    assert s.transaction_server() == MONGOS_A
    assert s.pinned_connection_from(pool) is conn
    assert s.pinned_connection_from(other_pool) is None
    assert s.holds(conn) and s.has_pinned_connection()
    # The pool counts it as held by a transaction (the wait queue timeout message says so).
    assert pool.pinned == {conn: "transaction"} and other_pool.pinned == {}
    s.unpin()
    # The connection goes back to its pool; the next transaction chooses again.
    assert pool.checked_in == [conn] and other_pool.checked_in == [] and pool.pinned == {}
    assert s.transaction_server() is None and not s.holds(conn)


def test_an_operation_outside_the_transaction_unpins_and_one_inside_drops_its_write_concern() -> None:
    s = session()
    pool, conn = FakePool(), object()
    s.start_transaction()
    write = Insert("db", write_concern=WriteConcern(w=0))
    assert not write.acknowledged
    assert s.begin_operation(write)
    assert write.write_concern is None and is_acknowledged(write)
    s.pin_transaction(MONGOS_A, pool, conn)
    s.transaction_sent()
    s._transaction.begin_commit()
    assert not s.begin_operation(RunCommand("db", "ping"))
    assert pool.checked_in == [conn] and s.transaction_server() is None


def test_a_reply_gives_the_recovery_token_only_inside_a_transaction() -> None:
    s = session()
    s.take_from_reply({"ok": 1, "recoveryToken": {"t": 1}}, in_transaction=False)
    assert s._transaction.recovery_token is None
    s.take_from_reply({"ok": 1, "recoveryToken": {"t": 2}}, in_transaction=True)
    assert s._transaction.recovery_token == {"t": 2}


def test_a_snapshot_session_reads_at_its_first_reads_time() -> None:
    s = session(snapshot=True)
    first, later = Timestamp(10, 1), Timestamp(20, 1)
    s.take_from_reply({"ok": 1, "cursor": {"atClusterTime": first}}, in_transaction=False)
    s.take_from_reply({"ok": 1, "cursor": {"atClusterTime": later}}, in_transaction=False)
    assert s.snapshot_time == first
    assert s.read_concern_for(None, standalone=False) == {"level": "snapshot", "atClusterTime": first}


def test_a_causal_session_waits_for_its_operation_time_except_on_a_standalone() -> None:
    s = session()
    assert s.read_concern_for({"level": "majority"}, standalone=False) == {"level": "majority"}
    s.take_from_reply({"ok": 1, "operationTime": Timestamp(5, 1)}, in_transaction=False)
    assert s.after_cluster_time() == Timestamp(5, 1)
    assert s.read_concern_for({"level": "majority"}, standalone=False) == {
        "level": "majority",
        "afterClusterTime": Timestamp(5, 1),
    }
    assert s.read_concern_for(None, standalone=True) is None
    assert session(causal_consistency=False).after_cluster_time() is None


def test_an_abandoned_session_hands_its_server_session_over_once() -> None:
    s = session()
    server_session = s.checked_server_session()
    assert s.abandon() is server_session
    assert s.has_ended
    assert s.abandon() is None
    unused = session()
    assert unused.abandon() is None  # never used: nothing to give back, and it stays usable
    assert not unused.has_ended
