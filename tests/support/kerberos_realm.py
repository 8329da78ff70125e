"""A throwaway MIT Kerberos realm on loopback, and a wire peer that accepts GSSAPI with a real keytab.

:func:`start_realm` sets up ``KRBTEST.COM`` in a temporary directory through ``k5test`` (``kdb5_util``,
``kadmin.local``, ``krb5kdc`` listening on 127.0.0.1 only), with the user ``user@KRBTEST.COM`` (password
``realm.user_password``, a ticket already in the realm's credential cache) and the service ``mongodb/localhost`` in a keytab.
The realm's ``krb5.conf`` turns off the library's own host name canonicalization (``dns_canonicalize_hostname``,
``rdns``), so the service principal is exactly the one the driver names.

:class:`GssapiMember` answers ``saslStart``/``saslContinue`` as a MongoDB server configured for Kerberos does:
a python-gssapi acceptor (``SecurityContext(usage="accept")``) with the service keytab, the RFC 4752 security
layer offer wrapped for the client, and the client's wrapped answer checked. Its Kerberos calls run in worker
threads, like the driver's, so the peer never blocks the loop it shares with the client.

    realm = start_realm(tmp_path)
    with realm_environment(realm):
        async with LoopbackPeer(GssapiMember(realm.keytab_path)) as peer:
            ...
    realm.stop()
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback_peer import HandlerResult, Reply, Request

__all__ = [
    "REALM",
    "SERVICE_PRINCIPAL",
    "USER",
    "GssapiMember",
    "KerberosRealm",
    "missing_kerberos",
    "realm_environment",
    "start_realm",
]

REALM = "KRBTEST.COM"
USER = f"user@{REALM}"
SERVICE_PRINCIPAL = f"mongodb/localhost@{REALM}"
OTHER_SERVICE_PRINCIPAL = f"other/localhost@{REALM}"
# RFC 4752's offer: "no security layer" only, and a maximum message size the server could receive.
NO_LAYER_OFFER = bytes((0x01, 0x00, 0x10, 0x00))
_FAILED = {"ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "Authentication failed."}


def missing_kerberos() -> str | None:
    """Why the real-KDC tests cannot run here (naming what is missing), or None when they can."""
    for tool in ("krb5kdc", "kdb5_util", "kadmin.local"):
        if shutil.which(tool, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])) is None:
            return f"no MIT Kerberos KDC on this machine ({tool} is missing; Debian: krb5-kdc krb5-admin-server)"
    try:
        import gssapi  # noqa: F401
        import k5test  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install mongio[gssapi] k5test)"
    return None


@dataclass
class KerberosRealm:
    """A running realm: its ``k5test`` object, the environment clients need, and the service keytab."""

    k5: Any
    keytab_path: str
    env: Mapping[str, str]

    @property
    def directory(self) -> str:
        """The realm's temporary directory (its configuration, database, caches)."""
        return str(self.k5.tmpdir)

    @property
    def kdc_port(self) -> int:
        """The KDC's TCP and UDP port on 127.0.0.1."""
        return int(self.k5.portbase)

    @property
    def ccache(self) -> str:
        return str(self.k5.ccache)

    @property
    def user_password(self) -> str:
        return str(self.k5.password("user"))

    def kinit(self) -> None:
        """A fresh ticket for ``USER`` in the realm's credential cache."""
        self.k5.kinit(USER, self.user_password)

    @property
    def has_ticket_cache(self) -> bool:
        return os.path.exists(self.ccache)

    def kdestroy(self) -> None:
        if os.path.exists(self.ccache):
            os.unlink(self.ccache)

    def stop(self) -> None:
        self.k5.stop()
        shutil.rmtree(self.k5.tmpdir, ignore_errors=True)


def _free_port() -> int:
    """A port free for both TCP and UDP on 127.0.0.1 (the KDC listens on both)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port


def start_realm() -> KerberosRealm:
    """Create and start the realm (a few seconds: the database, the principals, the KDC)."""
    from k5test import K5Realm

    kdc = "127.0.0.1:$port0"
    k5 = K5Realm(
        realm=REALM,
        portbase=_free_port(),
        krb5_conf={
            "libdefaults": {
                "dns_canonicalize_hostname": "false",
                "rdns": "false",
                "dns_lookup_realm": "false",
                "udp_preference_limit": "1",
            },
            "realms": {"$realm": {"kdc": kdc, "admin_server": "127.0.0.1:$port1", "kpasswd_server": "127.0.0.1:$port2"}},
        },
        kdc_conf={"realms": {"$realm": {"kdc_listen": kdc, "kdc_tcp_listen": kdc}}},
        create_host=False,
    )
    keytab = os.path.join(k5.tmpdir, "mongodb.keytab")
    for principal in (SERVICE_PRINCIPAL, OTHER_SERVICE_PRINCIPAL):
        k5.addprinc(principal)
        k5.extract_keytab(principal, keytab)
    return KerberosRealm(k5, keytab, dict(k5.env))


@contextmanager
def realm_environment(realm: KerberosRealm) -> Iterator[None]:
    """The process environment pointing the Kerberos library at ``realm`` (krb5.conf, ccache), restored after."""
    names = ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_KDC_PROFILE", "KRB5RCACHEDIR")
    saved = {name: os.environ.get(name) for name in (*names, "KRB5_KTNAME", "KRB5_CLIENT_KTNAME")}
    os.environ.update({name: realm.env[name] for name in names})
    # No keytab for the client: its only credentials are the ticket cache or the password.
    os.environ.pop("KRB5_KTNAME", None)
    os.environ.pop("KRB5_CLIENT_KTNAME", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class _Exchange:
    """One connection's acceptor side."""

    context: Any
    offered: bool = False
    initiator: str | None = None
    target: str | None = None
    text: bool = False
    """The client sent base64 text payloads (as PyMongo does), so the replies are base64 text too."""


