"""The cluster harness's pure parts: failCommand's modes and labels as a member applies them, what a
secondary refuses, and the hello a member presents."""

from __future__ import annotations

from typing import Any

from spec_runner.cluster.failpoints import FailCommand
from spec_runner.cluster.members import (
    Member,
    MemberConfig,
    ReplicaSetState,
    Role,
    refusal,
    replica_set_hello,
)

from mongio.bson import Int64


def configured(mode: Any, **data: Any) -> FailCommand:
    fail_point = FailCommand()
    fail_point.configure({"configureFailPoint": "failCommand", "mode": mode, "data": data})
    return fail_point


def fires(fail_point: FailCommand, command: dict[str, Any], app_name: str | None = None) -> bool:
    return fail_point.action_for(command, app_name) is not None


def test_times_fires_that_many_times_then_never() -> None:
    fail_point = configured({"times": 2}, failCommands=["find"], errorCode=91)
    assert [fires(fail_point, {"find": "c"}) for _ in range(4)] == [True, True, False, False]


def test_skip_lets_the_first_ones_by_then_fires_always() -> None:
    fail_point = configured({"skip": 2}, failCommands=["insert"], errorCode=91)
    assert [fires(fail_point, {"insert": "c"}) for _ in range(4)] == [False, False, True, True]


def test_off_never_fires_and_other_commands_are_not_matched() -> None:
    fail_point = configured("alwaysOn", failCommands=["insert"], errorCode=91)
    assert not fires(fail_point, {"find": "c"})
    fail_point.configure({"configureFailPoint": "failCommand", "mode": "off"})
    assert not fires(fail_point, {"insert": "c"})


def test_activation_probability_zero_never_fires() -> None:
    fail_point = configured({"activationProbability": 0.0}, failCommands=["find"], errorCode=91)
    assert not any(fires(fail_point, {"find": "c"}) for _ in range(50))


def test_app_name_limits_the_fail_point_to_one_client() -> None:
    fail_point = configured("alwaysOn", failCommands=["find"], errorCode=91, appName="mine")
    assert not fires(fail_point, {"find": "c"}, "theirs")
    assert fires(fail_point, {"find": "c"}, "mine")


def test_hello_is_master_and_ismaster_are_one_command() -> None:
    fail_point = configured("alwaysOn", failCommands=["hello", "ismaster"], closeConnection=True)
    assert fires(fail_point, {"isMaster": 1}) and fires(fail_point, {"hello": 1})


def test_the_server_labels_a_retryable_write_and_a_transaction_statement() -> None:
    fail_point = configured("alwaysOn", failCommands=["insert"], errorCode=10107)
    retryable = fail_point.action_for({"insert": "c", "txnNumber": Int64(1)}, None)
    assert retryable is not None and retryable.error is not None
    assert retryable.error["errorLabels"] == ["RetryableWriteError"]
    in_transaction = fail_point.action_for({"insert": "c", "txnNumber": Int64(1), "autocommit": False}, None)
    assert in_transaction is not None and in_transaction.error is not None
    assert in_transaction.error["errorLabels"] == ["TransientTransactionError"]
    given = configured("alwaysOn", failCommands=["insert"], errorCode=10107, errorLabels=[])
    action = given.action_for({"insert": "c", "txnNumber": Int64(1)}, None)
    assert action is not None and action.error is not None and "errorLabels" not in action.error


def test_a_secondary_refuses_writes_and_primary_reads_but_serves_secondary_reads() -> None:
    secondary = Member("s", 1, Role.SECONDARY)
    assert refusal(secondary, {"insert": "c"})["code"] == 10107  # type: ignore[index]
    assert refusal(secondary, {"aggregate": "c", "pipeline": [{"$out": "x"}]})["code"] == 10107  # type: ignore[index]
    assert refusal(secondary, {"find": "c"})["code"] == 13435  # type: ignore[index]
    assert refusal(secondary, {"find": "c", "$readPreference": {"mode": "secondaryPreferred"}}) is None
    assert refusal(secondary, {"hello": 1}) is None
    assert refusal(Member("p", 2, Role.PRIMARY), {"insert": "c"}) is None


def test_a_member_hello_describes_the_set_as_configured() -> None:
    members = [
        Member("a", 1, Role.PRIMARY, MemberConfig(tags={"dc": "east"})),
        Member("b", 2, Role.SECONDARY),
        Member("c", 3, Role.SECONDARY, MemberConfig(hidden=True)),
        Member("d", 4, Role.ARBITER, MemberConfig(arbiter=True)),
    ]
    state = ReplicaSetState(name="rs", members=members)
    backend = {"maxWireVersion": 27, "minWireVersion": 0, "logicalSessionTimeoutMinutes": 30}
    primary = replica_set_hello(members[0], state, backend, {"hello": 1}, 7)
    assert primary["isWritablePrimary"] is True and primary["secondary"] is False
    assert primary["hosts"] == ["127.0.0.1:1", "127.0.0.1:2"]
    assert primary["arbiters"] == ["127.0.0.1:4"]
    assert primary["tags"] == {"dc": "east"} and primary["electionId"] == state.election_id
    hidden = replica_set_hello(members[2], state, backend, {"isMaster": 1}, 8)
    assert hidden["ismaster"] is False and hidden["hidden"] is True and hidden["primary"] == "127.0.0.1:1"
    assert "electionId" not in hidden
    members[1].lag = 60
    lagging = replica_set_hello(members[1], state, backend, {"hello": 1}, 9)
    behind = primary["lastWrite"]["lastWriteDate"] - lagging["lastWrite"]["lastWriteDate"]
    assert behind.total_seconds() >= 59
