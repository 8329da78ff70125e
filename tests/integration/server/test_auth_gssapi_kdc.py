"""GSSAPI end to end: a real MIT Kerberos KDC on loopback, python-gssapi on both sides, mongio's client.

The realm (tests/support/kerberos_realm.py) is set up once for this module: ``user@KRBTEST.COM`` with a password
and a ticket in the realm's credential cache, and the services ``mongodb/localhost`` and ``other/localhost`` in
the keytab of a loopback peer that runs a real GSSAPI acceptor. Without ``krb5kdc`` or python-gssapi the module
is skipped, naming what is missing (``.ci/run`` installs them).
"""

from __future__ import annotations

import logging
import socket
import traceback
import warnings
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import anyio
import pytest

from mongio import MongoClient
from mongio.errors import AuthenticationFailed
from mongio.monitoring import CommandListener, ConnectionPoolListener
from mongio.options import ConfigurationWarning
from tests.support.kerberos_realm import (
    REALM,
    SERVICE_PRINCIPAL,
    USER,
    GssapiMember,
    KerberosRealm,
    missing_kerberos,
    realm_environment,
    start_realm,
)
from tests.support.loopback_peer import LoopbackPeer

_MISSING = missing_kerberos()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"GSSAPI with a real KDC: {_MISSING}")

QUICK = "serverSelectionTimeoutMS=5000&connectTimeoutMS=10000"


@pytest.fixture(scope="module")
def realm() -> Iterator[KerberosRealm]:
    realm = start_realm()
    try:
        yield realm
    finally:
        realm.stop()


@pytest.fixture
def kerberos_env(realm: KerberosRealm) -> Iterator[KerberosRealm]:
    with realm_environment(realm):
        realm.kinit()
        yield realm


@pytest.fixture
async def member(kerberos_env: KerberosRealm) -> AsyncIterator[tuple[GssapiMember, LoopbackPeer]]:
    gssapi_member = GssapiMember(kerberos_env.keytab_path)
    async with LoopbackPeer(gssapi_member) as peer:
        yield gssapi_member, peer


def uri(
    peer: LoopbackPeer, host: str = "localhost", password: str | None = None, properties: str = ""
) -> str:
    userinfo = quote(USER, safe="") + ("" if password is None else ":" + quote(password, safe=""))
    query = f"authMechanism=GSSAPI&{QUICK}"
    if properties:
        query += f"&authMechanismProperties={properties}"
    return f"mongodb://{userinfo}@{host}:{peer.address[1]}/?{query}"


async def ping(address: str) -> None:
    async with MongoClient(address) as client:
        assert await client.admin.command("ping") == {"ok": 1}


async def refused(address: str) -> AuthenticationFailed:
    with pytest.raises(AuthenticationFailed) as info:
        await ping(address)
    return info.value


def shown(error: AuthenticationFailed, caplog: pytest.LogCaptureFixture) -> str:
    """Everything an application could see of a failure: the traceback with its chain, and the log records."""
    texts = ["".join(traceback.format_exception(error)), repr(error), repr(error.details)]
    texts += [record.getMessage() for record in caplog.records]
    return "\n".join(texts)


async def test_the_ticket_cache_authenticates(member: tuple[GssapiMember, LoopbackPeer]) -> None:
    gssapi_member, peer = member
    await ping(uri(peer))
    assert gssapi_member.authenticated == [(USER, USER)]
    assert gssapi_member.targets == [SERVICE_PRINCIPAL]
    # The security layer answer the acceptor unwrapped: no layer, size 0, the user as authorization id.
    assert gssapi_member.answers == [b"\x01\x00\x00\x00" + USER.encode()]


async def test_a_password_authenticates_without_a_ticket_cache(
    member: tuple[GssapiMember, LoopbackPeer], realm: KerberosRealm
) -> None:
    gssapi_member, peer = member
    realm.kdestroy()
    await ping(uri(peer, password=realm.user_password))
    assert gssapi_member.authenticated == [(USER, USER)]
    assert not realm.has_ticket_cache, "the password's ticket stays in memory"


