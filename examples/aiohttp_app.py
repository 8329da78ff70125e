"""An aiohttp service storing books in MongoDB with mongio.

Run it with ``python examples/aiohttp_app.py`` (``MONGODB_URI`` names the deployment, default
``mongodb://localhost:27017``); it serves the same API as ``fastapi_app.py`` on port 8080.

The client lives in ``app.cleanup_ctx``: made when the app starts, closed (with every task it started)
when the app shuts down.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiohttp import web

from mongio import ASCENDING, Collection, MongoClient, ReturnDocument
from mongio.bson import ObjectId

DEFAULT_URI = "mongodb://localhost:27017"

Document = dict[str, Any]

# Typed application keys: ``app[BOOKS]`` is known to be a Collection, unlike a plain string key.
CLIENT = web.AppKey("client", MongoClient)
BOOKS: web.AppKey[Collection[Document]] = web.AppKey("books")

FIELDS: dict[str, type] = {"title": str, "author": str, "year": int}
MAX_PAGE = 100

routes = web.RouteTableDef()


def to_json(document: Mapping[str, Any]) -> dict[str, Any]:
    # The ObjectId stays inside the service: the API speaks its hex string.
    return {"id": str(document["_id"]), **{name: document[name] for name in FIELDS}}


def book_id(request: web.Request) -> ObjectId:
    """The path's id as an ObjectId; an id that cannot be one names no book, so it is a 404 too."""
    text = request.match_info["book_id"]
    if not ObjectId.is_valid(text):
        raise web.HTTPNotFound(text=f"no book {text!r}")
    return ObjectId(text)


async def book_fields(request: web.Request, partial: bool) -> Document:
    """The request body's book fields, checked: all of them to create, any of them to update."""
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="the body must be JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    fields: Document = {}
    for name, kind in FIELDS.items():
        if name not in body:
            if not partial:
                raise web.HTTPBadRequest(text=f"{name} is required")
            continue
        value = body[name]
        # bool is an int subclass, but true is not a year.
        if not isinstance(value, kind) or isinstance(value, bool) or value == "":
            raise web.HTTPBadRequest(text=f"{name} must be a non-empty {kind.__name__}")
        fields[name] = value
    return fields


def page_parameter(request: web.Request, name: str, default: int, check: Callable[[int], bool]) -> int:
    try:
        value = int(request.query.get(name, default))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer") from None
    if not check(value):
        raise web.HTTPBadRequest(text=f"{name} is out of range")
    return value


@routes.post("/books")
async def create_book(request: web.Request) -> web.Response:
    fields = await book_fields(request, partial=False)
    result = await request.app[BOOKS].insert_one(dict(fields))
    return web.json_response(to_json({"_id": result.inserted_id, **fields}), status=201)


@routes.get("/books/{book_id}")
async def get_book(request: web.Request) -> web.Response:
    document = await request.app[BOOKS].find_one({"_id": book_id(request)})
    if document is None:
        raise web.HTTPNotFound(text="no such book")
    return web.json_response(to_json(document))


@routes.get("/books")
async def list_books(request: web.Request) -> web.Response:
    skip = page_parameter(request, "skip", 0, lambda value: value >= 0)
    limit = page_parameter(request, "limit", 20, lambda value: 1 <= value <= MAX_PAGE)
    books = request.app[BOOKS]
    # Sorting by _id gives a stable order, so consecutive pages neither repeat nor miss books.
    documents = await books.find().sort("_id", ASCENDING).skip(skip).limit(limit).to_list()
    total = await books.count_documents({})
    return web.json_response(
        {"items": [to_json(document) for document in documents], "total": total, "skip": skip, "limit": limit}
    )


@routes.patch("/books/{book_id}")
async def update_book(request: web.Request) -> web.Response:
    oid = book_id(request)
    changes = await book_fields(request, partial=True)
    books = request.app[BOOKS]
    if changes:
        # One round trip that both updates and returns the new version, so no other writer slips in between.
        document = await books.find_one_and_update(
            {"_id": oid}, {"$set": changes}, return_document=ReturnDocument.AFTER
        )
    else:
        document = await books.find_one({"_id": oid})
    if document is None:
        raise web.HTTPNotFound(text="no such book")
    return web.json_response(to_json(document))


@routes.delete("/books/{book_id}")
async def delete_book(request: web.Request) -> web.Response:
    result = await request.app[BOOKS].delete_one({"_id": book_id(request)})
    if result.deleted_count == 0:
        raise web.HTTPNotFound(text="no such book")
    return web.Response(status=204)


def create_app(uri: str | None = None, database: str = "library") -> web.Application:
    """The app; its client is made at startup and closed at cleanup."""

    async def mongo_client(app: web.Application) -> AsyncIterator[None]:
        # Before ``yield`` runs at startup, after it at cleanup: leaving ``async with`` then closes the
        # client and waits for its monitors and connections.
        async with MongoClient(uri or os.environ.get("MONGODB_URI", DEFAULT_URI)) as client:
            app[CLIENT] = client
            app[BOOKS] = client[database].books
            yield

    app = web.Application()
    app.cleanup_ctx.append(mongo_client)
    app.add_routes(routes)
    return app


if __name__ == "__main__":
    web.run_app(create_app())
