"""Write concerns of the helpers for commands that write, against the test server (read and write concern
specification, "Other commands that write" and "Errors")."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.database import Database
from mongio.errors import WriteConcernError
from mongio.options.write_concern import WriteConcern
from tests.support.recorders import CommandRecorder


@pytest.fixture
async def db(client: MongoClient) -> AsyncIterator[Database[Any]]:
    name = f"wc_helpers_{uuid.uuid4().hex[:12]}"
    database = client[name]
    await database.create_collection("source")
    await database.source.insert_one({"_id": 1})
    yield database
    await client.drop_database(name)


Helper = Callable[[MongoClient, Database[Any]], Awaitable[Any]]


async def _create(client: MongoClient, db: Database[Any]) -> Any:
    return await db.create_collection("made")


async def _drop(client: MongoClient, db: Database[Any]) -> Any:
    return await db.drop_collection("source")


async def _rename(client: MongoClient, db: Database[Any]) -> Any:
    return await db.source.rename("renamed")


async def _drop_database(client: MongoClient, db: Database[Any]) -> Any:
    return await client.drop_database(db.name)


async def _aggregate_out(client: MongoClient, db: Database[Any]) -> Any:
    return await db.source.aggregate([{"$out": "copied"}]).to_list()


HELPERS: list[tuple[str, Helper]] = [
    ("create", _create),
    ("drop", _drop),
    ("renameCollection", _rename),
    ("dropDatabase", _drop_database),
    ("aggregate", _aggregate_out),
]


async def _fail_with_write_concern_error(client: MongoClient, command: str) -> None:
    await client.admin.command(
        {
            "configureFailPoint": "failCommand",
            "mode": {"times": 1},
            "data": {
                "failCommands": [command],
                "writeConcernError": {"code": 64, "errmsg": "waiting for replication timed out"},
            },
        }
    )


@pytest.mark.parametrize(("command", "helper"), HELPERS, ids=[name for name, _ in HELPERS])
async def test_write_concern_error_is_raised_by_helpers_that_write(
    client: MongoClient, db: Database[Any], command: str, helper: Helper
) -> None:
    """Read and write concern spec, Errors: the helper of a command that writes (create, drop,
    renameCollection, dropDatabase, aggregate with $out) reports the writeConcernError of an ok: 1 reply as a
    WriteConcernError instead of returning as if the write concern had been met."""
    await _fail_with_write_concern_error(client, command)
    try:
        with pytest.raises(WriteConcernError) as raised:
            await helper(client, db)
    finally:
        await client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})
    assert raised.value.code == 64


DATABASE_HELPERS = [(name, helper) for name, helper in HELPERS if name != "dropDatabase"]


@pytest.mark.parametrize(("command", "helper"), DATABASE_HELPERS, ids=[name for name, _ in DATABASE_HELPERS])
async def test_helpers_that_write_send_the_inherited_write_concern(
    client: MongoClient, db: Database[Any], recorder: CommandRecorder, command: str, helper: Helper
) -> None:
    """Read and write concern spec, Other commands that write: helpers that apply the write concern inherited
    from the client or database include it on the wire, and send none for the server default."""
    majority = WriteConcern(w="majority", wtimeout=5000)
    inheriting = client.get_database(db.name, write_concern=majority)
    await helper(client, inheriting)
    assert recorder.last(command)["writeConcern"] == majority.document


async def test_drop_database_sends_the_clients_write_concern(server_uri: str, recorder: CommandRecorder) -> None:
    """Read and write concern spec, Other commands that write: dropDatabase carries the client's write concern,
    and a command sent with the server's default write concern carries none."""
    async with MongoClient(server_uri, w="majority", event_listeners=[recorder]) as client:
        name = f"wc_drop_{uuid.uuid4().hex[:12]}"
        await client[name].scratch.insert_one({})
        await client.drop_database(name)
        assert recorder.last("dropDatabase")["writeConcern"] == {"w": "majority"}
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        name = f"wc_drop_{uuid.uuid4().hex[:12]}"
        await client[name].scratch.insert_one({})
        await client.drop_database(name)
        assert "writeConcern" not in recorder.last("dropDatabase")
