"""mongio.error_classification: each question about an error, checked against the specifications' tables.

The codes and labels are the ones the specifications list: server-discovery-and-monitoring.md ("not writable
primary", "node is recovering", "node is shutting down"), retryable-writes.md and retryable-reads.md (the
retryable codes), transactions.md (UnknownTransactionCommitResult), change-streams.md (resumable errors) and
client-backpressure.md (SystemOverloadedError, RetryableError).
"""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from mongio.error_classification import (
    OVERLOAD_LABELS,
    RETRYABLE_ERROR,
    RETRYABLE_WRITE_ERROR,
    SYSTEM_OVERLOADED_ERROR,
    TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_TRANSACTION_COMMIT_RESULT,
    ApplicationError,
    AttemptFailure,
    ErrorKind,
    FailureKind,
    application_error_decision,
    command_error_class,
    has_error_label,
    is_duplicate_key,
    is_max_time_ms_expired,
    is_namespace_not_found,
    is_network_error,
    is_network_timeout,
    is_not_writable_primary,
    is_recovering,
    is_resumable,
    is_retryable_writes_unsupported,
    is_shutdown,
    is_state_change_error,
    is_timeout,
    is_unreported_timeout,
    labels_to_add,
    may_be_overload,
    retryable_write_concern_error,
    unpins_transaction,
    write_concern_error,
    write_error_class,
)
from mongio.errors import (
    AutoReconnect,
    BulkWriteError,
    ConfigurationError,
    CursorNotFound,
    DuplicateKeyError,
    ExecutionTimeout,
    MongioError,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    PoolClearedError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WriteConcernError,
    WriteError,
    WTimeoutError,
    operation_timeout_error,
)
from mongio.topology.server_description import Address, ServerDescription
from mongio.topology.server_type import ServerType
from mongio.topology.settings import TopologySettings
from mongio.topology.topology_description import (
    TopologyDescription,
    initial_topology_description,
    updated_topology_description,
)

A: Address = ("a", 27017)

# server-discovery-and-monitoring.md, "not writable primary" and "node is recovering": (code, recovering,
# not writable primary, shutting down).
STATE_CHANGE_CODES = [
    (11600, True, False, True),  # InterruptedAtShutdown
    (11602, True, False, False),  # InterruptedDueToReplStateChange
    (13436, True, False, False),  # NotPrimaryOrSecondary
    (189, True, False, False),  # PrimarySteppedDown
    (91, True, False, True),  # ShutdownInProgress
    (10107, False, True, False),  # NotWritablePrimary
    (13435, False, True, False),  # NotPrimaryNoSecondaryOk
    (10058, False, True, False),  # LegacyNotPrimary
    (6, False, False, False),  # HostUnreachable: retryable, but no state change
    (2, False, False, False),  # BadValue
]

# retryable-writes.md and retryable-reads.md: (code, retryable write, retryable read).
RETRYABLE_CODES = [
    (11600, True, True),  # InterruptedAtShutdown
    (11602, True, True),  # InterruptedDueToReplStateChange
    (10107, True, True),  # NotWritablePrimary
    (13435, True, True),  # NotPrimaryNoSecondaryOk
    (13436, True, True),  # NotPrimaryOrSecondary
    (189, True, True),  # PrimarySteppedDown
    (91, True, True),  # ShutdownInProgress
    (7, True, True),  # HostNotFound
    (6, True, True),  # HostUnreachable
    (89, True, True),  # NetworkTimeout
    (9001, True, True),  # SocketException
    (262, True, True),  # ExceededTimeLimit
    (134, False, True),  # ReadConcernMajorityNotAvailableYet: reads only
    (10058, False, False),  # LegacyNotPrimary: a state change, but not in the retryable tables
    (50, False, False),  # MaxTimeMSExpired
    (11000, False, False),  # DuplicateKey
]


@pytest.mark.parametrize(("code", "recovering", "not_writable_primary", "shutting_down"), STATE_CHANGE_CODES)
def test_state_change_codes(
    code: int, recovering: bool, not_writable_primary: bool, shutting_down: bool
) -> None:
    # A message that says the opposite is ignored: the code decides when there is one.
    assert is_recovering("not master", code) is recovering
    assert is_not_writable_primary("node is recovering", code) is not_writable_primary
    assert is_state_change_error("", code) is (recovering or not_writable_primary)
    assert is_shutdown(code) is shutting_down


