"""The commands the operations build, checked against the CRUD spec's unified tests (``crud/tests/unified``).

Each test whose operations are all CRUD operations and whose expected events are only the commands those
operations start is replayed without a server: the operations are made from the test's arguments, built, and
answered with a plain success, and every built command (document sequences folded in as arrays, as command
monitoring shows them) must match the ``commandStartedEvent.command`` the file expects. The fields the executor
owns (``lsid``, ``txnNumber``, ``$clusterTime``, ``readConcern``, ``$readPreference``, ``$db``) are left out;
``writeConcern`` is compared with the operation's write concern. Client-side errors the file expects must be
raised before anything is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from spec_runner.model import specs_root
from spec_runner.unified.ejson import loads

from mongio.bson import decode
from mongio.operations import (
    BulkWrite,
    ClientBulkWrite,
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    ReturnDocument,
    ServerLimits,
    UpdateMany,
    UpdateOne,
    WriteModel,
)
from mongio.operations.crud import (
    Aggregate,
    CountDocuments,
    Delete,
    Distinct,
    EstimatedDocumentCount,
    Find,
    FindAndModify,
    Insert,
    Update,
)
from mongio.options.write_concern import WriteConcern

UNIFIED = specs_root() / "crud" / "tests" / "unified"
EXECUTOR_FIELDS = {
    "lsid",
    "txnNumber",
    "$clusterTime",
    "readConcern",
    "writeConcern",
    "$readPreference",
    "$db",
    "apiVersion",
}
SUPPORTED = {
    "find",
    "findOne",
    "aggregate",
    "countDocuments",
    "estimatedDocumentCount",
    "distinct",
    "insertOne",
    "insertMany",
    "updateOne",
    "updateMany",
    "replaceOne",
    "deleteOne",
    "deleteMany",
    "findOneAndUpdate",
    "findOneAndReplace",
    "findOneAndDelete",
    "bulkWrite",
    "clientBulkWrite",
}


class ClientSideError(Exception):
    pass


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("max_time_m_s", "max_time_ms")


def wire_version(requirements: list[dict[str, Any]]) -> int:
    """The newest wire version the test's requirements allow (21 when they do not cap it)."""
    table = [((3, 6), 6), ((4, 0), 7), ((4, 2), 8), ((4, 4), 9), ((5, 0), 13), ((6, 0), 17), ((7, 0), 21)]
    best = 21
    for requirement in requirements:
        top = requirement.get("maxServerVersion")
        if top:
            version = tuple(int(part) for part in top.split(".")[:2])
            best = min(best, max((wire for v, wire in table if v <= version), default=6))
    return best


def models(requests: list[dict[str, Any]]) -> list[WriteModel]:
    out: list[WriteModel] = []
    makers: dict[str, Any] = {
        "insertOne": InsertOne,
        "updateOne": UpdateOne,
        "updateMany": UpdateMany,
        "replaceOne": ReplaceOne,
        "deleteOne": DeleteOne,
        "deleteMany": DeleteMany,
    }
    for request in requests:
        ((name, arguments),) = request.items()
        out.append(makers[name](**{snake(key): value for key, value in arguments.items()}))
    return out


def fold(command: Any) -> dict[str, Any]:
    body = dict(command.body)
    for identifier, sequence in (command.sequences or {}).items():
        body[identifier] = [decode(data) for data in sequence.encoded_documents()]
    return body


