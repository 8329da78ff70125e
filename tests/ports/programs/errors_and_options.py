"""Errors caught by PyMongo's names, read preferences and concerns by PyMongo's names, bson.json_util output."""

import asyncio
import sys

from bson import json_util
from bson.son import SON
from pymongo import AsyncMongoClient, ReadPreference, WriteConcern
from pymongo.errors import (
    CollectionInvalid,
    ConfigurationError,
    DuplicateKeyError,
    InvalidName,
    InvalidOperation,
    InvalidURI,
    OperationFailure,
    PyMongoError,
    WriteError,
)
from pymongo.read_concern import ReadConcern
from pymongo.read_preferences import Nearest, Secondary, SecondaryPreferred

DB = "port_errors_and_options"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    db = client[DB]

    await db.create_collection("strict", validator={"$jsonSchema": {"required": ["name"]}})
    try:
        await db.create_collection("strict")
    except CollectionInvalid as error:
        print("create twice: CollectionInvalid", isinstance(error, PyMongoError))
    try:
        await db.strict.insert_one({"nameless": True})
    except WriteError as error:
        print("validation:", error.code, isinstance(error, OperationFailure), error.details["code"])
    await db.strict.insert_one({"_id": 1, "name": "ok"})
    try:
        await db.strict.insert_one({"_id": 1, "name": "again"})
    except WriteError as error:
        print("duplicate is a WriteError:", isinstance(error, DuplicateKeyError), error.code)
    try:
        await db.strict.update_one({"_id": 1}, {"$unset": {"name": ""}})
    except OperationFailure as error:
        print("update breaking validation:", error.code)
    try:
        await db.command("collMod", "missing_collection", validator={})
    except OperationFailure as error:
        print("command failure:", error.code, error.details.get("codeName"), "ok" in error.details)

    for bad_name in ["", "has$dollar", "bad..dots"]:
        try:
            db[bad_name]
        except InvalidName:
            print("invalid collection name:", repr(bad_name))
    try:
        client[""]
    except InvalidName:
        print("invalid database name")

    try:
        AsyncMongoClient("http://localhost")
    except InvalidURI:
        print("InvalidURI: http://localhost")
    try:
        AsyncMongoClient("mongodb://host:notaport")
    except (ConfigurationError, ValueError):
        print("refused: mongodb://host:notaport")
    try:
        AsyncMongoClient(uri, w="majority", journal="sometimes")
    except (ConfigurationError, ValueError, TypeError) as error:
        print("bad option refused:", isinstance(error, (ConfigurationError, ValueError, TypeError)))

    print("default read preference:", client.read_preference.name, client.read_preference.mode)
    secondary_ok = db.strict.with_options(read_preference=ReadPreference.SECONDARY_PREFERRED)
    print("with_options:", secondary_ok.read_preference.name, secondary_ok.read_preference == SecondaryPreferred())
    print("read from secondaryPreferred:", (await secondary_ok.find_one({"_id": 1}))["name"])
    tagged = Nearest(tag_sets=[{"dc": "east"}, {}], max_staleness=120)
    print("nearest:", tagged.name, tagged.mode, tagged.tag_sets, tagged.max_staleness, tagged.document)
    print("secondary document:", Secondary().document, ReadPreference.PRIMARY.document)
    majority = db.get_collection("strict", write_concern=WriteConcern(w="majority", wtimeout=1000),
                                 read_concern=ReadConcern("majority"))
    print("concerns:", sorted(majority.write_concern.document.items()), majority.read_concern.document,
          majority.write_concern.acknowledged, WriteConcern(w=0).acknowledged)
    await majority.insert_one({"_id": 2, "name": "majority"})
    unacknowledged = db.get_collection("strict", write_concern=WriteConcern(w=0))
    result = await unacknowledged.insert_one({"_id": 3, "name": "fire and forget"})
    print("unacknowledged:", result.acknowledged)
    try:
        print((await unacknowledged.update_one({"_id": 3}, {"$set": {"x": 1}})).modified_count)
    except InvalidOperation:
        print("counts of an unacknowledged write: InvalidOperation")
    primary_client = AsyncMongoClient(uri, readPreference="secondaryPreferred", w="majority", readConcernLevel="local")
    print("from uri:", primary_client.read_preference.name, primary_client.write_concern.document,
          primary_client.read_concern.level)
    await primary_client.close()

    await db.strict.insert_one({"_id": 4, "name": "json", "tags": SON([("b", 1), ("a", 2)])})
    document = await db.strict.find_one({"_id": 4})
    print("json:", json_util.dumps(document, sort_keys=True))
    print("relaxed json:", json_util.dumps(document, json_options=json_util.RELAXED_JSON_OPTIONS))
    back = json_util.loads('{"when": {"$date": "2024-01-02T03:04:05Z"}, "n": {"$numberLong": "7"}}')
    await db.strict.insert_one({"_id": 5, "name": "from json", **back})
    stored = await db.strict.find_one({"_id": 5}, {"_id": 0})
    print("json round trip:", json_util.dumps(stored))
    print("acknowledged documents:", await db.strict.count_documents({"_id": {"$ne": 3}}))

    await client.close()
    try:
        await db.strict.find_one()
    except InvalidOperation:
        print("after close: InvalidOperation")
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
