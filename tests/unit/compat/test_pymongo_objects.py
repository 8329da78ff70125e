"""PyMongo's option and model objects are accepted wherever mongio's are, with or without the PyMongo-typed
mode, and mean the same: write models, index models, driver information, read preferences."""

from __future__ import annotations

from typing import Any

import pymongo
import pytest
from pymongo import read_preferences as pymongo_read_preferences
from pymongo.collation import Collation as PyMongoCollation
from pymongo.driver_info import DriverInfo as PyMongoDriverInfo
from pymongo.read_concern import ReadConcern as PyMongoReadConcern

from mongio import MongoClient
from mongio.connection.handshake import ClientMetadata, DriverInfo
from mongio.errors import ConfigurationError
from mongio.operations import ServerLimits, models
from mongio.operations.bulk import BulkWrite
from mongio.operations.indexes import CreateIndexes, DropIndexes
from mongio.options.read_preference import Nearest, Secondary, as_read_preference

COLLATION = {"locale": "fr", "strength": 2}

# The public signatures take PyMongo's objects through the protocols of mongio.options.protocols (checked in
# test_pymongo_option_typing.py); the internal helpers called directly here (BulkWrite, ClientMetadata.append)
# still name mongio's classes only, so those arguments carry a `type: ignore`.

PAIRS: list[tuple[Any, Any]] = [
    (pymongo.InsertOne({"a": 1}), models.InsertOne({"a": 1})),
    (
        pymongo.DeleteOne({"a": 1}, collation=PyMongoCollation("fr", strength=2), hint="a_1"),
        models.DeleteOne({"a": 1}, collation=COLLATION, hint="a_1"),
    ),
    (pymongo.DeleteMany({"a": {"$gt": 1}}, hint=[("a", 1)]), models.DeleteMany({"a": {"$gt": 1}}, hint=[("a", 1)])),
    (
        pymongo.ReplaceOne({"a": 1}, {"b": 2}, upsert=True, sort={"a": -1}),
        models.ReplaceOne({"a": 1}, {"b": 2}, upsert=True, sort={"a": -1}),
    ),
    (
        pymongo.UpdateOne({"a": 1}, {"$set": {"x.$[e]": 1}}, array_filters=[{"e": 1}], upsert=False),
        models.UpdateOne({"a": 1}, {"$set": {"x.$[e]": 1}}, array_filters=[{"e": 1}], upsert=False),
    ),
    (
        pymongo.UpdateMany({}, [{"$set": {"n": 1}}], collation=COLLATION),
        models.UpdateMany({}, [{"$set": {"n": 1}}], collation=COLLATION),
    ),
]


@pytest.mark.parametrize(("theirs", "ours"), PAIRS, ids=[type(pair[1]).__name__ for pair in PAIRS])
def test_a_pymongo_write_model_becomes_the_same_mongio_model(theirs: Any, ours: Any) -> None:
    adopted = models.as_write_model(theirs)
    assert type(adopted) is type(ours)
    if isinstance(ours, models.InsertOne):
        assert isinstance(adopted, models.InsertOne)
        assert adopted.document == ours.document
    else:
        assert models.model_statement(adopted) == models.model_statement(ours)


def test_pymongo_models_with_a_namespace_serve_the_client_bulk_write() -> None:
    adopted = models.as_write_model(pymongo.UpdateOne({"a": 1}, {"$inc": {"n": 1}}, namespace="db.c"))
    assert adopted.namespace == "db.c"
    ours = models.UpdateOne({"a": 1}, {"$inc": {"n": 1}}, namespace="db.c")
    assert models.client_bulk_op(adopted, 0) == models.client_bulk_op(ours, 0)


def test_a_bulk_write_takes_pymongo_models_beside_mongio_ones() -> None:
    bulk = BulkWrite("db", "c", [pymongo.InsertOne({"_id": 1}), models.DeleteOne({"_id": 2})])  # type: ignore[list-item]
    assert bulk.inserted_ids == [1]
    commands = []
    while (batch := bulk.next_batch()) is not None:
        commands.append(next(iter(batch.build(ServerLimits()).body)))
        batch.handle_response({"ok": 1, "n": 1}, ServerLimits())
    assert commands == ["insert", "delete"]


def test_anything_else_is_still_refused_by_name() -> None:
    class InsertOne:  # a namesake from elsewhere is not PyMongo's
        _doc = {"a": 1}
        _namespace = None

    with pytest.raises(TypeError, match="is not a valid write model"):
        models.as_write_model(InsertOne())
    with pytest.raises(TypeError, match="is not a valid write model"):
        models.as_write_model({"insertOne": {"a": 1}})


