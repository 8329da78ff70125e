"""CRUD keyed by bson.ObjectId: insert, find by id, update, replace, delete, count."""

import asyncio
import sys

from bson import ObjectId
from pymongo import AsyncMongoClient

DB = "port_crud_objectid"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    users = client[DB].users

    alice_id = ObjectId()
    result = await users.insert_one({"_id": alice_id, "name": "alice", "age": 31})
    print("inserted id matches:", result.inserted_id == alice_id, str(result.inserted_id) == str(alice_id))
    print("acknowledged:", result.acknowledged)

    bob = {"name": "bob", "age": 25}
    result = await users.insert_one(bob)
    print("generated id is ObjectId-like:", len(str(result.inserted_id)) == 24, "_id" in bob)
    bob_id = result.inserted_id

    found = await users.find_one({"_id": alice_id})
    print("found alice:", found["name"], found["age"], str(found["_id"]) == str(alice_id))
    print("found _id equals original:", found["_id"] == alice_id)
    print("by string id:", await users.find_one({"_id": str(alice_id)}))
    by_rebuilt = await users.find_one({"_id": ObjectId(str(bob_id))})
    print("by rebuilt ObjectId:", by_rebuilt["name"])
    print("generation time is aware:", found["_id"].generation_time.tzinfo is not None)

    result = await users.update_one({"_id": alice_id}, {"$set": {"age": 32}, "$push": {"tags": "admin"}})
    print("update_one:", result.matched_count, result.modified_count, result.upserted_id)
    result = await users.update_one({"_id": alice_id}, {"$set": {"age": 32}})
    print("update_one no change:", result.matched_count, result.modified_count)
    new_id = ObjectId()
    result = await users.update_one({"_id": new_id}, {"$set": {"name": "carol"}}, upsert=True)
    print("upsert:", result.matched_count, result.modified_count, result.upserted_id == new_id)
    result = await users.update_many({}, {"$inc": {"visits": 1}})
    print("update_many:", result.matched_count, result.modified_count)

    result = await users.replace_one({"_id": bob_id}, {"name": "robert", "age": 26})
    print("replace_one:", result.matched_count, result.modified_count)
    replaced = await users.find_one({"_id": bob_id}, {"_id": 0})
    print("replaced:", replaced)

    print("count all:", await users.count_documents({}))
    print("count age>=30:", await users.count_documents({"age": {"$gte": 30}}))
    print("estimated:", await users.estimated_document_count())

    ids = [doc["_id"] async for doc in users.find({}, {"_id": 1}).sort("name", 1)]
    print("ids in set:", alice_id in ids, bob_id in ids, new_id in ids)
    print("sorted by name:", [doc["name"] async for doc in users.find().sort("name", 1)])

    result = await users.delete_one({"_id": bob_id})
    print("delete_one:", result.deleted_count)
    result = await users.delete_one({"_id": bob_id})
    print("delete_one again:", result.deleted_count)
    result = await users.delete_many({"_id": {"$in": [alice_id, new_id]}})
    print("delete_many:", result.deleted_count)
    print("left:", await users.count_documents({}))

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
