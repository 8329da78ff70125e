"""Cursor and CommandCursor against the stand-in executor: batches, getMore pinning, limits, sessions,
closing, abandonment and the builder methods."""

from __future__ import annotations

import asyncio
import copy
import gc
import re
from typing import Any

import pytest

from mongio.bson import RawBSONDocument
from mongio.cursor import CommandCursor, Cursor, RawBatchCommandCursor, RawBatchCursor
from mongio.errors import CursorNotFound, InvalidOperation, OperationFailure
from mongio.execution.executor import Answered
from mongio.gridfs.grid_out import GridOutCursor
from mongio.operations.base import Operation
from mongio.operations.crud import CursorType
from tests.support.fake_client import ADDRESS, CursorServer, FakeClient, FakeSession, documents


def setup(n: int) -> tuple[FakeClient, CursorServer, Any]:
    server = CursorServer(documents(n))
    client = FakeClient(respond=server)
    return client, server, client["db"]["coll"]


async def test_iterates_all_batches_with_getmore_pinned_to_the_answering_server() -> None:
    client, _, coll = setup(7)
    got = [doc["_id"] async for doc in coll.find({}, batch_size=3)]
    assert got == list(range(7))
    assert [c.name for c in client.calls] == ["find", "getMore", "getMore"]
    find, *get_mores = client.calls
    assert find.body["batchSize"] == 3
    assert find.address is None
    for get_more in get_mores:
        assert get_more.address == ADDRESS
        assert get_more.body["collection"] == "coll"
        assert get_more.body["batchSize"] == 3
        assert int(get_more.body["getMore"]) == 1000


async def test_an_empty_sort_given_to_find_sends_no_sort_as_pymongo_does() -> None:
    client, _, coll = setup(2)
    empties: list[Any] = [[], {}, None]
    for empty in empties:
        await coll.find({}, sort=empty).to_list()
    await coll.find({}, sort=[("a", -1)]).to_list()
    assert ["sort" in call.body for call in client.calls] == [False, False, False, True]
    assert client.calls[-1].body["sort"] == {"a": -1}
    with pytest.raises(ValueError, match="sort cannot be empty"):
        coll.find({}).sort([])


def test_a_cursor_cannot_be_indexed() -> None:
    _, _, coll = setup(3)
    cursor = coll.find()
    with pytest.raises(IndexError, match="skip"):
        cursor[1]
    with pytest.raises(IndexError):
        cursor[0:2]


async def test_await_find_fetches_first_batch_and_returns_the_cursor() -> None:
    client, _, coll = setup(5)
    cursor = await coll.find(batch_size=2)
    assert isinstance(cursor, Cursor)
    assert client.calls[-1].name == "find"
    assert cursor.cursor_id not in (None, 0)
    assert cursor.address == ADDRESS
    # awaiting again does not run the query again
    assert await cursor is cursor
    assert len(client.calls) == 1
    assert [d["_id"] for d in await cursor.to_list()] == [0, 1, 2, 3, 4]


async def test_to_list_with_length_leaves_the_rest_in_the_cursor() -> None:
    _, _, coll = setup(6)
    cursor = coll.find(batch_size=4)
    first = await cursor.to_list(3)
    second = await cursor.to_list(2)
    rest = await cursor.to_list()
    assert [d["_id"] for d in first + second + rest] == list(range(6))
    assert [len(first), len(second), len(rest)] == [3, 2, 1]
    with pytest.raises(ValueError):
        await cursor.to_list(0)


async def test_limit_caps_getmore_batch_size() -> None:
    client, _, coll = setup(20)
    got = await coll.find(limit=5, batch_size=2).to_list()
    assert [d["_id"] for d in got] == [0, 1, 2, 3, 4]
    get_mores = [c for c in client.calls if c.name == "getMore"]
    assert [c.body["batchSize"] for c in get_mores] == [2, 1]


async def test_negative_limit_is_a_single_batch() -> None:
    client, _, coll = setup(20)
    got = await coll.find().limit(-4).to_list()
    assert len(got) == 4
    assert client.calls[0].body["singleBatch"] is True
    assert [c.name for c in client.calls] == ["find"]


async def test_implicit_session_lives_until_exhaustion() -> None:
    client, _, coll = setup(5)
    cursor = coll.find(batch_size=2)
    await cursor.next()
    session = client.sessions[0]
    assert session.implicit
    assert client.sessions[0].has_ended is False
    # every command of the cursor uses the same session
    await cursor.to_list()
    assert {id(c.session) for c in client.calls} == {id(session)}
    assert session.has_ended
    assert cursor.cursor_id == 0
    assert not cursor.alive


