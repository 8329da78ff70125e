"""The PyMongo-typed mode against the test server: what an application typed against PyMongo sees.

Run in a fresh interpreter, since turning the mode on changes mongio's error classes for the whole process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.server

PROGRAM = textwrap.dedent(
    """
    import asyncio, datetime, sys, uuid
    import bson, pymongo.errors
    from bson import Binary, Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
    from mongio import AsyncMongoClient
    from mongio.gridfs import AsyncGridFSBucket

    EVERY_TYPE = {
        "oid": ObjectId(), "i64": Int64(5), "ts": Timestamp(5, 6), "bin": Binary(b"x", 0x80),
        "uuid": Binary(uuid.UUID(int=7).bytes, 4), "code": Code("f()", {"a": 1}), "re": Regex("^a", "i"),
        "dec": Decimal128("1.5"), "ref": DBRef("c", ObjectId()), "min": MinKey(), "max": MaxKey(),
        "when": datetime.datetime(2024, 5, 6, 7, 8, 9, 10000), "nested": {"list": [ObjectId(), Int64(1)]},
    }

    def classes(value):
        if isinstance(value, dict):
            return {key: classes(item) for key, item in value.items()}
        if isinstance(value, list):
            return [classes(item) for item in value]
        return type(value).__module__.split(".")[0] + "." + type(value).__name__

    async def main(uri):
        async with AsyncMongoClient(uri, pymongoTypes=True) as client:
            coll = client.pymongo_types_test.docs
            await coll.drop()
            generated = {"n": 1}
            result = await coll.insert_one(generated)
            print("generated", classes(result.inserted_id), generated["_id"] is result.inserted_id)
            await coll.insert_one(dict(EVERY_TYPE, _id=1))
            found = await coll.find_one({"_id": 1})
            print("same bytes", bson.encode(found) == bson.encode(dict(EVERY_TYPE, _id=1)))
            print("classes", sorted(set(str(v) for v in classes(found).values() if isinstance(v, str))))
            print("nested", classes(found["nested"]))
            by_id = await coll.find_one({"_id": result.inserted_id})
            print("found by generated id", by_id == {"_id": result.inserted_id, "n": 1})
            rows = [classes(doc["_id"]) async for doc in coll.find({"n": 1})]
            grouped = await (await coll.aggregate([{"$group": {"_id": None, "n": {"$sum": "$n"}}}])).to_list()
            print("cursor", rows, "aggregate", grouped)
            reply = await client.pymongo_types_test.command("ping")
            print("command", classes(reply.get("operationTime")))
            await coll.create_index("n", unique=True)
            try:
                await coll.insert_one({"n": 1})
            except pymongo.errors.DuplicateKeyError as error:
                print("caught", type(error).__name__, error.code)
            async with client.start_session() as session:
                async with await session.start_transaction():
                    await coll.insert_one({"n": 2}, session=session)
                await coll.find_one({"n": 2}, session=session)
            print("transaction", await coll.count_documents({"n": 2}))
            bucket = AsyncGridFSBucket(client.pymongo_types_test)
            file_id = await bucket.upload_from_stream("f.txt", b"data")
            stored = await bucket.open_download_stream(file_id)
            print("gridfs", classes(file_id), classes(stored._id), await stored.read())

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_typed_client_reads_and_writes_pymongo_values(server_uri: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, server_uri], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "generated bson.ObjectId True"
    assert lines[1] == "same bytes True"
    assert lines[2] == (
        "classes ['bson.Binary', 'bson.Code', 'bson.DBRef', 'bson.Decimal128', 'bson.Int64', 'bson.MaxKey', "
        "'bson.MinKey', 'bson.ObjectId', 'bson.Regex', 'bson.Timestamp', 'builtins.int', 'datetime.datetime']"
    )
    assert lines[3] == "nested {'list': ['bson.ObjectId', 'bson.Int64']}"
    assert lines[4] == "found by generated id True"
    assert lines[5] == "cursor ['bson.ObjectId'] aggregate [{'_id': None, 'n': 1}]"
    assert lines[6] == "command bson.Timestamp"
    assert lines[7] == "caught DuplicateKeyError 11000"
    assert lines[8] == "transaction 1"
    assert lines[9] == "gridfs bson.ObjectId bson.ObjectId b'data'"
