"""MONGODB-OIDC prose tests (auth/tests/mongodb-oidc.md) against a loopback server that verifies signed tokens.

Machine flow tests are named ``test_machine_<section>_<number>``, human flow tests ``test_human_<section>_<number>``.
The ``ENVIRONMENT:test`` variants read the token file the test writes (``OIDC_TOKEN_FILE``); the callback
variants count their calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mongio import MongoClient
from mongio.auth_oidc import OIDCCallback, OIDCCallbackContext, OIDCCallbackResult
from mongio.connection.auth.oidc_cache import OidcTokenCache
from mongio.connection.establish import ConnectionSettings, establish
from mongio.errors import AuthenticationFailed, AutoReconnect, ConfigurationError, OperationFailure
from mongio.events.command import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from mongio.options.credentials import MongoCredential
from tests.support.oidc_server import ISSUER, OidcServer


class CountingCallback(OIDCCallback):
    """A machine callback (plain ``def``: run in a worker thread) returning ``tokens`` in turn, the last one
    forever."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.calls: list[OIDCCallbackContext] = []
        self.threads: set[int] = set()

    def fetch(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        self.calls.append(context)
        self.threads.add(threading.get_ident())
        token = self.tokens[min(len(self.calls), len(self.tokens)) - 1]
        return OIDCCallbackResult(access_token=token)


class HumanCallback:
    """A human callback (a coroutine function, awaited on the loop)."""

    def __init__(self, server: OidcServer, *, refresh: str | None = "refresh-1", good: int = 1 << 30) -> None:
        self.server = server
        self.refresh = refresh
        self.good = good
        self.calls: list[OIDCCallbackContext] = []

    async def __call__(self, context: OIDCCallbackContext) -> OIDCCallbackResult:
        self.calls.append(context)
        key = None if len(self.calls) <= self.good else b"not-the-server-key"
        return OIDCCallbackResult(
            access_token=self.server.issue("human", key=key), refresh_token=self.refresh
        )


class Events(CommandListener):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.seen.append(("started", event.command_name))

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.seen.append(("succeeded", event.command_name))

    def failed(self, event: CommandFailedEvent) -> None:
        self.seen.append(("failed", event.command_name))


@pytest.fixture
async def server() -> AsyncIterator[OidcServer]:
    async with OidcServer() as running:
        yield running


@pytest.fixture
def token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "test_machine"
    monkeypatch.setenv("OIDC_TOKEN_FILE", str(path))
    yield path


def client(server: OidcServer, properties: dict[str, Any], **options: Any) -> MongoClient:
    return MongoClient(
        server.uri,
        authMechanism="MONGODB-OIDC",
        authMechanismProperties=properties,
        retryReads=False,
        directConnection=True,
        **options,
    )


# -- machine flow: (1) callback authentication ------------------------------------------------------------------


async def test_machine_1_1_callback_is_called_during_authentication(server: OidcServer) -> None:
    callback = CountingCallback(server.issue())
    async with client(server, {"OIDC_CALLBACK": callback}) as c:
        assert await c.db.coll.find_one({}) is None
    assert len(callback.calls) == 1
    assert threading.get_ident() not in callback.threads  # a plain callback runs off the loop


async def test_machine_1_1_environment_test_reads_the_token_file(
    server: OidcServer, token_file: Path
) -> None:
    token = server.issue()
    await asyncio.to_thread(token_file.write_text, token + "\n")
    async with client(server, {"ENVIRONMENT": "test"}) as c:
        await c.db.coll.insert_one({"x": 1})
        assert (await c.db.coll.find_one({}))["x"] == 1  # type: ignore[index]
    assert server.accepted == [token]


async def test_machine_1_2_callback_is_called_once_for_multiple_connections(server: OidcServer) -> None:
    callback = CountingCallback(server.issue())
    async with client(server, {"OIDC_CALLBACK": callback}, maxPoolSize=10) as c:

        async def finds() -> None:
            for _ in range(20):
                await c.db.coll.find_one({})

        await asyncio.gather(*(finds() for _ in range(10)))
    assert len(callback.calls) == 1
    assert len(server.accepted) > 1  # several connections, all with the one cached token


# -- machine flow: (2) callback validation ---------------------------------------------------------------------


async def test_machine_2_1_valid_callback_inputs(server: OidcServer) -> None:
    token = server.issue()
    seen: list[OIDCCallbackContext] = []

    async def callback(context: OIDCCallbackContext) -> OIDCCallbackResult:
        seen.append(context)
        return OIDCCallbackResult(access_token=token, expires_in_seconds=60)

    async with client(server, {"OIDC_CALLBACK": callback}) as c:
        await c.db.coll.find_one({})
    (context,) = seen
    assert context.version == 1 and context.username is None
    assert context.idp_info is None and context.refresh_token is None
    assert 0 < context.timeout_seconds <= 60  # the remaining connect timeout at most


@pytest.mark.parametrize("returned", [None, {"access_token": "a-dict"}, OIDCCallbackResult(access_token="")])
async def test_machine_2_2_and_2_3_callback_returns_null_or_missing_data(
    server: OidcServer, returned: Any
) -> None:
    async with client(
        server, {"OIDC_CALLBACK": lambda context: returned}, serverSelectionTimeoutMS=2000
    ) as c:
        with pytest.raises(AuthenticationFailed, match="OIDC_CALLBACK returned"):
            await c.db.coll.find_one({})


def test_machine_2_4_callback_and_environment_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="ENVIRONMENT=test cannot be used with OIDC_CALLBACK"):
        MongoClient(
            "mongodb://127.0.0.1/?authMechanism=MONGODB-OIDC",
            authMechanismProperties={"ENVIRONMENT": "test", "OIDC_CALLBACK": CountingCallback("t")},
            connect=False,
        )


