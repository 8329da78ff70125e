"""Client-level bulk writes (MongoClient.bulk_write) across collections, their results and errors."""

import asyncio
import sys

from pymongo import AsyncMongoClient
from pymongo.errors import ClientBulkWriteException
from pymongo.operations import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne

DB = "port_client_bulk_write"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    orders = f"{DB}.orders"
    stock = f"{DB}.stock"
    await client[DB].stock.create_index("sku", unique=True)

    result = await client.bulk_write([
        InsertOne({"_id": 1, "sku": "tea", "qty": 2}, namespace=orders),
        InsertOne({"_id": 2, "sku": "cup", "qty": 1}, namespace=orders),
        InsertOne({"sku": "tea", "left": 10}, namespace=stock),
        InsertOne({"sku": "cup", "left": 3}, namespace=stock),
        UpdateOne({"sku": "tea"}, {"$inc": {"left": -2}}, namespace=stock),
        UpdateMany({}, {"$set": {"status": "new"}}, namespace=orders),
        ReplaceOne({"_id": 2}, {"sku": "cup", "qty": 5}, namespace=orders),
        UpdateOne({"sku": "pot"}, {"$set": {"left": 1}}, upsert=True, namespace=stock),
        DeleteOne({"sku": "cup"}, namespace=stock),
    ], verbose_results=True)
    print("counts:", result.acknowledged, result.inserted_count, result.matched_count, result.modified_count,
          result.upserted_count, result.deleted_count)
    print("has verbose:", result.has_verbose_results)
    print("insert results:", sorted(index for index in result.insert_results))
    print("update results:", {i: (r.matched_count, r.modified_count, r.upserted_id is not None)
                              for i, r in sorted(result.update_results.items())})
    print("delete results:", {i: r.deleted_count for i, r in result.delete_results.items()})
    print("orders:", [d async for d in client[DB].orders.find({}, {"_id": 0}).sort("sku", 1)])
    print("stock:", [(d["sku"], d["left"]) async for d in client[DB].stock.find().sort("sku", 1)])

    summary = await client.bulk_write([
        InsertOne({"_id": 3, "sku": "pot"}, namespace=orders),
        DeleteMany({"status": "new"}, namespace=orders),
    ])
    print("summary only:", summary.inserted_count, summary.deleted_count, summary.has_verbose_results)

    try:
        await client.bulk_write([
            InsertOne({"sku": "spoon", "left": 9}, namespace=stock),
            InsertOne({"sku": "tea", "left": 1}, namespace=stock),
            InsertOne({"sku": "fork", "left": 4}, namespace=stock),
        ], verbose_results=True)
    except ClientBulkWriteException as error:
        partial = error.partial_result
        print("ordered error:", [(e["idx"], e["code"]) for e in error.write_errors],
              partial.inserted_count if partial is not None else None, error.write_concern_errors)

    try:
        await client.bulk_write([
            InsertOne({"sku": "tea"}, namespace=stock),
            InsertOne({"sku": "knife", "left": 2}, namespace=stock),
            InsertOne({"sku": "cup", "left": 1}, namespace=stock),
            InsertOne({"sku": "knife"}, namespace=stock),
        ], ordered=False)
    except ClientBulkWriteException as error:
        print("unordered errors:", sorted((e["idx"], e["code"]) for e in error.write_errors),
              error.partial_result.inserted_count)
    print("final stock:", sorted(await client[DB].stock.distinct("sku")))

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
