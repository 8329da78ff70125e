"""Application-error decisions: classification, staleness, and what each kind of error does to the topology."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.error_classification import (
    SYSTEM_OVERLOADED_ERROR,
    ApplicationError,
    ErrorKind,
    application_error_decision,
    is_not_writable_primary,
    is_recovering,
    is_shutdown,
    is_state_change_error,
)
from mongio.errors import (
    AutoReconnect,
    ConnectionFailure,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    PoolClearedError,
    WaitQueueTimeoutError,
    WriteConcernError,
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
TV1 = {"processId": "p", "counter": 1}
TV2 = {"processId": "p", "counter": 2}


def rs_with_primary(topology_version: dict[str, Any] | None = TV1) -> TopologyDescription:
    td = initial_topology_description(TopologySettings(seeds=(A,), replica_set_name="rs"))
    reply: dict[str, Any] = {
        "ok": 1,
        "setName": "rs",
        "isWritablePrimary": True,
        "hosts": ["a:27017"],
        "maxWireVersion": 21,
    }
    if topology_version is not None:
        reply["topologyVersion"] = topology_version
    return updated_topology_description(td, ServerDescription(A, reply, round_trip_time=0.001))


def load_balanced() -> TopologyDescription:
    td = initial_topology_description(TopologySettings(seeds=(A,), load_balanced=True))
    return updated_topology_description(td, ServerDescription.load_balancer(A))


def command(code: int | None, message: str = "", **kwargs: Any) -> ApplicationError:
    reply: dict[str, Any] = {"ok": 0, "errmsg": message}
    if code is not None:
        reply["code"] = code
    reply.update(kwargs.pop("reply", {}))
    error = ApplicationError.from_reply(reply, generation=kwargs.pop("generation", 0), **kwargs)
    assert error is not None
    return error


def network(kind: ErrorKind = ErrorKind.NETWORK, **kwargs: Any) -> ApplicationError:
    return ApplicationError(
        kind=kind,
        generation=kwargs.pop("generation", 0),
        completed_handshake=kwargs.pop("completed_handshake", True),
        **kwargs,
    )


def test_codes_are_preferred_over_messages() -> None:
    assert is_recovering("anything", 11602)
    assert not is_recovering("node is recovering", 1)
    assert is_not_writable_primary("whatever", 10107)
    assert not is_not_writable_primary("not master", 1)
    assert not is_state_change_error("not master", 1)


def test_messages_are_used_without_a_code() -> None:
    assert is_recovering("node is recovering", None)
    assert is_recovering("not master or secondary; cannot read", None)
    # "not master or secondary" is recovering, not "not writable primary", though it contains "not master".
    assert not is_not_writable_primary("not master or secondary", None)
    assert is_not_writable_primary("not master", None)
    assert not is_state_change_error("some other failure", None)


def test_only_shutdown_codes_are_shutdown() -> None:
    assert is_shutdown(91) and is_shutdown(11600)
    assert not is_shutdown(11602) and not is_shutdown(None) and not is_shutdown(0)


def test_state_change_marks_unknown_keeps_topology_version_and_requests_check() -> None:
    td = rs_with_primary()
    decision = application_error_decision(
        td, A, command(10107, "not primary", reply={"topologyVersion": TV2}), 0
    )
    assert not decision.stale
    assert decision.mark_unknown is not None
    assert decision.mark_unknown.server_type == ServerType.Unknown
    assert decision.mark_unknown.topology_version == TV2
    assert "not primary" in str(decision.mark_unknown.error)
    assert decision.request_check and not decision.clear_pool and not decision.cancel_check
    after = updated_topology_description(td, decision.mark_unknown)
    assert after.server_descriptions()[A].server_type == ServerType.Unknown


@pytest.mark.parametrize("code", [91, 11600])
def test_shutdown_clears_the_pool(code: int) -> None:
    decision = application_error_decision(
        rs_with_primary(), A, command(code, reply={"topologyVersion": TV2}), 0
    )
    assert decision.clear_pool and decision.mark_unknown is not None


def test_stale_generation_is_ignored() -> None:
    decision = application_error_decision(rs_with_primary(), A, network(generation=0), pool_generation=1)
    assert decision.stale and not decision.acts


@pytest.mark.parametrize("version", [TV1, {"processId": "p", "counter": 0}])
def test_state_change_with_old_topology_version_is_ignored(version: dict[str, Any]) -> None:
    error = command(10107, reply={"topologyVersion": version})
    decision = application_error_decision(rs_with_primary(), A, error, 0)
    assert decision.stale and not decision.acts


def test_new_process_id_is_not_stale() -> None:
    error = command(10107, reply={"topologyVersion": {"processId": "q", "counter": 0}})
    assert application_error_decision(rs_with_primary(), A, error, 0).mark_unknown is not None


def test_error_from_a_removed_server_is_ignored() -> None:
    decision = application_error_decision(rs_with_primary(), ("gone", 1), network(), 0)
    assert decision.stale and not decision.acts


def test_network_error_after_handshake_marks_unknown_and_clears() -> None:
    decision = application_error_decision(rs_with_primary(), A, network(), 0)
    assert decision.mark_unknown is not None and decision.mark_unknown.topology_version is None
    assert decision.clear_pool and decision.cancel_check and not decision.request_check


def test_timeout_after_handshake_changes_nothing() -> None:
    decision = application_error_decision(rs_with_primary(), A, network(ErrorKind.TIMEOUT), 0)
    assert not decision.stale and not decision.acts


def test_errors_while_connecting_mark_unknown_unless_overloaded() -> None:
    td = rs_with_primary()
    timeout = network(ErrorKind.TIMEOUT, completed_handshake=False)
    decision = application_error_decision(td, A, timeout, 0)
    assert decision.mark_unknown is not None and decision.clear_pool
    overloaded = network(
        ErrorKind.TIMEOUT, completed_handshake=False, labels=frozenset({SYSTEM_OVERLOADED_ERROR})
    )
    assert not application_error_decision(td, A, overloaded, 0).acts
    # An authentication failure (not a state change) while connecting also marks the server Unknown.
    auth = command(18, "Authentication failed", completed_handshake=False)
    decision = application_error_decision(td, A, auth, 0)
    assert decision.mark_unknown is not None and decision.clear_pool


def test_other_command_errors_change_nothing() -> None:
    decision = application_error_decision(rs_with_primary(), A, command(11000, "duplicate key"), 0)
    assert not decision.acts


def test_load_balanced_never_marks_unknown() -> None:
    td = load_balanced()
    state_change = command(91, "shutting down", service_id="svc")
    decision = application_error_decision(td, A, state_change, 0)
    assert decision.mark_unknown is None and decision.clear_pool and decision.service_id == "svc"
    net = network(service_id="svc")
    decision = application_error_decision(td, A, net, 0)
    assert decision.mark_unknown is None and decision.clear_pool and decision.service_id == "svc"
    assert not application_error_decision(td, A, network(), 0).acts


def test_load_balanced_ignores_errors_before_the_hello_named_the_service() -> None:
    td = load_balanced()
    # A shutdown error answering the hello itself: the connection has no service yet, nothing is cleared.
    during_hello = command(11600, "interrupted at shutdown", completed_handshake=False)
    assert not application_error_decision(td, A, during_hello, 0).acts
    assert not application_error_decision(td, A, network(completed_handshake=False), 0).acts
    # After the hello (authentication), only that service's connections are cleared.
    during_auth = network(completed_handshake=False, service_id="svc")
    decision = application_error_decision(td, A, during_auth, 0)
    assert decision.clear_pool and decision.service_id == "svc" and decision.mark_unknown is None
    # An error from a connection older than that service's last clear is stale.
    assert application_error_decision(td, A, network(service_id="svc", generation=0), 1).stale


def test_from_reply_reads_write_concern_errors_but_not_write_errors() -> None:
    wce = ApplicationError.from_reply(
        {"ok": 1, "writeConcernError": {"code": 91, "errmsg": "shutting down"}}, generation=0
    )
    assert wce is not None and wce.code == 91 and wce.message == "shutting down"
    assert ApplicationError.from_reply({"ok": 1, "writeErrors": [{"code": 10107}]}, generation=0) is None
    labelled = ApplicationError.from_reply({"ok": 0, "code": 1, "errorLabels": ["X"]}, generation=0)
    assert labelled is not None and labelled.labels == {"X"}


def test_from_exception_classifies_driver_errors() -> None:
    def classify(error: BaseException) -> ApplicationError | None:
        return ApplicationError.from_exception(error, generation=3)

    failure = classify(
        OperationFailure("not primary", 10107, {"ok": 0, "code": 10107, "topologyVersion": TV2})
    )
    assert failure is not None and failure.kind == ErrorKind.COMMAND
    assert failure.code == 10107 and failure.topology_version == TV2 and failure.generation == 3
    wce = classify(WriteConcernError("shutting down", 91, {"code": 91, "errmsg": "shutting down"}))
    assert wce is not None and wce.code == 91
    not_primary = classify(NotPrimaryError("not primary", {"ok": 0, "code": 13435, "errmsg": "not primary"}))
    assert not_primary is not None and not_primary.kind == ErrorKind.COMMAND and not_primary.code == 13435
    timeout = classify(NetworkTimeout("timed out"))
    assert timeout is not None and timeout.kind == ErrorKind.TIMEOUT
    reset = classify(AutoReconnect("connection reset", error_labels=[SYSTEM_OVERLOADED_ERROR]))
    assert reset is not None and reset.kind == ErrorKind.NETWORK and SYSTEM_OVERLOADED_ERROR in reset.labels
    assert classify(ConnectionFailure("refused")) is not None
    # A bare socket error is a network error; the builtin TimeoutError (an OSError too) is a timeout.
    raw = classify(ConnectionResetError("reset by peer"))
    assert raw is not None and raw.kind == ErrorKind.NETWORK
    builtin_timeout = classify(TimeoutError())
    assert builtin_timeout is not None and builtin_timeout.kind == ErrorKind.TIMEOUT
    assert classify(WaitQueueTimeoutError("pool busy")) is None
    # The pool was cleared because of an earlier error: this one says nothing new about the server.
    assert classify(PoolClearedError("pool cleared", ("a", 27017))) is None
    assert classify(ValueError("bug")) is None
