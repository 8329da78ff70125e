"""``Collection(...)`` takes PyMongo's ``AsyncCollection`` arguments in PyMongo's order and, like it, refuses
``create`` and collection options (creating a collection needs an await)."""

from __future__ import annotations

import pytest

from mongio.bson import CodecOptions
from mongio.collection import Collection
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import Secondary
from mongio.options.write_concern import WriteConcern
from tests.support.fake_client import make_collection


def test_positional_arguments_follow_pymongo_order() -> None:
    _, _, coll = make_collection()
    codec_options = CodecOptions(tz_aware=True)
    made = Collection(
        coll.database, "other", False, codec_options, Secondary(), WriteConcern(w=2), ReadConcern("local"), None
    )
    assert made.codec_options is codec_options
    assert made.read_preference == Secondary()
    assert made.write_concern == WriteConcern(w=2)
    assert made.read_concern == ReadConcern("local")
    inherited = Collection(coll.database, "other")
    assert inherited.write_concern == coll.database.write_concern


@pytest.mark.parametrize("arguments", [{"create": True}, {"capped": True, "size": 4096}])
def test_create_and_collection_options_are_refused(arguments: dict[str, object]) -> None:
    _, recorder, coll = make_collection()
    with pytest.raises(ValueError, match="create_collection"):
        Collection(coll.database, "other", **arguments)  # type: ignore[arg-type]
    assert recorder.bodies == []


def test_copies_keep_their_options() -> None:
    _, _, coll = make_collection()
    tuned = coll.with_options(read_preference=Secondary(), write_concern=WriteConcern(w=3), timeout=2)
    child = tuned["archive"]
    assert (child.name, child.read_preference, child.write_concern) == ("coll.archive", Secondary(), WriteConcern(w=3))
    assert child._timeout == tuned._timeout == 2
    fetched = coll.database.get_collection("x", read_concern=ReadConcern("majority"), timeout=5)
    assert (fetched.read_concern, fetched._timeout) == (ReadConcern("majority"), 5)
