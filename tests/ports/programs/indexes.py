"""Indexes: create_index, create_indexes with IndexModel, index_information, list_indexes, drop, unique keys."""

import asyncio
import sys

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, IndexModel
from pymongo.errors import DuplicateKeyError, OperationFailure

DB = "port_indexes"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    people = client[DB].people

    name = await people.create_index("email", unique=True)
    print("create_index:", name)
    name = await people.create_index([("last", ASCENDING), ("first", DESCENDING)], name="by_name")
    print("compound:", name)
    names = await people.create_indexes([
        IndexModel([("age", DESCENDING)]),
        IndexModel("city", sparse=True),
        IndexModel([("created", ASCENDING)], expireAfterSeconds=3600, name="ttl_created"),
        IndexModel([("nick", ASCENDING)], unique=True, partialFilterExpression={"nick": {"$type": "string"}}),
    ])
    print("create_indexes:", names)
    print("again is a no-op:", await people.create_index("email", unique=True))

    info = await people.index_information()
    for index_name in sorted(info):
        entry = info[index_name]
        extras = {k: entry[k] for k in ("unique", "sparse", "expireAfterSeconds") if k in entry}
        if "partialFilterExpression" in entry:
            extras["partial"] = entry["partialFilterExpression"] == {"nick": {"$type": "string"}}
        print("info:", index_name, entry["key"], extras)

    listed = [index async for index in await people.list_indexes()]
    print("list_indexes:", [(index["name"], list(index["key"].items())) for index in listed])

    await people.insert_one({"email": "a@example.com", "last": "Ng", "first": "Al"})
    try:
        await people.insert_one({"email": "a@example.com"})
    except DuplicateKeyError as error:
        print("duplicate:", error.code, error.details["keyPattern"], error.details["keyValue"])
    await people.insert_many([{"email": "b@example.com", "nick": 5}, {"email": "c@example.com", "nick": 5}])
    print("partial unique allows non-strings:", await people.count_documents({"nick": 5}))

    try:
        await people.create_index("email", unique=False, name="email_1", sparse=True)
    except OperationFailure as error:
        print("conflicting options:", error.code, error.details["codeName"])

    try:
        await people.create_index([("email", ASCENDING)], name="other_email", unique=True)
    except OperationFailure as error:
        print("same key, other name:", error.code, error.details["codeName"])

    await people.drop_index("by_name")
    await people.drop_index([("age", DESCENDING)])
    print("after drop_index:", sorted(await people.index_information()))
    try:
        await people.drop_index("no_such_index")
    except OperationFailure as error:
        print("drop missing:", error.code, error.details["codeName"])

    await people.drop_indexes()
    print("after drop_indexes:", sorted(await people.index_information()))
    await people.insert_one({"email": "a@example.com"})
    print("duplicates allowed now:", await people.count_documents({"email": "a@example.com"}))

    found = await people.find({"email": "a@example.com"}).hint([("_id", ASCENDING)]).to_list()
    print("hinted find:", len(found))

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
