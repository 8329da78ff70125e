"""A FastAPI app whose pydantic models hold bson.ObjectId, driven through httpx's ASGI transport."""

import asyncio
import sys
from typing import Annotated, Any

import httpx
from bson import ObjectId
from bson.errors import InvalidId
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema
from pymongo import AsyncMongoClient, ReturnDocument

DB = "port_fastapi_objectid"


def validate_object_id(value: Any) -> ObjectId:
    if isinstance(value, ObjectId):
        return value
    if isinstance(value, str) and ObjectId.is_valid(value):
        return ObjectId(value)
    raise ValueError(f"not an ObjectId: {value!r}")


PyObjectId = Annotated[
    ObjectId,
    PlainValidator(validate_object_id),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string"}),
]


class BookIn(BaseModel):
    title: str
    author: str
    year: int


class Book(BookIn):
    model_config = ConfigDict(populate_by_name=True, arbitrary_types_allowed=True)

    id: PyObjectId = Field(alias="_id")
    shelf_id: PyObjectId | None = None


class BookPatch(BaseModel):
    title: str | None = None
    year: int | None = None


def build_app(client: AsyncMongoClient) -> FastAPI:
    app = FastAPI()
    books = client[DB].books

    def object_id(book_id: str) -> ObjectId:
        try:
            return ObjectId(book_id)
        except InvalidId:
            raise HTTPException(status_code=422, detail="invalid id") from None

    @app.post("/books", status_code=201)
    async def create_book(book: BookIn, shelf: str | None = None) -> Book:
        document = book.model_dump()
        if shelf is not None:
            document["shelf_id"] = object_id(shelf)
        result = await books.insert_one(document)
        return Book.model_validate(await books.find_one({"_id": result.inserted_id}))

    @app.get("/books")
    async def list_books() -> list[Book]:
        return [Book.model_validate(doc) async for doc in books.find().sort("year", 1)]

    @app.get("/books/{book_id}")
    async def get_book(book_id: str) -> Book:
        document = await books.find_one({"_id": object_id(book_id)})
        if document is None:
            raise HTTPException(status_code=404, detail=f"book {book_id} not found")
        return Book.model_validate(document)

    @app.patch("/books/{book_id}")
    async def update_book(book_id: str, patch: BookPatch) -> Book:
        changes = patch.model_dump(exclude_none=True)
        document = await books.find_one_and_update(
            {"_id": object_id(book_id)}, {"$set": changes}, return_document=ReturnDocument.AFTER
        )
        if document is None:
            raise HTTPException(status_code=404, detail=f"book {book_id} not found")
        return Book.model_validate(document)

    @app.delete("/books/{book_id}", status_code=204)
    async def delete_book(book_id: str) -> None:
        result = await books.delete_one({"_id": object_id(book_id)})
        if result.deleted_count == 0:
            raise HTTPException(status_code=404, detail=f"book {book_id} not found")

    @app.get("/shelves/{shelf_id}/books")
    async def shelf_books(shelf_id: str) -> list[str]:
        cursor = books.find({"shelf_id": object_id(shelf_id)}, {"title": 1}).sort("title", 1)
        return [doc["title"] for doc in await cursor.to_list()]

    return app


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    app = build_app(client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        shelf = str(ObjectId())
        created = []
        for title, author, year in [("Dune", "Herbert", 1965), ("Emma", "Austen", 1815), ("Ubik", "Dick", 1969)]:
            response = await http.post(
                "/books", json={"title": title, "author": author, "year": year}, params={"shelf": shelf}
            )
            body = response.json()
            print("create:", response.status_code, body["title"], ObjectId.is_valid(body["_id"]),
                  body["shelf_id"] == shelf)
            created.append(body["_id"])

        response = await http.get("/books")
        print("list:", response.status_code, [book["title"] for book in response.json()])
        response = await http.get(f"/books/{created[0]}")
        print("get:", response.status_code, response.json()["title"], response.json()["_id"] == created[0])
        response = await http.patch(f"/books/{created[1]}", json={"year": 1816})
        print("patch:", response.status_code, response.json()["year"], response.json()["author"])
        response = await http.get(f"/shelves/{shelf}/books")
        print("shelf:", response.status_code, response.json())
        response = await http.delete(f"/books/{created[2]}")
        print("delete:", response.status_code, response.content)
        missing = str(ObjectId())
        response = await http.get(f"/books/{created[2]}")
        print("get deleted:", response.status_code, response.json()["detail"] == f"book {created[2]} not found")
        response = await http.patch(f"/books/{missing}", json={"year": 1})
        print("patch missing:", response.status_code)
        response = await http.get("/books/not-an-id")
        print("bad id:", response.status_code, response.json())
        response = await http.post("/books", json={"title": "x"})
        print("bad body:", response.status_code, [error["loc"] for error in response.json()["detail"]])
        schema = (await http.get("/openapi.json")).json()["components"]["schemas"]["Book"]
        print("schema id:", schema["properties"]["_id"])

    stored = await client[DB].books.find_one({"title": "Emma"})
    print("stored ids:", isinstance(stored["_id"], ObjectId), isinstance(stored["shelf_id"], ObjectId))
    print("model from stored:", Book.model_validate(stored).model_dump(mode="json", exclude={"id", "shelf_id"}))
    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
