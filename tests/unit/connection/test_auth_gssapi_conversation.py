"""GSSAPI without a KDC: the mechanism properties, host name canonicalization with a fake resolver, the
RFC 4752 security layer answer, and the SASL conversation against a scripted Kerberos library and server.

The same conversation against a real MIT KDC and a real acceptor: tests/integration/server/test_auth_gssapi_kdc.py.
"""

from __future__ import annotations

import asyncio
import builtins
import socket
import threading
from typing import Any

import pytest

from mongio.connection.auth import Authenticator
from mongio.connection.auth.base import AuthenticationFailed
from mongio.connection.auth.gssapi import (
    GssapiProperties,
    LoopResolver,
    authenticate_gssapi,
    canonicalize_host,
    security_layer_reply,
    server_host,
    service_name_for,
)
from mongio.connection.auth.gssapi_library import ServiceName, python_gssapi
from mongio.errors import ConfigurationError
from mongio.options import ClientOptions
from mongio.options.credentials import MongoCredential
from tests.support.fake_kerberos import FIRST_TOKEN, WRAP_PREFIX, FakeGssapiServer, FakeKerberos, FakeResolver

PASSWORD = "k3rb3r0sPW"


def credential(password: str | None = None, **properties: Any) -> MongoCredential:
    return MongoCredential(
        mechanism="GSSAPI",
        source="$external",
        username="alice@EXAMPLE.COM",
        password=password,
        mechanism_properties=properties,
    )


def properties_of(uri: str) -> GssapiProperties:
    options = ClientOptions.from_uri(uri)
    assert options.credential is not None
    return GssapiProperties.from_mapping(options.credential.mechanism_properties)


# -- the mechanism properties ------------------------------------------------------------------------------


def test_properties_default_to_the_mongodb_service_without_canonicalization() -> None:
    assert properties_of("mongodb://alice%40EXAMPLE.COM@h/?authMechanism=GSSAPI") == GssapiProperties(
        service_name="mongodb", canonicalize="none", service_realm=None, service_host=None
    )


def test_properties_from_the_connection_string() -> None:
    uri = (
        "mongodb://alice%40EXAMPLE.COM@h/?authMechanism=GSSAPI&authMechanismProperties="
        "SERVICE_NAME:other,SERVICE_REALM:SERVICES.EXAMPLE.COM,SERVICE_HOST:db.example.com,"
        "CANONICALIZE_HOST_NAME:forward"
    )
    assert properties_of(uri) == GssapiProperties(
        service_name="other",
        canonicalize="forward",
        service_realm="SERVICES.EXAMPLE.COM",
        service_host="db.example.com",
    )


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        ("true", "forwardAndReverse"),
        ("false", "none"),
        ("none", "none"),
        ("forward", "forward"),
        ("forwardAndReverse", "forwardAndReverse"),
    ],
)
def test_canonicalize_host_name_values_and_the_legacy_booleans(given: str, mode: str) -> None:
    uri = f"mongodb://alice%40EXAMPLE.COM@h/?authMechanism=GSSAPI&authMechanismProperties=CANONICALIZE_HOST_NAME:{given}"
    assert properties_of(uri).canonicalize == mode


def test_the_deprecated_gssapi_service_name_becomes_service_name() -> None:
    with pytest.warns(Warning, match="SERVICE_NAME"):
        properties = properties_of("mongodb://alice%40EXAMPLE.COM@h/?authMechanism=GSSAPI&gssapiServiceName=other")
    assert properties.service_name == "other"


def test_an_unnormalized_canonicalize_value_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="CANONICALIZE_HOST_NAME 'sideways'"):
        GssapiProperties.from_mapping({"CANONICALIZE_HOST_NAME": "sideways"})


# -- host name canonicalization ----------------------------------------------------------------------------


RESOLVER_NAMES = {"db": ("DB-1.Example.COM", "192.0.2.10"), "192.0.2.10": ("192.0.2.10", "192.0.2.10")}
REVERSE_NAMES = {"192.0.2.10": "Host-10.Example.NET"}


async def test_none_makes_no_lookup() -> None:
    resolver = FakeResolver(RESOLVER_NAMES, REVERSE_NAMES)
    assert await canonicalize_host("DB", "none", resolver) == "DB"
    assert resolver.lookups == []


async def test_forward_takes_the_canonical_name_lowercased() -> None:
    resolver = FakeResolver(RESOLVER_NAMES, REVERSE_NAMES)
    assert await canonicalize_host("db", "forward", resolver) == "db-1.example.com"
    assert resolver.lookups == ["forward db"]


async def test_forward_and_reverse_takes_the_first_address_ptr_name_lowercased() -> None:
    resolver = FakeResolver(RESOLVER_NAMES, REVERSE_NAMES)
    assert await canonicalize_host("db", "forwardAndReverse", resolver) == "host-10.example.net"
    assert resolver.lookups == ["forward db", "reverse 192.0.2.10"]


