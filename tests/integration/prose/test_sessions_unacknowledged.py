"""Unacknowledged writes and sessions, against the test server (driver sessions specification,
"Unacknowledged writes"; read and write concern specification, "Unacknowledged WriteConcern")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.errors import InvalidOperation
from mongio.operations.models import InsertOne, UpdateOne
from mongio.options.write_concern import WriteConcern
from mongio.sessions.client_session import ClientSession
from tests.support.recorders import CommandRecorder

Write = Callable[[Collection[Any], MongoClient, "ClientSession | None"], Awaitable[Any]]


async def _insert_one(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await c.insert_one({"x": 1}, session=s)


async def _insert_many(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await c.insert_many([{"x": 1}, {"x": 2}], session=s)


async def _update_many(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await c.update_many({}, {"$set": {"y": 1}}, session=s)


async def _delete_one(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await c.delete_one({"x": 1}, session=s)


async def _find_one_and_update(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await c.find_one_and_update({"x": 1}, {"$set": {"y": 2}}, session=s)


async def _bulk_write(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await c.bulk_write([InsertOne({"x": 3}), UpdateOne({"x": 3}, {"$set": {"y": 3}})], session=s)


async def _client_bulk_write(c: Collection[Any], client: MongoClient, s: ClientSession | None) -> Any:
    return await client.bulk_write(
        [InsertOne({"x": 4}, namespace=c.full_name)],
        session=s,
        ordered=False,
        write_concern=WriteConcern(w=0),
    )


WRITES: list[tuple[str, Write]] = [
    ("insert", _insert_one),
    ("insert", _insert_many),
    ("update", _update_many),
    ("delete", _delete_one),
    ("findAndModify", _find_one_and_update),
    ("insert", _bulk_write),
    ("bulkWrite", _client_bulk_write),
]
IDS = [write.__name__[1:] for _, write in WRITES]


@pytest.mark.parametrize(("command", "write"), WRITES, ids=IDS)
async def test_unacknowledged_write_sends_no_session_id(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder, command: str, write: Write
) -> None:
    """Driver sessions spec, Unacknowledged writes: "drivers MUST NOT send a session ID with unacknowledged
    writes"; without an explicit session no implicit one is used (no lsid, and so no txnNumber either)."""
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    recorder.clear()
    await write(unacknowledged, client, None)
    sent = recorder.commands(command)
    assert sent
    for body in sent:
        assert "lsid" not in body and "txnNumber" not in body
        assert body["writeConcern"] == {"w": 0}
    await client.admin.command("ping")  # the unacknowledged write has been read by the server first
    acknowledged = recorder.commands("ping")
    assert "lsid" in acknowledged[-1]


@pytest.mark.parametrize(("command", "write"), WRITES, ids=IDS)
async def test_unacknowledged_write_with_an_explicit_session_is_refused(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder, command: str, write: Write
) -> None:
    """Driver sessions spec, Unacknowledged writes: "For unacknowledged writes with an explicit session,
    drivers SHOULD raise an error": nothing is sent, and the session stays usable."""
    unacknowledged = coll.with_options(write_concern=WriteConcern(w=0))
    async with client.start_session() as session:
        recorder.clear()
        with pytest.raises(InvalidOperation, match="unacknowledged"):
            await write(unacknowledged, client, session)
        assert recorder.events == []
        assert await coll.count_documents({}, session=session) == 0
