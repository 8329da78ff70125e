"""The examples' books API, exercised the same way on every web framework and backend: load an example as a
fresh module, read back what the app stored, and the scenario every books app must pass."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import httpx

from mongio import MongoClient
from mongio.bson import ObjectId

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Call(Protocol):
    """One request to the app under test: its status and body (decoded JSON, text, or None when empty)."""

    async def __call__(
        self, method: str, path: str, body: Any = None, params: dict[str, int] | None = None
    ) -> tuple[int, Any]: ...


def load_example(name: str) -> ModuleType:
    """A fresh copy of ``examples/<name>.py`` (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        f"example_{name}_{uuid.uuid4().hex}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered as an import would be: pydantic resolves the models' annotations through sys.modules
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def stored_books(server_uri: str, database: str) -> list[dict[str, Any]]:
    """The books as the database holds them, read by a client of the test's own, in insertion order."""
    async with MongoClient(server_uri) as client:
        return await client[database].books.find().sort("_id", 1).to_list()


async def exercise_books_api(call: Call, server_uri: str, database: str, invalid_status: int) -> None:
    """The scenario both web examples must pass: they serve the same API."""
    status, created = await call("POST", "/books", {"title": "Dune", "author": "Frank Herbert", "year": 1965})
    assert status == 201, created
    assert created == {"id": created["id"], "title": "Dune", "author": "Frank Herbert", "year": 1965}
    # the id is the stored document's ObjectId, and nothing else was stored with it
    [stored] = await stored_books(server_uri, database)
    assert stored == {
        "_id": ObjectId(created["id"]),
        "title": "Dune",
        "author": "Frank Herbert",
        "year": 1965,
    }

    assert await call("GET", f"/books/{created['id']}") == (200, created)
    # an id that is no ObjectId, and one that names no book, are both "not found"
    assert (await call("GET", "/books/not-an-id"))[0] == 404
    assert (await call("GET", f"/books/{ObjectId()}"))[0] == 404
    status, _ = await call("POST", "/books", {"title": "Emma", "author": "Jane Austen"})
    assert status == invalid_status
    status, _ = await call("POST", "/books", {"title": "Emma", "author": "Jane Austen", "year": "1815"})
    assert status == invalid_status
    assert len(await stored_books(server_uri, database)) == 1

    ids = [created["id"]]
    for number in range(4):
        status, book = await call("POST", "/books", {"title": f"Vol. {number}", "author": "A", "year": 2000})
        assert status == 201, book
        ids.append(book["id"])
    # pages of two, in _id order, cover every book exactly once
    paged: list[str] = []
    for skip in (0, 2, 4):
        status, page = await call("GET", "/books", params={"skip": skip, "limit": 2})
        assert status == 200, page
        assert page["total"] == 5
        assert (page["skip"], page["limit"]) == (skip, 2)
        paged.extend(book["id"] for book in page["items"])
    assert paged == [str(document["_id"]) for document in await stored_books(server_uri, database)]
    assert sorted(paged) == sorted(ids)
    status, past_the_end = await call("GET", "/books", params={"skip": 5, "limit": 2})
    assert (status, past_the_end["items"], past_the_end["total"]) == (200, [], 5)
    assert (await call("GET", "/books", params={"limit": 0}))[0] == invalid_status
    assert (await call("GET", "/books", params={"skip": -1}))[0] == invalid_status

    status, updated = await call("PATCH", f"/books/{created['id']}", {"year": 1966})
    assert (status, updated) == (200, {**created, "year": 1966})
    assert (await stored_books(server_uri, database))[0]["year"] == 1966
    assert await call("PATCH", f"/books/{created['id']}", {}) == (200, updated)
    assert (await call("PATCH", f"/books/{ObjectId()}", {"year": 1}))[0] == 404
    assert (await call("PATCH", f"/books/{created['id']}", {"title": ""}))[0] == invalid_status

    status, _ = await call("DELETE", f"/books/{created['id']}")
    assert status == 204
    assert (await call("GET", f"/books/{created['id']}"))[0] == 404
    assert (await call("DELETE", f"/books/{created['id']}"))[0] == 404
    remaining = await stored_books(server_uri, database)
    assert [str(document["_id"]) for document in remaining] == ids[1:]


def httpx_call(http: httpx.AsyncClient) -> Call:
    async def call(
        method: str, path: str, body: Any = None, params: dict[str, int] | None = None
    ) -> tuple[int, Any]:
        response = await http.request(method, path, json=body, params=params)
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.status_code, response.json()
        return response.status_code, response.text or None

    return call