async def test_single_batch_result_ends_implicit_session_immediately() -> None:
    client, _, coll = setup(2)
    cursor = await coll.find()
    assert client.sessions[0].has_ended
    assert cursor.alive  # documents are still buffered
    await cursor.to_list()
    assert not cursor.alive


def test_a_session_argument_that_is_not_a_session_is_refused_before_anything_runs() -> None:
    client, _, coll = setup(5)
    with pytest.raises(TypeError, match=r"session must be a ClientSession .* not dict"):
        coll.find(session={})
    with pytest.raises(TypeError, match="not dict"):
        coll.aggregate([], {})
    assert client.calls == []


async def test_explicit_session_is_used_and_never_ended() -> None:
    client, _, coll = setup(5)
    explicit = FakeSession(implicit=False)
    await coll.find(batch_size=2, session=explicit).to_list()
    assert client.sessions == []
    assert all(c.session is explicit for c in client.calls)


async def test_close_kills_server_cursor_on_its_server_and_ends_session() -> None:
    client, server, coll = setup(10)
    cursor = await coll.find(batch_size=3)
    cursor_id = cursor.cursor_id
    await cursor.close()
    kill = client.calls[-1]
    assert kill.name == "killCursors"
    assert kill.address == ADDRESS
    assert kill.body == {"killCursors": "coll", "cursors": [cursor_id]}
    assert server.killed == [cursor_id]
    assert client.sessions[0].has_ended
    assert not cursor.alive
    assert await cursor.to_list() == []
    await cursor.close()  # a second close does nothing
    assert [c.name for c in client.calls].count("killCursors") == 1


async def test_async_with_closes() -> None:
    client, server, coll = setup(10)
    async with coll.find(batch_size=2) as cursor:
        await cursor.next()
    assert server.killed == [cursor.cursor_id or server.killed[0]]
    assert client.calls[-1].name == "killCursors"


async def test_exhausted_cursor_is_not_killed() -> None:
    client, _, coll = setup(3)
    async with coll.find(batch_size=2) as cursor:
        await cursor.to_list()
    assert "killCursors" not in [c.name for c in client.calls]


async def test_garbage_collected_open_cursor_goes_to_the_client_hook() -> None:
    client, _, coll = setup(10)
    cursor = await coll.find(batch_size=3)
    cursor_id = cursor.cursor_id
    session = client.sessions[0]
    del cursor
    gc.collect()
    assert client.abandoned == [(ADDRESS, "db.coll", cursor_id, session)]


async def test_garbage_collected_exhausted_or_unrun_cursor_needs_no_cleanup() -> None:
    client, _, coll = setup(3)
    cursor = coll.find()
    await cursor.to_list()
    unrun = coll.find()
    del cursor, unrun
    gc.collect()
    assert client.abandoned == []


async def test_cancelled_getmore_hands_the_cursor_to_the_client() -> None:
    gate = asyncio.Event()
    server = CursorServer(documents(10))
    client = FakeClient(respond=server)
    coll = client["db"]["coll"]
    cursor = await coll.find(batch_size=5)
    original = client._executor.execute

    async def slow_execute(op: Any, session: Any = None, *, address: Any = None, **_: Any) -> Any:
        if op.command_name == "getMore":
            await gate.wait()
        return await original(op, session, address=address)

    client._executor.execute = slow_execute  # type: ignore[method-assign,assignment]
    await cursor.to_list(5)
    task = asyncio.ensure_future(cursor.next())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.abandoned == [(ADDRESS, "db.coll", 1000, client.sessions[0])]
    assert not cursor.alive


async def test_cursor_not_found_is_raised_and_not_killed() -> None:
    client, server, coll = setup(10)
    cursor = await coll.find(batch_size=5)
    await cursor.to_list(5)
    server.open.clear()
    with pytest.raises(CursorNotFound):
        await cursor.next()
    assert "killCursors" not in [c.name for c in client.calls]
    assert client.sessions[0].has_ended
    assert not cursor.alive


async def test_failed_find_ends_the_implicit_session() -> None:
    client = FakeClient(respond=lambda body: {"ok": 0, "code": 2, "errmsg": "bad query"})
    with pytest.raises(OperationFailure):
        await client["db"]["coll"].find({"$bad": 1}).to_list()
    assert client.sessions[0].has_ended


