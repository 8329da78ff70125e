"""The deprecated ``Collection.count``, ``map_reduce`` and ``inline_map_reduce``: their warnings, the commands
they send (options only when given), how the reply becomes the result, and which concerns, read preference
and retry rule each command gets."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.bson import Code
from mongio.operations import Retryability
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import Secondary
from mongio.options.write_concern import WriteConcern
from tests.support.fake_client import make_collection

MAP = Code("function () { emit(this.k, 1) }")
REDUCE = Code("function (key, values) { return Array.sum(values) }")


async def test_count_warns_and_sends_only_the_options_given() -> None:
    client, recorder, coll = make_collection(count=[{"n": 3}, {"n": 0}])
    with pytest.warns(DeprecationWarning, match="count_documents"):
        assert await coll.count({"a": 1}, skip=2, limit=-5, hint="a_1", maxTimeMS=7, comment="c") == 3
    assert recorder.bodies[0] == {
        "count": "coll",
        "query": {"a": 1},
        "skip": 2,
        "limit": -5,
        "hint": "a_1",
        "maxTimeMS": 7,
        "comment": "c",
    }
    with pytest.warns(DeprecationWarning):
        assert await coll.count() == 0
    assert recorder.bodies[1] == {"count": "coll"}
    assert client.calls[0].operation.retryability is Retryability.READ


async def test_count_takes_the_collections_read_preference_and_concern() -> None:
    client, _, coll = make_collection(count={"n": 1})
    reader = coll.with_options(read_preference=Secondary(), read_concern=ReadConcern("majority"))
    with pytest.warns(DeprecationWarning):
        await reader.count({}, collation={"locale": "fr"})
    operation = client.calls[0].operation
    assert operation.read_preference == Secondary()
    assert operation.read_concern == ReadConcern("majority")
    assert operation.takes_read_concern
    assert client.calls[0].body["collation"] == {"locale": "fr"}


async def test_count_refuses_unknown_options() -> None:
    _, recorder, coll = make_collection()
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="bogus"):
        await coll.count({}, bogus=1)
    assert recorder.bodies == []


async def test_map_reduce_to_a_collection_writes_on_the_primary() -> None:
    client, recorder, coll = make_collection(mapReduce={"result": "totals"})
    writer = coll.with_options(read_preference=Secondary(), write_concern=WriteConcern(w=2))
    with pytest.warns(DeprecationWarning, match="aggregate"):
        output = await writer.map_reduce(MAP, REDUCE, "totals", query={"k": {"$gt": 0}}, maxTimeMS=9)
    assert output.full_name == "db.totals"
    assert recorder.bodies[0] == {
        "mapReduce": "coll",
        "map": MAP,
        "reduce": REDUCE,
        "out": "totals",
        "maxTimeMS": 9,
        "query": {"k": {"$gt": 0}},
    }
    operation = client.calls[0].operation
    assert operation.read_preference is None
    assert operation.takes_write_concern and not operation.takes_read_concern
    assert operation.write_concern == WriteConcern(w=2)
    assert operation.retryability is Retryability.NONE


async def test_map_reduce_result_in_another_database_and_full_response() -> None:
    reply: dict[str, Any] = {"result": {"db": "reports", "collection": "totals"}, "counts": {"input": 4}}
    _, _, coll = make_collection(mapReduce=[reply, reply])
    with pytest.warns(DeprecationWarning):
        output = await coll.map_reduce(MAP, REDUCE, {"replace": "totals", "db": "reports"})
    assert output.full_name == "reports.totals"
    with pytest.warns(DeprecationWarning):
        response = await coll.map_reduce(MAP, REDUCE, {"replace": "totals", "db": "reports"}, full_response=True)
    assert response["counts"] == {"input": 4}


async def test_inline_map_reduce_is_a_read_that_is_not_retried() -> None:
    results = [{"_id": 1, "value": 2.0}]
    client, recorder, coll = make_collection(mapReduce=[{"results": results}, {"results": results}])
    reader = coll.with_options(read_preference=Secondary(), read_concern=ReadConcern("local"))
    with pytest.warns(DeprecationWarning):
        assert await reader.inline_map_reduce(MAP, REDUCE) == results
    assert recorder.bodies[0]["out"] == {"inline": 1}
    operation = client.calls[0].operation
    assert operation.read_preference == Secondary()
    assert operation.read_concern == ReadConcern("local")
    assert operation.takes_read_concern and not operation.takes_write_concern
    assert operation.retryability is Retryability.NONE
    # map_reduce with inline output returns the reply, whose results are the documents.
    with pytest.warns(DeprecationWarning):
        assert (await coll.map_reduce(MAP, REDUCE, {"inline": 1}))["results"] == results


async def test_map_reduce_refuses_a_bad_out() -> None:
    _, recorder, coll = make_collection()
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="out"):
        await coll.map_reduce(MAP, REDUCE, 5)  # type: ignore[arg-type]
    assert recorder.bodies == []
