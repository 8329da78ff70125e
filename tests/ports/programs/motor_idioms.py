"""Written for Motor: sessions, transactions, change streams, cursors and GridFS the way Motor code uses them."""

import asyncio
import sys

from bson import ObjectId
from motor.motor_asyncio import AsyncIOMotorClient, AsyncIOMotorGridFSBucket
from pymongo import DESCENDING, InsertOne, UpdateOne
from pymongo.errors import DuplicateKeyError

DB = "port_motor_idioms"


async def main(uri: str) -> None:
    client = AsyncIOMotorClient(uri)
    await client.drop_database(DB)
    db = client[DB]
    posts = db.posts
    await posts.create_index("slug", unique=True)

    result = await posts.insert_many(
        [{"slug": f"post-{i}", "votes": i * 3 % 10, "tags": ["a", "b"][: i % 3]} for i in range(8)]
    )
    print("inserted:", len(result.inserted_ids))
    top = await posts.find({}, {"_id": 0, "slug": 1}).sort("votes", DESCENDING).limit(3).to_list(None)
    print("top:", [doc["slug"] for doc in top])
    some = await posts.find().sort("slug").to_list(length=2)
    print("length 2:", [doc["slug"] for doc in some])

    cursor = posts.aggregate([{"$unwind": "$tags"}, {"$group": {"_id": "$tags", "n": {"$sum": 1}}},
                              {"$sort": {"_id": 1}}])
    print("tag counts:", [(doc["_id"], doc["n"]) async for doc in cursor])
    print("indexes:", [index["name"] async for index in posts.list_indexes()])
    print("collections:", await db.list_collection_names())

    async with await client.start_session() as session:
        async with session.start_transaction():
            await posts.update_one({"slug": "post-1"}, {"$inc": {"votes": 100}}, session=session)
            await posts.insert_one({"slug": "draft", "votes": 0}, session=session)
        print("committed:", (await posts.find_one({"slug": "post-1"}))["votes"],
              await posts.count_documents({"slug": "draft"}))

        async def callback(s):
            await posts.delete_one({"slug": "draft"}, session=s)
            return "deleted draft"

        print("with_transaction:", await session.with_transaction(callback))
        try:
            async with session.start_transaction():
                await posts.insert_one({"slug": "post-2"}, session=session)
        except DuplicateKeyError as error:
            print("transaction aborted on:", error.code, session.in_transaction)

    async with posts.watch() as stream:
        await posts.insert_one({"slug": "live", "votes": 1})
        await posts.update_one({"slug": "live"}, {"$inc": {"votes": 1}})
        async for change in stream:
            print("change:", change["operationType"], change.get("fullDocument", {}).get("slug"))
            if change["operationType"] == "update":
                break
        print("token:", stream.resume_token is not None)

    bulk = await posts.bulk_write([InsertOne({"slug": "bulk"}), UpdateOne({"slug": "bulk"}, {"$set": {"v": 1}})])
    print("bulk:", bulk.inserted_count, bulk.modified_count)

    bucket = AsyncIOMotorGridFSBucket(db)
    file_id = await bucket.upload_from_stream("hello.txt", b"hello motor", metadata={"by": "motor"})
    grid_out = await bucket.open_download_stream(file_id)
    print("gridfs:", grid_out.filename, await grid_out.read(), grid_out.metadata)
    upload = bucket.open_upload_stream("streamed.txt")
    await upload.write(b"part one, ")
    await upload.write(b"part two")
    await upload.close()
    print("gridfs files:", [(f.filename, f.length) async for f in bucket.find({}).sort("filename", 1)])
    listed = await bucket.find({"length": {"$gt": 11}}).to_list(None)
    print("to_list gives documents:", [f["filename"] for f in listed], "sizes:", *[f["length"] for f in listed])
    await bucket.delete(file_id)
    print("after delete:", len(await bucket.find().to_list(None)), ObjectId.is_valid(str(upload._id)))

    print("databases include ours:", DB in await client.list_database_names())
    await client.drop_database(DB)
    client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
