"""The change streams specification's prose tests that one replica-set member can run, plus the stream
surviving dropped connections and cancelled waits without losing or repeating a change.

Most tests run against the test server (a one-member replica set) with ``failCommand``; the ones that need a
reply no real server sends (a change without its ``_id``, an old wire version) use the loopback peer.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest

from mongio.change_stream import (
    ChangeStream,
    ClusterChangeStream,
    CollectionChangeStream,
    DatabaseChangeStream,
)
from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.errors import InvalidOperation, MongioError, OperationFailure
from mongio.execution.deadline import timeout
from mongio.options.read_preference import PrimaryPreferred, Secondary, SecondaryPreferred
from tests.support.loopback_peer import CLOSE, LoopbackPeer, Request
from tests.support.recorders import CommandRecorder

_RESUMABLE = ["ResumableChangeStreamError"]


@pytest.fixture
async def helper(server_uri: str) -> AsyncIterator[MongoClient]:
    """A second client for writes and fail points, whose commands the recorder does not see."""
    async with MongoClient(server_uri) as client:
        yield client
        await fail_point(client, "off")


@pytest.fixture
async def names(helper: MongoClient) -> AsyncIterator[tuple[str, str]]:
    db_name = f"cs_{uuid.uuid4().hex[:12]}"
    await helper[db_name].create_collection("changes")
    yield db_name, "changes"
    await helper.drop_database(db_name)


@pytest.fixture
def coll(client: MongoClient, names: tuple[str, str]) -> Collection[Any]:
    return client[names[0]][names[1]]


@pytest.fixture
def other(helper: MongoClient, names: tuple[str, str]) -> Collection[Any]:
    return helper[names[0]][names[1]]


async def fail_point(client: MongoClient, mode: Any, **data: Any) -> None:
    command: dict[str, Any] = {"configureFailPoint": "failCommand", "mode": mode}
    if data:
        command["data"] = data
    await client.admin.command(command)


def stage(command: Mapping[str, Any]) -> dict[str, Any]:
    first = command["pipeline"][0]
    assert list(first) == ["$changeStream"]
    return dict(first["$changeStream"])


async def next_change(stream: ChangeStream[Any]) -> Any:
    with anyio.fail_after(30):
        return await stream.next()


# -- watch() on each target ------------------------------------------------------------------------------------


async def test_watch_targets_send_the_spec_commands(
    client: MongoClient, coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    async with await coll.watch() as on_collection:
        assert isinstance(on_collection, CollectionChangeStream)
    async with await coll.database.watch() as on_database:
        assert isinstance(on_database, DatabaseChangeStream)
    async with await client.watch() as on_cluster:
        assert isinstance(on_cluster, ClusterChangeStream)
    collection_cmd, database_cmd, cluster_cmd = recorder.commands("aggregate")
    assert collection_cmd["aggregate"] == coll.name and collection_cmd["$db"] == coll.database.name
    assert database_cmd["aggregate"] == 1 and database_cmd["$db"] == coll.database.name
    assert cluster_cmd["aggregate"] == 1 and cluster_cmd["$db"] == "admin"
    assert stage(collection_cmd) == {} and stage(database_cmd) == {}
    assert stage(cluster_cmd) == {"allChangesForCluster": True}
    # close() killed each server cursor.
    assert len(recorder.commands("killCursors")) == 3


async def test_database_stream_uses_the_reply_namespace_for_get_more(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    async with await coll.database.watch() as stream:
        await other.insert_one({"x": 1})
        change = await next_change(stream)
    assert change["ns"] == {"db": coll.database.name, "coll": coll.name}
    namespace = recorder.replies("aggregate")[0]["cursor"]["ns"]
    get_more = recorder.commands("getMore")[0]
    assert get_more["collection"] == namespace.partition(".")[2]


# -- prose 1, 11, 13: the cached resume token ------------------------------------------------------------------


def expected_tokens(recorder: CommandRecorder) -> list[Any]:
    """For every change the server sent, the resume token the stream must hold after returning it: the
    change's _id, or the batch's postBatchResumeToken for the last change of a batch."""
    tokens: list[Any] = []
    for reply in recorder.replies("aggregate", "getMore"):
        cursor = reply["cursor"]
        batch = cursor.get("firstBatch", cursor.get("nextBatch", []))
        for index, change in enumerate(batch):
            last = index == len(batch) - 1
            tokens.append(cursor["postBatchResumeToken"] if last else change["_id"])
    return tokens


async def test_resume_token_tracks_every_change_and_empty_batch(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    stream = await coll.watch([{"$match": {"fullDocument.x": {"$lt": 5}}}], max_await_time_ms=50)
    async with stream:
        first_batch = recorder.replies("aggregate")[0]["cursor"]
        assert first_batch["firstBatch"] == []
        # An empty first batch: the token is the batch's postBatchResumeToken (prose 11).
        assert stream.resume_token == first_batch["postBatchResumeToken"]
        for i in range(8):
            await other.insert_one({"x": i})
        returned: list[Any] = []
        while len(returned) < 5:
            change = await stream.try_next()
            if change is None:
                continue
            returned.append(change)
            # Mid-batch: the change's _id (prose 13); the last of a batch: postBatchResumeToken (prose 11).
            assert stream.resume_token == expected_tokens(recorder)[len(returned) - 1]
        # An empty getMore moves the token to the new postBatchResumeToken too (prose 11).
        assert await stream.try_next() is None
        last_reply = recorder.replies("getMore")[-1]["cursor"]
        assert last_reply["nextBatch"] == []
        assert stream.resume_token == last_reply["postBatchResumeToken"]


async def test_resume_token_prefers_the_batch_token_over_the_last_change() -> None:
    """With a postBatchResumeToken past the batch's last change (the server scanned further than what
    matched; the test server does not report that, so a peer does), the last change of a batch leaves the
    batch's token, the others their own _id, and an empty batch its token."""
    killed: list[Request] = []
    batch = [{"_id": {"_data": "c1"}, "n": 1}, {"_id": {"_data": "c2"}, "n": 2}]
    get_more = [
        {
            "ok": 1,
            "cursor": {"id": 7, "ns": "db.coll", "nextBatch": batch, "postBatchResumeToken": {"_data": "p1"}},
        },
        {
            "ok": 1,
            "cursor": {"id": 7, "ns": "db.coll", "nextBatch": [], "postBatchResumeToken": {"_data": "p2"}},
        },
    ]
    handler = change_stream_peer_handler([], get_more, killed, {"_data": "p0"})
    async with LoopbackPeer(handler) as peer, MongoClient(peer.uri, directConnection=True) as client:
        stream = await client.db.coll.watch()
        assert stream.resume_token == {"_data": "p0"}
        change = await stream.try_next()
        assert change is not None and change["n"] == 1
        assert stream.resume_token == {"_data": "c1"}
        change = await stream.try_next()
        assert change is not None and change["n"] == 2
        assert stream.resume_token == {"_data": "p1"}
        assert await stream.try_next() is None
        assert stream.resume_token == {"_data": "p2"}
        await stream.close()
        assert len(killed) == 1


