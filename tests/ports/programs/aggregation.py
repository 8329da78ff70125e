"""Aggregation pipelines: $match, $group, $sort, $project, $unwind, $lookup, $facet; async for and to_list."""

import asyncio
import sys
from datetime import UTC, datetime
from decimal import Decimal

from bson import Decimal128
from pymongo import AsyncMongoClient

DB = "port_aggregation"

ORDERS = [
    {"customer": "ann", "status": "paid", "items": [{"sku": "tea", "qty": 2}, {"sku": "cup", "qty": 1}],
     "total": 14.5, "at": datetime(2024, 1, 5, tzinfo=UTC)},
    {"customer": "ben", "status": "paid", "items": [{"sku": "tea", "qty": 1}], "total": 4.0,
     "at": datetime(2024, 1, 17, tzinfo=UTC)},
    {"customer": "ann", "status": "open", "items": [{"sku": "pot", "qty": 1}], "total": 30.0,
     "at": datetime(2024, 2, 2, tzinfo=UTC)},
    {"customer": "cid", "status": "paid", "items": [{"sku": "cup", "qty": 4}], "total": 22.0,
     "at": datetime(2024, 2, 20, tzinfo=UTC)},
    {"customer": "ben", "status": "void", "items": [], "total": 0.0,
     "at": datetime(2024, 3, 1, tzinfo=UTC)},
]
CUSTOMERS = [
    {"_id": "ann", "city": "Oslo", "credit": Decimal128("120.50")},
    {"_id": "ben", "city": "Bergen", "credit": Decimal128("0")},
    {"_id": "cid", "city": "Oslo", "credit": Decimal128("33.25")},
]


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri, tz_aware=True)
    await client.drop_database(DB)
    db = client[DB]
    await db.orders.insert_many(ORDERS)
    await db.customers.insert_many(CUSTOMERS)

    pipeline = [
        {"$match": {"status": "paid"}},
        {"$group": {"_id": "$customer", "spent": {"$sum": "$total"}, "orders": {"$sum": 1}}},
        {"$sort": {"spent": -1}},
    ]
    print("spent per customer:")
    async for row in await db.orders.aggregate(pipeline):
        print("  ", row["_id"], row["spent"], row["orders"])

    units = await (await db.orders.aggregate([
        {"$unwind": "$items"},
        {"$group": {"_id": "$items.sku", "units": {"$sum": "$items.qty"}}},
        {"$sort": {"units": -1, "_id": 1}},
        {"$project": {"_id": 0, "sku": "$_id", "units": 1}},
    ])).to_list()
    print("units:", units)

    monthly = await (await db.orders.aggregate([
        {"$match": {"status": {"$ne": "void"}}},
        {"$group": {"_id": {"$month": "$at"}, "revenue": {"$sum": "$total"}, "first": {"$min": "$at"}}},
        {"$sort": {"_id": 1}},
    ])).to_list(length=10)
    for row in monthly:
        print("month", row["_id"], row["revenue"], row["first"].isoformat())

    joined = await (await db.orders.aggregate([
        {"$match": {"total": {"$gt": 10}}},
        {"$lookup": {"from": "customers", "localField": "customer", "foreignField": "_id", "as": "who"}},
        {"$unwind": "$who"},
        {"$project": {"_id": 0, "customer": 1, "city": "$who.city", "credit": "$who.credit"}},
        {"$sort": {"customer": 1, "city": 1}},
    ])).to_list()
    for row in joined:
        print("joined:", row["customer"], row["city"], str(row["credit"]), row["credit"].to_decimal() > Decimal(1))

    facets = await (await db.orders.aggregate([
        {"$facet": {
            "by_status": [{"$sortByCount": "$status"}],
            "stats": [{"$group": {"_id": None, "max": {"$max": "$total"}, "avg": {"$avg": "$total"}}}],
        }},
    ])).to_list()
    print("by status:", sorted((row["_id"], row["count"]) for row in facets[0]["by_status"]))
    print("stats:", facets[0]["stats"][0]["max"], round(facets[0]["stats"][0]["avg"], 2))

    cities = await (await db.customers.aggregate([
        {"$group": {"_id": "$city", "credit": {"$sum": "$credit"}, "names": {"$push": "$_id"}}},
        {"$sort": {"_id": 1}},
    ])).to_list()
    print("cities:", [(row["_id"], str(row["credit"]), row["names"]) for row in cities])

    cursor = await db.orders.aggregate([{"$sort": {"at": 1}}, {"$project": {"customer": 1}}], batchSize=2)
    print("batched:", [row["customer"] async for row in cursor])

    await db.orders.aggregate([{"$match": {"status": "paid"}}, {"$out": "paid_orders"}])
    print("$out count:", await db.paid_orders.count_documents({}))
    print("db aggregate:", await (await client.admin.aggregate([{"$documents": [{"x": 1}, {"x": 2}]}])).to_list())

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