def test_machine_2_5_allowed_hosts_with_environment_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="ALLOWED_HOSTS can only be used with OIDC_HUMAN_CALLBACK"):
        MongoClient(
            "mongodb://127.0.0.1/?authMechanism=MONGODB-OIDC",
            authMechanismProperties={"ENVIRONMENT": "azure", "TOKEN_RESOURCE": "r", "ALLOWED_HOSTS": []},
            connect=False,
        )


# -- machine flow: (3) authentication failure -------------------------------------------------------------------


async def test_machine_3_1_a_poisoned_cache_fetches_a_new_token(server: OidcServer) -> None:
    callback = CountingCallback(server.issue())
    cache = OidcTokenCache()
    cache.put("not-a-valid-token")
    credential = MongoCredential("MONGODB-OIDC", "$external", None, None, {"OIDC_CALLBACK": callback})
    settings = ConnectionSettings(credential=credential, oidc_cache=cache)
    conn = await establish(server.peer.address, settings)
    try:
        reply = await conn.command("db", {"find": "coll"})
        assert reply["ok"] == 1
    finally:
        conn.close()
    assert len(callback.calls) == 1
    assert cache.token is not None and cache.token.value == callback.tokens[0]


async def test_machine_3_2_failure_without_cached_token_returns_an_error(server: OidcServer) -> None:
    callback = CountingCallback(server.issue(key=b"wrong"))
    async with client(server, {"OIDC_CALLBACK": callback}, serverSelectionTimeoutMS=2000) as c:
        with pytest.raises(AuthenticationFailed) as raised:
            await c.db.coll.find_one({})
    assert raised.value.code == 18
    assert len(callback.calls) == 1


async def test_machine_3_3_unexpected_error_code_does_not_clear_the_cache(server: OidcServer) -> None:
    callback = CountingCallback(server.issue())
    async with client(server, {"OIDC_CALLBACK": callback}, serverSelectionTimeoutMS=2000) as c:
        server.fail("saslStart", code=20)
        with pytest.raises(OperationFailure) as raised:
            await c.db.coll.find_one({})
        assert raised.value.code == 20
        assert len(callback.calls) == 1
        assert await c.db.coll.find_one({}) is None
        assert len(callback.calls) == 1


# -- machine flow: (4) reauthentication ---------------------------------------------------------------------------


async def test_machine_4_1_reauthentication_succeeds(server: OidcServer) -> None:
    callback = CountingCallback(server.issue(), server.issue())
    async with client(server, {"OIDC_CALLBACK": callback}) as c:
        server.fail("find", code=391)
        assert await c.db.coll.find_one({}) is None
    assert len(callback.calls) == 2