async def test_a_wrong_password_names_the_user_and_the_step_and_not_the_password(
    member: tuple[GssapiMember, LoopbackPeer], realm: KerberosRealm, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gssapi_member, peer = member
    realm.kdestroy()
    wrong = "Wr0ngK3rbPass"
    error = await refused(uri(peer, password=wrong))
    assert f"GSSAPI authentication failed for user {USER!r}" in str(error)
    assert "acquiring credentials" in str(error)
    assert wrong not in shown(error, caplog)
    assert realm.user_password not in shown(error, caplog)
    assert gssapi_member.authenticated == []
    assert not peer.commands("saslStart"), "nothing is sent before the credentials are acquired"


async def test_no_ticket_and_no_password_is_refused_before_the_server_is_asked(
    member: tuple[GssapiMember, LoopbackPeer], realm: KerberosRealm
) -> None:
    _gssapi_member, peer = member
    realm.kdestroy()
    error = await refused(uri(peer))
    assert "acquiring credentials" in str(error)
    assert not peer.commands("saslStart")


async def test_many_connections_authenticate_at_once(member: tuple[GssapiMember, LoopbackPeer]) -> None:
    gssapi_member, peer = member
    async with MongoClient(uri(peer) + "&maxPoolSize=8") as client, anyio.create_task_group() as pings:
        for _ in range(8):
            pings.start_soon(client.admin.command, "ping")
    assert len(gssapi_member.authenticated) == len(peer.commands("saslStart"))
    assert len(gssapi_member.authenticated) >= 1 and gssapi_member.failures == []


# -- the service principal -------------------------------------------------------------------------------


async def test_service_name_picks_the_service(member: tuple[GssapiMember, LoopbackPeer]) -> None:
    gssapi_member, peer = member
    await ping(uri(peer, properties="SERVICE_NAME:other"))
    assert gssapi_member.targets == [f"other/localhost@{REALM}"]


async def test_the_deprecated_gssapi_service_name_picks_the_service(
    member: tuple[GssapiMember, LoopbackPeer],
) -> None:
    gssapi_member, peer = member
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigurationWarning)
        await ping(uri(peer) + "&gssapiServiceName=other")
    assert gssapi_member.targets == [f"other/localhost@{REALM}"]


async def test_an_unknown_service_name_is_named_in_the_error(
    member: tuple[GssapiMember, LoopbackPeer],
) -> None:
    gssapi_member, peer = member
    error = await refused(uri(peer, properties="SERVICE_NAME:nosuch"))
    assert "to service 'nosuch/localhost'" in str(error)
    assert "not found in Kerberos database" in str(error)
    assert gssapi_member.authenticated == []


async def test_service_realm_names_the_realm_of_the_service(
    member: tuple[GssapiMember, LoopbackPeer],
) -> None:
    gssapi_member, peer = member
    await ping(uri(peer, properties=f"SERVICE_REALM:{REALM}"))
    assert gssapi_member.targets == [SERVICE_PRINCIPAL]
    error = await refused(uri(peer, properties="SERVICE_REALM:ELSEWHERE.EXAMPLE"))
    assert "'mongodb/localhost@ELSEWHERE.EXAMPLE'" in str(error)
    assert "ELSEWHERE.EXAMPLE" in str(error).split("starting the security context", 1)[1]


async def test_service_host_replaces_the_address_host(member: tuple[GssapiMember, LoopbackPeer]) -> None:
    gssapi_member, peer = member
    error = await refused(uri(peer, host="127.0.0.1"))
    assert "to service 'mongodb/127.0.0.1'" in str(error)
    await ping(uri(peer, host="127.0.0.1", properties="SERVICE_HOST:localhost"))
    assert gssapi_member.targets == [SERVICE_PRINCIPAL]


def _reverse_name_of_loopback() -> str | None:
    try:
        return socket.getnameinfo(("127.0.0.1", 0), socket.NI_NAMEREQD)[0].lower()
    except OSError:
        return None


