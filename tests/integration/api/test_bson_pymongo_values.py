"""Documents holding PyMongo's ``bson`` values, written through the driver and read back: every value is
stored as its own BSON type (none becomes the bytes, str or int it subclasses) and reads back equal."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import bson
import bson.binary
import bson.code
import bson.datetime_ms
import bson.dbref
import bson.decimal128
import bson.int64
import bson.max_key
import bson.min_key
import bson.objectid
import bson.regex
import bson.timestamp
import pytest

from mongio.bson import Binary, Code, Int64, ObjectId
from mongio.client import MongoClient
from mongio.collection import Collection


@pytest.fixture
async def coll(server_uri: str) -> AsyncIterator[Collection[Any]]:
    async with MongoClient(server_uri) as client:
        name = f"interop_{uuid.uuid4().hex[:12]}"
        yield client[name].values
        await client.drop_database(name)


async def test_pymongo_values_are_stored_as_their_bson_types(coll: Collection[Any]) -> None:
    oid = bson.objectid.ObjectId()
    document = {
        "_id": oid,
        "user_binary": bson.binary.Binary(b"\x01\x02", 0x80),
        "uuid": bson.binary.Binary.from_uuid(uuid.UUID(int=12345)),
        "code": bson.code.Code("function () { return 1; }"),
        "int64": bson.int64.Int64(5),
        "decimal": bson.decimal128.Decimal128("1.10"),
        "regex": bson.regex.Regex("^a", re.IGNORECASE),
        "timestamp": bson.timestamp.Timestamp(5, 6),
        "ref": bson.dbref.DBRef("other", bson.objectid.ObjectId(), "db"),
        "min": bson.min_key.MinKey(),
        "max": bson.max_key.MaxKey(),
        "millis": bson.datetime_ms.DatetimeMS(1_000),
    }
    await coll.insert_one(document)
    # $type asks the server what it stored, so a value written as its base class would not match.
    types = {"user_binary": "binData", "uuid": "binData", "code": "javascript", "int64": "long"}
    for field, bson_type in types.items():
        assert await coll.count_documents({field: {"$type": bson_type}}) == 1, field
    stored = await coll.find_one({"_id": oid})
    assert stored is not None
    assert type(stored["_id"]) is ObjectId and stored["_id"] == oid
    assert type(stored["int64"]) is Int64 and stored["int64"] == 5
    assert type(stored["code"]) is Code
    assert stored["user_binary"] == Binary(b"\x01\x02", 0x80) and stored["uuid"].subtype == 4
    for field, value in document.items():
        if field != "millis":  # read back as a datetime under the default codec options
            assert stored[field] == value, field
    assert await coll.count_documents({"_id": stored["_id"]}) == 1
