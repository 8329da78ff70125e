"""The examples run and do what they say, and the embedded server they rely on starts, answers and stops.

The web apps are driven in-process (FastAPI through httpx's ASGI transport, aiohttp through its test
server) against the test server; what they store is checked through a separate client, and their shutdown
must close their client and leave no task behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from aiohttp.test_utils import TestClient, TestServer
from spec_runner.task_census import running_tasks, tasks_started_since

from mongio import MongoClient
from mongio.backend import running_loop
from mongio.bson import ObjectId
from mongio.connection.establish import ConnectionSettings, establish
from mongio.embedded import EmbeddedServer
from mongio.errors import AutoReconnect, ClientClosedError
from tests.support.books_api import EXAMPLES, Call, exercise_books_api, httpx_call, load_example, stored_books

pytestmark = pytest.mark.server


@pytest.fixture
async def database(server_uri: str) -> AsyncIterator[str]:
    """A database name of this test's own, dropped afterwards."""
    name = f"examples_{uuid.uuid4().hex[:12]}"
    yield name
    async with MongoClient(server_uri) as client:
        await client.drop_database(name)


def aiohttp_call(http: TestClient[Any, Any]) -> Call:
    async def call(
        method: str, path: str, body: Any = None, params: dict[str, int] | None = None
    ) -> tuple[int, Any]:
        async with http.request(method, path, json=body, params=params) as response:
            if response.content_type == "application/json":
                return response.status, await response.json()
            return response.status, (await response.text()) or None

    return call


async def test_quickstart_prints_what_it_did_and_leaves_it_stored(server_uri: str) -> None:
    env = {**os.environ, "MONGODB_URI": server_uri}
    with anyio.fail_after(120):
        process = await anyio.run_process([sys.executable, str(EXAMPLES / "quickstart.py")], env=env, check=False)
    assert process.returncode == 0, process.stderr.decode()
    lines = process.stdout.decode().splitlines()
    assert "inserted 3 documents" in lines
    # the query sorts by birth year and filters out Ada; the aggregation counts speakers per language
    assert lines.index("  Grace (born 1906)") < lines.index("  Edsger (born 1930)")
    assert "  Ada (born 1815)" not in lines
    assert "English speakers: Ada, Edsger, Grace" in lines
    assert "  Grace now speaks English, COBOL" in lines
    assert lines.index("  English: 3") < lines.index("  COBOL: 1")
    assert lines[-1] == "deleted 1 document, 2 left"

    ada_id = next(line for line in lines if line.startswith("inserted Ada")).split()[-1]
    async with MongoClient(server_uri) as client:
        people = await client.quickstart.people.find({}, {"name": 1, "languages": 1}).to_list()
    by_name = {person["name"]: person for person in people}
    assert sorted(by_name) == ["Ada", "Grace"]
    assert by_name["Ada"]["_id"] == ObjectId(ada_id)
    assert by_name["Grace"]["languages"] == ["English", "COBOL"]


async def test_fastapi_app_serves_the_books_api_and_closes_its_client(server_uri: str, database: str) -> None:
    app = load_example("fastapi_app").create_app(server_uri, database)
    before = running_tasks()
    # httpx's ASGI transport does not run the lifespan, so the test runs it around the requests.
    async with app.router.lifespan_context(app):
        client = app.state.client
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://books.test") as http:
            await exercise_books_api(httpx_call(http), server_uri, database, invalid_status=422)
    assert tasks_started_since(before) == []
    with pytest.raises(ClientClosedError):
        await client[database].books.find_one({})


