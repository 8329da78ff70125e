"""Cursors: sort/skip/limit/projection/batch_size, async for, to_list(length), distinct, find_one_and_*."""

import asyncio
import sys

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, ReturnDocument
from pymongo.errors import InvalidOperation

DB = "port_cursors"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    scores = client[DB].scores
    await scores.insert_many(
        [{"_id": i, "player": f"p{i % 7}", "score": (i * 37) % 101, "level": i % 3} for i in range(40)]
    )

    top = scores.find({"level": {"$ne": 0}}, {"_id": 0, "player": 1, "score": 1})
    top = top.sort([("score", DESCENDING), ("player", ASCENDING)]).skip(2).limit(5)
    print("top after skip:", [(d["player"], d["score"]) async for d in top])

    cursor = scores.find({}, projection=["score"], sort=[("_id", 1)], batch_size=7)
    first = await cursor.to_list(length=10)
    print("to_list(10):", [d["_id"] for d in first], sorted(first[0]))
    second = await cursor.to_list(5)
    print("to_list(5) continues:", [d["_id"] for d in second])
    rest = await cursor.to_list(None)
    print("rest:", len(rest), cursor.alive)
    print("exhausted to_list:", await cursor.to_list())

    cursor = scores.find({"score": {"$gte": 50}}).sort("score", 1).batch_size(3)
    seen = []
    async for doc in cursor:
        seen.append(doc["score"])
        if len(seen) == 4:
            break
    await cursor.close()
    print("broke out early:", seen)

    cursor = scores.find().sort("_id", -1).limit(3)
    print("next:", (await cursor.next())["_id"], (await anext(cursor))["_id"])
    print("remaining:", [d["_id"] async for d in cursor])
    try:
        await cursor.next()
    except StopAsyncIteration:
        print("next after end: StopAsyncIteration")

    cursor = scores.find({"level": 2})
    await cursor.to_list(1)
    try:
        cursor.sort("score")
    except InvalidOperation as error:
        print("modify after start:", type(error).__name__)
    clone = cursor.clone()
    print("clone restarts:", len(await clone.to_list()))
    rewound = await cursor.rewind()
    print("rewind restarts:", len(await rewound.to_list()))

    print("distinct levels:", sorted(await scores.distinct("level")))
    print("distinct players high:", sorted(await scores.distinct("player", {"score": {"$gt": 90}})))
    print("cursor distinct:", sorted(await scores.find({"level": 1}).distinct("player")))
    print("limit(-2):", len(await scores.find().limit(-2).to_list()))
    print("where count via len:", len(await scores.find({"player": "p3"}).to_list()))

    after = await scores.find_one_and_update(
        {"_id": 5}, {"$inc": {"score": 1000}}, return_document=ReturnDocument.AFTER, projection={"_id": 0}
    )
    print("find_one_and_update AFTER:", after)
    before = await scores.find_one_and_update({"_id": 5}, {"$set": {"score": 0}})
    print("find_one_and_update BEFORE:", before["score"])
    upserted = await scores.find_one_and_update(
        {"_id": 100}, {"$setOnInsert": {"player": "new"}}, upsert=True, return_document=ReturnDocument.AFTER
    )
    print("upsert AFTER:", upserted)
    missing = await scores.find_one_and_update({"_id": -1}, {"$set": {"x": 1}})
    print("no match:", missing)
    replaced = await scores.find_one_and_replace(
        {"player": "p1"}, {"player": "p1", "score": -1}, sort=[("_id", DESCENDING)],
        return_document=ReturnDocument.AFTER,
    )
    print("find_one_and_replace:", replaced)
    deleted = await scores.find_one_and_delete({"level": 2}, sort=[("score", DESCENDING)], projection={"score": 1})
    print("find_one_and_delete:", deleted)

    print("find_one sort:", await scores.find_one({}, sort=[("score", -1)], projection={"_id": 1}))
    print("skip past end:", await scores.find().skip(1000).to_list())
    cursor = scores.find({"level": 1}, {"_id": 1}).sort("_id", 1).skip(3).limit(4)
    print("explain has plan:", "queryPlanner" in await scores.find({"level": 1}).explain())
    print("collation-free sorted ids:", [d["_id"] for d in await cursor.to_list()])
    print("count after changes:", await scores.count_documents({}), await scores.count_documents({}, limit=5))

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