async def test_machine_4_1_an_expired_token_is_replaced_on_the_same_connection(server: OidcServer) -> None:
    first, second = server.issue(), server.issue()
    callback = CountingCallback(first, second)
    async with client(server, {"OIDC_CALLBACK": callback}, maxPoolSize=1) as c:
        await c.db.coll.insert_one({"x": 1})
        server.revoke(first)  # the server now answers 391 on the connection, as when the token expires
        assert (await c.db.coll.find_one({}))["x"] == 1  # type: ignore[index]
    assert server.accepted == [first, second]
    used = {
        r.connection.index for r in server.peer.requests if r.command_name in ("insert", "find", "saslStart")
    }
    assert len(used) == 1  # reauthenticated and retried on the connection that got 391


async def test_machine_4_2_read_commands_fail_if_reauthentication_fails(server: OidcServer) -> None:
    callback = CountingCallback(server.issue(), server.issue(key=b"wrong"))
    async with client(server, {"OIDC_CALLBACK": callback}) as c:
        await c.db.coll.find_one({})
        server.fail("find", code=391)
        with pytest.raises(AuthenticationFailed):
            await c.db.coll.find_one({})
    assert len(callback.calls) == 2


async def test_machine_4_3_write_commands_fail_if_reauthentication_fails(server: OidcServer) -> None:
    callback = CountingCallback(server.issue(), server.issue(key=b"wrong"))
    async with client(server, {"OIDC_CALLBACK": callback}, retryWrites=False) as c:
        await c.db.coll.insert_one({})
        server.fail("insert", code=391)
        with pytest.raises(AuthenticationFailed):
            await c.db.coll.insert_one({})
    assert len(callback.calls) == 2


async def test_machine_4_4_speculative_authentication_is_ignored_on_reauthentication(
    server: OidcServer,
) -> None:
    callback = CountingCallback(server.issue())
    cache = OidcTokenCache()
    cache.put(server.issue())
    credential = MongoCredential("MONGODB-OIDC", "$external", None, None, {"OIDC_CALLBACK": callback})
    conn = await establish(server.peer.address, ConnectionSettings(credential=credential, oidc_cache=cache))
    try:
        await conn.command("db", {"insert": "coll", "documents": [{}]})
        assert callback.calls == [] and server.sasl_starts == 0 and server.speculative_successes == 1
        server.fail("insert", code=391)
        with pytest.raises(OperationFailure) as raised:
            await conn.command("db", {"insert": "coll", "documents": [{}]})
        assert raised.value.code == 391 and conn.can_reauthenticate
        await conn.reauthenticate()
        await conn.command("db", {"insert": "coll", "documents": [{}]})
    finally:
        conn.close()
    assert len(callback.calls) == 1 and server.sasl_starts == 1
    handshakes = [r for r in server.peer.requests if r.command_name.lower() in ("hello", "ismaster")]
    assert len(handshakes) == 1  # no hello when reauthenticating


async def test_machine_4_5_reauthentication_succeeds_in_a_session(server: OidcServer) -> None:
    callback = CountingCallback(server.issue(), server.issue())
    async with client(server, {"OIDC_CALLBACK": callback}) as c:
        server.fail("find", code=391)
        async with c.start_session() as session:
            assert await c.db.coll.find_one({}, session=session) is None
    assert len(callback.calls) == 2


async def test_reauthentication_of_a_cursor_getmore(server: OidcServer) -> None:
    first, second = server.issue(), server.issue()
    callback = CountingCallback(first, second)
    async with client(server, {"OIDC_CALLBACK": callback}, maxPoolSize=1) as c:
        await c.db.coll.insert_many([{"i": i} for i in range(5)])
        cursor = c.db.coll.find({}, batch_size=2)
        got = [await cursor.next(), await cursor.next()]
        server.revoke(first)
        got += [doc async for doc in cursor]
    assert [doc["i"] for doc in got] == [0, 1, 2, 3, 4]
    assert [r.command_name for r in server.peer.requests].count("getMore") == 3  # one answered 391, resent
    assert server.accepted == [first, second]


