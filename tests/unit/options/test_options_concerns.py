"""Read preference, read concern and write concern values."""

from __future__ import annotations

import pytest

from mongio.errors import ConfigurationError
from mongio.options import Nearest, Primary, ReadConcern, ReadPreference, Secondary, WriteConcern
from mongio.options.read_preference import make_read_preference, read_pref_mode_from_name


def test_modes_are_numbered_and_named_as_pymongo() -> None:
    modes = [
        ReadPreference.PRIMARY,
        ReadPreference.PRIMARY_PREFERRED,
        ReadPreference.SECONDARY,
        ReadPreference.SECONDARY_PREFERRED,
        ReadPreference.NEAREST,
    ]
    assert [mode.mode for mode in modes] == [0, 1, 2, 3, 4]
    assert [mode.mongos_mode for mode in modes] == [
        "primary",
        "primaryPreferred",
        "secondary",
        "secondaryPreferred",
        "nearest",
    ]
    assert ReadPreference.SECONDARY.name == "Secondary"
    assert read_pref_mode_from_name("SecondaryPreferred") == 3
    assert make_read_preference(4, [{"a": "b"}], 100) == Nearest([{"a": "b"}], 100)


def test_read_preference_document_and_defaults() -> None:
    assert Primary().document == {"mode": "primary"}
    assert Secondary().tag_sets == [{}]
    assert Secondary().max_staleness == -1
    assert Secondary([{"dc": "ny"}, {}], 90).document == {
        "mode": "secondary",
        "tags": [{"dc": "ny"}, {}],
        "maxStalenessSeconds": 90,
    }


@pytest.mark.parametrize(
    "build",
    [
        lambda: make_read_preference(0, [{"dc": "ny"}]),
        lambda: make_read_preference(0, None, 120),
        lambda: Secondary(max_staleness=0),
        lambda: Secondary(tag_sets=[1]),  # type: ignore[list-item]
        lambda: read_pref_mode_from_name("closest"),
    ],
)
def test_invalid_read_preferences(build: object) -> None:
    with pytest.raises(ConfigurationError):
        build()  # type: ignore[operator]


def test_read_concern() -> None:
    assert ReadConcern().document == {} and ReadConcern().is_server_default
    assert ReadConcern("snapshot").document == {"level": "snapshot"}
    assert ReadConcern("majority") == ReadConcern("majority") != ReadConcern("local")


@pytest.mark.parametrize(
    ("kwargs", "document", "acknowledged"),
    [
        ({}, {}, True),
        ({"w": 3}, {"w": 3}, True),
        ({"w": "my_mode"}, {"w": "my_mode"}, True),
        ({"wtimeout": 1000}, {"wtimeout": 1000}, True),
        ({"w": 0}, {"w": 0}, False),
        ({"w": 0, "wtimeout": 500}, {"w": 0, "wtimeout": 500}, False),
        ({"w": 0, "j": False}, {"w": 0, "j": False}, False),
        ({"w": 3, "wtimeout": 1000, "j": True}, {"w": 3, "wtimeout": 1000, "j": True}, True),
    ],
)
def test_write_concern_documents(
    kwargs: dict[str, object], document: dict[str, object], acknowledged: bool
) -> None:
    concern = WriteConcern(**kwargs)  # type: ignore[arg-type]
    assert concern.document == document
    assert concern.acknowledged is acknowledged
    assert concern.is_server_default is (not document)


@pytest.mark.parametrize(
    "kwargs", [{"w": -3}, {"wtimeout": -1000}, {"w": 0, "j": True}, {"w": 0, "fsync": True}, {"j": 1}]
)
def test_invalid_write_concerns(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        WriteConcern(**kwargs)  # type: ignore[arg-type]