async def test_a_failed_reverse_lookup_keeps_the_forward_name() -> None:
    resolver = FakeResolver(RESOLVER_NAMES, {})
    assert await canonicalize_host("db", "forwardAndReverse", resolver) == "db-1.example.com"


@pytest.mark.parametrize("mode", ["forward", "forwardAndReverse"])
async def test_a_failed_forward_lookup_keeps_the_host_as_given(mode: str) -> None:
    resolver = FakeResolver({}, REVERSE_NAMES)
    assert await canonicalize_host("Unknown.Example", mode, resolver) == "Unknown.Example"
    assert resolver.lookups == ["forward Unknown.Example"]


async def test_service_host_replaces_the_host_and_is_not_canonicalized() -> None:
    resolver = FakeResolver(RESOLVER_NAMES, REVERSE_NAMES)
    properties = GssapiProperties(canonicalize="forwardAndReverse", service_host="db", service_realm="R.EXAMPLE")
    assert await service_name_for("elsewhere", properties, resolver) == ServiceName("mongodb", "db", "R.EXAMPLE")
    assert resolver.lookups == []


async def test_the_service_principal_joins_service_host_and_realm() -> None:
    resolver = FakeResolver(RESOLVER_NAMES, REVERSE_NAMES)
    properties = GssapiProperties(service_name="other", canonicalize="forward")
    service = await service_name_for("db", properties, resolver)
    assert str(service) == "other/db-1.example.com"
    assert str(ServiceName("mongodb", "h", "REALM.EXAMPLE")) == "mongodb/h@REALM.EXAMPLE"


async def test_the_loop_resolver_asks_the_loops_getaddrinfo_for_the_canonical_name() -> None:
    # The loop's getaddrinfo runs the lookup in its default executor; socket.getaddrinfo would block the loop.
    loop = asyncio.get_running_loop()
    default_getaddrinfo = loop.getaddrinfo
    asked: list[dict[str, Any]] = []

    async def recording_getaddrinfo(host: Any, port: Any, **kwargs: Any) -> Any:
        asked.append(kwargs)
        return await default_getaddrinfo(host, port, **kwargs)

    loop.getaddrinfo = recording_getaddrinfo  # type: ignore[method-assign]
    try:
        canonical, address = await LoopResolver().forward("localhost")
    finally:
        del loop.getaddrinfo
    assert canonical == "localhost"
    assert address in ("127.0.0.1", "::1")
    assert len(asked) == 1 and asked[0]["flags"] & socket.AI_CANONNAME


def test_a_unix_socket_names_the_local_host() -> None:
    assert server_host(("/tmp/mongodb-27017.sock", None)) == "localhost"
    assert server_host(("db.example.com", 27017)) == "db.example.com"


# -- the security layer ------------------------------------------------------------------------------------


def test_the_answer_selects_no_security_layer_with_size_zero_and_names_the_user() -> None:
    assert security_layer_reply(b"\x07\x01\x00\x00", "alice@EXAMPLE.COM") == b"\x01\x00\x00\x00alice@EXAMPLE.COM"


