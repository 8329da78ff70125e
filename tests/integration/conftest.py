"""Fixtures of the integration tests: a client on the test server whose commands are recorded, and a fresh
collection in a database of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
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
async def coll(client: MongoClient, request: pytest.FixtureRequest) -> AsyncIterator[Collection[Any]]:
    """An empty collection ``items`` in a database of its own (named for the test module), dropped after."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = f"{module}_{uuid.uuid4().hex[:12]}"
    await client[name].create_collection("items")
    yield client[name].items
    await client.drop_database(name)
