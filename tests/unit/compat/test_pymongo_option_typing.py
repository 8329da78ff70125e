"""PyMongo's option objects type-check where mongio's signatures take them (mongio.options.protocols).

This file is itself checked by the project's strict mypy run: every call below passes PyMongo's objects with no
``type: ignore``. The tests run those calls (the ones that need no server) to show each object is also
converted at runtime, and run mypy on a small program to show the protocols still refuse an object of the
wrong kind.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pymongo
import pytest
from bson import Timestamp as PyMongoTimestamp
from bson.codec_options import CodecOptions as PyMongoCodecOptions
from pymongo.driver_info import DriverInfo as PyMongoDriverInfo
from pymongo.read_concern import ReadConcern as PyMongoReadConcern
from pymongo.read_preferences import ReadPreference as PyMongoReadPreference

from mongio import Collection, Database, MongoClient, ReadConcern, WriteConcern
from mongio.bson import CodecOptions, Timestamp
from mongio.gridfs import GridFSBucket
from mongio.options.read_preference import Nearest, Secondary

PYMONGO_CODEC_OPTIONS: PyMongoCodecOptions[dict[str, Any]] = PyMongoCodecOptions(tz_aware=True)
PYMONGO_WRITE_CONCERN = pymongo.WriteConcern(w=2, j=True)
PYMONGO_READ_CONCERN = PyMongoReadConcern("majority")
PYMONGO_READ_PREFERENCE = PyMongoReadPreference.SECONDARY


def client() -> MongoClient:
    return MongoClient("mongodb://127.0.0.1:1/", connect=False)


def assert_converted(target: Database[Any] | Collection[Any]) -> None:
    """``target`` holds mongio's objects with the settings of the PyMongo ones it was given."""
    assert type(target.codec_options) is CodecOptions and target.codec_options.tz_aware
    assert target.read_preference == Secondary()
    assert type(target.write_concern) is WriteConcern and target.write_concern.document == {"w": 2, "j": True}
    assert target.read_concern == ReadConcern("majority")


def test_databases_take_pymongo_options_by_position_and_keyword() -> None:
    mongo = client()
    assert_converted(
        mongo.get_database(
            "d", PYMONGO_CODEC_OPTIONS, PYMONGO_READ_PREFERENCE, PYMONGO_WRITE_CONCERN, PYMONGO_READ_CONCERN
        )
    )
    assert_converted(
        mongo.get_default_database(
            "d",
            codec_options=PYMONGO_CODEC_OPTIONS,
            read_preference=PYMONGO_READ_PREFERENCE,
            write_concern=PYMONGO_WRITE_CONCERN,
            read_concern=PYMONGO_READ_CONCERN,
        )
    )
    assert_converted(
        Database(mongo, "d", PYMONGO_CODEC_OPTIONS, PYMONGO_READ_PREFERENCE, PYMONGO_WRITE_CONCERN, PYMONGO_READ_CONCERN)
    )
    assert_converted(
        mongo.d.with_options(
            codec_options=PYMONGO_CODEC_OPTIONS,
            read_preference=PYMONGO_READ_PREFERENCE,
            write_concern=PYMONGO_WRITE_CONCERN,
            read_concern=PYMONGO_READ_CONCERN,
        )
    )


def test_collections_take_pymongo_options_by_position_and_keyword() -> None:
    database = client().d
    assert_converted(
        database.get_collection(
            "c", PYMONGO_CODEC_OPTIONS, PYMONGO_READ_PREFERENCE, PYMONGO_WRITE_CONCERN, PYMONGO_READ_CONCERN
        )
    )
    assert_converted(
        Collection(
            database,
            "c",
            codec_options=PYMONGO_CODEC_OPTIONS,
            read_preference=PYMONGO_READ_PREFERENCE,
            write_concern=PYMONGO_WRITE_CONCERN,
            read_concern=PYMONGO_READ_CONCERN,
        )
    )
    assert_converted(
        database.c.with_options(
            PYMONGO_CODEC_OPTIONS, PYMONGO_READ_PREFERENCE, PYMONGO_WRITE_CONCERN, PYMONGO_READ_CONCERN
        )
    )


def test_a_gridfs_bucket_takes_pymongo_concerns_and_read_preference() -> None:
    bucket = GridFSBucket(
        client().d,
        write_concern=PYMONGO_WRITE_CONCERN,
        read_preference=PyMongoReadPreference.NEAREST,
        read_concern=PYMONGO_READ_CONCERN,
    )
    assert bucket._files.write_concern == WriteConcern(w=2, j=True)
    assert bucket._files.read_preference == Nearest()
    assert bucket._chunks.read_concern == ReadConcern("majority")
    with pytest.raises(Exception, match="acknowledged"):
        GridFSBucket(client().d, write_concern=pymongo.WriteConcern(w=0))