async def test_builder_methods_shape_the_find_command() -> None:
    client, _, coll = setup(3)
    cursor = (
        coll.find({"x": 1}, {"_id": 0})
        .sort("x", -1)
        .skip(1)
        .limit(2)
        .batch_size(5)
        .hint("x_1")
        .max_time_ms(500)
        .comment("why")
        .collation({"locale": "fr"})
        .allow_disk_use(True)
        .min([("x", 0)])
        .max([("x", 9)])
    )
    await cursor.to_list()
    body = client.calls[0].body
    assert body["filter"] == {"x": 1}
    assert body["projection"] == {"_id": 0}
    assert body["sort"] == {"x": -1}
    assert (body["skip"], body["limit"], body["batchSize"]) == (1, 2, 5)
    assert body["hint"] == "x_1"
    assert body["maxTimeMS"] == 500
    assert body["comment"] == "why"
    assert body["collation"] == {"locale": "fr"}
    assert body["allowDiskUse"] is True
    assert (body["min"], body["max"]) == ({"x": 0}, {"x": 9})


async def test_builder_methods_refuse_after_the_cursor_ran() -> None:
    _, _, coll = setup(3)
    cursor = await coll.find()
    with pytest.raises(InvalidOperation):
        cursor.limit(1)


def test_bad_builder_value_leaves_the_cursor_unchanged() -> None:
    client = FakeClient()
    cursor = client["db"]["coll"].find().limit(3)
    with pytest.raises(TypeError):
        cursor.limit("3")  # type: ignore[arg-type]
    assert cursor._spec["limit"] == 3
    with pytest.raises(ValueError):
        cursor.skip(-1)


async def test_tailable_await_cursor_flags_and_empty_batches() -> None:
    batches: list[list[dict[str, Any]]] = [[{"_id": 1}], [], [{"_id": 2}]]
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        field = "firstBatch" if "find" in body else "nextBatch"
        return {"cursor": {"id": 77, "ns": "db.coll", field: batches.pop(0) if batches else []}}

    client = FakeClient(respond=respond)
    cursor = client["db"]["coll"].find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(250)
    assert [d["_id"] async for d in cursor] == [1]  # an empty getMore ends this round
    assert cursor.alive
    assert await cursor.try_next() == {"_id": 2}
    assert await cursor.try_next() is None
    assert seen[0]["tailable"] is True and seen[0]["awaitData"] is True
    assert "maxTimeMS" not in seen[0]
    assert all(body["maxTimeMS"] == 250 for body in seen[1:])
    await cursor.close()


def test_add_option_maps_flags() -> None:
    cursor = FakeClient()["db"]["coll"].find().add_option(2 | 32 | 16)
    assert cursor._spec["cursor_type"] == CursorType.TAILABLE_AWAIT
    assert cursor._spec["no_cursor_timeout"] is True
    cursor.remove_option(32)
    assert cursor._spec["cursor_type"] == CursorType.TAILABLE
    with pytest.raises(InvalidOperation):
        FakeClient()["db"]["coll"].find().add_option(32)


async def test_clone_and_rewind_run_the_query_again() -> None:
    client, _, coll = setup(4)
    cursor = coll.find({"x": 1}, batch_size=3).sort("x")
    first = await cursor.to_list()
    clone = cursor.clone()
    assert [d["_id"] for d in await clone.to_list()] == [d["_id"] for d in first]
    await cursor.rewind()
    assert cursor.alive and cursor.cursor_id is None
    assert len(await cursor.to_list()) == 4
    finds = [c.body for c in client.calls if c.name == "find"]
    assert len(finds) == 3
    assert all(body["sort"] == {"x": 1} for body in finds)


async def test_explain_and_distinct_use_the_cursor_query() -> None:
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"values": [1, 2]} if "distinct" in body else {"queryPlanner": {}}

    client = FakeClient(respond=respond)
    cursor = client["db"]["coll"].find({"x": {"$gt": 0}}).max_time_ms(10)
    assert await cursor.distinct("x") == [1, 2]
    assert seen[0] == {"distinct": "coll", "key": "x", "query": {"x": {"$gt": 0}}, "maxTimeMS": 10}
    plan = await cursor.explain("queryPlanner")
    assert "queryPlanner" in plan
    assert seen[1]["explain"]["find"] == "coll"
    assert seen[1]["verbosity"] == "queryPlanner"