@pytest.mark.parametrize(
    ("message", "recovering", "not_writable_primary"),
    [
        ("node is recovering", True, False),
        ("not master or secondary; cannot read", True, False),
        ("not master", False, True),
        ("interrupted", False, False),
        (None, False, False),
    ],
)
def test_state_change_by_message_without_a_code(
    message: str | None, recovering: bool, not_writable_primary: bool
) -> None:
    assert is_recovering(message, None) is recovering
    assert is_not_writable_primary(message, None) is not_writable_primary
    assert is_state_change_error(message, None) is (recovering or not_writable_primary)
    assert not is_shutdown(None)


def server_failure(code: int, *, wire: int = 8, labels: tuple[str, ...] = ()) -> AttemptFailure:
    details: dict[str, Any] = {"ok": 0, "code": code, "errmsg": "failed"}
    if labels:
        details["errorLabels"] = list(labels)
    return AttemptFailure.from_exception(OperationFailure("failed", code, details), max_wire_version=wire)


@pytest.mark.parametrize(("code", "write_retryable", "read_retryable"), RETRYABLE_CODES)
def test_retryable_codes(code: int, write_retryable: bool, read_retryable: bool) -> None:
    failure = server_failure(code)
    assert failure.is_read_retryable is read_retryable
    added, _ = labels_to_add(failure, is_write=True, retry_writes=True, in_transaction=False)
    assert (RETRYABLE_WRITE_ERROR in added) is write_retryable
    assert failure.with_labels(added).is_write_retryable is write_retryable


def test_servers_from_4_4_label_their_own_retryable_writes() -> None:
    unlabelled = server_failure(91, wire=9)
    assert labels_to_add(unlabelled, is_write=True, retry_writes=True, in_transaction=False) == (
        frozenset(),
        frozenset(),
    )
    labelled = server_failure(2, wire=9, labels=(RETRYABLE_WRITE_ERROR,))
    assert labelled.is_write_retryable


@pytest.mark.parametrize(
    ("error", "kind", "read_retryable", "network", "reached_for_server"),
    [
        (AutoReconnect("reset"), FailureKind.NETWORK, True, True, True),
        (ConnectionResetError("reset"), FailureKind.NETWORK, True, True, True),
        (NetworkTimeout("slow"), FailureKind.TIMEOUT, True, True, True),
        (TimeoutError(), FailureKind.TIMEOUT, True, True, True),
        (PoolClearedError("cleared", A), FailureKind.POOL_CLEARED, True, False, True),
        (ServerSelectionTimeoutError("none"), FailureKind.SELECTION, False, False, False),
        (WaitQueueTimeoutError("busy"), FailureKind.CLIENT, False, False, False),
        (operation_timeout_error("expired", NetworkTimeout("slow")), FailureKind.CLIENT, False, False, False),
        (ValueError("bug"), FailureKind.CLIENT, False, False, False),
    ],
)
def test_attempt_failure_kinds(
    error: BaseException, kind: FailureKind, read_retryable: bool, network: bool, reached_for_server: bool
) -> None:
    failure = AttemptFailure.from_exception(error)
    assert failure.kind is kind
    assert failure.is_read_retryable is read_retryable
    assert failure.is_network is network
    assert failure.reached_for_server is reached_for_server


@pytest.mark.parametrize(
    ("labels", "overload", "retryable_overload"),
    [
        ((), False, False),
        ((SYSTEM_OVERLOADED_ERROR,), True, False),
        ((RETRYABLE_ERROR,), False, False),
        (OVERLOAD_LABELS, True, True),
    ],
)
def test_overload_labels(labels: tuple[str, ...], overload: bool, retryable_overload: bool) -> None:
    failure = AttemptFailure.from_exception(AutoReconnect("refused", error_labels=labels))
    assert failure.is_overload is overload
    assert failure.is_retryable_overload is retryable_overload


def test_overload_backoff_hint_and_write_concern_code_are_read() -> None:
    reply = {
        "ok": 0,
        "code": 462,
        "errmsg": "overloaded",
        "baseBackoffMS": 250,
        "errorLabels": list(OVERLOAD_LABELS),
    }
    failure = AttemptFailure.from_exception(OperationFailure("overloaded", 462, reply))
    assert failure.base_backoff_ms == 250.0 and failure.is_retryable_overload
    concern = WriteConcernError(
        "not enough", None, {"ok": 1, "writeConcernError": {"code": 64, "errmsg": "x"}}
    )
    described = AttemptFailure.from_exception(concern)
    assert described.write_concern_error and described.code == 64


