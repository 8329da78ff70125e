"""Fixtures of the integration tests: a client on the test server whose commands are recorded, a database of
its own for each test, and a fresh collection in it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.database import Database
from tests.support.recorders import CommandRecorder


@pytest.fixture
def recorder() -> CommandRecorder:
    """The command events of ``client``."""
    return CommandRecorder()


@pytest.fixture
async def client(server_uri: str, recorder: CommandRecorder) -> AsyncIterator[MongoClient]:
    """A client on the test server; its command events go to ``recorder``."""
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        yield client


@pytest.fixture
async def db(client: MongoClient, request: pytest.FixtureRequest) -> AsyncIterator[Database[Any]]:
    """A database of its own (named for the test module), dropped after the test."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = f"{module}_{uuid.uuid4().hex[:12]}"
    yield client[name]
    await client.drop_database(name)


@pytest.fixture
async def coll(db: Database[Any]) -> Collection[Any]:
    """An empty collection ``items``, created, in ``db``."""
    await db.create_collection("items")
    return db.items