async def test_command_cursor_aggregate_iterates_and_is_awaitable() -> None:
    client, _, coll = setup(5)
    cursor = coll.aggregate([{"$match": {}}], batchSize=2)
    assert isinstance(cursor, CommandCursor)
    assert client.calls == []  # nothing runs before it is awaited or iterated
    cursor = await cursor
    assert client.calls[0].body["cursor"] == {"batchSize": 2}
    assert [d["_id"] async for d in cursor] == list(range(5))
    get_mores = [c for c in client.calls if c.name == "getMore"]
    assert get_mores and all(c.address == ADDRESS and c.body["batchSize"] == 2 for c in get_mores)


async def test_command_cursor_close_kills() -> None:
    client, server, coll = setup(5)
    cursor = await coll.aggregate([], batchSize=1)
    await cursor.close()
    assert server.killed == [1000]
    assert client.calls[-1].address == ADDRESS


async def test_cursor_left_open_at_its_limit_is_killed() -> None:
    sizes: list[int] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if "killCursors" in body:
            return {"cursorsKilled": body["cursors"]}
        size = body.get("batchSize", 2)
        sizes.append(size)
        field = "firstBatch" if "find" in body else "nextBatch"
        return {"cursor": {"id": 9, "ns": "db.coll", field: [{"_id": n} for n in range(size)]}}

    client = FakeClient(respond=respond)
    got = await client["db"]["coll"].find(limit=3, batch_size=2).to_list()
    assert len(got) == 3
    assert sizes == [2, 1]
    assert [c.name for c in client.calls] == ["find", "getMore", "killCursors"]
    assert client.calls[-1].address == ADDRESS
    assert client.sessions[0].has_ended


async def test_cancelled_first_command_hands_the_session_to_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = asyncio.Event()
    client = FakeClient(respond=CursorServer(documents(3)))
    original = client._executor.execute_answered

    async def slow_execute(
        op: Operation[Any],
        session: Any = None,
        *,
        address: Any = None,
        level_timeout: float | None = None,
        pin: Any = None,
    ) -> Answered[Any]:
        await gate.wait()
        return await original(op, session, address=address, level_timeout=level_timeout, pin=pin)

    monkeypatch.setattr(client._executor, "execute_answered", slow_execute)
    cursor = client["db"]["coll"].find()
    task = asyncio.ensure_future(cursor.to_list())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.abandoned == [(None, "", 0, client.sessions[0])]
    assert not cursor.alive


async def test_a_clone_is_made_by_the_constructor_with_every_option_and_the_session() -> None:
    _, _, coll = setup(5)
    session = FakeSession(implicit=False)
    cursor: Cursor[Any] = coll.find(
        {"a": 1}, projection=["x"], skip=1, session=session, timeout_mode="iteration"
    )
    cursor.sort("x", -1).limit(3).add_option(CursorType.TAILABLE_AWAIT).max_await_time_ms(20).comment("c")
    clone = cursor.clone()
    assert type(clone) is Cursor and clone is not cursor
    assert clone._spec == cursor._spec and clone._spec is not cursor._spec
    assert clone.session is session and clone._timeout_mode is cursor._timeout_mode
    assert clone._find_operation().body == cursor._find_operation().body
    assert clone._find_operation().max_await_time_ms == 20
    # The clone checks what the constructor checks: an option that is wrong is refused by both alike.
    cursor._spec["skip"] = -1
    with pytest.raises(ValueError, match="skip must be >= 0"):
        cursor.clone()


def test_the_clones_of_raw_batch_and_gridfs_cursors_keep_their_kind_and_collection() -> None:
    _, _, coll = setup(5)
    raw = coll.find_raw_batches({"a": 1}, batch_size=2)
    raw_clone = raw.clone()
    assert type(raw_clone) is RawBatchCursor and raw_clone.collection is coll
    assert raw_clone._spec == raw._spec and raw_clone._codec_options == raw._codec_options
    files = GridOutCursor(coll, {"filename": "a"}, limit=2)
    files_clone = files.clone()
    assert type(files_clone) is GridOutCursor and files_clone._root_collection is coll
    assert files_clone.collection.full_name == files.collection.full_name == "db.coll.files"
    assert files_clone._spec == files._spec


def test_aggregate_raw_batches_makes_its_cursor_by_its_own_constructor() -> None:
    _, _, coll = setup(5)
    cursor = coll.aggregate_raw_batches([{"$match": {}}], batchSize=2)
    assert type(cursor) is RawBatchCommandCursor
    assert cursor._batch_size == 2 and cursor._codec_options.document_class is RawBSONDocument