async def test_reauthentication_inside_a_transaction(server: OidcServer) -> None:
    first, second = server.issue(), server.issue()
    callback = CountingCallback(first, second)
    async with (
        client(server, {"OIDC_CALLBACK": callback}, maxPoolSize=1) as c,
        c.start_session() as session,
        session.start_transaction(),
    ):
        await c.db.coll.insert_one({"a": 1}, session=session)
        server.revoke(first)
        await c.db.coll.insert_one({"b": 2}, session=session)
    inserts = [r.document for r in server.peer.requests if r.command_name == "insert"]
    assert [doc.get("startTransaction") for doc in inserts] == [True, None, None]
    assert len({doc["txnNumber"] for doc in inserts}) == 1
    assert server.peer.commands("commitTransaction")


# -- human flow -------------------------------------------------------------------------------------------------


async def test_human_1_1_single_principal_implicit_username(server: OidcServer) -> None:
    human = HumanCallback(server)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}) as c:
        await c.db.coll.find_one({})
    (context,) = human.calls
    assert server.principal_requests == [None]
    assert context.idp_info is not None and context.idp_info.issuer == ISSUER
    assert context.idp_info.client_id == "mongio-tests" and context.idp_info.request_scopes == ("openid",)
    assert context.refresh_token is None and context.timeout_seconds == 300


async def test_human_1_2_single_principal_explicit_username(server: OidcServer) -> None:
    human = HumanCallback(server)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}, username="test_user1@idp") as c:
        await c.db.coll.find_one({})
    assert server.principal_requests == ["test_user1@idp"]
    assert human.calls[0].username == "test_user1@idp"


@pytest.mark.parametrize("user", ["test_user1@idp", "test_user2@idp"])
async def test_human_1_3_and_1_4_multiple_principals_user_1_and_2(user: str) -> None:
    async with OidcServer(known_principals=frozenset({"test_user1@idp", "test_user2@idp"})) as server:
        human = HumanCallback(server)
        async with client(server, {"OIDC_HUMAN_CALLBACK": human}, username=user) as c:
            assert await c.db.coll.find_one({}) is None
        assert server.principal_requests == [user] and human.calls[0].username == user


async def test_human_2_1_valid_callback_inputs(server: OidcServer) -> None:
    human = HumanCallback(server)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}, username="test_user1@idp") as c:
        await c.db.coll.find_one({})
    (context,) = human.calls
    assert context.version == 1 and context.username == "test_user1@idp"
    assert context.timeout_seconds == 300 and context.refresh_token is None
    assert context.idp_info is not None and context.idp_info.issuer == ISSUER


async def test_human_1_5_multiple_principals_no_user_fails() -> None:
    async with OidcServer(known_principals=frozenset({"test_user1@idp", "test_user2@idp"})) as server:
        human = HumanCallback(server)
        async with client(server, {"OIDC_HUMAN_CALLBACK": human}, serverSelectionTimeoutMS=2000) as c:
            with pytest.raises(AuthenticationFailed):
                await c.db.coll.find_one({})
        assert human.calls == []


async def test_human_1_6_allowed_hosts_blocked(server: OidcServer) -> None:
    human = HumanCallback(server)
    for allowed in ([], ["example.com"]):
        properties = {"OIDC_HUMAN_CALLBACK": human, "ALLOWED_HOSTS": allowed}
        async with client(server, properties, serverSelectionTimeoutMS=2000) as c:
            with pytest.raises(ConfigurationError, match="not in ALLOWED_HOSTS"):
                await c.db.coll.find_one({})
    assert human.calls == [] and server.sasl_starts == 0


async def test_human_cached_token_is_not_sent_speculatively_to_a_host_outside_allowed_hosts(
    server: OidcServer,
) -> None:
    cache = OidcTokenCache()
    cache.put(server.issue())  # obtained from an allowed host
    human = HumanCallback(server)
    properties = {"OIDC_HUMAN_CALLBACK": human, "ALLOWED_HOSTS": ["*.mongodb.net"]}
    credential = MongoCredential("MONGODB-OIDC", "$external", None, None, properties)
    with pytest.raises(ConfigurationError, match="not in ALLOWED_HOSTS"):
        await establish(server.peer.address, ConnectionSettings(credential=credential, oidc_cache=cache))
    (hello,) = server.peer.requests
    assert "speculativeAuthenticate" not in hello.document
    assert human.calls == [] and server.accepted == []


