"""Server selection errors against the test server: a wrong replicaSet name is named in the timeout error,
whether the server was removed from the topology or, with directConnection, kept as Unknown."""

from __future__ import annotations

import pytest
from spec_runner.raw_wire import command_once

from mongio import MongoClient
from mongio.errors import ServerSelectionTimeoutError

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def set_name(server_address: tuple[str, int]) -> str:
    """The server's replica set name, asked by hand as a person would to find out why selection failed."""
    reply = command_once(*server_address, {"hello": 1, "$db": "admin"})
    name = reply.get("setName")
    if not isinstance(name, str):
        pytest.skip("the server is not a replica set member")
    return name


async def selection_error(uri: str) -> str:
    client = MongoClient(uri)
    try:
        with pytest.raises(ServerSelectionTimeoutError) as caught:
            await client.selerr.things.insert_one({})
    finally:
        await client.close()
    return str(caught.value)


async def test_a_wrong_set_name_is_named_though_no_server_is_left(
    server_address: tuple[str, int], set_name: str
) -> None:
    host, port = server_address
    wrong = f"not-{set_name}"
    message = await selection_error(
        f"mongodb://{host}:{port}/?replicaSet={wrong}&serverSelectionTimeoutMS=500"
    )
    assert "servers: none" in message
    assert (
        f"removed from the topology: {host}:{port} (it reports replica set name {set_name!r}, "
        f"but the client's replicaSet option asks for {wrong!r})"
    ) in message


async def test_a_wrong_set_name_with_direct_connection_is_the_server_s_error(
    server_address: tuple[str, int], set_name: str
) -> None:
    host, port = server_address
    wrong = f"not-{set_name}"
    message = await selection_error(
        f"mongodb://{host}:{port}/?replicaSet={wrong}&directConnection=true&serverSelectionTimeoutMS=500"
    )
    assert "topology type Single" in message
    assert f"{host}:{port} (Unknown, error: ConfigurationError: " in message
    assert f"client is configured for replica set {wrong!r} but the server reports {set_name!r}" in message


async def test_a_secondary_read_names_why_the_primary_does_not_qualify(
    server_address: tuple[str, int], set_name: str
) -> None:
    host, port = server_address
    hello = command_once(host, port, {"hello": 1, "$db": "admin"})
    if len(hello.get("hosts", [])) != 1:
        pytest.skip("the set has secondaries")
    client = MongoClient(
        f"mongodb://{host}:{port}/?replicaSet={set_name}&readPreference=secondary&serverSelectionTimeoutMS=500"
    )
    try:
        with pytest.raises(ServerSelectionTimeoutError) as caught:
            await client.selerr.things.find_one({})
    finally:
        await client.close()
    assert "(RSPrimary, read preference secondary reads only from secondaries)" in str(caught.value)