def commands_for(
    operation: dict[str, Any], entities: dict[str, dict[str, Any]], context: ServerLimits, first_only: bool
) -> list[tuple[dict[str, Any], Any]]:
    """The commands one test operation sends, each with the operation that built it."""
    name = operation["name"]
    arguments = {key: value for key, value in operation.get("arguments", {}).items() if key != "session"}
    entity = entities[operation["object"]]
    concern = entity.get("writeConcern")
    kwargs = {snake(key): value for key, value in arguments.items()}
    try:
        if name == "clientBulkWrite":
            concern = kwargs.pop("write_concern", concern)
            bulk_models = []
            for request in kwargs.pop("models"):
                bulk_models.extend(models([request]))
            client_bulk = ClientBulkWrite(
                bulk_models, write_concern=WriteConcern(**concern) if concern else None, **kwargs
            )
            out: list[tuple[dict[str, Any], Any]] = []
            while (client_batch := client_bulk.next_batch()) is not None:
                out.append((fold(client_batch.build(context)), client_batch))
                client_batch.handle_response(
                    {}
                    if not client_batch.acknowledged
                    else {"ok": 1, "cursor": {"id": 0, "ns": "x.y", "firstBatch": []}},
                    context,
                )
                if first_only:
                    break
            return out
        write_concern = WriteConcern(**concern) if concern else None
        database: str = entity["database"]
        collection: str | None = entity.get("collection")
        op: Any
        if name == "aggregate":  # on the database itself when the entity has no collection
            op = Aggregate(
                database, collection, kwargs.pop("pipeline"), write_concern=write_concern, **kwargs
            )
            return [(fold(op.build(context)), op)]
        assert collection is not None, f"{name} runs on a collection"
        if name in ("bulkWrite", "insertMany"):
            if name == "bulkWrite":
                bulk = BulkWrite(
                    database,
                    collection,
                    models(kwargs.pop("requests")),
                    write_concern=write_concern,
                    **kwargs,
                )
            else:
                bulk = BulkWrite.for_insert_many(
                    database, collection, kwargs.pop("documents"), write_concern=write_concern, **kwargs
                )
            out = []
            while (batch := bulk.next_batch()) is not None:
                out.append((fold(batch.build(context)), batch))
                batch.handle_response({"ok": 1, "n": 0}, context)
                if first_only:
                    break
            return out
        if name in ("find", "findOne"):
            if name == "findOne":
                kwargs["limit"] = -1
            op = Find(database, collection, **kwargs)
        elif name == "countDocuments":
            op = CountDocuments(database, collection, **kwargs)
        elif name == "estimatedDocumentCount":
            op = EstimatedDocumentCount(database, collection, **kwargs)
        elif name == "distinct":
            op = Distinct(database, collection, kwargs.pop("field_name"), **kwargs)
        elif name == "insertOne":
            op = Insert(database, collection, kwargs.pop("document"), write_concern=write_concern, **kwargs)
        elif name in ("updateOne", "updateMany", "replaceOne"):
            command_options = {
                key: kwargs.pop(key)
                for key in ("let", "comment", "bypass_document_validation")
                if key in kwargs
            }
            model = {"updateOne": UpdateOne, "updateMany": UpdateMany, "replaceOne": ReplaceOne}[name](
                **kwargs
            )
            op = Update(database, collection, model, write_concern=write_concern, **command_options)
        elif name in ("deleteOne", "deleteMany"):
            command_options = {key: kwargs.pop(key) for key in ("let", "comment") if key in kwargs}
            model = (DeleteOne if name == "deleteOne" else DeleteMany)(**kwargs)
            op = Delete(database, collection, model, write_concern=write_concern, **command_options)
        else:
            if "return_document" in kwargs:
                kwargs["return_document"] = ReturnDocument[kwargs["return_document"].upper()]
            if name == "findOneAndDelete":
                kwargs["remove"] = True
            op = FindAndModify(
                database, collection, kwargs.pop("filter"), write_concern=write_concern, **kwargs
            )
        return [(fold(op.build(context)), op)]
    except (TypeError, ValueError) as exc:
        raise ClientSideError(str(exc)) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("mongio"):
            raise ClientSideError(str(exc)) from exc
        raise


def match(expected: Any, actual: Any, path: str, root: bool = False) -> None:
    if isinstance(expected, Mapping):
        if len(expected) == 1:
            ((key, value),) = expected.items()
            if key == "$$type":
                names = value if isinstance(value, list) else [value]
                kinds = {
                    "string": str,
                    "object": Mapping,
                    "int": int,
                    "long": int,
                    "bool": bool,
                    "array": list,
                }
                assert any(isinstance(actual, kinds[n]) for n in names), f"{path}: {actual!r} is not {names}"
                return
            if key.startswith("$$"):
                return
        assert isinstance(actual, Mapping), f"{path}: expected a document, got {actual!r}"
        for key, value in expected.items():
            if root and key in EXECUTOR_FIELDS:
                continue
            if isinstance(value, Mapping) and "$$unsetOrMatches" in value:
                if key in actual:
                    match(value["$$unsetOrMatches"], actual[key], f"{path}.{key}")
                continue
            if isinstance(value, Mapping) and "$$exists" in value:
                assert (key in actual) == value["$$exists"], (
                    f"{path}.{key}: presence should be {value['$$exists']}"
                )
                continue
            assert key in actual, f"{path}: {key!r} missing from {dict(actual)!r}"
            match(value, actual[key], f"{path}.{key}")
        if not root:
            extra = set(actual) - set(expected)
            assert not extra, f"{path}: unexpected fields {sorted(extra)} in {dict(actual)!r}"
        return
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), (
            f"{path}: {actual!r} != {expected!r}"
        )
        for index, (want, got) in enumerate(zip(expected, actual)):
            match(want, got, f"{path}[{index}]")
        return
    assert type(expected) is bool or not isinstance(actual, bool), f"{path}: {actual!r} != {expected!r}"
    assert expected == actual, f"{path}: {actual!r} != {expected!r}"