@pytest.mark.parametrize(
    ("offer", "problem"),
    [
        (b"\x01\x00", "has 2 bytes, not 4"),
        (b"\x01\x00\x00\x00\x00", "has 5 bytes, not 4"),
        (b"\x04\x00\x10\x00", "does not offer running without a security layer"),
    ],
)
def test_an_offer_without_the_no_layer_choice_is_refused(offer: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        security_layer_reply(offer, "alice")


# -- the conversation --------------------------------------------------------------------------------------


async def test_the_conversation_on_external_ends_with_the_wrapped_answer() -> None:
    server = FakeGssapiServer()
    kerberos = FakeKerberos()
    await authenticate_gssapi(credential(), server, "db.example.com", library=kerberos)
    assert [db for db, _command in server.commands] == ["$external"] * 3
    start, established, answer = (command for _db, command in server.commands)
    assert start == {"saslStart": 1, "mechanism": "GSSAPI", "payload": FIRST_TOKEN, "autoAuthorize": 1}
    assert established == {"saslContinue": 1, "payload": b"", "conversationId": 7}
    assert answer == {
        "saslContinue": 1,
        "payload": WRAP_PREFIX + b"\x01\x00\x00\x00alice@EXAMPLE.COM",
        "conversationId": 7,
    }
    assert kerberos.opened == [("alice@EXAMPLE.COM", None, ServiceName("mongodb", "db.example.com"))]


async def test_a_longer_context_exchange_sends_each_token() -> None:
    server = FakeGssapiServer(tokens=2)
    kerberos = FakeKerberos(steps=2)
    await authenticate_gssapi(credential(), server, "h", library=kerberos)
    assert [command.get("payload") for _db, command in server.commands][1:3] == [b"more", b""]


async def test_the_password_goes_to_the_library_only() -> None:
    server = FakeGssapiServer()
    kerberos = FakeKerberos()
    await authenticate_gssapi(credential(PASSWORD), server, "h", library=kerberos)
    assert kerberos.opened[0][1] == PASSWORD
    assert PASSWORD.encode() not in repr(server.commands).encode()


async def test_every_kerberos_call_runs_off_the_loop_thread() -> None:
    kerberos = FakeKerberos()
    await authenticate_gssapi(credential(PASSWORD), FakeGssapiServer(), "h", library=kerberos)
    assert [name for name, _thread in kerberos.calls] == ["open", "step", "step", "unwrap", "wrap"]
    assert threading.get_ident() not in {thread for _name, thread in kerberos.calls}


@pytest.mark.parametrize(
    ("fail", "step"),
    [
        ("open", "acquiring credentials: Preauthentication failed"),
        ("step", "starting the security context: step refused"),
        ("unwrap", "unwrapping the server's security layer offer: unwrap refused"),
        ("wrap", "wrapping the security layer reply: wrap refused"),
    ],
)
async def test_a_kerberos_refusal_names_the_user_the_service_and_the_step(fail: str, step: str) -> None:
    with pytest.raises(AuthenticationFailed) as info:
        await authenticate_gssapi(credential(PASSWORD), FakeGssapiServer(), "db", library=FakeKerberos(fail=fail))
    message = str(info.value)
    assert message.startswith("GSSAPI authentication failed for user 'alice@EXAMPLE.COM' to service 'mongodb/db'")
    assert step in message
    assert PASSWORD not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("refuse", "Authentication failed."),
        ("done-early", "ended the conversation before the security layer step"),
        ("no-payload", "has no SASL payload"),
        ("not-done", "did not end the conversation"),
    ],
)
async def test_a_misbehaving_server_is_an_authentication_failure(fault: str, problem: str) -> None:
    with pytest.raises(AuthenticationFailed, match=problem):
        await authenticate_gssapi(credential(), FakeGssapiServer(fault=fault), "db", library=FakeKerberos())


async def test_a_kerberos_call_past_the_deadline_fails_naming_the_time_limit() -> None:
    server = FakeGssapiServer()
    deadline = asyncio.get_running_loop().time() + 0.05
    with pytest.raises(AuthenticationFailed, match="acquiring credentials: no answer before the connection's time"):
        await authenticate_gssapi(credential(), server, "db", library=FakeKerberos(slow=0.5), deadline=deadline)
    assert server.commands == []


async def test_an_endless_context_exchange_stops() -> None:
    server = FakeGssapiServer(fault="endless")
    with pytest.raises(AuthenticationFailed, match="not established in 10 steps"):
        await authenticate_gssapi(credential(), server, "db", library=FakeKerberos(steps=1000))
    assert len(server.commands) == 11


async def test_a_security_layer_offer_without_no_layer_is_refused() -> None:
    server = FakeGssapiServer(offer=b"\x06\xff\xff\xff")
    with pytest.raises(AuthenticationFailed, match="does not offer running without a security layer"):
        await authenticate_gssapi(credential(), server, "db", library=FakeKerberos())
    assert len(server.commands) == 2


async def test_canonicalization_names_the_service_the_library_gets() -> None:
    kerberos = FakeKerberos()
    resolver = FakeResolver(RESOLVER_NAMES, REVERSE_NAMES)
    cred = credential(CANONICALIZE_HOST_NAME="forwardAndReverse", SERVICE_REALM="R")
    await authenticate_gssapi(cred, FakeGssapiServer(), "db", resolver=resolver, library=kerberos)
    assert kerberos.opened[0][2] == ServiceName("mongodb", "host-10.example.net", "R")


# -- wiring ------------------------------------------------------------------------------------------------


def test_without_python_gssapi_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def refuse_gssapi(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "gssapi" or name.startswith("gssapi."):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse_gssapi)
    with pytest.raises(ConfigurationError, match=r"install mongio\[gssapi\]"):
        python_gssapi()


async def test_the_authenticator_needs_the_server_address() -> None:
    server = FakeGssapiServer()
    with pytest.raises(ConfigurationError, match="needs the address of the server"):
        await Authenticator(credential()).authenticate(server, None)
    assert server.commands == []


async def test_no_username_is_refused_before_any_command() -> None:
    cred = MongoCredential(mechanism="GSSAPI", source="$external", username=None, password=None)
    server = FakeGssapiServer()
    with pytest.raises(ConfigurationError, match="needs a username"):
        await authenticate_gssapi(cred, server, "db", library=FakeKerberos())
    assert server.commands == []