async def test_fastapi_app_traces_each_request_with_the_driver_spans_under_it(
    server_uri: str, database: str
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = load_example("fastapi_app").create_app(
        server_uri, database, tracing={"enabled": True, "tracer_provider": provider}
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://books.test") as http:
            book = {"title": "Dune", "author": "Frank Herbert", "year": 1965}
            response = await http.post("/books", json=book)
            assert response.status_code == 201, response.text
            book_id = response.json()["id"]
            assert (await http.get(f"/books/{book_id}")).status_code == 200
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}

    def path(name: str) -> list[str]:
        """The names from the span called ``name`` up to its root."""
        (span,) = [span for span in spans if span.name == name]
        names = [span.name]
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    assert path("insert") == ["insert", f"insert {database}.books", "POST /books"]
    assert path("find") == ["find", f"find {database}.books", f"GET /books/{book_id}"]
    (request,) = [span for span in spans if span.name == "POST /books"]
    assert request.attributes is not None and request.attributes["http.response.status_code"] == 201
    provider.shutdown()


@pytest.fixture
def fastapi_module(server_uri: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The FastAPI example imported the way a server imports it: no event loop (nor trio run) running yet."""
    monkeypatch.setenv("MONGODB_URI", server_uri)
    with pytest.raises(RuntimeError):
        running_loop()
    yield load_example("fastapi_app")


async def test_fastapi_module_level_client_made_before_the_loop_works_and_closes(
    fastapi_module: ModuleType, server_uri: str, database: str
) -> None:
    app = fastapi_module.module_level_app
    client = fastapi_module.client
    app.state.books = client[database].books  # this test's own database rather than "library"
    before = running_tasks()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://books.test") as http:
            response = await http.post(
                "/books", json={"title": "Kindred", "author": "Octavia Butler", "year": 1979}
            )
            assert response.status_code == 201, response.text
            book = response.json()
            response = await http.get(f"/books/{book['id']}")
            assert (response.status_code, response.json()) == (200, book)
    assert tasks_started_since(before) == []
    assert [document["title"] for document in await stored_books(server_uri, database)] == ["Kindred"]
    with pytest.raises(ClientClosedError):
        await client[database].books.find_one({})


async def test_aiohttp_app_serves_the_books_api_and_closes_its_client(server_uri: str, database: str) -> None:
    module = load_example("aiohttp_app")
    app = module.create_app(server_uri, database)
    before = asyncio.all_tasks()
    async with TestClient(TestServer(app)) as http:
        client = app[module.CLIENT]
        await exercise_books_api(aiohttp_call(http), server_uri, database, invalid_status=400)
    assert asyncio.all_tasks() == before
    with pytest.raises(ClientClosedError):
        await client[database].books.find_one({})


async def test_aiohttp_app_rejects_a_body_that_is_not_json(server_uri: str, database: str) -> None:
    app = load_example("aiohttp_app").create_app(server_uri, database)
    async with TestClient(TestServer(app)) as http:
        async with http.post(
            "/books", data="{not json", headers={"content-type": "application/json"}
        ) as response:
            assert response.status == 400
        async with http.post("/books", json=["a", "list"]) as response:
            assert response.status == 400
    assert await stored_books(server_uri, database) == []


async def ping(port: int) -> None:
    conn = await establish(("127.0.0.1", port), ConnectionSettings())
    try:
        reply = await conn.command("admin", {"ping": 1})
        assert reply["ok"] == 1
    finally:
        conn.close()


async def test_embedded_server_serves_and_stops_without_leftover_tasks() -> None:
    before = running_tasks()
    async with EmbeddedServer() as server:
        assert server.uri == f"mongodb://127.0.0.1:{server.port}/"
        await ping(server.port)
    assert tasks_started_since(before) == []
    assert server._process is None
    with pytest.raises(AutoReconnect):
        await ping(server.port)  # nothing listens there any more


async def test_embedded_server_left_through_a_cancel_scope_still_stops() -> None:
    """A cancel scope cutting the ``async with`` body (anyio's here; trio's cancels every await in it
    again) does not cut the server's stop short: it exits, and no task is left."""
    before = running_tasks()
    with anyio.CancelScope() as scope:
        async with EmbeddedServer() as server:
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert tasks_started_since(before) == []
    assert server._process is None
    with pytest.raises(AutoReconnect):
        await ping(server.port)


async def test_embedded_server_that_exits_reports_its_output() -> None:
    with pytest.raises(RuntimeError, match="exited with"):
        await EmbeddedServer("--no-such-option").start()