def collect() -> list[Any]:
    cases = []
    for path in sorted(UNIFIED.glob("*.json")) if UNIFIED.is_dir() else []:
        suite = loads(path.read_text())
        for index, test in enumerate(suite["tests"]):
            operations = test["operations"]
            if not operations or any(op["name"] not in SUPPORTED for op in operations):
                continue
            if any("rawData" in op.get("arguments", {}) for op in operations):
                continue
            expected = [
                event["commandStartedEvent"]
                for group in test.get("expectEvents", ())
                for event in group["events"]
                if "commandStartedEvent" in event
            ]
            if any(
                event.get("commandName") in ("getMore", "killCursors")
                or next(iter(event.get("command", {"": 0}))) in ("getMore", "killCursors")
                for event in expected
            ):
                continue
            cases.append(pytest.param(path, index, id=f"{path.stem}[{index}] {test['description']}"))
    return cases


CASES = collect()


def test_enough_cases_are_checked() -> None:
    if not UNIFIED.is_dir():
        pytest.skip(f"no CRUD unified tests at {UNIFIED}")
    assert len(CASES) > 150


@pytest.mark.parametrize(("path", "index"), CASES)
def test_command_shape(path: Path, index: int) -> None:
    suite = loads(path.read_text())
    test = suite["tests"][index]
    entities: dict[str, dict[str, Any]] = {}
    databases: dict[str, dict[str, Any]] = {}
    for item in suite.get("createEntities", ()):
        ((kind, spec),) = item.items()
        if kind == "database":
            databases[spec["id"]] = dict(entities[spec["client"]], database=spec["databaseName"])
            concern = spec.get("databaseOptions", {}).get("writeConcern")
            if concern:
                databases[spec["id"]]["writeConcern"] = concern
            entities[spec["id"]] = databases[spec["id"]]
        elif kind == "collection":
            entity = dict(databases[spec["database"]], collection=spec["collectionName"])
            concern = spec.get("collectionOptions", {}).get("writeConcern")
            if concern:
                entity["writeConcern"] = concern
            entities[spec["id"]] = entity
        elif kind == "client":
            names = {"w": "w", "wtimeoutMS": "wtimeout", "journal": "j"}
            client_concern = {
                names[key]: value for key, value in spec.get("uriOptions", {}).items() if key in names
            }
            entities[spec["id"]] = {"writeConcern": client_concern} if client_concern else {}
    context = ServerLimits(
        max_wire_version=wire_version(suite.get("runOnRequirements", []) + test.get("runOnRequirements", []))
    )
    built: list[tuple[dict[str, Any], Any]] = []
    for operation in test["operations"]:
        expect_error = operation.get("expectError")
        try:
            built.extend(commands_for(operation, entities, context, first_only=expect_error is not None))
        except ClientSideError:
            assert expect_error and expect_error.get("isClientError"), (
                f"{operation['name']} refused: unexpected"
            )
            continue
        assert not (expect_error and expect_error.get("isClientError")), (
            f"{operation['name']} should be refused"
        )
    expected = [
        event["commandStartedEvent"]
        for group in test.get("expectEvents", ())
        for event in group["events"]
        if "commandStartedEvent" in event
    ]
    if not test.get("expectEvents"):
        return
    assert len(built) == len(expected), f"built {len(built)} commands, the test expects {len(expected)}"
    for number, ((body, operation), event) in enumerate(zip(built, expected)):
        command = event.get("command", {})
        match(command, body, f"command {number}", root=True)
        if "writeConcern" in command:
            assert operation.takes_write_concern, f"command {number} should take the write concern"
            match(command["writeConcern"], operation.write_concern.document, f"command {number}.writeConcern")
        if "commandName" in event:
            assert next(iter(body)) == event["commandName"]
        if "databaseName" in event:
            assert operation.database == event["databaseName"]
