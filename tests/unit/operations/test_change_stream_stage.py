"""The pure change stream rules: the $changeStream stage, where a resume starts, which errors resume."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import DEFAULT_CODEC_OPTIONS, Timestamp
from mongio.error_classification import RESUMABLE_CODES, is_resumable
from mongio.errors import (
    AutoReconnect,
    CursorNotFound,
    ExecutionTimeout,
    InvalidOperation,
    NetworkTimeout,
    OperationFailure,
    ServerSelectionTimeoutError,
)
from mongio.operations.base import ServerLimits
from mongio.operations.change_stream_stage import (
    ChangeStreamAggregate,
    change_stream_options,
    resume_options,
)
from mongio.options.read_concern import ReadConcern

TOKEN = {"_data": "8263"}
LATER = {"_data": "8264"}
TIME = Timestamp(1700000000, 3)


def failure(code: int, labels: list[str] | None = None) -> OperationFailure:
    details: dict[str, Any] = {"ok": 0, "code": code, "errmsg": "x"}
    if labels is not None:
        details["errorLabels"] = labels
    return OperationFailure("x", code, details)


# -- the stage ------------------------------------------------------------------------------------------------


def test_options_hold_only_what_was_given() -> None:
    assert change_stream_options() == {}
    assert change_stream_options(all_changes_for_cluster=True) == {"allChangesForCluster": True}
    options = change_stream_options(
        full_document="updateLookup",
        full_document_before_change="whenAvailable",
        resume_after=TOKEN,
        start_at_operation_time=TIME,
        show_expanded_events=False,
    )
    assert options == {
        "fullDocument": "updateLookup",
        "fullDocumentBeforeChange": "whenAvailable",
        "resumeAfter": TOKEN,
        "startAtOperationTime": TIME,
        "showExpandedEvents": False,
    }


def test_unknown_modes_and_conflicting_start_points_are_left_to_the_server() -> None:
    options = change_stream_options(full_document="someFutureMode", resume_after=TOKEN, start_after=LATER)
    assert options == {"fullDocument": "someFutureMode", "resumeAfter": TOKEN, "startAfter": LATER}


def test_a_resume_token_must_be_a_document() -> None:
    with pytest.raises(TypeError, match="resume_after"):
        change_stream_options(resume_after="8263")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="start_after"):
        change_stream_options(start_after=[1])  # type: ignore[arg-type]


def test_aggregate_puts_the_stage_first_and_options_in_the_command() -> None:
    operation = ChangeStreamAggregate(
        "db",
        "coll",
        {"fullDocument": "updateLookup"},
        [{"$match": {"operationType": "insert"}}],
        batch_size=3,
        collation={"locale": "fr"},
        comment="c",
        read_concern=ReadConcern("majority"),
        codec_options=DEFAULT_CODEC_OPTIONS,
    )
    body = operation.build(ServerLimits()).body
    assert body["aggregate"] == "coll"
    assert body["pipeline"] == [
        {"$changeStream": {"fullDocument": "updateLookup"}},
        {"$match": {"operationType": "insert"}},
    ]
    assert body["cursor"] == {"batchSize": 3}
    assert body["collation"] == {"locale": "fr"} and body["comment"] == "c"
    assert "maxTimeMS" not in body and "maxAwaitTimeMS" not in body
    on_database = ChangeStreamAggregate("db", None, {}, [], codec_options=DEFAULT_CODEC_OPTIONS)
    database_body = on_database.build(ServerLimits()).body
    assert database_body["aggregate"] == 1 and database_body["cursor"] == {}


def test_aggregate_keeps_operation_time_and_wire_version_of_its_reply() -> None:
    operation = ChangeStreamAggregate("db", "coll", {}, [], codec_options=DEFAULT_CODEC_OPTIONS)
    reply = {"ok": 1, "operationTime": TIME, "cursor": {"id": 5, "ns": "db.coll", "firstBatch": []}}
    state = operation.handle_response(reply, ServerLimits(max_wire_version=17))
    assert state.id == 5
    assert operation.operation_time == TIME and operation.max_wire_version == 17


def test_pipeline_must_be_a_list() -> None:
    with pytest.raises(TypeError):
        ChangeStreamAggregate("db", "coll", {}, {"$match": {}}, codec_options=DEFAULT_CODEC_OPTIONS)  # type: ignore[arg-type]


# -- where a resume starts --------------------------------------------------------------------------------------


def test_resume_with_a_token_uses_resume_after_and_drops_other_start_points() -> None:
    original = {"fullDocument": "updateLookup", "startAfter": TOKEN, "startAtOperationTime": TIME}
    resumed = resume_options(original, LATER, start_after_pending=False, operation_time=TIME)
    assert resumed == {"fullDocument": "updateLookup", "resumeAfter": LATER}


def test_resume_of_a_start_after_stream_before_any_change_keeps_start_after() -> None:
    resumed = resume_options({"startAfter": TOKEN}, LATER, start_after_pending=True, operation_time=None)
    assert resumed == {"startAfter": LATER}


def test_resume_without_a_token_starts_at_the_operation_time() -> None:
    original = {"allChangesForCluster": True}
    resumed = resume_options(original, None, start_after_pending=False, operation_time=TIME)
    assert resumed == {"allChangesForCluster": True, "startAtOperationTime": TIME}
    assert original == {"allChangesForCluster": True}


def test_resume_without_token_or_time_repeats_the_original() -> None:
    original = {"fullDocument": "required"}
    assert resume_options(original, None, start_after_pending=False, operation_time=None) == original


# -- which errors resume ----------------------------------------------------------------------------------------


def test_network_errors_resume() -> None:
    for error in (AutoReconnect("closed"), NetworkTimeout("slow"), ServerSelectionTimeoutError("none")):
        assert is_resumable(error, 21)


def test_cursor_not_found_always_resumes() -> None:
    assert is_resumable(CursorNotFound("gone", 43, {"code": 43}), 21)
    assert is_resumable(CursorNotFound("gone", 43, {"code": 43}), 8)


def test_from_wire_version_9_only_the_label_counts() -> None:
    assert is_resumable(failure(50, ["ResumableChangeStreamError"]), 9)
    assert not is_resumable(failure(6), 9)
    assert not is_resumable(failure(10107, ["RetryableWriteError"]), 21)
    assert is_resumable(failure(280, ["ResumableChangeStreamError"]), None)


def test_before_wire_version_9_the_code_list_counts() -> None:
    for code in RESUMABLE_CODES:
        assert is_resumable(failure(code), 8)
    assert not is_resumable(failure(216), 8)  # ElectionInProgress
    assert not is_resumable(failure(11601), 8)  # Interrupted
    assert not is_resumable(ExecutionTimeout("slow", 50, {"code": 50}), 8)
    assert len(RESUMABLE_CODES) == 17


def test_driver_errors_other_than_network_errors_do_not_resume() -> None:
    assert not is_resumable(InvalidOperation("closed"), 21)
    assert not is_resumable(ValueError("x"), 21)
