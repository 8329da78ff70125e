"""PyMongo's bson values stored and read back: the classes code checks with isinstance, and json_util."""

import asyncio
import datetime
import sys
import uuid

from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp, json_util
from bson.binary import UuidRepresentation
from bson.codec_options import CodecOptions
from gridfs import AsyncGridFSBucket
from pymongo import AsyncMongoClient

DB = "port_bson_values"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri, uuidRepresentation="standard")
    await client.drop_database(DB)
    values = client[DB].values
    document = {
        "oid": ObjectId("65a0c0ffee00000000000001"),
        "int64": Int64(2**40),
        "small64": Int64(7),
        "dec": Decimal128("3.14159"),
        "bin": Binary(b"\x00\x01", 128),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "regex": Regex("^a.*z$", "i"),
        "code": Code("function () { return 1; }"),
        "ts": Timestamp(1700000000, 5),
        "when": datetime.datetime(2024, 5, 6, 7, 8, 9, 123000),
        "min": MinKey(),
        "max": MaxKey(),
    }
    keys = list(document)
    result = await values.insert_one(document)
    print("generated id is an ObjectId:", isinstance(result.inserted_id, ObjectId))
    stored = await values.find_one({"_id": result.inserted_id})
    for key in keys:
        value = stored[key]
        print(f"{key}: {type(value).__module__.split('.')[0]}.{type(value).__name__} {value!r}")
    print("equal to what was stored:", all(stored[key] == document[key] for key in keys))
    json_options = json_util.CANONICAL_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.STANDARD)
    print("json:", json_util.dumps({key: stored[key] for key in keys}, json_options=json_options))

    typed = values.with_options(codec_options=CodecOptions(tz_aware=True, uuid_representation=UuidRepresentation.STANDARD))
    aware = await typed.find_one({}, {"when": 1, "_id": 0})
    print("tz_aware:", aware["when"].isoformat())
    print("query by bson values:", await values.count_documents({"dec": Decimal128("3.14159"), "int64": 2**40}))

    bucket = AsyncGridFSBucket(client[DB])
    file_id = await bucket.upload_from_stream("f", b"data")
    print("gridfs id is an ObjectId:", isinstance(file_id, ObjectId))
    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