@pytest.mark.parametrize(
    ("options", "message"),
    [({"skip": 0.0}, "skip must be an int"), ({"batch_size": False}, "batch_size must be an int")],
)
def test_a_value_equal_to_an_options_default_is_still_checked(options: dict[str, Any], message: str) -> None:
    # The cursor leaves out of its Find only the very objects Find takes by default, not values equal to them.
    _, _, coll = setup(1)
    with pytest.raises(TypeError, match=message):
        coll.find({}, **options)


def test_copy_and_deepcopy_make_unrun_clones_of_the_same_kind() -> None:
    _, _, coll = setup(3)
    query: dict[str, Any] = {"x": {"$in": [1, 2]}, "y": re.compile("^a")}
    cursor = coll.find(query).sort([("x", 1)]).limit(2)
    shallow = copy.copy(cursor)
    deep = copy.deepcopy(cursor)
    assert type(shallow) is type(deep) is Cursor
    assert shallow._spec == deep._spec == cursor._spec
    # The deep copy's filter is its own: changing the original's leaves it as it was.
    query["x"]["$in"].append(3)
    assert deep._spec["filter"]["x"]["$in"] == [1, 2]
    assert shallow._spec["filter"]["x"]["$in"] == [1, 2, 3]
    raw = copy.deepcopy(coll.find_raw_batches({"a": 1}))
    assert type(raw) is RawBatchCursor and raw.collection is coll


async def test_min_and_max_take_pairs_and_need_a_hint_before_anything_is_sent() -> None:
    client, _, coll = setup(3)
    for bound in ({"x": 1}, 10, "x"):
        with pytest.raises(TypeError, match="list or tuple"):
            coll.find().min(bound)
        with pytest.raises(TypeError, match="list or tuple"):
            coll.find().max(bound)
    with pytest.raises(InvalidOperation, match="need a hint"):
        await coll.find().min([("x", 1)]).to_list()
    with pytest.raises(InvalidOperation, match="need a hint"):
        await coll.find().max((("x", 1),)).to_list()
    assert client.calls == []
    await coll.find().min([("x", 1)]).max([("x", 3)]).hint([("x", 1)]).to_list()
    assert (client.calls[0].body["min"], client.calls[0].body["max"]) == ({"x": 1}, {"x": 3})


async def test_an_aggregate_opening_a_change_stream_is_tailable_so_to_list_returns_after_an_empty_batch() -> None:
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        field = "firstBatch" if "aggregate" in body else "nextBatch"
        # The stream ends after a few rounds, so that a cursor which goes on fetching fails rather than hangs.
        return {"cursor": {"id": 55 if len(seen) < 4 else 0, "ns": "db.coll", field: []}}

    client = FakeClient(respond=respond)
    cursor = client["db"]["coll"].aggregate([{"$changeStream": {}}], maxAwaitTimeMS=5)
    assert await cursor.to_list() == []
    # One getMore, not one after another for as long as the stream stays open.
    assert [next(iter(body)) for body in seen] == ["aggregate", "getMore"]
    assert seen[1]["maxTimeMS"] == 5
    assert cursor.alive
    await cursor.close()


@pytest.mark.parametrize("code", [136, 43, 237])
async def test_a_tailable_find_cursor_whose_position_is_lost_ends_without_error(code: int) -> None:
    batches: list[list[dict[str, Any]]] = [[{"_id": 1}], [{"_id": 2}]]

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if not batches:
            # The capped collection rolled over the cursor's position (or the server dropped the cursor).
            return {"ok": 0, "code": code, "errmsg": "CollectionScan died due to failure to restore position"}
        field = "firstBatch" if "find" in body else "nextBatch"
        return {"cursor": {"id": 77, "ns": "db.coll", field: batches.pop(0)}}

    client = FakeClient(respond=respond)
    cursor = client["db"]["coll"].find(cursor_type=CursorType.TAILABLE)
    assert [d["_id"] async for d in cursor] == [1, 2]
    assert await cursor.to_list() == []
    assert not cursor.alive
    assert "killCursors" not in [c.name for c in client.calls]
    assert client.sessions[0].has_ended
    # A cursor that is not tailable still raises the error.
    batches.append([{"_id": 3}])
    plain = client["db"]["coll"].find()
    with pytest.raises(OperationFailure):
        await plain.to_list()
    assert not plain.alive


def test_raw_batch_cursors_cannot_be_indexed() -> None:
    _, _, coll = setup(3)
    with pytest.raises(InvalidOperation, match="cannot be indexed"):
        coll.find_raw_batches()[0]
    with pytest.raises(InvalidOperation, match="cannot be indexed"):
        coll.aggregate_raw_batches([])[0]
