"""Find cursors of a client with no command listener, whose batches are decoded document by document as taken
(``Operation.lazy_batch``): every way of reading a cursor gives what a client with a listener (whose replies are
decoded whole) gives, under the compiled and the Python decoder loops."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from mongio.bson import _decoder
from mongio.bson.lazy_batch import DocumentBatch
from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.cursor import CursorType
from tests.support.recorders import CommandRecorder

DOCUMENTS = [{"_id": i, "text": f"document {i}", "tags": [i, {"nested": [i]}]} for i in range(23)]


@pytest.fixture(params=[True, False], ids=["compiled", "python"])
def loops(request: pytest.FixtureRequest) -> Iterator[None]:
    if _decoder.use_speedups(request.param) != request.param:
        pytest.skip("the compiled decoder loops are not built or are switched off")
    try:
        yield
    finally:
        _decoder.use_speedups(True)


@pytest.fixture
async def colls(server_uri: str, loops: None) -> AsyncIterator[tuple[Collection[Any], Collection[Any]]]:
    """The same collection through a client with no listener and through one with a command listener."""
    name = f"lazy_batches_{uuid.uuid4().hex[:12]}"
    async with MongoClient(server_uri) as plain, MongoClient(server_uri, event_listeners=[CommandRecorder()]) as heard:
        await plain[name].items.insert_many(DOCUMENTS)
        try:
            yield plain[name].items, heard[name].items
        finally:
            await plain.drop_database(name)


async def both(colls: tuple[Collection[Any], Collection[Any]], **options: Any) -> tuple[list[Any], list[Any]]:
    lazy, whole = colls
    return await lazy.find({}, sort=[("_id", 1)], **options).to_list(), await whole.find(
        {}, sort=[("_id", 1)], **options
    ).to_list()


async def test_a_plain_client_buffers_a_lazy_batch(colls: tuple[Collection[Any], Collection[Any]]) -> None:
    lazy, whole = colls
    plain_cursor, heard_cursor = lazy.find(batch_size=5), whole.find(batch_size=5)
    await plain_cursor
    await heard_cursor
    assert isinstance(plain_cursor._data, DocumentBatch)
    assert not isinstance(heard_cursor._data, DocumentBatch)  # its events were given the reply whole
    assert len(plain_cursor._data) == len(heard_cursor._data) == 5
    await plain_cursor.close()
    await heard_cursor.close()


@pytest.mark.parametrize(
    "options",
    [{}, {"batch_size": 4}, {"batch_size": 5, "limit": 12}, {"limit": -7}, {"skip": 20, "batch_size": 2}],
    ids=["one-batch", "batches", "limit", "single-batch", "skip"],
)
async def test_to_list_gives_the_same_documents(
    colls: tuple[Collection[Any], Collection[Any]], options: dict[str, Any]
) -> None:
    lazy, whole = await both(colls, **options)
    assert lazy == whole
    assert lazy == DOCUMENTS[options.get("skip", 0) :][: abs(options.get("limit", 0)) or None]


async def test_every_way_of_taking_documents_agrees(colls: tuple[Collection[Any], Collection[Any]]) -> None:
    taken: list[list[Any]] = []
    for coll in colls:
        cursor = coll.find({}, batch_size=6, sort=[("_id", 1)])
        got = [await cursor.next(), await cursor.try_next()]
        got += await cursor.to_list(3)  # within the first batch
        got += await cursor.to_list(4)  # across into the second
        got += [document async for document in cursor]
        assert not cursor.alive
        taken.append(got)
    assert taken[0] == taken[1] == DOCUMENTS


async def test_a_limit_reached_while_the_server_cursor_is_open_keeps_the_rest(
    colls: tuple[Collection[Any], Collection[Any]],
) -> None:
    # limit 8 with batches of 5: the second batch completes the limit, the server cursor is closed, and the
    # documents of that batch not yet taken stay in the cursor.
    for coll in colls:
        cursor = coll.find({}, batch_size=5, limit=8, sort=[("_id", 1)])
        first = [await cursor.next() for _ in range(6)]
        assert first == DOCUMENTS[:6]
        assert [document async for document in cursor] == DOCUMENTS[6:8]


async def test_find_one_through_a_cursor_decodes_its_reply_whole(
    colls: tuple[Collection[Any], Collection[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its one document is wanted at once: a lazy batch would only add the framing's cost.
    lazy, _ = colls
    made: list[int] = []
    scan = DocumentBatch.of.__func__  # type: ignore[attr-defined]

    def recording(cls: type[DocumentBatch], data: bytes, ctx: Any) -> DocumentBatch | None:
        made.append(len(data))
        return scan(cls, data, ctx)  # type: ignore[no-any-return]

    monkeypatch.setattr(DocumentBatch, "of", classmethod(recording))
    assert await lazy.find_one({"_id": 3}, sort=[("_id", -1)], skip=0) == DOCUMENTS[3]
    assert made == []
    assert [document async for document in lazy.find({"_id": 3})] == [DOCUMENTS[3]]  # a cursor's stay lazy
    assert len(made) == 1


async def test_find_one_and_rewind_and_exhaust(colls: tuple[Collection[Any], Collection[Any]]) -> None:
    lazy, whole = colls
    assert await lazy.find_one({"_id": 3}) == await whole.find_one({"_id": 3}) == DOCUMENTS[3]
    assert await lazy.find_one({"_id": 3}, sort=[("_id", -1)], skip=0) == DOCUMENTS[3]  # through a cursor
    cursor = lazy.find({}, batch_size=10, sort=[("_id", 1)])
    assert await cursor.next() == DOCUMENTS[0]
    await cursor.rewind()
    assert await cursor.to_list() == DOCUMENTS
    exhaust = lazy.find({}, batch_size=4, cursor_type=CursorType.EXHAUST, sort=[("_id", 1)])
    assert await exhaust.to_list() == DOCUMENTS


async def test_closing_drops_what_is_buffered(colls: tuple[Collection[Any], Collection[Any]]) -> None:
    cursor = colls[0].find({}, batch_size=10)
    await cursor.next()
    await cursor.close()
    assert await cursor.try_next() is None
    assert await cursor.to_list() == []


async def test_batches_stay_lazy_only_while_the_program_lets_documents_go(
    colls: tuple[Collection[Any], Collection[Any]],
) -> None:
    lazy = colls[0]
    dropping = lazy.find({}, batch_size=5, sort=[("_id", 1)])
    count = 0
    async for document in dropping:
        assert document == DOCUMENTS[count]
        count += 1
        if count == 7:  # within the second batch
            assert isinstance(dropping._data, DocumentBatch) and not dropping._data.kept
    keeping = lazy.find({}, batch_size=5, sort=[("_id", 1)])
    kept = []
    async for document in keeping:
        kept.append(document)
        if len(kept) == 7:  # the first batch showed the documents kept: the second came decoded whole
            assert not isinstance(keeping._data, DocumentBatch)
    assert kept == DOCUMENTS and count == len(DOCUMENTS)
    listed = lazy.find({}, batch_size=5, sort=[("_id", 1)])
    assert await listed.to_list(3) == DOCUMENTS[:3]
    assert not isinstance(listed._data, DocumentBatch)  # to_list keeps every document it takes
    await listed.close()
