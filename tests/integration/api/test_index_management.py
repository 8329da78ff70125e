"""Index management against the test server: which read and write concern each index command carries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from mongio.events import CommandListener, CommandStartedEvent
from mongio.options.read_concern import ReadConcern
from mongio.options.write_concern import WriteConcern


class Started(CommandListener):
    def __init__(self) -> None:
        self.commands: list[dict[str, Any]] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.commands.append(dict(event.command))

    def last(self, name: str) -> dict[str, Any]:
        return next(command for command in reversed(self.commands) if name in command)


@pytest.fixture
async def setup(server_uri: str) -> AsyncIterator[tuple[MongoClient, Started, str]]:
    started = Started()
    async with MongoClient(server_uri, event_listeners=[started]) as client:
        name = f"indexes_{uuid.uuid4().hex[:12]}"
        yield client, started, name
        await client.drop_database(name)


async def run_search_index_helpers(coll: Any, session: Any = None) -> None:
    # The test server is not Atlas: each command fails, after it was sent as the driver built it.
    definition = {"mappings": {"dynamic": True}}
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: coll.create_search_index({"definition": definition}, session=session),
        lambda: coll.create_search_indexes([{"definition": definition}], session=session),
        lambda: coll.update_search_index("s", definition, session=session),
        lambda: coll.drop_search_index("s", session=session),
        lambda: coll.list_search_indexes("s", session=session, batchSize=5, maxTimeMS=1000).to_list(),
    ]
    for call in calls:
        try:
            await call()
        except OperationFailure:
            pass


SEARCH_COMMANDS = ("createSearchIndexes", "updateSearchIndex", "dropSearchIndex", "aggregate")


async def test_search_index_commands_carry_no_read_or_write_concern(
    setup: tuple[MongoClient, Started, str],
) -> None:
    """Index management, Search Indexes / Where are read concern and write concern?: the search index
    helpers send neither readConcern nor writeConcern, whatever the collection's concerns are, and
    listSearchIndexes still takes the aggregation options."""
    client, started, name = setup
    coll = client[name].get_collection(
        "c", read_concern=ReadConcern("majority"), write_concern=WriteConcern(w="majority", wtimeout=5000)
    )
    await coll.insert_one({"x": 1})
    started.commands.clear()
    await run_search_index_helpers(coll)
    sent = [command for command in started.commands if next(iter(command)) in SEARCH_COMMANDS]
    assert [next(iter(command)) for command in sent] == [
        "createSearchIndexes",
        "createSearchIndexes",
        "updateSearchIndex",
        "dropSearchIndex",
        "aggregate",
    ]
    for command in sent:
        assert "readConcern" not in command and "writeConcern" not in command, command
    listing = started.last("aggregate")
    assert listing["pipeline"] == [{"$listSearchIndexes": {"name": "s"}}]
    assert listing["cursor"] == {"batchSize": 5} and listing["maxTimeMS"] == 1000


async def test_search_index_commands_in_a_causally_consistent_session(
    setup: tuple[MongoClient, Started, str],
) -> None:
    """Index management, Where are read concern and write concern?: a causally consistent session whose
    operation time is known adds no afterClusterTime read concern to the search index commands."""
    client, started, name = setup
    coll = client[name]["c"]
    async with client.start_session(causal_consistency=True) as session:
        await coll.insert_one({"x": 1}, session=session)
        assert session.operation_time is not None
        started.commands.clear()
        await run_search_index_helpers(coll, session)
    sent = [command for command in started.commands if next(iter(command)) in SEARCH_COMMANDS]
    assert len(sent) == 5
    assert all("readConcern" not in command for command in sent)


async def test_index_commands_take_the_write_concern_and_no_read_concern(
    setup: tuple[MongoClient, Started, str],
) -> None:
    """Index management, Q&A "Where is write concern?": createIndexes and dropIndexes carry the collection's
    write concern; listIndexes carries no read concern."""
    client, started, name = setup
    coll = client[name].get_collection(
        "c", read_concern=ReadConcern("majority"), write_concern=WriteConcern(w="majority", wtimeout=5000)
    )
    await coll.create_index("x")
    await coll.list_indexes().to_list()
    await coll.drop_index("x_1")
    await coll.drop_indexes()
    concern = {"w": "majority", "wtimeout": 5000}
    assert started.last("createIndexes")["writeConcern"] == concern
    dropped = [command for command in started.commands if "dropIndexes" in command]
    assert [command["index"] for command in dropped] == ["x_1", "*"]
    assert all(command["writeConcern"] == concern for command in dropped)
    assert "readConcern" not in started.last("listIndexes")


async def test_dropping_indexes_of_a_missing_collection_is_not_an_error(
    setup: tuple[MongoClient, Started, str],
) -> None:
    """As PyMongo: the server's "ns not found" (26) is ignored by drop_index and drop_indexes, which are sent
    anyway; any other failure (an index that does not exist) is still raised."""
    client, started, name = setup
    missing = client[name]["missing"]
    await missing.drop_indexes()
    await missing.drop_index("x_1")
    await missing.drop_index([("y", -1)])
    dropped = [command["index"] for command in started.commands if "dropIndexes" in command]
    assert dropped == ["*", "x_1", "y_-1"]
    existing = client[name]["existing"]
    await existing.insert_one({})
    with pytest.raises(OperationFailure) as raised:
        await existing.drop_index("x_1")
    assert raised.value.code == 27
