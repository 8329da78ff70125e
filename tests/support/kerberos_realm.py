"""A throwaway MIT Kerberos realm on loopback, and a wire peer that accepts GSSAPI with a real keytab.

:func:`start_realm` sets up ``KRBTEST.COM`` in a temporary directory through ``k5test`` (``kdb5_util``,
``kadmin.local``, ``krb5kdc`` listening on 127.0.0.1 only), with the user ``user@KRBTEST.COM`` (password
``realm.user_password``, a ticket already in the realm's credential cache) and the service ``mongodb/localhost`` in a keytab.
The realm's ``krb5.conf`` turns off the library's own host name canonicalization (``dns_canonicalize_hostname``,
``rdns``), so the service principal is exactly the one the driver names.

:class:`GssapiMember` answers ``saslStart``/``saslContinue`` as a MongoDB server configured for Kerberos does,
through the cluster harness's ``GssapiSaslServer`` (spec_runner/cluster/gssapi_sasl.py): a python-gssapi acceptor
(``SecurityContext(usage="accept")``) with the service keytab, the RFC 4752 security layer offer wrapped for the
client, and the client's wrapped answer checked. Its Kerberos calls run in worker threads, like the driver's, so
the peer never blocks the loop it shares with the client.

    realm = start_realm(tmp_path)
    with realm_environment(realm):
        async with LoopbackPeer(GssapiMember(realm.keytab_path)) as peer:
            ...
    realm.stop()
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from spec_runner.cluster.gssapi_sasl import NO_LAYER_OFFER, GssapiExchange, GssapiSaslServer

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
class GssapiMember:
    """The handler of a ``LoopbackPeer`` answering GSSAPI conversations with ``keytab_path``'s keys: the
    harness's :class:`GssapiSaslServer`, its blocking calls in worker threads, one conversation per connection.

    ``delay`` postpones every ``saslStart``/``saslContinue`` reply (seconds); ``offer`` and ``tamper_offer`` are
    the server's (see ``GssapiSaslServer``), whose records ``authenticated``, ``targets``, ``answers`` and
    ``failures`` this member shows.
    """

    keytab_path: str
    delay: float = 0.0
    offer: bytes = NO_LAYER_OFFER
    tamper_offer: bool = False
    server: GssapiSaslServer = field(init=False)
    _exchanges: dict[int, GssapiExchange | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.server = GssapiSaslServer(self.keytab_path, offer=self.offer, tamper_offer=self.tamper_offer)

    @property
    def authenticated(self) -> list[tuple[str, str]]:
        return self.server.authenticated

    @property
    def targets(self) -> list[str]:
        return self.server.targets

    @property
    def answers(self) -> list[bytes]:
        return self.server.answers

    @property
    def failures(self) -> list[str]:
        return self.server.failures

    async def __call__(self, request: Request) -> HandlerResult:
        name = request.command_name
        connection = request.connection.index
        if name == "saslStart" and request.db == "$external":
            reply, exchange = await asyncio.to_thread(self.server.start, request.document)
            self._exchanges[connection] = exchange
        elif name == "saslContinue" and request.db == "$external":
            exchange = self._exchanges.get(connection)
            reply = await asyncio.to_thread(self.server.finish, exchange, request.document)
        else:
            return None
        return Reply(reply, delay=self.delay)
