"""PyMongo's option objects type-check where mongio's signatures take them (mongio.options.protocols).

This file is itself checked by the project's strict mypy run: every call below passes PyMongo's objects with no
``type: ignore``. The tests run those calls (the ones that need no server) to show each object is also
converted at runtime, and run mypy on a small program to show the protocols still refuse an object of the
wrong kind.

A second program, typed with ``MongoClient[Movie]`` (``Movie`` a ``TypedDict``), is checked twice in one mypy
run: once importing PyMongo's asynchronous classes and once mongio's, under the same names, with the same
annotations. It passes under both but for its deliberate mistakes, and each of those draws the same error
under both.
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


def mypy_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *programs: Path) -> dict[str, dict[int, set[str]]]:
    """The error codes ``mypy --strict`` draws on each line of each program, by program name. mypy is pointed
    at the mongio the tests import (not at whatever copy is installed in the environment)."""
    mypy_api = pytest.importorskip("mypy.api")
    import mongio

    monkeypatch.setenv("MYPYPATH", str(Path(mongio.__file__).parents[1]))
    report, errors, _ = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"]
        + [str(program) for program in programs]
    )
    assert not errors
    drawn: dict[str, dict[int, set[str]]] = {program.name: {} for program in programs}
    for line in report.splitlines():
        name, _, rest = line.partition(":")
        lines = drawn.get(Path(name).name)
        if lines is not None and ": error: " in rest:
            lines.setdefault(int(rest.split(":")[0]), set()).add(line.rsplit("[", 1)[-1].rstrip("]"))
    return drawn


def refusals(program: str, driver: str = "") -> dict[int, set[str]]:
    """The error code each line marked "refused:" (or, for ``driver`` only, "<driver> refuses:") must draw, by
    line number."""
    markers = ("# refused: ", f"# {driver} refuses: ") if driver else ("# refused: ",)
    return {
        number: {line.split(marker)[1]}
        for number, line in enumerate(program.splitlines(), start=1)
        for marker in markers
        if marker in line
    }


def test_mypy_accepts_pymongo_objects_and_still_refuses_other_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "uses_pymongo_objects.py"
    program.write_text(PROGRAM)
    drawn = mypy_errors(tmp_path, monkeypatch, program)[program.name]
    expected = refusals(PROGRAM)
    assert len(expected) == 6
    assert drawn == expected


# One program, two sets of imports with the same names and the same number of lines. Each line marked
# "refused:" must draw exactly that mypy error code under both drivers; no other line may draw any.
TYPED_PROGRAM = """\
from typing import Any, TypedDict

{imports}


class Movie(TypedDict):
    name: str
    year: int


async def typed() -> None:
    client: Client[Movie] = Client(connect=False)
    database: Database[Movie] = client.get_database("films")
    movies: Collection[Movie] = database.movies
    same: Collection[Movie] = client["films"]["movies"].with_options()
    await movies.insert_one({{"name": "Alien", "year": 1979}})
    await movies.insert_many([{{"name": "Heat", "year": 1995}}])
    found = await movies.find_one({{"year": 1979}})
    if found is not None:
        name: str = found["name"]
        year: int = found["year"]
    async for movie in movies.find({{"year": {{"$gt": 1990}}}}):
        title: str = movie["name"]
    every: list[Movie] = await movies.find().to_list(None)
    async for row in await movies.aggregate([{{"$match": {{}}}}]):
        released: int = row["year"]
    updated: Movie | None = await movies.find_one_and_update({{"name": "Heat"}}, {{"$set": {{"year": 1996}}}})
    untyped: Client[dict[str, Any]] = Client(connect=False)
    anything: dict[str, Any] | None = await untyped.films.movies.find_one()

    await movies.insert_one({{"name": "Alien", "year": "1979"}})  # refused: arg-type
    await movies.insert_one({{"title": "Alien", "year": 1979}})  # refused: arg-type
    await movies.insert_one(["Alien", 1979])  # refused: arg-type
    surely: Movie = await movies.find_one()  # refused: assignment
    print(found["name"])  # refused: index
    if found is not None:
        print(found["rating"])  # refused: typeddict-item
        wrong: int = found["name"]  # refused: assignment
    other: Collection[dict[str, Any]] = movies  # refused: assignment
    mixed: Database[Movie] = untyped.films  # refused: assignment
"""

# The declared difference "unparameterised-generic-classes" (differences.yaml): unparameterised, mongio's
# classes are over dict[str, Any], where PyMongo's refuse the annotation.
BARE_PROGRAM = """\
from typing import Any

{imports}


async def bare(given: Client) -> None:  # pymongo refuses: type-arg
    client = Client(connect=False)  # pymongo refuses: var-annotated
    found: dict[str, Any] | None = await client.db.coll.find_one()
    named: str = await given.db.coll.find_one() or {{}}  # refused: assignment
"""

TYPED_IMPORTS = {
    "pymongo": """\
from pymongo import AsyncMongoClient as Client
from pymongo.asynchronous.collection import AsyncCollection as Collection
from pymongo.asynchronous.database import AsyncDatabase as Database""",
    "mongio": """\
from mongio import MongoClient as Client
from mongio import Collection
from mongio import Database""",
}


def test_a_program_typed_with_a_typeddict_checks_the_same_under_pymongo_and_mongio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = []
    for driver, imports in TYPED_IMPORTS.items():
        for name, text in (("typed", TYPED_PROGRAM), ("bare", BARE_PROGRAM)):
            program = tmp_path / f"{name}_with_{driver}.py"
            program.write_text(text.format(imports=imports))
            programs.append(program)
    drawn = mypy_errors(tmp_path, monkeypatch, *programs)
    # Both sets of imports are three lines: the programs' line numbers are the same under both.
    typed = TYPED_PROGRAM.format(imports=TYPED_IMPORTS["mongio"])
    bare = BARE_PROGRAM.format(imports=TYPED_IMPORTS["mongio"])
    expected = refusals(typed)
    assert len(expected) == 9
    assert drawn["typed_with_pymongo.py"] == expected
    assert drawn["typed_with_mongio.py"] == expected
    # Unparameterised: one refusal under both; PyMongo's two more are the declared difference.
    assert drawn["bare_with_pymongo.py"] == refusals(bare, "pymongo")
    assert drawn["bare_with_mongio.py"] == refusals(bare, "mongio")
    assert len(refusals(bare, "pymongo")) == 3 and len(refusals(bare, "mongio")) == 1
