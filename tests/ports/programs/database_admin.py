"""Database administration: collections, options, renames, commands, server and database information."""

import asyncio
import sys

from pymongo import AsyncMongoClient
from pymongo.errors import CollectionInvalid, OperationFailure

DB = "port_database_admin"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    db = client[DB]

    print("ping:", (await client.admin.command("ping"))["ok"])
    info = await client.server_info()
    print("server info:", sorted(key for key in ("version", "versionArray", "ok") if key in info))
    hello = await client.admin.command("hello")
    print("hello:", hello["isWritablePrimary"], "setName" in hello, hello["maxBsonObjectSize"])

    await db.create_collection("events", capped=True, size=4096, max=3)
    await db.create_collection("users", validator={"$jsonSchema": {"required": ["email"]}})
    await db.create_collection("archive")
    print("collections:", sorted(await db.list_collection_names()))
    print("filtered:", await db.list_collection_names(filter={"name": {"$regex": "^u"}}))
    listed = {c["name"]: c async for c in await db.list_collections()}
    print("capped options:", listed["events"]["options"].get("capped"), listed["events"]["options"].get("max"))
    print("validator kept:", "validator" in listed["users"]["options"], listed["archive"]["type"])
    options = await db.events.options()
    print("options():", options.get("capped"), options.get("size"))

    for i in range(5):
        await db.events.insert_one({"i": i})
    print("capped keeps last:", [d["i"] async for d in db.events.find({}, {"_id": 0})])

    try:
        await db.create_collection("archive")
    except CollectionInvalid:
        print("exists: CollectionInvalid")
    again = await db.create_collection("archive", check_exists=False)
    print("check_exists=False:", again.name)

    await db.archive.insert_many([{"n": 1}, {"n": 2}])
    renamed = await db.archive.rename("archive_2024")
    print("renamed:", renamed["ok"], sorted(await db.list_collection_names()))
    try:
        await db.users.rename("archive_2024")
    except OperationFailure as error:
        print("rename onto existing:", error.code)
    await db.users.rename("archive_2024", dropTarget=True)
    print("rename dropTarget:", sorted(await db.list_collection_names()))

    stats = await db.command("dbStats")
    print("dbStats:", stats["db"], stats["ok"], "collections" in stats)
    count = await db.command({"count": "events"})
    print("count command:", count["n"])
    result = await db.command("collMod", "archive_2024", validator={})
    print("collMod ok:", result["ok"])
    validated = await db.validate_collection("events")
    print("validate:", validated["valid"], validated["ns"])

    names = await client.list_database_names()
    print("database listed:", DB in names)
    databases = {d["name"]: d async for d in await client.list_databases()}
    print("list_databases entry:", sorted(k for k in databases[DB] if k in ("name", "sizeOnDisk", "empty")))

    print("drop missing collection:", (await db.drop_collection("never_made"))["ok"])
    await db.drop_collection("events")
    await db["archive_2024"].drop()
    print("after drops:", await db.list_collection_names())
    print("client db names:", db.name, db.client is client, db.events.full_name, db.events.database.name)
    print("sub collection:", db.events.sub.name, db["events.sub"].full_name)

    await client.drop_database(DB)
    print("dropped:", DB in await client.list_database_names())
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
