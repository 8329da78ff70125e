"""A FastAPI service storing books in MongoDB with mongio.

Run it with ``uvicorn --app-dir examples fastapi_app:app`` (``MONGODB_URI`` names the deployment, default
``mongodb://localhost:27017``), then try::

    curl -X POST localhost:8000/books -H 'content-type: application/json' \\
         -d '{"title": "Dune", "author": "Frank Herbert", "year": 1965}'
    curl 'localhost:8000/books?skip=0&limit=10'

Two ways to own the client are shown: :func:`create_app` makes it in the lifespan (the usual choice: one
client per running app, closed at shutdown), and ``module_level_app`` at the end uses a client made at import
time, which mongio allows because making a ``MongoClient`` does no I/O and needs no running event loop.

Tracing: ``create_app(tracing={"enabled": True})`` turns on mongio's OpenTelemetry spans (``pip install
'mongio[opentelemetry]'``) and gives every request a span of its own, so each request's trace holds the
driver's operation spans and, under them, one span per command sent. The request span is made by a small
middleware here; ``opentelemetry-instrumentation-fastapi`` makes the same parent if you use it instead.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response, status
from pydantic import BaseModel, Field, StrictInt

from mongio import ASCENDING, Collection, MongoClient, ReturnDocument
from mongio.bson import ObjectId

DEFAULT_URI = "mongodb://localhost:27017"

Document = dict[str, Any]


class BookIn(BaseModel):
    """What a client sends to create a book."""

    title: str = Field(min_length=1)
    author: str = Field(min_length=1)
    year: StrictInt  # a JSON API should refuse "1965" rather than guess


class BookPatch(BaseModel):
    """A partial update: only the fields given change."""

    title: str | None = Field(default=None, min_length=1)
    author: str | None = Field(default=None, min_length=1)
    year: StrictInt | None = None


class Book(BookIn):
    """A stored book; ``id`` is the document's ObjectId as 24 hex digits."""

    id: str


class Page(BaseModel):
    items: list[Book]
    total: int
    skip: int
    limit: int


def to_book(document: Mapping[str, Any]) -> Book:
    # The ObjectId stays inside the service: the API speaks its hex string.
    return Book(
        id=str(document["_id"]), title=document["title"], author=document["author"], year=document["year"]
    )


def object_id(book_id: str) -> ObjectId:
    """The path's id as an ObjectId; an id that cannot be one names no book, so it is a 404 too."""
    if not ObjectId.is_valid(book_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no book {book_id!r}")
    return ObjectId(book_id)


def books_collection(request: Request) -> Collection[Document]:
    collection: Collection[Document] = request.app.state.books
    return collection


Books = Annotated[Collection[Document], Depends(books_collection)]
BookId = Annotated[ObjectId, Depends(object_id)]

router = APIRouter()


@router.post("/books", status_code=status.HTTP_201_CREATED)
async def create_book(book: BookIn, books: Books) -> Book:
    result = await books.insert_one(book.model_dump())
    return Book(id=str(result.inserted_id), **book.model_dump())


@router.get("/books/{book_id}")
async def get_book(book_id: BookId, books: Books) -> Book:
    document = await books.find_one({"_id": book_id})
    if document is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no book {book_id}")
    return to_book(document)


@router.get("/books")
async def list_books(
    books: Books,
    skip: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> Page:
    # Sorting by _id gives a stable order, so consecutive pages neither repeat nor miss books.
    cursor = books.find().sort("_id", ASCENDING).skip(skip).limit(limit)
    items = [to_book(document) async for document in cursor]
    return Page(items=items, total=await books.count_documents({}), skip=skip, limit=limit)


@router.patch("/books/{book_id}")
async def update_book(book_id: BookId, patch: BookPatch, books: Books) -> Book:
    changes = patch.model_dump(exclude_unset=True)
    if not changes:
        return await get_book(book_id, books)
    # One round trip that both updates and returns the new version, so no other writer slips in between.
    document = await books.find_one_and_update(
        {"_id": book_id}, {"$set": changes}, return_document=ReturnDocument.AFTER
    )
    if document is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no book {book_id}")
    return to_book(document)


@router.delete("/books/{book_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_book(book_id: BookId, books: Books) -> Response:
    result = await books.delete_one({"_id": book_id})
    if result.deleted_count == 0:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no book {book_id}")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def create_app(
    uri: str | None = None, database: str = "library", *, tracing: Mapping[str, Any] | None = None
) -> FastAPI:
    """The app, with its client made when it starts and closed when it shuts down. ``tracing`` is the
    client's tracing option (``{"enabled": True}``, plus ``"tracer_provider"`` to use one other than the
    global); with it, each request gets a span too."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Leaving ``async with`` at shutdown closes the client and waits for its monitors and connections.
        async with MongoClient(uri or os.environ.get("MONGODB_URI", DEFAULT_URI), tracing=tracing) as client:
            app.state.client = client
            app.state.books = client[database].books
            yield

    app = FastAPI(title="books", lifespan=lifespan)
    app.include_router(router)
    if tracing is not None:
        add_request_spans(app, tracing.get("tracer_provider"))
    return app


def add_request_spans(app: FastAPI, tracer_provider: Any = None) -> None:
    """Give each request a server span; the operations its handler runs become its children, since the
    span is the current one while the handler runs."""
    from opentelemetry import trace

    tracer = trace.get_tracer("books-example", tracer_provider=tracer_provider)

    @app.middleware("http")
    async def request_span(request: Request, call_next: Any) -> Response:
        name = f"{request.method} {request.url.path}"
        with tracer.start_as_current_span(name, kind=trace.SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", request.method)
            response: Response = await call_next(request)
            span.set_attribute("http.response.status_code", response.status_code)
            return response


app = create_app()


# -- the other pattern: a client made at import time -------------------------------------------------------
#
# Nothing here touches the network or needs an event loop: the client starts monitoring on the loop that
# runs its first operation. It must still be closed, and the lifespan's exit is the place for it. A closed
# client stays closed, so this app can start only once per process (fine for a server, not for tests that
# restart the app).

client = MongoClient(os.environ.get("MONGODB_URI", DEFAULT_URI))


@asynccontextmanager
async def close_client_at_shutdown(app: FastAPI) -> AsyncIterator[None]:
    yield
    await client.close()


module_level_app = FastAPI(title="books", lifespan=close_client_at_shutdown)
module_level_app.state.books = client.library.books
module_level_app.include_router(router)