def test_human_1_7_allowed_hosts_in_the_connection_string_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="ALLOWED_HOSTS"):
        MongoClient(
            "mongodb://example.com/?authMechanism=MONGODB-OIDC&authMechanismProperties=ALLOWED_HOSTS:%5B%22example.com%22%5D",
            authMechanismProperties={"OIDC_HUMAN_CALLBACK": HumanCallback(OidcServer())},
            connect=False,
        )


async def test_human_2_2_callback_returns_missing_data(server: OidcServer) -> None:
    async def bad(context: OIDCCallbackContext) -> Any:
        return OIDCCallbackResult(access_token=None)  # type: ignore[arg-type]

    async with client(server, {"OIDC_HUMAN_CALLBACK": bad}, serverSelectionTimeoutMS=2000) as c:
        with pytest.raises(AuthenticationFailed, match="no access_token"):
            await c.db.coll.find_one({})


async def test_human_2_3_refresh_token_is_passed_to_the_callback(server: OidcServer) -> None:
    human = HumanCallback(server)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}) as c:
        await c.db.coll.find_one({})
        server.fail("find", code=391)
        await c.db.coll.find_one({})
    assert [context.refresh_token for context in human.calls] == [None, "refresh-1"]
    assert server.principal_requests == [None]  # the refresh needed no second two-step conversation


async def test_human_3_1_uses_speculative_authentication_with_a_cached_token(server: OidcServer) -> None:
    human = HumanCallback(server)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}) as c:
        await c.db.coll.find_one({})
        server.fail("find", close=True)
        with pytest.raises(AutoReconnect):
            await c.db.coll.find_one({})
        server.fail("saslStart", code=18)  # would fail a conversation: the hello's speculation must do it
        assert await c.db.coll.find_one({}) is None
    assert server.speculative_successes == 1 and len(human.calls) == 1


async def test_human_3_2_no_speculative_authentication_without_a_cached_token(server: OidcServer) -> None:
    human = HumanCallback(server)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}, serverSelectionTimeoutMS=2000) as c:
        server.fail("saslStart", code=18)
        with pytest.raises(AuthenticationFailed):
            await c.db.coll.find_one({})
    assert server.speculative_successes == 0


async def test_human_4_1_reauthentication_succeeds(server: OidcServer) -> None:
    human = HumanCallback(server)
    events = Events()
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}, event_listeners=[events]) as c:
        await c.db.coll.find_one({})
        assert len(human.calls) == 1
        events.seen.clear()
        server.fail("find", code=391)
        await c.db.coll.find_one({})
    assert len(human.calls) == 2
    finds = [seen for seen in events.seen if seen[1] == "find"]
    assert finds == [("started", "find"), ("failed", "find"), ("started", "find"), ("succeeded", "find")]
    assert not [seen for seen in events.seen if seen[1].startswith("sasl")]


async def test_human_4_2_reauthentication_succeeds_without_refresh_token(server: OidcServer) -> None:
    human = HumanCallback(server, refresh=None)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}) as c:
        await c.db.coll.find_one({})
        server.fail("find", code=391)
        await c.db.coll.find_one({})
    assert len(human.calls) == 2 and human.calls[1].refresh_token is None
    assert server.principal_requests == [None, None]


async def test_human_4_3_reauthentication_succeeds_after_refresh_fails(server: OidcServer) -> None:
    human = HumanCallback(server, refresh="bad-refresh", good=1)

    async def callback(context: OIDCCallbackContext) -> OIDCCallbackResult:
        if context.refresh_token is not None:  # the identity provider refuses the refresh token
            human.calls.append(context)
            return OIDCCallbackResult(access_token=server.issue(key=b"wrong"))
        human.good += 1
        return await human(context)

    async with client(server, {"OIDC_HUMAN_CALLBACK": callback}) as c:
        await c.db.coll.find_one({})
        server.fail("find", code=391)
        await c.db.coll.find_one({})
    assert [context.refresh_token for context in human.calls] == [None, "bad-refresh", None]


async def test_human_4_4_reauthentication_fails(server: OidcServer) -> None:
    human = HumanCallback(server, refresh="bad-refresh", good=1)
    async with client(server, {"OIDC_HUMAN_CALLBACK": human}) as c:
        await c.db.coll.find_one({})
        assert len(human.calls) == 1
        server.fail("find", code=391)
        with pytest.raises(AuthenticationFailed):
            await c.db.coll.find_one({})
    assert len(human.calls) == 3