# transactions.md: which failures of commitTransaction leave its outcome unknown.
@pytest.mark.parametrize(
    ("error", "unknown_result"),
    [
        (AutoReconnect("reset"), True),
        (ServerSelectionTimeoutError("none"), True),
        (OperationFailure("expired", 50, {"ok": 0, "code": 50}), True),  # MaxTimeMSExpired
        (OperationFailure("stepped down", 189, {"ok": 0, "code": 189}), True),  # retryable write code
        (WriteConcernError("failed", 64, {"code": 64}), True),  # WriteConcernFailed
        (WriteConcernError("unsatisfiable", 100, {"code": 100}), False),  # UnsatisfiableWriteConcern
        (WriteConcernError("unknown mode", 79, {"code": 79}), False),  # UnknownReplWriteConcern
        (OperationFailure("bad", 2, {"ok": 0, "code": 2}), False),
    ],
)
def test_commit_unknown_transaction_result(error: BaseException, unknown_result: bool) -> None:
    failure = AttemptFailure.from_exception(error, max_wire_version=21)
    added, _ = labels_to_add(
        failure,
        is_write=False,
        retry_writes=True,
        in_transaction=True,
        transaction_command="commitTransaction",
    )
    assert (UNKNOWN_TRANSACTION_COMMIT_RESULT in added) is unknown_result
    assert TRANSIENT_TRANSACTION_ERROR not in added


def test_transient_transaction_error_inside_a_transaction() -> None:
    network = AttemptFailure.from_exception(AutoReconnect("reset"))
    added, _ = labels_to_add(network, is_write=True, retry_writes=True, in_transaction=True)
    assert added == {TRANSIENT_TRANSACTION_ERROR}
    labelled = AttemptFailure.from_exception(
        AutoReconnect("reset", error_labels=[TRANSIENT_TRANSACTION_ERROR])
    )
    added, removed = labels_to_add(
        labelled,
        is_write=False,
        retry_writes=True,
        in_transaction=True,
        transaction_command="commitTransaction",
    )
    assert UNKNOWN_TRANSACTION_COMMIT_RESULT in added and removed == {TRANSIENT_TRANSACTION_ERROR}


@pytest.mark.parametrize(
    ("reply", "wire", "from_mongos", "retryable"),
    [
        ({"ok": 1, "writeConcernError": {"code": 91, "errmsg": "shutdown"}}, 8, False, True),
        ({"ok": 1, "writeConcernError": {"code": 91, "errmsg": "shutdown"}}, 8, True, False),
        ({"ok": 1, "writeConcernError": {"code": 91, "errmsg": "shutdown"}}, 9, False, False),
        (
            {"ok": 1, "writeConcernError": {"code": 2}, "errorLabels": [RETRYABLE_WRITE_ERROR]},
            21,
            False,
            True,
        ),
        ({"ok": 1, "n": 1}, 21, False, False),
    ],
)
def test_retryable_write_concern_error(
    reply: dict[str, Any], wire: int, from_mongos: bool, retryable: bool
) -> None:
    error = retryable_write_concern_error(reply, max_wire_version=wire, from_mongos=from_mongos)
    assert (error is not None) is retryable
    if error is not None:
        assert error.has_error_label(RETRYABLE_WRITE_ERROR)


@pytest.mark.parametrize(
    ("error", "network_error", "network_timeout"),
    [
        (AutoReconnect("reset"), True, False),
        (NetworkTimeout("slow"), True, True),
        (TimeoutError(), True, True),
        (ConnectionRefusedError(), True, False),
        (PoolClearedError("cleared", A), True, False),
        (OperationFailure("bad", 2), False, False),
        (ConfigurationError("bad option"), False, False),
        (None, False, False),
    ],
)
def test_network_errors(error: BaseException | None, network_error: bool, network_timeout: bool) -> None:
    assert is_network_error(error) is network_error
    assert is_network_timeout(error) is network_timeout