def test_a_pymongo_index_model_creates_and_drops_the_same_index() -> None:
    theirs = pymongo.IndexModel([("a", 1), ("b", -1)], unique=True, name="ab")
    ours = models.IndexModel([("a", 1), ("b", -1)], unique=True, name="ab")
    assert models.index_model_document(theirs) == ours.document
    limits = ServerLimits()
    create = CreateIndexes("db", "c", [theirs])
    assert create.build(limits).body["indexes"] == [ours.document]
    assert DropIndexes("db", "c", theirs).build(limits).body["index"] == "ab"
    assert models.index_model_document({"key": {"a": 1}, "name": "a_1"}) is None  # mappings keep their own path


def test_a_pymongo_driver_info_is_appended_like_mongio_s() -> None:
    theirs = ClientMetadata(driver_info=PyMongoDriverInfo("odm", "2.1", "py"), environ={}, dockerenv="/nonexistent")
    ours = ClientMetadata(driver_info=DriverInfo("odm", "2.1", "py"), environ={}, dockerenv="/nonexistent")
    assert theirs.document == ours.document
    assert not ours.append(PyMongoDriverInfo("odm", "2.1", "py"))  # type: ignore[arg-type]  # already there
    with pytest.raises(ConfigurationError, match="expected a DriverInfo, not tuple"):
        ours.append(("odm", "2.1", "py"))  # type: ignore[arg-type]


def test_pymongo_read_preferences_mean_the_same() -> None:
    theirs = pymongo_read_preferences.Secondary(tag_sets=[{"dc": "east"}, {}], max_staleness=120)
    assert as_read_preference(theirs) == Secondary(tag_sets=[{"dc": "east"}, {}], max_staleness=120)
    assert as_read_preference(pymongo.ReadPreference.NEAREST) == Nearest()
    client = MongoClient("mongodb://127.0.0.1:1/", connect=False, read_preference=pymongo.ReadPreference.SECONDARY)
    assert client.read_preference == Secondary()
    collection = client.db.get_collection("c", read_preference=theirs)
    assert collection.read_preference.document == theirs.document
    with pytest.raises(TypeError, match="read_preference must be a read preference"):
        as_read_preference("secondary")


def test_pymongo_write_and_read_concerns_mean_the_same() -> None:
    from mongio.options.read_concern import ReadConcern, as_read_concern
    from mongio.options.write_concern import WriteConcern, as_write_concern

    theirs = pymongo.WriteConcern(w="majority", wtimeout=500, j=True)
    assert as_write_concern(theirs).document == WriteConcern(w="majority", wtimeout=500, j=True).document
    assert not as_write_concern(pymongo.WriteConcern(w=0)).acknowledged
    assert as_read_concern(PyMongoReadConcern("snapshot")) == ReadConcern("snapshot")
    collection = MongoClient("mongodb://127.0.0.1:1/", connect=False).db.get_collection(
        "c",
        write_concern=pymongo.WriteConcern(w=2),
        read_concern=PyMongoReadConcern("majority"),
    )
    assert type(collection.write_concern) is WriteConcern and collection.write_concern.document == {"w": 2}
    assert collection.read_concern == ReadConcern("majority")
    with pytest.raises(TypeError, match="write_concern must be a WriteConcern, not dict"):
        as_write_concern({"w": 1})
    with pytest.raises(TypeError, match="read_concern must be a ReadConcern, not str"):
        as_read_concern("majority")


@pytest.mark.filterwarnings("ignore:The read preference 'hedge' option is deprecated:DeprecationWarning")
def test_read_preferences_compare_equal_to_pymongo_s_both_ways() -> None:
    from mongio.options.read_preference import Primary, ReadPreference, SecondaryPreferred

    same = [
        (pymongo_read_preferences.Primary(), Primary()),
        (pymongo.ReadPreference.NEAREST, ReadPreference.NEAREST),
        (
            pymongo_read_preferences.SecondaryPreferred([{"dc": "ny"}, {}], max_staleness=120),
            SecondaryPreferred([{"dc": "ny"}, {}], max_staleness=120),
        ),
        (pymongo_read_preferences.Nearest(hedge={"enabled": True}), Nearest(hedge={"enabled": True})),
    ]
    for theirs, ours in same:
        assert (theirs == ours, ours == theirs, theirs != ours, ours != theirs) == (True, True, False, False)
    different = [
        (pymongo.ReadPreference.PRIMARY, ReadPreference.SECONDARY),
        (pymongo_read_preferences.Secondary([{"dc": "ny"}]), Secondary([{"dc": "sf"}])),
        (pymongo_read_preferences.Nearest(max_staleness=90), Nearest(max_staleness=120)),
        (pymongo_read_preferences.Nearest(hedge={"enabled": True}), Nearest()),
    ]
    for theirs, ours in different:
        assert (theirs == ours, ours == theirs, theirs != ours, ours != theirs) == (False, False, True, True)
    assert Secondary() != "secondary" and Secondary() != 2