async def test_resume_token_before_iterating_is_the_start_option(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    """Prose 14: with a non-empty first batch not yet iterated, the token is startAfter, resumeAfter, or
    nothing."""
    async with await coll.watch() as stream:
        await other.insert_one({"x": 0})
        token = (await next_change(stream))["_id"]
    await other.insert_many([{"x": 1}, {"x": 2}])
    for option in ("start_after", "resume_after"):
        recorder.clear()
        async with await coll.watch(**{option: token}) as stream:
            assert len(recorder.replies("aggregate")[0]["cursor"]["firstBatch"]) == 2
            assert stream.resume_token == token
            assert [c["fullDocument"]["x"] for c in await stream_changes(stream, 2)] == [1, 2]


async def test_resume_token_before_iterating_without_start_option_is_empty(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    """Prose 14, third case: a first batch that is not empty (start_at_operation_time gives one) leaves no
    token until a change is returned (its postBatchResumeToken belongs to the batch's last change)."""
    await other.insert_one({"x": 0})
    start = (await coll.database.command("ping"))["operationTime"]
    await other.insert_one({"x": 1})
    async with await coll.watch(start_at_operation_time=start) as stream:
        cursor = recorder.replies("aggregate")[0]["cursor"]
        assert len(cursor["firstBatch"]) >= 1
        assert stream.resume_token is None


async def stream_changes(stream: ChangeStream[Any], count: int) -> list[Any]:
    return [await next_change(stream) for _ in range(count)]


# -- prose 2: a missing resume token ----------------------------------------------------------------------------


async def test_server_error_when_id_is_projected_out(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    stream = await coll.watch([{"$project": {"_id": 0}}])
    await other.insert_one({"x": 1})
    with pytest.raises(OperationFailure) as raised:
        await next_change(stream)
    assert raised.value.code == 280
    assert not stream.alive
    # Not resumed: the error has no resumable label.
    assert len(recorder.commands("aggregate")) == 1


def change_stream_peer_handler(
    first_batch: list[dict[str, Any]], get_more: list[Any], killed: list[Request], token: Any = None
) -> Any:
    """A fake server: aggregate opens cursor 7 with ``first_batch`` (and ``token`` as its
    postBatchResumeToken); each getMore answers with the next reply of ``get_more``."""

    def handler(request: Request) -> Any:
        name = request.command_name
        if name == "aggregate":
            cursor: dict[str, Any] = {"id": 7, "ns": "db.coll", "firstBatch": first_batch}
            if token is not None:
                cursor["postBatchResumeToken"] = token
            return {"ok": 1, "cursor": cursor}
        if name == "getMore":
            return get_more.pop(0)
        if name == "killCursors":
            killed.append(request)
            return {"ok": 1, "cursorsKilled": list(request.document["cursors"])}
        return None

    return handler


async def test_driver_raises_when_a_change_has_no_resume_token() -> None:
    killed: list[Request] = []
    handler = change_stream_peer_handler([{"_id": {"_data": "01"}, "n": 1}, {"n": 2}], [], killed)
    async with LoopbackPeer(handler) as peer, MongoClient(peer.uri, directConnection=True) as client:
        stream = await client.db.coll.watch()
        assert (await stream.next())["n"] == 1
        with pytest.raises(InvalidOperation, match="resume token is missing"):
            await stream.next()
        assert not stream.alive
        assert len(killed) == 1 and killed[0].document["cursors"] == [7]
        with pytest.raises(StopAsyncIteration):
            await stream.next()


# -- prose 3, 4, 6: resuming ------------------------------------------------------------------------------------


async def test_resumes_once_with_the_same_pipeline_options_and_session(
    coll: Collection[Any], other: Collection[Any], helper: MongoClient, recorder: CommandRecorder
) -> None:
    pipeline = [{"$match": {"operationType": "insert"}}]
    stream = await coll.watch(
        pipeline, full_document="updateLookup", batch_size=5, comment="resume-me", max_await_time_ms=500
    )
    async with stream:
        await other.insert_one({"x": 1})
        assert (await next_change(stream))["fullDocument"]["x"] == 1
        token = stream.resume_token
        await fail_point(helper, {"times": 1}, failCommands=["getMore"], errorCode=6, errorLabels=_RESUMABLE)
        await other.insert_one({"x": 2})
        assert (await next_change(stream))["fullDocument"]["x"] == 2
    first, resumed = recorder.commands("aggregate")
    assert stage(resumed) == {**stage(first), "resumeAfter": token}
    assert resumed["pipeline"][1:] == first["pipeline"][1:] == pipeline
    for key in ("cursor", "comment", "aggregate", "$db"):
        assert resumed[key] == first[key]
    get_mores = recorder.commands("getMore")
    assert all(
        g["batchSize"] == 5 and g["maxTimeMS"] == 500 and g["comment"] == "resume-me" for g in get_mores
    )
    assert len({str(c["lsid"]) for c in (first, resumed, *get_mores)}) == 1


async def test_no_resume_on_an_aggregate_error(
    server_uri: str, helper: MongoClient, names: tuple[str, str]
) -> None:
    recorder = CommandRecorder()
    async with MongoClient(server_uri, event_listeners=[recorder], retryReads=False) as client:
        await fail_point(
            helper, {"times": 1}, failCommands=["aggregate"], errorCode=43, errorLabels=_RESUMABLE
        )
        with pytest.raises(OperationFailure) as raised:
            await client[names[0]][names[1]].watch()
        assert raised.value.code == 43
        assert len(recorder.commands("aggregate")) == 1


async def test_no_resume_on_an_unlabelled_error(
    coll: Collection[Any], other: Collection[Any], helper: MongoClient, recorder: CommandRecorder
) -> None:
    stream = await coll.watch()
    await fail_point(helper, {"times": 1}, failCommands=["getMore"], errorCode=6)
    await other.insert_one({"x": 1})
    with pytest.raises(OperationFailure) as raised:
        await next_change(stream)
    assert raised.value.code == 6
    assert not stream.alive
    assert len(recorder.commands("aggregate")) == 1


async def test_resume_selects_a_server_with_the_initial_read_preference(
    coll: Collection[Any], other: Collection[Any], helper: MongoClient, recorder: CommandRecorder
) -> None:
    preferring = coll.with_options(read_preference=PrimaryPreferred())
    async with await preferring.watch() as stream:
        await fail_point(helper, {"times": 1}, failCommands=["getMore"], closeConnection=True)
        await other.insert_one({"x": 1})
        assert (await next_change(stream))["fullDocument"]["x"] == 1
    aggregates = recorder.commands("aggregate")
    assert len(aggregates) == 2
    assert all(a["$readPreference"] == {"mode": "primaryPreferred"} for a in aggregates)


async def test_resume_after_a_resume_keeps_going(
    coll: Collection[Any], other: Collection[Any], helper: MongoClient, recorder: CommandRecorder
) -> None:
    """Each resume that opens a cursor allows the next one, with no change in between."""
    async with await coll.watch() as stream:
        await fail_point(helper, {"times": 3}, failCommands=["getMore"], errorCode=43)
        for _ in range(3):
            assert await stream.try_next() is None
            assert stream.alive
        await other.insert_one({"x": 1})
        assert (await next_change(stream))["fullDocument"]["x"] == 1
    assert len(recorder.commands("aggregate")) == 4
    assert len(recorder.failures("getMore")) == 3


async def test_code_list_decides_before_wire_version_9() -> None:
    """Below wire version 9 the code list decides: code 6 resumes without any label."""
    killed: list[Request] = []
    get_more: list[Any] = [{"ok": 0, "code": 6, "errmsg": "host unreachable"}]
    handler = change_stream_peer_handler([], get_more, killed)
    async with (
        LoopbackPeer(handler, max_wire_version=8) as peer,
        MongoClient(peer.uri, directConnection=True) as client,
    ):
        stream = await client.db.coll.watch()
        assert await stream.try_next() is None
        assert stream.alive
        assert len(peer.commands("aggregate")) == 2
        assert len(killed) == 1
        await stream.close()


# -- prose 7, 8 -------------------------------------------------------------------------------------------------


async def test_empty_first_batch_keeps_the_cursor_open(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    stream = await coll.watch()
    cursor = recorder.replies("aggregate")[0]["cursor"]
    assert cursor["firstBatch"] == [] and cursor["id"] != 0
    assert stream.alive
    assert recorder.commands("killCursors") == []
    await other.insert_one({"x": 1})
    assert (await next_change(stream))["fullDocument"]["x"] == 1
    assert recorder.commands("getMore")[0]["getMore"] == cursor["id"]
    await stream.close()
    assert [k["cursors"] for k in recorder.commands("killCursors")] == [[cursor["id"]]]


async def test_kill_cursors_failure_during_resume_is_not_raised(
    coll: Collection[Any], other: Collection[Any], helper: MongoClient, recorder: CommandRecorder
) -> None:
    async with await coll.watch() as stream:
        await fail_point(helper, {"times": 2}, failCommands=["getMore", "killCursors"], closeConnection=True)
        await other.insert_one({"x": 1})
        assert (await next_change(stream))["fullDocument"]["x"] == 1
    assert len(recorder.failures("killCursors")) == 1
    assert len(recorder.commands("aggregate")) == 2


# -- prose 17, 18: startAfter on resume ------------------------------------------------------------------------


async def test_start_after_is_kept_until_a_change_is_returned(
    coll: Collection[Any], other: Collection[Any], helper: MongoClient, recorder: CommandRecorder
) -> None:
    async with await coll.watch() as stream:
        await other.insert_one({"x": 0})
        token = (await next_change(stream))["_id"]
    recorder.clear()
    # The first batch would hold nothing newer: a resume before any change keeps startAfter (prose 17).
    stream = await coll.watch(start_after=token, max_await_time_ms=50)
    async with stream:
        await fail_point(helper, {"times": 1}, failCommands=["getMore"], errorCode=43)
        assert await stream.try_next() is None
        first, resumed = recorder.commands("aggregate")
        assert stage(first) == {"startAfter": token}
        assert "resumeAfter" not in stage(resumed) and "startAfter" in stage(resumed)
        # After a change, a resume uses resumeAfter (prose 18).
        await other.insert_one({"x": 1})
        change = await next_change(stream)
        token = stream.resume_token
        await fail_point(helper, {"times": 1}, failCommands=["getMore"], errorCode=43)
        assert await stream.try_next() is None
        last = recorder.commands("aggregate")[-1]
        assert stage(last) == {"resumeAfter": token}
        assert change["fullDocument"]["x"] == 1


# -- prose 19: large events split ------------------------------------------------------------------------------


async def test_large_events_are_split(
    client: MongoClient, helper: MongoClient, names: tuple[str, str]
) -> None:
    database = client[names[0]]
    await database.create_collection("large", changeStreamPreAndPostImages={"enabled": True})
    coll = database.large
    await coll.insert_one({"value": "q" * 10 * 1024 * 1024})
    pipeline: list[dict[str, Any]] = [{"$changeStreamSplitLargeEvent": {}}]
    async with await coll.watch(pipeline, full_document_before_change="required") as stream:
        await coll.update_one({}, {"$set": {"value": "z" * 10 * 1024 * 1024}})
        fragments = await stream_changes(stream, 2)
    assert [f["splitEvent"] for f in fragments] == [{"fragment": 1, "of": 2}, {"fragment": 2, "of": 2}]


# -- surviving dropped connections and cancelled waits ---------------------------------------------------------


async def test_every_change_exactly_once_in_order_across_closed_connections(
    server_uri: str,
    coll: Collection[Any],
    other: Collection[Any],
    helper: MongoClient,
    recorder: CommandRecorder,
) -> None:
    """The server closes the stream's connection in the middle of a getMore, several times, while changes
    keep coming: each change arrives once, in the order it was made."""
    total = 30
    async with await coll.watch(batch_size=4) as stream:
        received: list[int] = []
        await other.insert_many([{"x": i} for i in range(10)])
        await fail_point(helper, {"times": 3}, failCommands=["getMore"], closeConnection=True)
        for _ in range(6):
            received.append((await next_change(stream))["fullDocument"]["x"])
        await other.insert_many([{"x": i} for i in range(10, 20)])
        await fail_point(helper, {"times": 2}, failCommands=["getMore"], closeConnection=True)
        for _ in range(10):
            received.append((await next_change(stream))["fullDocument"]["x"])
        # Then the resuming aggregate's connection is dropped too (retried as a retryable read).
        await fail_point(helper, {"times": 2}, failCommands=["getMore", "aggregate"], closeConnection=True)
        for i in range(20, total):
            await other.insert_one({"x": i})
        while len(received) < total:
            received.append((await next_change(stream))["fullDocument"]["x"])
        assert await stream.try_next() is None
    assert received == list(range(total))
    aggregates = recorder.commands("aggregate")
    assert len(recorder.failures("aggregate")) == 1
    resumes = [stage(a) for a in aggregates[1:]]
    # One resume per dropped getMore (the second fail point replaced what was left of the first), plus the
    # retry of the dropped aggregate.
    assert len(resumes) == len(recorder.failures("getMore")) + 1 >= 5
    assert all("resumeAfter" in s for s in resumes)


async def test_a_cancelled_wait_loses_no_change(
    coll: Collection[Any], other: Collection[Any], recorder: CommandRecorder
) -> None:
    async with await coll.watch(max_await_time_ms=2000) as stream:
        abandoned = recorder.replies("aggregate")[0]["cursor"]["id"]
        await other.insert_one({"x": 1})
        assert (await next_change(stream))["fullDocument"]["x"] == 1
        # Nothing happens: the wait is cancelled in the middle of its getMore.
        with pytest.raises(TimeoutError):
            with anyio.fail_after(0.2):
                await stream.next()
        assert stream.alive
        await other.insert_many([{"x": 2}, {"x": 3}])
        assert [c["fullDocument"]["x"] for c in await stream_changes(stream, 2)] == [2, 3]
    # The given-up cursor was killed; the stream went on from its resume token.
    killed = [k["cursors"] for k in recorder.commands("killCursors")]
    assert [abandoned] in killed
    assert "resumeAfter" in stage(recorder.commands("aggregate")[-1])


# -- client-side operation timeout -----------------------------------------------------------------------------


async def test_a_timed_out_next_leaves_the_stream_usable(
    server_uri: str, names: tuple[str, str], other: Collection[Any], helper: MongoClient
) -> None:
    recorder = CommandRecorder()
    async with MongoClient(server_uri, event_listeners=[recorder], timeoutMS=1000) as client:
        stream = await client[names[0]][names[1]].watch(max_await_time_ms=50)
        await fail_point(
            helper, {"times": 1}, failCommands=["getMore"], blockConnection=True, blockTimeMS=2500
        )
        with pytest.raises(MongioError) as raised:
            await stream.next()
        assert raised.value.timeout  # a timeout error
        assert stream.alive
        await other.insert_one({"x": 1})
        assert (await stream.next())["fullDocument"]["x"] == 1
        await stream.close()
    aggregates = recorder.commands("aggregate")
    assert len(aggregates) == 2 and "maxTimeMS" in aggregates[0]
    assert "resumeAfter" in stage(aggregates[1])


async def test_max_await_time_must_be_shorter_than_the_timeout(
    coll: Collection[Any], recorder: CommandRecorder
) -> None:
    with timeout(0.5), pytest.raises(InvalidOperation, match="max_await_time_ms"):
        await coll.watch(max_await_time_ms=500)
    assert recorder.commands("aggregate") == []


# -- prose 6 on a two-member replica set of loopback peers ------------------------------------------------------


async def test_resume_selects_anew_with_the_initial_read_preference() -> None:
    """A stream reading from the secondary loses it: the resume selects a server again with the stream's
    secondaryPreferred read preference (the primary, now), and the old cursor is killed on no other server."""
    secondary_down = False
    hosts: list[str] = []

    def member(primary: bool) -> Any:
        def handler(request: Request) -> Any:
            name = request.command_name
            if not primary and secondary_down:
                return CLOSE
            if name.lower() in ("hello", "ismaster"):
                return {
                    "ok": 1,
                    "helloOk": True,
                    "isWritablePrimary": primary,
                    "secondary": not primary,
                    "setName": "rs",
                    "hosts": hosts,
                    "me": hosts[0 if primary else 1],
                    "minWireVersion": 0,
                    "maxWireVersion": 21,
                    "maxBsonObjectSize": 16 * 1024 * 1024,
                    "maxMessageSizeBytes": 48_000_000,
                    "maxWriteBatchSize": 100_000,
                    "logicalSessionTimeoutMinutes": 30,
                }
            if name == "aggregate":
                token = {"_data": "primary" if primary else "secondary"}
                cursor: dict[str, Any] = {"id": 11 if primary else 22, "ns": "db.coll", "firstBatch": []}
                cursor["postBatchResumeToken"] = token
                return {"ok": 1, "cursor": cursor}
            if name == "getMore":
                return CLOSE
            if name in ("killCursors", "ping"):
                return {"ok": 1}
            return None

        return handler

    async with LoopbackPeer(member(True)) as primary, LoopbackPeer(member(False)) as secondary:
        hosts.extend(f"{host}:{port}" for host, port in (primary.address, secondary.address))
        uri = f"mongodb://{hosts[0]},{hosts[1]}/?replicaSet=rs"
        async with MongoClient(uri) as client:
            # Until the secondary is discovered, secondaryPreferred would pick the primary: wait for it.
            await client.db.command("ping", read_preference=Secondary())
            coll = client.db.get_collection("coll", read_preference=SecondaryPreferred())
            stream = await coll.watch()
            assert len(secondary.commands("aggregate")) == 1 and primary.commands("aggregate") == []
            secondary_down = True
            assert await stream.try_next() is None
            resumed = primary.commands("aggregate")
            assert len(resumed) == 1
            assert resumed[0].document["$readPreference"] == {"mode": "secondaryPreferred"}
            assert stage(resumed[0].document) == {"resumeAfter": {"_data": "secondary"}}
            # killCursors for the lost cursor went to its own server only (where it could not arrive).
            assert primary.commands("killCursors") == []
            await stream.close()
            assert [k.document["cursors"] for k in primary.commands("killCursors")] == [[11]]


# -- a stream dropped without closing --------------------------------------------------------------------------


async def test_a_dropped_stream_gives_back_its_implicit_session(coll: Collection[Any]) -> None:
    stream = await coll.watch()
    session = stream._session
    assert session is not None and not session.has_ended
    del stream
    gc.collect()
    assert session.has_ended


async def test_a_dropped_stream_leaves_an_explicit_session_alone(
    client: MongoClient, coll: Collection[Any]
) -> None:
    async with client.start_session() as session:
        stream = await coll.watch(session=session)
        del stream
        gc.collect()
        assert not session.has_ended


async def test_a_stream_refused_when_made_has_nothing_to_give_back(client: MongoClient) -> None:
    # The finalizer of a stream whose arguments were refused runs on an object none of whose fields were set.
    stream = ChangeStream.__new__(ChangeStream)
    stream._abandon_session()
    with pytest.raises(TypeError, match="pipeline must be a list"):
        ChangeStream(client, "db", "coll", pipeline="not a list", codec_options=client.codec_options)  # type: ignore[arg-type]