@pytest.mark.parametrize(
    ("error", "timeout", "max_time_ms_expired"),
    [
        (NetworkTimeout("slow"), True, False),
        (WaitQueueTimeoutError("busy"), True, False),
        (ExecutionTimeout("expired", 50, {"ok": 0, "code": 50}), True, True),
        (OperationFailure("expired", 50, {"ok": 0, "code": 50}), True, True),
        (OperationFailure("w", 64, {"ok": 1, "writeConcernError": {"code": 50}}), True, True),
        (OperationFailure("bulk", 65, {"writeErrors": [{"index": 0, "code": 50}]}), True, False),
        (OperationFailure("bad", 2, {"ok": 0, "code": 2}), False, False),
        (AutoReconnect("reset"), False, False),
    ],
)
def test_timeouts(error: BaseException, timeout: bool, max_time_ms_expired: bool) -> None:
    assert is_timeout(error) is timeout
    assert is_unreported_timeout(error) is timeout
    assert is_max_time_ms_expired(error) is max_time_ms_expired


def test_the_operations_own_timeout_is_already_reported() -> None:
    for cause in (NetworkTimeout("slow"), OperationFailure("expired", 50, {"ok": 0, "code": 50}), None):
        own = operation_timeout_error("timeoutMS expired", cause)
        assert is_timeout(own)
        assert not is_unreported_timeout(own)
        assert not is_max_time_ms_expired(own)  # code 50 on the PyMongo class it wears, but not the server's


@pytest.mark.parametrize(
    ("code", "command_class", "write_class"),
    [
        (50, ExecutionTimeout, WriteError),
        (43, CursorNotFound, WriteError),
        (11000, DuplicateKeyError, DuplicateKeyError),
        (11001, DuplicateKeyError, DuplicateKeyError),
        (12582, DuplicateKeyError, DuplicateKeyError),
        (2, OperationFailure, WriteError),
        (None, OperationFailure, WriteError),
    ],
)
def test_exception_class_for_a_code(code: int | None, command_class: type, write_class: type) -> None:
    assert command_error_class(code) is command_class
    assert write_error_class(code) is write_class


def test_write_concern_error_of_a_reply() -> None:
    assert write_concern_error({"ok": 1, "n": 1}) is None
    timed_out = write_concern_error(
        {"ok": 1, "writeConcernError": {"code": 64, "errmsg": "waiting", "errInfo": {"wtimeout": True}}}
    )
    assert type(timed_out) is WTimeoutError and timed_out.code == 64
    labelled = write_concern_error(
        {
            "ok": 1,
            "writeConcernError": {"code": 91, "errmsg": "shutdown"},
            "errorLabels": [RETRYABLE_WRITE_ERROR],
        }
    )
    assert type(labelled) is WriteConcernError and labelled.has_error_label(RETRYABLE_WRITE_ERROR)


@pytest.mark.parametrize(
    ("error", "duplicate"),
    [
        (DuplicateKeyError("dup", 11000), True),
        (BulkWriteError({"writeErrors": [{"index": 0, "code": 11000}], "nInserted": 0}), True),
        (BulkWriteError({"writeErrors": [{"index": 0, "code": 2}, {"index": 1, "code": 11001}]}), True),
        (BulkWriteError({"writeErrors": [{"index": 0, "code": 2}]}), False),
        (WriteError("bad", 2), False),
        (OperationFailure("dup", 11000), False),  # by class: the driver raises DuplicateKeyError
    ],
)
def test_duplicate_key(error: BaseException, duplicate: bool) -> None:
    assert is_duplicate_key(error) is duplicate


def test_namespace_not_found() -> None:
    assert is_namespace_not_found(OperationFailure("ns not found", 26))
    assert not is_namespace_not_found(OperationFailure("other", 2))


def _caused_by(cause: BaseException) -> AutoReconnect:
    error = AutoReconnect("cannot connect")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "overload"),
    [
        (ConnectionRefusedError(), True),
        (NetworkTimeout("connect timed out"), True),
        (_caused_by(ssl.SSLEOFError()), True),  # a TLS handshake cut short: I/O
        (_caused_by(ssl.SSLZeroReturnError()), True),
        (_caused_by(ssl.SSLCertVerificationError()), False),  # the peer's verdict
        (_caused_by(ssl.SSLError()), False),
        (_caused_by(_caused_by(ssl.SSLError())), False),
    ],
)
def test_may_be_overload(error: BaseException, overload: bool) -> None:
    assert may_be_overload(error) is overload