def test_sessions_and_metadata_take_pymongo_timestamps_and_driver_info() -> None:
    mongo = client()
    session = mongo.start_session(snapshot=True, snapshot_time=PyMongoTimestamp(10, 1))
    assert session.snapshot_time == Timestamp(10, 1)
    session.advance_operation_time(PyMongoTimestamp(20, 2))
    assert session.operation_time == Timestamp(20, 2)
    mongo.append_metadata(PyMongoDriverInfo("odm", "2.0"))
    assert mongo._metadata.document["driver"]["name"].endswith("|odm")


async def test_database_commands_convert_a_pymongo_read_preference(monkeypatch: pytest.MonkeyPatch) -> None:
    database = client().d
    sent: list[Any] = []

    async def run(operation: Any, session: Any, **options: Any) -> dict[str, Any]:
        sent.append(operation)
        return {"ok": 1}

    monkeypatch.setattr(database.client._executor, "execute", run)
    await database.command("ping", read_preference=PyMongoReadPreference.SECONDARY_PREFERRED)
    assert sent[0].read_preference.document == {"mode": "secondaryPreferred"}
    assert type(sent[0].read_preference).__module__ == "mongio.options.read_preference"


async def _io_signatures(mongo: MongoClient, database: Database[Any], collection: Collection[Any]) -> None:
    """The signatures that do I/O, for the type checker only (running them needs a server; the conversions they
    rely on are tested in test_pymongo_objects.py)."""
    await mongo.bulk_write([pymongo.InsertOne({"a": 1}, namespace="d.c")], write_concern=PYMONGO_WRITE_CONCERN)
    await collection.bulk_write([pymongo.UpdateOne({"a": 1}, {"$set": {"b": 2}}), pymongo.DeleteMany({})])
    await collection.create_indexes([pymongo.IndexModel([("a", pymongo.ASCENDING)])])
    await database.command("ping", read_preference=PYMONGO_READ_PREFERENCE, codec_options=PYMONGO_CODEC_OPTIONS)
    await database.cursor_command("find", read_preference=PYMONGO_READ_PREFERENCE)
    await database.create_collection(
        "c",
        codec_options=PYMONGO_CODEC_OPTIONS,
        read_preference=PYMONGO_READ_PREFERENCE,
        write_concern=PYMONGO_WRITE_CONCERN,
        read_concern=PYMONGO_READ_CONCERN,
    )


# Each line marked "refused:" must draw exactly that mypy error code; no other line may draw any.
PROGRAM = textwrap.dedent(
    """
    import pymongo
    from pymongo.read_concern import ReadConcern
    from pymongo.read_preferences import ReadPreference
    from mongio import MongoClient

    client = MongoClient(connect=False)
    client.get_database("d", write_concern=pymongo.WriteConcern(w=1), read_concern=ReadConcern("local"))
    client.d.get_collection("c", read_preference=ReadPreference.NEAREST)
    client.get_database("d", write_concern=ReadConcern("local"))  # refused: arg-type
    client.get_database("d", read_concern=pymongo.WriteConcern(w=1))  # refused: arg-type
    client.get_database("d", read_preference="secondary")  # refused: arg-type
    client.d.get_collection("c", codec_options={"tz_aware": True})  # refused: arg-type
    client.d.c.with_options(write_concern=1)  # refused: arg-type

    async def writes() -> None:
        await client.d.c.bulk_write([pymongo.InsertOne({"a": 1})])
        await client.d.c.bulk_write([{"insertOne": {"a": 1}}])  # refused: list-item
    """
)


def test_mypy_accepts_pymongo_objects_and_still_refuses_other_kinds(tmp_path: Path) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    program = tmp_path / "uses_pymongo_objects.py"
    program.write_text(PROGRAM)
    report, errors, _ = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(program)]
    )
    assert not errors
    drawn: dict[int, set[str]] = {}
    for line in report.splitlines():
        if f"{program.name}:" in line and ": error: " in line:
            number = int(line.split(":")[1])
            drawn.setdefault(number, set()).add(line.rsplit("[", 1)[-1].rstrip("]"))
    expected = {
        number: {line.split("# refused: ")[1]}
        for number, line in enumerate(PROGRAM.splitlines(), start=1)
        if "# refused: " in line
    }
    assert len(expected) == 6
    assert drawn == expected, report