def _payload(request: Request) -> bytes:
    payload = request.document.get("payload", b"")
    return base64.b64decode(payload) if isinstance(payload, str) else bytes(payload)


def _reply(exchange: _Exchange, payload: bytes, *, done: bool = False) -> dict[str, Any]:
    sent: bytes | str = base64.b64encode(payload).decode() if exchange.text else payload
    return {"conversationId": 1, "payload": sent, "done": done, "ok": 1}


@dataclass
class GssapiMember:
    """The handler of a ``LoopbackPeer`` that authenticates GSSAPI with ``keytab_path``'s keys.

    ``delay`` postpones every ``saslStart``/``saslContinue`` reply (seconds); ``offer`` is the security layer offer sent wrapped (RFC 4752),
    with its last byte flipped after wrapping when ``tamper_offer``.
    ``authenticated`` lists ``(initiator principal, authorization id)`` per success; ``targets`` the service
    principal each established context was for; ``answers`` the client's unwrapped security layer answers.
    """

    keytab_path: str
    delay: float = 0.0
    offer: bytes = NO_LAYER_OFFER
    tamper_offer: bool = False
    authenticated: list[tuple[str, str]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    answers: list[bytes] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _exchanges: dict[int, _Exchange] = field(default_factory=dict)

    async def __call__(self, request: Request) -> HandlerResult:
        name = request.command_name
        if name == "saslStart":
            reply = await self._start(request)
        elif name == "saslContinue":
            reply = await self._continue(request)
        else:
            return None
        return Reply(reply, delay=self.delay)

    async def _start(self, request: Request) -> dict[str, Any]:
        import gssapi

        if request.document.get("mechanism") != "GSSAPI" or request.db != "$external":
            return {**_FAILED, "errmsg": "expected GSSAPI on $external"}
        credentials = await asyncio.to_thread(
            gssapi.Credentials, usage="accept", store={"keytab": self.keytab_path}
        )
        exchange = _Exchange(gssapi.SecurityContext(creds=credentials, usage="accept"))
        self._exchanges[request.connection.index] = exchange
        exchange.text = isinstance(request.document.get("payload"), str)
        return await self._step(exchange, _payload(request))

    async def _continue(self, request: Request) -> dict[str, Any]:
        exchange = self._exchanges.get(request.connection.index)
        if exchange is None or request.document.get("conversationId") != 1:
            return {**_FAILED, "errmsg": "no such conversation"}
        payload = _payload(request)
        if not exchange.context.complete:
            return await self._step(exchange, payload)
        if not exchange.offered:
            exchange.offered = True
            wrapped = bytes((await asyncio.to_thread(exchange.context.wrap, self.offer, False)).message)
            if self.tamper_offer:
                wrapped = wrapped[:-1] + bytes((wrapped[-1] ^ 0xFF,))
            return _reply(exchange, wrapped)
        return await self._check_answer(exchange, payload)

    async def _step(self, exchange: _Exchange, token: bytes) -> dict[str, Any]:
        from gssapi.raw.misc import GSSError

        try:
            produced = await asyncio.to_thread(exchange.context.step, token)
        except GSSError as exc:
            self.failures.append(str(exc.gen_message()))
            return dict(_FAILED)
        if exchange.context.complete:
            exchange.initiator = str(exchange.context.initiator_name)
            exchange.target = str(exchange.context.target_name)
            self.targets.append(exchange.target)
        return _reply(exchange, produced or b"")

    async def _check_answer(self, exchange: _Exchange, payload: bytes) -> dict[str, Any]:
        from gssapi.raw.misc import GSSError

        try:
            unwrapped = await asyncio.to_thread(exchange.context.unwrap, payload)
        except GSSError as exc:
            self.failures.append(str(exc.gen_message()))
            return dict(_FAILED)
        answer = bytes(unwrapped.message)
        self.answers.append(answer)
        if len(answer) < 4 or answer[0] != 0x01:
            self.failures.append(f"bad security layer answer {answer[:4]!r}")
            return dict(_FAILED)
        authorization_id = answer[4:].decode("utf-8")
        assert exchange.initiator is not None
        if authorization_id != exchange.initiator:
            self.failures.append(f"authorization id {authorization_id!r} is not {exchange.initiator!r}")
            return dict(_FAILED)
        self.authenticated.append((exchange.initiator, authorization_id))
        return _reply(exchange, b"", done=True)