# change-streams.md: resumable errors.
@pytest.mark.parametrize(
    ("error", "wire", "resumable"),
    [
        (AutoReconnect("reset"), 21, True),
        (NetworkTimeout("slow"), 21, True),
        (OperationFailure("gone", 43, {"ok": 0, "code": 43}), 21, True),  # CursorNotFound, always
        (
            OperationFailure("x", 2, {"ok": 0, "code": 2, "errorLabels": ["ResumableChangeStreamError"]}),
            9,
            True,
        ),
        (OperationFailure("x", 91, {"ok": 0, "code": 91}), 9, False),  # 4.4+: only the label counts
        (OperationFailure("x", 91, {"ok": 0, "code": 91}), 8, True),  # before: the code table
        (OperationFailure("x", 63, {"ok": 0, "code": 63}), 8, True),  # StaleShardVersion
        (OperationFailure("x", 280, {"ok": 0, "code": 280}), 8, False),  # ChangeStreamFatalError
        (operation_timeout_error("expired", NetworkTimeout("slow")), 21, False),
        (ConfigurationError("bad"), 21, False),
    ],
)
def test_is_resumable(error: BaseException, wire: int, resumable: bool) -> None:
    assert is_resumable(error, wire) is resumable


@pytest.mark.parametrize(
    ("error", "unsupported"),
    [
        (
            OperationFailure(
                "x", 20, {"ok": 0, "code": 20, "errmsg": "Transaction numbers are only allowed on..."}
            ),
            True,
        ),
        (OperationFailure("x", 20, {"ok": 0, "code": 20, "errmsg": "something else"}), False),
        (
            OperationFailure(
                "x", 2, {"ok": 0, "code": 2, "errmsg": "Transaction numbers are only allowed on..."}
            ),
            False,
        ),
        (AutoReconnect("reset"), False),
    ],
)
def test_retryable_writes_unsupported(error: BaseException, unsupported: bool) -> None:
    assert is_retryable_writes_unsupported(error) is unsupported


@pytest.mark.parametrize(
    ("labels", "transaction_command", "unpins"),
    [
        ((), None, False),
        ((TRANSIENT_TRANSACTION_ERROR,), None, True),
        ((UNKNOWN_TRANSACTION_COMMIT_RESULT,), "commitTransaction", True),
        ((RETRYABLE_WRITE_ERROR,), "commitTransaction", False),
        ((), "abortTransaction", True),
    ],
)
def test_unpins_transaction(labels: tuple[str, ...], transaction_command: str | None, unpins: bool) -> None:
    assert unpins_transaction(AutoReconnect("x", error_labels=labels), transaction_command) is unpins


def test_has_error_label_on_any_exception() -> None:
    assert has_error_label(MongioError("x", [TRANSIENT_TRANSACTION_ERROR]), TRANSIENT_TRANSACTION_ERROR)
    assert not has_error_label(MongioError("x"), TRANSIENT_TRANSACTION_ERROR)
    assert not has_error_label(ValueError("callback bug"), TRANSIENT_TRANSACTION_ERROR)


# server-discovery-and-monitoring.md, "Error handling": how an operation's error is seen by the topology.
@pytest.mark.parametrize(
    ("error", "kind", "code"),
    [
        (AutoReconnect("reset"), ErrorKind.NETWORK, None),
        (OSError("reset"), ErrorKind.NETWORK, None),
        (NetworkTimeout("slow"), ErrorKind.TIMEOUT, None),
        (OperationFailure("not primary", 10107, {"ok": 0, "code": 10107}), ErrorKind.COMMAND, 10107),
        (WriteConcernError("shutdown", 91, {"code": 91, "errmsg": "shutdown"}), ErrorKind.COMMAND, 91),
        (
            NotPrimaryError("not primary", {"ok": 0, "code": 13435, "errmsg": "not primary"}),
            ErrorKind.COMMAND,
            13435,
        ),
        (PoolClearedError("cleared", A), None, None),  # says nothing new about the server
        (WaitQueueTimeoutError("busy"), None, None),
        (operation_timeout_error("expired", NetworkTimeout("slow")), None, None),
        (ConfigurationError("bad"), None, None),
    ],
)
def test_application_error_from_exception(
    error: BaseException, kind: ErrorKind | None, code: int | None
) -> None:
    described = ApplicationError.from_exception(error, generation=0)
    if kind is None:
        assert described is None
        return
    assert described is not None
    assert described.kind is kind and described.code == code and described.error is error