def test_write_and_read_concerns_compare_equal_to_pymongo_s_both_ways() -> None:
    from mongio.options.read_concern import ReadConcern
    from mongio.options.write_concern import WriteConcern

    uri = "mongodb://127.0.0.1:1/?w=majority&readConcernLevel=local"
    client = MongoClient(uri, connect=False, pymongo_types=True)
    assert client.write_concern == pymongo.WriteConcern(w="majority")
    assert pymongo.WriteConcern(w="majority") == client.write_concern
    assert client.read_concern == PyMongoReadConcern("local")
    assert PyMongoReadConcern("local") == client.read_concern
    assert WriteConcern() == pymongo.WriteConcern() and pymongo.WriteConcern() == WriteConcern()
    assert pymongo.WriteConcern(w=1, j=True) == WriteConcern(w=1, j=True)
    for theirs, ours in [
        (pymongo.WriteConcern(w=1), WriteConcern(w=2)),
        (pymongo.WriteConcern(w=1, wtimeout=10), WriteConcern(w=1)),
        (pymongo.WriteConcern(j=True), WriteConcern()),
    ]:
        assert (theirs == ours, ours == theirs, theirs != ours, ours != theirs) == (False, False, True, True)
    assert PyMongoReadConcern("majority") != ReadConcern("local")
    assert ReadConcern() != PyMongoReadConcern("local")
    assert WriteConcern(w=1) != {"w": 1} and ReadConcern("local") != "local"


async def test_pymongo_transaction_options_and_concerns_start_a_transaction() -> None:
    from pymongo.client_session_shared import TransactionOptions as PyMongoTransactionOptions

    from mongio.options.read_concern import ReadConcern
    from mongio.options.read_preference import Primary
    from mongio.options.write_concern import WriteConcern
    from mongio.sessions.transaction_state import TransactionOptions

    client = MongoClient("mongodb://127.0.0.1:1/", connect=False)
    defaults = PyMongoTransactionOptions(write_concern=pymongo.WriteConcern(w=2), max_commit_time_ms=5)
    session = client.start_session(default_transaction_options=defaults)
    try:
        converted = session.options.default_transaction_options
        assert type(converted) is TransactionOptions
        assert converted.write_concern == WriteConcern(w=2) and converted.max_commit_time_ms == 5
        session.start_transaction(
            read_concern=PyMongoReadConcern("snapshot"), read_preference=pymongo.ReadPreference.PRIMARY
        )
        options = session._transaction.options
        assert options.read_concern == ReadConcern("snapshot")
        assert options.read_preference == Primary()
        assert options.write_concern == WriteConcern(w=2)  # inherited from the converted defaults
        await session.abort_transaction()
        with pytest.raises(TypeError, match="read_concern must be a ReadConcern, not str"):
            session.start_transaction(read_concern="snapshot")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="default_transaction_options must be a TransactionOptions, not dict"):
            client.start_session(default_transaction_options={"max_commit_time_ms": 5})  # type: ignore[arg-type]
    finally:
        await session.end_session()
        await client.close()


def test_a_pymongo_search_index_model_gives_the_same_index_entry() -> None:
    from pymongo.operations import SearchIndexModel as PyMongoSearchIndexModel

    from mongio import SearchIndexModel
    from mongio.operations.indexes import CreateSearchIndexes

    definition = {"mappings": {"dynamic": True}}
    theirs = CreateSearchIndexes("db", "c", [PyMongoSearchIndexModel(definition, name="s", type="search")])
    ours = CreateSearchIndexes("db", "c", [SearchIndexModel(definition, name="s", type="search")])
    assert theirs.body["indexes"] == ours.body["indexes"]
    with pytest.raises(TypeError, match="a search index must be a SearchIndexModel or a mapping, not str"):
        CreateSearchIndexes("db", "c", ["s"])  # type: ignore[list-item]
