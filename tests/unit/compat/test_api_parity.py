"""mongio's public async API and ``mongio.bson`` match PyMongo's member by member
(tests/unit/compat/api_parity.py says how they are compared), except for the differences declared in
src/mongio/compat/differences.yaml: a difference not declared there fails, naming it, and so does a declared
one that no longer exists."""

from __future__ import annotations

import fnmatch
import uuid
from typing import Any

import pytest

pytest.importorskip("pymongo")

from tests.unit.compat import api_parity, readme_differences


def declared() -> dict[str, str]:
    """Each parity key of the list (a pattern where it holds ``*``) -> the id of the entry declaring it."""
    keys: dict[str, str] = {}
    for entry in readme_differences.entries():
        for key in entry.get("parity", ()):
            assert key not in keys, f"{key} declared by both {keys[key]} and {entry['id']}"
            keys[key] = entry["id"]
    return keys


def _declaring(key: str, patterns: dict[str, str]) -> list[str]:
    return [pattern for pattern in patterns if fnmatch.fnmatchcase(key, pattern)]


def test_every_difference_from_pymongo_is_declared() -> None:
    patterns = declared()
    found = api_parity.differences()
    undeclared = {key: why for key, why in found.items() if not _declaring(key, patterns)}
    assert not undeclared, "differences from PyMongo not declared in compat/differences.yaml:\n" + "\n".join(
        f"  {key}: {why}" for key, why in sorted(undeclared.items())
    )
    twice = {key: _declaring(key, patterns) for key in found if len(_declaring(key, patterns)) > 1}
    assert not twice, f"declared by more than one parity key: {twice}"


def test_every_declared_difference_still_exists() -> None:
    found = api_parity.differences()
    stale = sorted(pattern for pattern in declared() if not any(fnmatch.fnmatchcase(k, pattern) for k in found))
    assert not stale, f"declared in compat/differences.yaml but no longer different: {stale}"


def test_the_comparison_covers_the_async_api_and_bson() -> None:
    labels = {label for label, _, _ in api_parity.class_pairs()}
    expected = {
        "pymongo.asynchronous.mongo_client.AsyncMongoClient",
        "pymongo.asynchronous.database.AsyncDatabase",
        "pymongo.asynchronous.collection.AsyncCollection",
        "pymongo.asynchronous.cursor.AsyncCursor",
        "pymongo.asynchronous.command_cursor.AsyncCommandCursor",
        "pymongo.asynchronous.change_stream.AsyncChangeStream",
        "pymongo.asynchronous.client_session.AsyncClientSession",
        "gridfs.asynchronous.grid_file.AsyncGridFSBucket",
        "pymongo.results.BulkWriteResult",
        "pymongo.operations.IndexModel",
        "pymongo.operations.SearchIndexModel",
        "pymongo.operations.UpdateOne",
        "pymongo.errors.OperationFailure",
        "pymongo.read_preferences.Nearest",
        "pymongo.write_concern.WriteConcern",
        "pymongo.read_concern.ReadConcern",
        "bson.ObjectId",
        "bson.Binary",
        "bson.CodecOptions",
    }
    assert expected <= labels, sorted(expected - labels)
    assert sum(len(api_parity.public_members(theirs)) for _, theirs, _ in api_parity.class_pairs()) > 800


class _Theirs:
    def __init__(self, a: int, b: int = 1) -> None: ...

    async def fetch(self, key: str, *, limit: int | None = None) -> None: ...

    def build(self, x: int) -> None: ...

    @property
    def name(self) -> str:
        return ""

    def gone(self) -> None: ...


class _Ours:
    def __init__(self, a: int, b: int = 2) -> None: ...

    def fetch(self, key: str, *, limit: int | None = None) -> Any: ...

    def build(self, y: int) -> None: ...

    def name(self) -> str:
        return ""


def test_the_comparison_names_each_kind_of_difference() -> None:
    found = api_parity.compare("Pair", _Theirs, _Ours)
    assert found == {
        "Pair.__init__: signature": "PyMongo (a, b=1), mongio (a, b=2)",
        "Pair.fetch: kind": "PyMongo coroutine, mongio method",
        "Pair.build: signature": "PyMongo (x), mongio (y)",
        "Pair.name: kind": "PyMongo property, mongio method",
        "Pair.gone: missing": "not in mongio",
    }
    assert api_parity.compare("Reverse", _Ours, _Theirs)["Reverse.gone: addition"] == "only in mongio (method)"
    assert api_parity.compare("Same", _Theirs, _Theirs) == {}


# -- the signature fixes the comparison found ---------------------------------------------------------------------


def test_the_client_takes_pymongos_none_defaults_and_type_registry() -> None:
    import mongio
    from mongio.bson.codec_options import TypeRegistry

    registry = TypeRegistry(fallback_encoder=str)
    client = mongio.MongoClient("mongodb://h", None, None, None, None, registry)
    assert client.codec_options.document_class is dict
    assert client.codec_options.tz_aware is False
    assert client.codec_options.type_registry is registry


def test_binary_from_uuid_takes_pymongos_keyword() -> None:
    from mongio.bson import Binary

    value = uuid.uuid4()
    assert Binary.from_uuid(uuid=value).as_uuid() == value


def test_invalid_document_carries_the_document() -> None:
    from mongio.bson.errors import InvalidDocument
    from mongio.errors import DocumentTooLarge

    document = {"a": 1}
    assert InvalidDocument("bad", document).document is document
    assert DocumentTooLarge("too large").document is None
    assert str(InvalidDocument("bad", document)) == "bad"


def test_is_valid_takes_pymongos_keyword() -> None:
    import mongio.bson

    assert mongio.bson.is_valid(bson=mongio.bson.encode({"a": 1}))
    assert not mongio.bson.is_valid(bson=b"\x05\x00\x00\x00\x01")
