"""Index, collection, database and runCommand operations."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.errors import InvalidName, InvalidOperation
from mongio.operations import (
    ASCENDING,
    DESCENDING,
    GEOSPHERE,
    TEXT,
    IndexModel,
    Retryability,
    SearchIndexModel,
    ServerLimits,
)
from mongio.operations.collections import (
    Create,
    Drop,
    DropDatabase,
    ListCollections,
    ListDatabases,
    RenameCollection,
)
from mongio.operations.indexes import (
    CreateIndexes,
    CreateSearchIndexes,
    DropIndexes,
    DropSearchIndex,
    ListIndexes,
    ListSearchIndexes,
    UpdateSearchIndex,
)
from mongio.operations.models import gen_index_name, index_document
from mongio.operations.run_command import RunCommand, RunCursorCommand
from mongio.options.write_concern import WriteConcern

LIMITS = ServerLimits()


def body(operation: Any) -> dict[str, Any]:
    return dict(operation.build(LIMITS).body)


@pytest.mark.parametrize(
    ("keys", "name"),
    [
        ("a", "a_1"),
        ([("a", ASCENDING), ("b", DESCENDING)], "a_1_b_-1"),
        ({"loc": GEOSPHERE}, "loc_2dsphere"),
        ([("t", TEXT), ("n", 1)], "t_text_n_1"),
    ],
)
def test_index_names(keys: Any, name: str) -> None:
    assert gen_index_name(index_document(keys)) == name
    assert IndexModel(keys).document["name"] == name


def test_index_document_refusals() -> None:
    refused: list[Any] = [[], {}, [("a",)], [("a", True)], 5]
    for bad in refused:
        with pytest.raises((TypeError, ValueError)):
            index_document(bad)


def test_create_indexes() -> None:
    op = CreateIndexes(
        "db",
        "c",
        [IndexModel([("a", 1)], unique=True, collation={"locale": "en"}), IndexModel("b", name="custom")],
        commit_quorum="majority",
        comment="x",
        write_concern=WriteConcern(w=1),
    )
    assert body(op) == {
        "createIndexes": "c",
        "indexes": [
            {"key": {"a": 1}, "name": "a_1", "collation": {"locale": "en"}, "unique": True},
            {"key": {"b": 1}, "name": "custom"},
        ],
        "commitQuorum": "majority",
        "comment": "x",
    }
    assert op.handle_response({"ok": 1}, LIMITS) == ["a_1", "custom"]
    assert op.takes_write_concern and op.retryability is Retryability.NONE
    with pytest.raises(ValueError):
        CreateIndexes("db", "c", [])


def test_list_and_drop_indexes() -> None:
    listing = ListIndexes("db", "c", batch_size=2)
    assert body(listing) == {"listIndexes": "c", "cursor": {"batchSize": 2}}
    assert listing.retryability is Retryability.READ and listing.ignores_namespace_not_found
    assert listing.empty_result().batch == [] and listing.empty_result().id == 0
    assert body(DropIndexes("db", "c", [("a", 1), ("b", -1)]))["index"] == "a_1_b_-1"
    assert body(DropIndexes("db", "c"))["index"] == "*"
    assert body(DropIndexes("db", "c", "x_1", max_time_ms=5)) == {
        "dropIndexes": "c",
        "index": "x_1",
        "maxTimeMS": 5,
    }


def test_search_index_commands() -> None:
    create = CreateSearchIndexes("db", "c", [SearchIndexModel({"mappings": {}}, name="s", type="search")])
    assert body(create) == {
        "createSearchIndexes": "c",
        "indexes": [{"name": "s", "type": "search", "definition": {"mappings": {}}}],
    }
    assert create.handle_response({"ok": 1, "indexesCreated": [{"id": "1", "name": "s"}]}, LIMITS) == ["s"]
    assert body(UpdateSearchIndex("db", "c", "s", {"m": 1})) == {
        "updateSearchIndex": "c",
        "name": "s",
        "definition": {"m": 1},
    }
    assert body(DropSearchIndex("db", "c", "s")) == {"dropSearchIndex": "c", "name": "s"}
    assert body(ListSearchIndexes("db", "c", "s"))["pipeline"] == [{"$listSearchIndexes": {"name": "s"}}]


def test_create_collection_options() -> None:
    op = Create(
        "db",
        "ts",
        timeseries={"timeField": "t", "metaField": "m"},
        expire_after_seconds=60,
        validator={"$jsonSchema": {}},
        validation_level="strict",
        clustered_index=None,
    )
    assert body(op) == {
        "create": "ts",
        "timeseries": {"timeField": "t", "metaField": "m"},
        "expireAfterSeconds": 60,
        "validator": {"$jsonSchema": {}},
        "validationLevel": "strict",
    }
    clustered = Create("db", "c", clusteredIndex={"key": {"_id": 1}, "unique": True})
    assert body(clustered)["clusteredIndex"] == {"key": {"_id": 1}, "unique": True}
    view = Create("db", "v", view_on="c", pipeline=[{"$match": {}}])
    assert body(view) == {"create": "v", "viewOn": "c", "pipeline": [{"$match": {}}]}
    assert op.takes_write_concern
    with pytest.raises(TypeError):
        Create("db", "c", clustered_index={"unique": True})
    with pytest.raises(TypeError):
        Create("db", "c", timeseries="t")
    with pytest.raises(InvalidName):
        Create("db", "a$b")


def test_drop_rename_list_and_drop_database() -> None:
    drop = Drop("db", "c")
    assert body(drop) == {"drop": "c"} and drop.ignores_namespace_not_found
    rename = RenameCollection("db", "a", "b", drop_target=True)
    assert rename.database == "admin"
    assert body(rename) == {"renameCollection": "db.a", "to": "db.b", "dropTarget": True}
    with pytest.raises(InvalidName):
        RenameCollection("db", "a", ".b")
    listing = ListCollections("db", filter={"name": "c"}, name_only=True, authorized_collections=True)
    assert body(listing) == {
        "listCollections": 1,
        "cursor": {},
        "filter": {"name": "c"},
        "nameOnly": True,
        "authorizedCollections": True,
    }
    assert listing.retryability is Retryability.READ
    dbs = ListDatabases(name_only=True, authorized_databases=True, filter={"name": "x"})
    assert dbs.database == "admin"
    assert body(dbs) == {
        "listDatabases": 1,
        "filter": {"name": "x"},
        "nameOnly": True,
        "authorizedDatabases": True,
    }
    assert dbs.handle_response({"ok": 1, "databases": [{"name": "x"}]}, LIMITS) == [{"name": "x"}]
    assert body(DropDatabase("db")) == {"dropDatabase": 1}


def test_run_command_is_sent_as_given_and_never_retried() -> None:
    op = RunCommand("db", "ping")
    assert body(op) == {"ping": 1} and op.command_name == "ping"
    assert op.retryability is Retryability.NONE
    assert not op.takes_read_concern and not op.takes_write_concern
    doc = RunCommand("db", {"find": "c", "filter": {}}, batchSize=2)
    assert body(doc) == {"find": "c", "filter": {}, "batchSize": 2}
    assert body(RunCommand("db", "collStats", "c", scale=2)) == {"collStats": "c", "scale": 2}
    with pytest.raises(InvalidOperation):
        RunCommand("db", {})
    cursor = RunCursorCommand("db", {"find": "c", "comment": "x"}, batch_size=3)
    assert cursor.comment == "x" and cursor.batch_size == 3
    assert (
        cursor.handle_response({"ok": 1, "cursor": {"id": 1, "ns": "db.c", "firstBatch": []}}, LIMITS).id == 1
    )


def test_commit_quorum_is_refused_before_mongodb_4_4() -> None:
    """Index management, createIndexes commitQuorum: the driver raises an error when the option is given
    for a server older than 4.4, and sends it to newer ones."""
    from mongio.errors import ConfigurationError

    operation = CreateIndexes("db", "c", [IndexModel("x")], commit_quorum="votingMembers")
    with pytest.raises(ConfigurationError, match=r"commit_quorum needs MongoDB 4\.4"):
        operation.build(ServerLimits(max_wire_version=8))
    assert operation.build(ServerLimits(max_wire_version=9)).body["commitQuorum"] == "votingMembers"
    assert (
        "commitQuorum"
        not in CreateIndexes("db", "c", [IndexModel("x")]).build(ServerLimits(max_wire_version=8)).body
    )


def test_list_search_indexes_takes_no_read_concern() -> None:
    """Index management, Where are read concern and write concern?: the $listSearchIndexes aggregate is an
    operation that takes no read concern (the executor adds none), with the aggregation options."""
    operation = ListSearchIndexes("db", "c", None, batch_size=3, allow_disk_use=True, let={"v": 1})
    assert not operation.takes_read_concern and not operation.takes_write_concern
    assert operation.read_concern is None
    assert body(operation) == {
        "aggregate": "c",
        "pipeline": [{"$listSearchIndexes": {}}],
        "cursor": {"batchSize": 3},
        "allowDiskUse": True,
        "let": {"v": 1},
    }
