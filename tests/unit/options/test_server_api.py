"""ServerApi: the declared stable API version, validated on creation and sent as the command fields."""

from __future__ import annotations

import pytest

from mongio.client import MongoClient
from mongio.connection.handshake import build_hello, server_api_fields
from mongio.server_api import ServerApi, ServerApiVersion


def test_version_one_is_known() -> None:
    api = ServerApi(ServerApiVersion.V1)
    assert (api.version, api.strict, api.deprecation_errors) == ("1", None, None)


@pytest.mark.parametrize("version", ["2", "server_will_never_support_this_api_version", "", 1])
def test_unknown_versions_are_refused_before_anything_is_sent(version: object) -> None:
    with pytest.raises(ValueError, match="Unknown ServerApi version"):
        ServerApi(version)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["strict", "deprecation_errors"])
def test_flags_must_be_booleans(field: str) -> None:
    with pytest.raises(TypeError, match=field):
        ServerApi("1", **{field: "yes"})  # type: ignore[arg-type]


def test_is_immutable() -> None:
    api = ServerApi("1", strict=True)
    with pytest.raises(AttributeError):
        api.strict = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        api._version = "2"
    assert api.strict is True and api.version == "1"


def test_equal_declarations_are_equal() -> None:
    assert ServerApi("1", strict=True) == ServerApi("1", strict=True)
    assert ServerApi("1", strict=True) != ServerApi("1", strict=False)
    assert ServerApi("1") != ServerApi("1", strict=False)  # an explicit False is sent, None is not
    assert len({ServerApi("1"), ServerApi("1")}) == 1


def test_only_the_fields_the_application_set_are_sent() -> None:
    assert server_api_fields(ServerApi("1")) == {"apiVersion": "1"}
    assert server_api_fields(ServerApi("1", strict=False, deprecation_errors=False)) == {
        "apiVersion": "1",
        "apiStrict": False,
        "apiDeprecationErrors": False,
    }
    assert server_api_fields(None) == {}


def test_a_declared_version_makes_the_handshake_hello() -> None:
    command = build_hello(None, server_api=ServerApi("1", strict=True))
    assert "hello" in command and "isMaster" not in command
    assert command["apiVersion"] == "1" and command["apiStrict"] is True
    assert "isMaster" in build_hello(None)


def test_the_client_refuses_a_server_api_that_is_not_a_server_api() -> None:
    with pytest.raises(TypeError, match=r"server_api must be a ServerApi \(e\.g\. .*\), not dict"):
        MongoClient("mongodb://localhost", server_api={"version": "1"})


async def test_the_client_takes_pymongo_s_server_api_as_its_own() -> None:
    from pymongo.server_api import ServerApi as PyMongoServerApi

    client = MongoClient("mongodb://localhost", connect=False, server_api=PyMongoServerApi("1", strict=True))
    try:
        assert client.options.extras["server_api"] == ServerApi("1", strict=True)
        assert server_api_fields(client.options.extras["server_api"]) == {"apiVersion": "1", "apiStrict": True}
    finally:
        await client.close()