def _replica_set() -> TopologyDescription:
    td = initial_topology_description(TopologySettings(seeds=(A,), replica_set_name="rs"))
    reply = {
        "ok": 1,
        "setName": "rs",
        "isWritablePrimary": True,
        "hosts": ["a:27017"],
        "maxWireVersion": 21,
        "topologyVersion": {"processId": "p", "counter": 1},
    }
    return updated_topology_description(td, ServerDescription(A, reply, round_trip_time=0.001))


NEWER = {"topologyVersion": {"processId": "p", "counter": 2}}


@pytest.mark.parametrize(
    ("error", "unknown", "clear_pool", "request_check", "cancel_check"),
    [
        (OperationFailure("x", 10107, {"ok": 0, "code": 10107, **NEWER}), True, False, True, False),
        (OperationFailure("x", 189, {"ok": 0, "code": 189, **NEWER}), True, False, True, False),
        (OperationFailure("x", 91, {"ok": 0, "code": 91, **NEWER}), True, True, True, False),
        (OperationFailure("x", 10107, {"ok": 0, "code": 10107}), True, False, True, False),  # no version
        (OperationFailure("x", 2, {"ok": 0, "code": 2, **NEWER}), False, False, False, False),
        (AutoReconnect("reset"), True, True, False, True),
        (NetworkTimeout("slow"), False, False, False, False),  # after the handshake: maybe a slow operation
        (AutoReconnect("refused", error_labels=OVERLOAD_LABELS), False, False, False, False),
    ],
)
def test_application_error_decision(
    error: BaseException, unknown: bool, clear_pool: bool, request_check: bool, cancel_check: bool
) -> None:
    described = ApplicationError.from_exception(error, generation=0)
    assert described is not None
    decision = application_error_decision(_replica_set(), A, described, 0)
    assert not decision.stale
    assert (decision.mark_unknown is not None) is unknown
    if decision.mark_unknown is not None:
        assert decision.mark_unknown.server_type is ServerType.Unknown
        assert decision.mark_unknown.error is error
    assert decision.clear_pool is clear_pool
    assert decision.request_check is request_check
    assert decision.cancel_check is cancel_check


def test_errors_before_the_handshake_mark_unknown_even_for_a_timeout() -> None:
    described = ApplicationError.from_exception(
        NetworkTimeout("slow"), generation=0, completed_handshake=False
    )
    assert described is not None
    decision = application_error_decision(_replica_set(), A, described, 0)
    assert decision.mark_unknown is not None and decision.clear_pool and decision.cancel_check


@pytest.mark.parametrize(
    ("error", "generation", "pool_generation"),
    [
        (AutoReconnect("reset"), 0, 1),  # the connection predates the last clear
        (
            OperationFailure(
                "x", 10107, {"ok": 0, "code": 10107, "topologyVersion": {"processId": "p", "counter": 1}}
            ),
            0,
            0,
        ),
        (
            OperationFailure(
                "x", 10107, {"ok": 0, "code": 10107, "topologyVersion": {"processId": "p", "counter": 0}}
            ),
            0,
            0,
        ),
    ],
)
def test_stale_errors_change_nothing(error: BaseException, generation: int, pool_generation: int) -> None:
    described = ApplicationError.from_exception(error, generation=generation)
    assert described is not None
    decision = application_error_decision(_replica_set(), A, described, pool_generation)
    assert decision.stale and not decision.acts


def test_state_change_reply_given_as_a_reply_carries_a_not_primary_error() -> None:
    described = ApplicationError.from_reply(
        {"ok": 0, "code": 11602, "errmsg": "stepping down", **NEWER}, generation=0
    )
    assert described is not None
    decision = application_error_decision(_replica_set(), A, described, 0)
    assert decision.mark_unknown is not None
    assert isinstance(decision.mark_unknown.error, NotPrimaryError)
    assert decision.mark_unknown.topology_version == NEWER["topologyVersion"]


def test_write_errors_are_never_state_changes() -> None:
    reply = {"ok": 1, "writeErrors": [{"index": 0, "code": 10107, "errmsg": "not primary"}]}
    assert ApplicationError.from_reply(reply, generation=0) is None
