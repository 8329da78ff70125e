"""What PyMongo's own async tests found mongio doing differently, against the test server: explain's read
concern in a causally consistent session, a session's cluster time from a PyMongo-typed client, and the
client's pool options as PyMongo lists them."""

from __future__ import annotations

from typing import Any

import pytest
from bson.timestamp import Timestamp as PyMongoTimestamp

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.read_concern import ReadConcern
from tests.support.recorders import CommandRecorder

pytestmark = pytest.mark.server


async def test_explain_in_a_causally_consistent_session_sends_no_read_concern_of_its_own(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    local = coll.with_options(read_concern=ReadConcern("local"))
    async with client.start_session() as session:
        await coll.find_one({}, session=session)
        assert session.operation_time is not None
        recorder.clear()
        plan = await local.find({}, session=session).explain()
        (command,) = [event.command for event in recorder.started_events]
        # Neither afterClusterTime nor the level at the top: explain takes no read concern; the explained
        # find keeps the level it was given.
        assert "readConcern" not in command
        assert command["explain"]["readConcern"] == {"level": "local"}
        assert "queryPlanner" in plan
        recorder.clear()
        await coll.find({}, session=session).explain()
        (command,) = [event.command for event in recorder.started_events]
        assert "readConcern" not in command and "readConcern" not in command["explain"]
        # The find itself still reads after the session's cluster time.
        recorder.clear()
        await coll.find_one({}, session=session)
        (find,) = [event.command for event in recorder.started_events]
        assert find["readConcern"]["afterClusterTime"] == session.operation_time


async def test_explain_in_a_snapshot_session_sends_no_read_concern(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    async with client.start_session(snapshot=True) as session:
        await coll.find_one({}, session=session)
        recorder.clear()
        await coll.find({}, session=session).explain()
        (command,) = [event.command for event in recorder.started_events]
        assert "readConcern" not in command


async def test_advance_cluster_time_takes_a_pymongo_typed_sessions_time_and_refuses_others_with_type_error(
    server_uri: str,
) -> None:
    client: MongoClient = MongoClient(server_uri, pymongo_types=True)
    async with client, client.start_session() as first, client.start_session() as second:
        await client.admin.command("ping", session=first)
        cluster_time = first.cluster_time
        assert cluster_time is not None
        assert isinstance(cluster_time["clusterTime"], PyMongoTimestamp)
        second.advance_cluster_time(cluster_time)
        assert second.cluster_time == cluster_time
        for wrong in (1, {}, {"clusterTime": 5}):
            with pytest.raises(TypeError, match="cluster_time"):
                second.advance_cluster_time(wrong)  # type: ignore[arg-type]
        assert second.cluster_time == cluster_time
