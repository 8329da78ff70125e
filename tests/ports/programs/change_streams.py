"""Change streams: watch() a collection and a database, read events, resume after a token."""

import asyncio
import sys

from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

DB = "port_change_streams"


def describe(change):
    document = change.get("fullDocument")
    shown = {key: value for key, value in document.items() if key != "_id"} if document else None
    return change["operationType"], change["ns"]["coll"], shown


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    db = client[DB]
    tasks = db.tasks
    await db.create_collection("tasks")

    stream = await tasks.watch(full_document="updateLookup")
    print("resume token before events:", stream.resume_token is not None)
    await tasks.insert_one({"title": "write", "done": False})
    await tasks.insert_one({"title": "read", "done": False})
    await tasks.update_one({"title": "write"}, {"$set": {"done": True}})
    await tasks.delete_one({"title": "read"})
    first_token = None
    for _ in range(4):
        change = await stream.next()
        print("event:", *describe(change))
        if change["operationType"] == "update":
            print("   updated fields:", change["updateDescription"]["updatedFields"])
        if first_token is None:
            first_token = change["_id"]
    print("token after events:", stream.resume_token is not None, stream.alive)
    print("nothing more:", await stream.try_next())
    await stream.close()
    print("closed:", stream.alive)

    async with await tasks.watch(resume_after=first_token) as resumed:
        replayed = [describe(await resumed.next())[0] for _ in range(3)]
        print("resumed after first:", replayed)

    pipeline = [{"$match": {"operationType": "insert", "fullDocument.priority": {"$gte": 2}}}]
    async with await tasks.watch(pipeline) as stream:
        await tasks.insert_many([{"title": "low", "priority": 1}, {"title": "high", "priority": 3}])
        async for change in stream:
            print("filtered:", *describe(change))
            break

    async with await db.watch() as stream:
        await db.notes.insert_one({"text": "db-level"})
        await tasks.replace_one({"title": "write"}, {"title": "write", "done": "maybe"})
        for _ in range(2):
            change = await stream.next()
            print("db event:", *describe(change))

    async with await client.watch(pipeline=[{"$match": {"ns.db": DB}}]) as stream:
        await db.notes.insert_one({"text": "client-level"})
        change = await stream.next()
        print("client event:", *describe(change), change["ns"]["db"] == DB)

    async with await tasks.watch(full_document_before_change="whenAvailable") as stream:
        await tasks.delete_many({})
        kinds = sorted([(await stream.next())["operationType"] for _ in range(3)])
        print("delete_many events:", kinds)

    async with await tasks.watch(max_await_time_ms=50) as stream:
        print("idle try_next:", await stream.try_next())

    async with await tasks.watch() as stream:
        await tasks.drop()
        change = await stream.next()
        print("drop:", change["operationType"])
        change = await stream.next()
        print("then:", change["operationType"])
        try:
            await stream.next()
        except (StopAsyncIteration, PyMongoError) as error:
            print("after invalidate:", type(error).__name__, stream.alive)

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