@pytest.mark.parametrize("mode", ["forwardAndReverse", "true"])
async def test_forward_and_reverse_canonicalization_finds_localhost_from_its_address(
    member: tuple[GssapiMember, LoopbackPeer], mode: str
) -> None:
    if _reverse_name_of_loopback() != "localhost":
        pytest.skip("127.0.0.1 does not reverse-resolve to localhost on this machine")
    gssapi_member, peer = member
    await ping(uri(peer, host="127.0.0.1", properties=f"CANONICALIZE_HOST_NAME:{mode}"))
    assert gssapi_member.targets == [SERVICE_PRINCIPAL]


@pytest.mark.parametrize("mode", ["forward", "none", "false"])
async def test_without_the_reverse_lookup_the_address_stays_the_host(
    member: tuple[GssapiMember, LoopbackPeer], mode: str
) -> None:
    _gssapi_member, peer = member
    error = await refused(uri(peer, host="127.0.0.1", properties=f"CANONICALIZE_HOST_NAME:{mode}"))
    assert "to service 'mongodb/127.0.0.1'" in str(error)


async def test_forward_canonicalization_keeps_a_name_that_is_canonical(
    member: tuple[GssapiMember, LoopbackPeer],
) -> None:
    gssapi_member, peer = member
    await ping(uri(peer, host="LOCALHOST", properties="CANONICALIZE_HOST_NAME:forward"))
    assert gssapi_member.targets == [SERVICE_PRINCIPAL]


# -- the security layer ----------------------------------------------------------------------------------


async def test_a_server_offering_only_a_protecting_layer_is_refused(kerberos_env: KerberosRealm) -> None:
    # Integrity (0x02) and privacy (0x04) layers only: the wire protocol cannot carry wrapped messages.
    gssapi_member = GssapiMember(kerberos_env.keytab_path, offer=b"\x06\x00\x10\x00")
    async with LoopbackPeer(gssapi_member) as peer:
        error = await refused(uri(peer))
    assert "does not offer running without a security layer (layers 0x06)" in str(error)
    assert gssapi_member.answers == []


async def test_a_tampered_security_layer_offer_fails_its_integrity_check(kerberos_env: KerberosRealm) -> None:
    gssapi_member = GssapiMember(kerberos_env.keytab_path, tamper_offer=True)
    async with LoopbackPeer(gssapi_member) as peer:
        error = await refused(uri(peer))
    assert "unwrapping the server's security layer offer" in str(error)
    assert gssapi_member.answers == []


# -- secrets -------------------------------------------------------------------------------------------------


class EventRecorder(CommandListener, ConnectionPoolListener):
    """Every command and pool event, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def _record(self, event: object) -> None:
        self.texts += [repr(event), repr(vars(event) if hasattr(event, "__dict__") else event)]

    started = succeeded = failed = _record
    pool_cleared = connection_closed = connection_check_out_failed = _record


async def test_no_password_or_kerberos_token_in_any_error_log_record_or_event(
    kerberos_env: KerberosRealm, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    recorder = EventRecorder()
    wrong = "Wr0ngK3rbPass"
    shown_texts: list[str] = []
    tokens: list[bytes] = []
    # A successful conversation (its tokens carry the service ticket), a wrong password, a refused service,
    # a tampered security layer offer: each through a client with the recorder.
    password = kerberos_env.user_password
    for tamper_offer, given_password, properties in (
        (False, password, ""),
        (False, wrong, ""),
        (False, password, "SERVICE_NAME:nosuch"),
        (True, password, ""),
    ):
        gssapi_member = GssapiMember(kerberos_env.keytab_path, tamper_offer=tamper_offer)
        async with LoopbackPeer(gssapi_member) as peer:
            address = uri(peer, password=given_password, properties=properties)
            try:
                async with MongoClient(address, event_listeners=[recorder]) as client:
                    await client.admin.command("ping")
            except AuthenticationFailed as error:
                shown_texts.append(shown(error, caplog))
            tokens += [bytes(request.document["payload"]) for request in peer.commands("saslStart")]
    assert len(shown_texts) == 3
    assert tokens and recorder.texts
    texts = [*shown_texts, *recorder.texts, *(record.getMessage() for record in caplog.records)]
    for text in texts:
        assert wrong not in text and kerberos_env.user_password not in text
        for token in tokens:
            assert repr(token)[2:40] not in text and token.hex()[:40] not in text
