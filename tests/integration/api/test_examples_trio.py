"""The FastAPI example on trio: served by Hypercorn's trio worker (``hypercorn.trio.serve``, in this process,
on a loopback port) and driven over real HTTP with httpx, it passes the same scenario as on asyncio
(``tests.support.books_api.exercise_books_api``), its lifespan's client closes at shutdown, and no task is left."""

from __future__ import annotations

import uuid
from functools import partial

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio import MongoClient
from mongio.errors import ClientClosedError
from tests.support.books_api import exercise_books_api, httpx_call, load_example

pytestmark = pytest.mark.server


def hypercorn_config() -> Config:
    config = Config()
    config.bind = ["127.0.0.1:0"]  # a free port, reported back by serve once it listens
    config.accesslog = None
    config.errorlog = None
    return config


async def serve_and_exercise(server_uri: str, database: str) -> None:
    app = load_example("fastapi_app").create_app(server_uri, database)
    tasks_before = running_tasks()
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(partial(serve, app, hypercorn_config(), shutdown_trigger=shutdown.wait))
        [base_url] = binds
        assert base_url.startswith("http://127.0.0.1:")
        try:
            async with httpx.AsyncClient(base_url=base_url, trust_env=False) as http:
                await exercise_books_api(httpx_call(http), server_uri, database, invalid_status=422)
                # The app's client was made in the lifespan, on trio, and serves requests there.
                client = app.state.client
                assert (await http.get("/books", params={"limit": 1})).status_code == 200
        finally:
            shutdown.set()
    # Hypercorn ran the lifespan's shutdown: the app's client is closed, and its background tasks with it.
    with pytest.raises(ClientClosedError):
        await client[database].books.find_one({})
    assert tasks_started_since(tasks_before) == []
    async with MongoClient(server_uri) as own:
        await own.drop_database(database)


def test_fastapi_app_on_hypercorn_s_trio_worker(server_uri: str) -> None:
    trio.run(serve_and_exercise, server_uri, f"examples_trio_{uuid.uuid4().hex[:12]}")
