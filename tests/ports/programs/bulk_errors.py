"""bulk_write with PyMongo's write models, and BulkWriteError for ordered and unordered batches."""

import asyncio
import sys

from bson import ObjectId
from pymongo import AsyncMongoClient, DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, PyMongoError

DB = "port_bulk_errors"


def show_error(label: str, error: BulkWriteError) -> None:
    details = error.details
    print(label, type(error).__name__, error.code,
          "inserted", details["nInserted"], "matched", details["nMatched"],
          "modified", details["nModified"], "removed", details["nRemoved"], "upserted", details["nUpserted"])
    for write_error in details["writeErrors"]:
        op = write_error["op"]
        print("   write error at", write_error["index"], "code", write_error["code"],
              "op", op["sku"] if "sku" in op else op["q"])
    print("   concern errors:", details["writeConcernErrors"])


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    items = client[DB].items
    await items.create_index("sku", unique=True)

    fixed = ObjectId()
    result = await items.bulk_write([
        InsertOne({"_id": fixed, "sku": "a", "qty": 1}),
        InsertOne({"sku": "b", "qty": 2}),
        InsertOne({"sku": "c", "qty": 3}),
        UpdateOne({"sku": "a"}, {"$inc": {"qty": 10}}),
        UpdateMany({"qty": {"$lt": 5}}, {"$set": {"low": True}}),
        ReplaceOne({"sku": "c"}, {"sku": "c", "qty": 30}),
        UpdateOne({"sku": "z"}, {"$set": {"qty": 0}}, upsert=True),
        DeleteOne({"sku": "b"}),
    ])
    print("bulk:", result.acknowledged, result.inserted_count, result.matched_count, result.modified_count,
          result.deleted_count, result.upserted_count)
    print("upserted index:", list(result.upserted_ids), str(result.upserted_ids[6]) == str(ObjectId(str(result.upserted_ids[6]))))
    print("bulk_api_result keys:", sorted(result.bulk_api_result))
    print("docs:", [(d["sku"], d["qty"], d.get("low")) async for d in items.find({}, {"_id": 0}).sort("sku", 1)])

    try:
        await items.bulk_write([
            InsertOne({"sku": "d"}),
            InsertOne({"sku": "a"}),
            InsertOne({"sku": "e"}),
            InsertOne({"sku": "a"}),
        ])
    except BulkWriteError as error:
        show_error("ordered:", error)
    print("after ordered:", sorted(await items.distinct("sku")))

    try:
        await items.bulk_write([
            InsertOne({"sku": "f"}),
            InsertOne({"sku": "a"}),
            UpdateOne({"sku": "f"}, {"$set": {"qty": 6}}),
            InsertOne({"sku": "c"}),
            DeleteMany({"sku": "z"}),
        ], ordered=False)
    except BulkWriteError as error:
        show_error("unordered:", error)
    print("after unordered:", sorted(await items.distinct("sku")))

    try:
        await items.insert_many([{"sku": "g"}, {"sku": "g"}, {"sku": "h"}], ordered=False)
    except BulkWriteError as error:
        show_error("insert_many:", error)

    try:
        await items.insert_one({"sku": "a"})
    except DuplicateKeyError as error:
        print("duplicate:", error.code, isinstance(error, OperationFailure), "E11000" in str(error),
              error.details["keyValue"])

    try:
        await items.bulk_write([UpdateOne({"sku": "a"}, {"$bogus": {"x": 1}})])
    except BulkWriteError as error:
        show_error("bad update:", error)
    except PyMongoError as error:
        print("bad update other:", type(error).__name__)

    try:
        await items.bulk_write([])
    except Exception as error:
        print("empty:", type(error).__name__)
    try:
        await items.bulk_write([{"insertOne": {"document": {}}}])
    except TypeError as error:
        print("not a model:", type(error).__name__)

    print("final count:", await items.count_documents({}))
    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
