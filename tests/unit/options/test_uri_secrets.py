"""No password in any error, warning, log record or ``repr`` of the connection string and credential code.

``CASES`` enumerates the ways parsing or validating a connection string or credentials can fail while a
password is present: every ``raise`` of the parsing code (``RAISE_FILES``) is reached by at least one case,
which :func:`test_every_raise_site_is_reached_with_a_password` checks by tracing the cases; a new raise site
without a case fails it. Each case carries a distinctive password (``s3cr3tPW%21`` as written, ``s3cr3tPW!``
decoded, or ``s3cr3t/PW0rd`` cut in two by an unencoded ``/``), and none of ``MARKERS`` may appear in the
error's text, ``repr``, formatted traceback (chained causes included), any error chained to it, any log
record at DEBUG or any warning.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import mongio
from mongio import MongoClient
from mongio import uri_parser as compat
from mongio.asynchronous import uri_parser as async_compat
from mongio.connection.auth.gssapi import authenticate_gssapi
from mongio.errors import AuthenticationFailed, ConfigurationError
from mongio.options import ClientOptions, parse_uri
from mongio.options.credentials import MongoCredential, build_credential
from mongio.options.secrets import REDACTED, Secrets, password_span, redact_uri
from mongio.options.srv import SrvRecord
from tests.support.fake_kerberos import FakeGssapiServer, FakeKerberos

PW = "s3cr3tPW%21"  # the password as a connection string writes it
PW_DECODED = "s3cr3tPW!"
CUT = "s3cr3t/PW0rd"  # a password with an unencoded "/": the parser cuts it in two
MARKERS = ("s3cr3t", "PW0rd")
AUTH = f"alice:{PW}@"
TLS_SECRET = f"tlsCertificateKeyFilePassword={PW}"  # the secret of cases that cannot carry a password
CLUSTER = "cluster0.example.com"

SRC = Path(mongio.__file__).resolve().parent
RAISE_FILES = tuple(
    SRC / name
    for name in (
        "options/uri_parser.py",
        "options/uri_options.py",
        "options/credentials.py",
        "options/client_options.py",
        "options/proxy_options.py",
        "options/srv.py",
        "uri_parser.py",
        "asynchronous/uri_parser.py",
        "connection/auth/gssapi.py",
    )
)
# Raise sites no connection string or credential reaches, with why.
UNREACHABLE = {
    # SRV polling runs after construction, on names only; no connection string or credential is at hand.
    ("options/srv.py", "rescan"),
    # The system resolver raises rather than answer an empty list; the lookup is of a host name, no credential.
    ("connection/auth/gssapi.py", "forward"),
}


class FakeResolver:
    """Serves one SRV answer and one TXT answer from memory; ``fail`` makes a lookup raise."""

    def __init__(
        self,
        srv: Sequence[tuple[str, int]] = ((f"a.{CLUSTER}", 27017),),
        txt: Sequence[Sequence[bytes]] = (),
        fail: str = "",
    ) -> None:
        self.srv = srv
        self.txt = txt
        self.fail = fail

    async def resolve_srv(self, name: str, lifetime: float) -> Sequence[SrvRecord]:
        if self.fail == "SRV":
            raise OSError("DNS server failure")
        return [SrvRecord(target, port, 60.0) for target, port in self.srv]

    async def resolve_txt(self, name: str, lifetime: float) -> Sequence[Sequence[bytes]]:
        if self.fail == "TXT":
            raise OSError("DNS server failure")
        return self.txt


def _resolve(uri: str, resolver: FakeResolver, **kwargs: Any) -> Callable[[], object]:
    def run() -> object:
        options = ClientOptions.from_uri(uri, **kwargs)
        return asyncio.run(options.resolve(resolver))

    return run


def _async_compat(uri: str) -> Callable[[], object]:
    return lambda: asyncio.run(async_compat.parse_uri(uri))


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[], object]
    error: type[Exception] = ConfigurationError


def uri(case_id: str, text: str, **kwargs: Any) -> list[Case]:
    """A malformed connection string, through every entry point that refuses it: ``parse_uri`` (strict),
    the PyMongo-shaped parser, ``ClientOptions`` and ``MongoClient`` (the last two unless ``strict_only``)."""
    strict_only = kwargs.pop("strict_only", False)
    cases = [
        Case(f"{case_id}-parse_uri", lambda: parse_uri(text, strict=True)),
        Case(f"{case_id}-pymongo", lambda: compat.parse_uri(text)),
    ]
    if not strict_only:
        cases.append(Case(f"{case_id}-options", lambda: ClientOptions.from_uri(text, **kwargs)))
        cases.append(Case(f"{case_id}-client", lambda: MongoClient(text, connect=False, **kwargs)))
    return cases


def client(case_id: str, host: Any, **kwargs: Any) -> list[Case]:
    """Options that fail once the client combines them (keywords, credentials), through ``ClientOptions``
    and ``MongoClient``."""
    return [
        Case(f"{case_id}-options", lambda: ClientOptions.from_uri(host, **kwargs)),
        Case(f"{case_id}-client", lambda: MongoClient(host, **{"connect": False, **kwargs})),
    ]


def strict(case_id: str, options: str) -> list[Case]:
    """An option value refused only by the strict parsers (the connection string warns and drops it)."""
    return uri(case_id, f"mongodb://{AUTH}h/?{options}", strict_only=True)


def _callback(*args: object) -> None:
    return None


def _cases() -> Iterator[Case]:
    # The connection string itself: scheme, user information, hosts, database, option syntax.
    yield from uri("wrong-scheme", f"mongodbx://{AUTH}h")
    yield from uri("no-scheme", f"alice:{PW}@h", strict_only=True)
    yield from client("no-scheme", f"alice:{PW}@h")
    yield from uri("one-slash", f"mongodb:/alice:{PW}@h", strict_only=True)
    yield from client("one-slash", f"mongodb:/alice:{PW}@h")
    yield from uri("no-slash", f"mongodb:alice:{PW}@h", strict_only=True)
    yield from client("no-slash", f"mongodb:alice:{PW}@h")
    yield Case("not-a-str", lambda: parse_uri(f"mongodb://{AUTH}h".encode()))  # type: ignore[arg-type]
    yield from uri("bad-utf8-password", f"mongodb://alice:{PW}%C3@h")
    yield from uri("lone-percent", f"mongodb://alice:{PW}%zz@h")
    yield from uri("two-colons", f"mongodb://alice:{PW}:x@h")
    yield from uri("unencoded-at", f"mongodb://alice:{PW}@x@h")
    yield from uri("unencoded-hash", f"mongodb://alice:{PW}#@h")
    yield from uri("empty-username", f"mongodb://:{PW}@h")
    yield from uri("cut-by-slash", f"mongodb://alice:{CUT}@h")
    yield from uri("cut-by-question-mark", f"mongodb://alice:{CUT.replace('/', '?')}@h")
    yield from uri("cut-decoded-colon", f"mongodb://alice:{CUT.replace('/', '%3A')}")
    yield from uri("no-host-after-password", f"mongodb://alice:{PW}")
    yield from uri("no-host", f"mongodb://{AUTH}")
    yield from uri("empty-host", f"mongodb://{AUTH}a,,b")
    yield from uri("port-not-a-number", f"mongodb://{AUTH}h:x1")
    yield from uri("port-out-of-range", f"mongodb://{AUTH}h:70000")
    yield from uri("socket-path", f"mongodb://{AUTH}%2Ftmp%2Fmongodb")
    yield from uri("unclosed-ip-literal", f"mongodb://{AUTH}[::1")
    yield from uri("bad-ip-literal", f"mongodb://{AUTH}[nothex]:1")
    yield from uri("after-ip-literal", f"mongodb://{AUTH}[::1]x")
    yield from uri("no-host-name", f"mongodb://{AUTH}:1")
    yield from uri("bare-ipv6", f"mongodb://{AUTH}a:b:1")
    yield from uri("bad-host-character", f"mongodb://{AUTH}h%20x")
    yield from uri("bad-host-utf8", f"mongodb://{AUTH}h%C3")
    yield from uri("bad-database", f"mongodb://{AUTH}h/a b")
    yield from uri("srv-two-hosts", f"mongodb+srv://{AUTH}a.{CLUSTER},b.{CLUSTER}")
    yield from uri("srv-port", f"mongodb+srv://{AUTH}{CLUSTER}:1", strict_only=True)
    yield from client("srv-port", f"mongodb+srv://{AUTH}{CLUSTER}:1")
    yield from uri("srv-ip", f"mongodb+srv://{AUTH}127.0.0.1", strict_only=True)
    yield from client("srv-ip", f"mongodb+srv://{AUTH}127.0.0.1")
    yield from uri("option-not-a-pair", f"mongodb://{AUTH}h/?w")
    yield from uri("option-bad-utf8", f"mongodb://{AUTH}h/?appname=%C3")
    yield from uri(
        "secret-option-bad-utf8", f"mongodb://h/?proxyHost=p&proxyUsername=u&proxyPassword={PW}%C3"
    )
    yield from uri("tls-ssl-disagree", f"mongodb://{AUTH}h/?tls=true&ssl=false")
    yield from uri("proxy-repeated", f"mongodb://{AUTH}h/?proxyHost=a&proxyHost=b")
    # Values that must never be dropped, even from a connection string.
    yield from uri("bogus-mechanism", f"mongodb://{AUTH}h/?authMechanism=BOGUS")
    yield from uri("empty-auth-source", f"mongodb://{AUTH}h/?authSource=")
    yield from uri("negative-w", f"mongodb://{AUTH}h/?w=-1")
    yield from uri("callback-in-string", f"mongodb://{AUTH}h/?authMechanismProperties=OIDC_CALLBACK:x")
    # Values only the strict parsers refuse.
    yield from strict("bad-bool", "retryWrites=maybe")
    yield from strict("bad-int", "maxPoolSize=x")
    yield from strict("int-out-of-range", "maxPoolSize=99999999999")
    yield from strict("int-too-small", "heartbeatFrequencyMS=1")
    yield from strict("int-not-between", "zlibCompressionLevel=10")
    yield from strict("empty-string", "replicaSet=")
    yield from strict("bad-choice", "readPreference=bogus")
    yield from strict("long-appname", "appname=" + "a" * 129)
    yield from strict("bad-tag-set", "readPreference=secondary&readPreferenceTags=bad")
    yield from strict("empty-w", "w=")
    yield from strict("huge-w", "w=99999999999")
    yield from strict("bad-staleness", "readPreference=secondary&maxStalenessSeconds=0")
    yield from strict("bad-service-name", "srvServiceName=-x")
    yield from strict("bad-proxy-port", "proxyHost=p&proxyPort=70000")
    yield Case("unknown-option-pymongo", lambda: compat.parse_uri(f"mongodb://{AUTH}h/?bogusOption=1"))
    # Options that contradict each other.
    yield from uri(
        "tls-insecure-conflict", f"mongodb://{AUTH}h/?tlsInsecure=true&tlsAllowInvalidHostnames=true"
    )
    yield from uri("tls-off-with-tls-options", f"mongodb://{AUTH}h/?tls=false&tlsCAFile=ca.pem")
    yield from uri("direct-srv", f"mongodb+srv://{AUTH}{CLUSTER}/?directConnection=true")
    yield from uri("direct-two-hosts", f"mongodb://{AUTH}a,b/?directConnection=true")
    yield from uri("srv-only-option", f"mongodb://{AUTH}h/?srvMaxHosts=1")
    yield from uri("srv-max-replica-set", f"mongodb+srv://{AUTH}{CLUSTER}/?srvMaxHosts=1&replicaSet=r")
    yield from uri("srv-max-load-balanced", f"mongodb+srv://{AUTH}{CLUSTER}/?srvMaxHosts=1&loadBalanced=true")
    yield from uri("load-balanced-two-hosts", f"mongodb://{AUTH}a,b/?loadBalanced=true")
    yield from uri("load-balanced-replica-set", f"mongodb://{AUTH}h/?loadBalanced=true&replicaSet=r")
    yield from uri("load-balanced-direct", f"mongodb://{AUTH}h/?loadBalanced=true&directConnection=true")
    yield from uri("proxy-port-alone", f"mongodb://{AUTH}h/?proxyPort=1")
    yield from uri("proxy-password-alone", f"mongodb://h/?proxyHost=p&proxyPassword={PW}")
    yield from uri("unacknowledged-journal", f"mongodb://{AUTH}h/?w=0&journal=true")
    yield from uri("pool-sizes", f"mongodb://{AUTH}h/?minPoolSize=5&maxPoolSize=1")
    yield from client("tz-aware-not-boolean", f"mongodb://{AUTH}h", tz_aware="maybe")
    for case in client("driver-not-driver-info", f"mongodb://{AUTH}h", driver="mongio-wrapper"):
        yield Case(case.id, case.call, TypeError)
    yield from uri("staleness-primary", f"mongodb://{AUTH}h/?maxStalenessSeconds=100")
    yield from uri("tags-primary", f"mongodb://{AUTH}h/?readPreferenceTags=dc:ny")
    # Credentials: what each mechanism requires and forbids.
    yield from client("password-without-username", "mongodb://h", password=PW_DECODED)
    yield from client(
        "properties-without-mechanism", f"mongodb://h/?authMechanismProperties=SERVICE_NAME:x&{TLS_SECRET}"
    )
    yield from client(
        "scram-property",
        f"mongodb://{AUTH}h/?authMechanism=SCRAM-SHA-256&authMechanismProperties=SERVICE_NAME:x",
    )
    yield from client(
        "gssapi-property",
        f"mongodb://{AUTH}h/?authMechanism=GSSAPI&authMechanismProperties=AWS_SESSION_TOKEN:{PW}",
    )
    yield from client(
        "gssapi-canonicalize",
        f"mongodb://{AUTH}h/?authMechanism=GSSAPI&authMechanismProperties=CANONICALIZE_HOST_NAME:bogus",
    )
    yield from client("gssapi-auth-source", f"mongodb://{AUTH}h/?authMechanism=GSSAPI&authSource=admin")
    yield from client("gssapi-no-username", "mongodb://h/?authMechanism=GSSAPI", password=PW_DECODED)
    yield from client("scram-no-username", "mongodb://h/?authMechanism=SCRAM-SHA-256", password=PW_DECODED)
    yield from client("plain-no-password", f"mongodb://alice@h/?authMechanism=PLAIN&{TLS_SECRET}")
    yield from client("x509-password", f"mongodb://{AUTH}h/?authMechanism=MONGODB-X509")
    yield from client("aws-password", f"mongodb://{AUTH}h/?authMechanism=MONGODB-AWS")
    yield from client(
        "aws-provider-not-callable",
        f"mongodb://h/?authMechanism=MONGODB-AWS&{TLS_SECRET}",
        authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": PW_DECODED},
    )
    yield from client("oidc-password", f"mongodb://{AUTH}h/?authMechanism=MONGODB-OIDC")
    oidc = f"mongodb://h/?authMechanism=MONGODB-OIDC&{TLS_SECRET}"
    yield from client(
        "oidc-two-callbacks",
        oidc,
        authMechanismProperties={"OIDC_CALLBACK": _callback, "OIDC_HUMAN_CALLBACK": _callback},
    )
    yield from client("oidc-bad-environment", oidc + "&authMechanismProperties=ENVIRONMENT:mars")
    yield from client(
        "oidc-environment-callback",
        oidc,
        authMechanismProperties={"ENVIRONMENT": "test", "OIDC_CALLBACK": _callback},
    )
    yield from client("oidc-azure-no-resource", oidc + "&authMechanismProperties=ENVIRONMENT:azure")
    yield from client(
        "oidc-test-resource", oidc + "&authMechanismProperties=ENVIRONMENT:test,TOKEN_RESOURCE:r"
    )
    yield from client(
        "oidc-username",
        f"mongodb://alice@h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test&{TLS_SECRET}",
    )
    yield from client("oidc-nothing", oidc)
    yield from client(
        "oidc-resource-alone",
        oidc,
        authMechanismProperties={"OIDC_CALLBACK": _callback, "TOKEN_RESOURCE": "r"},
    )
    yield from client(
        "oidc-allowed-hosts",
        oidc,
        authMechanismProperties={"OIDC_HUMAN_CALLBACK": _callback, "ALLOWED_HOSTS": "h"},
    )
    yield from client(
        "oidc-allowed-hosts-without-human-callback",
        oidc,
        authMechanismProperties={"OIDC_CALLBACK": _callback, "ALLOWED_HOSTS": ["h"]},
    )
    yield from client(
        "oidc-callback-not-callable", oidc, authMechanismProperties={"OIDC_CALLBACK": "not-a-callback"}
    )
    yield Case(
        "unsupported-mechanism",
        lambda: build_credential(
            mechanism="BOGUS",
            username="alice",
            password=PW_DECODED,
            auth_source=None,
            database=None,
            mechanism_properties=None,
        ),
    )
    # Keyword arguments next to a connection string with a password.
    with_password = f"mongodb://{AUTH}h"
    yield from client("unknown-keyword", with_password, passwrd=PW_DECODED)
    yield from client("bad-keyword-string", with_password, maxPoolSize="x")
    yield from client("keyword-tls-disagree", with_password, tls=True, ssl=False)
    yield from client("keyword-password-type", with_password, password=PW_DECODED.encode())
    yield from client("bad-port", with_password, port=0)
    for case in client("bad-host-type", [with_password, 1]):
        yield Case(case.id, case.call, TypeError)
    for case in client("bad-port-type", with_password, port="27017"):
        yield Case(case.id, case.call, TypeError)
    for case in client("host-not-a-str", 1, username="alice", password=PW_DECODED):
        yield Case(case.id, case.call, TypeError)
    yield from client("no-host", [], username="alice", password=PW_DECODED)
    yield from client("tls-keyword-against-uri", f"mongodb://{AUTH}h/?tls=true", tls=False)
    yield from client("srv-with-other-host", [f"mongodb+srv://{AUTH}{CLUSTER}", "h"])
    yield from client("bad-read-preference", with_password, read_preference=object())
    yield Case("bad-connect-options", lambda: ClientOptions.from_uri(with_password, connect="yes"))
    yield from client("keyword-bool-type", with_password, tls=1)
    yield from client("keyword-int-bool", with_password, maxPoolSize=True)
    yield from client("keyword-not-finite", with_password, connectTimeoutMS=float("inf"))
    yield from client("keyword-not-int", with_password, maxPoolSize=1.5)
    yield from client("keyword-not-str", with_password, replicaSet=5)
    yield from client("keyword-compressors", with_password, compressors=5)
    yield from client("keyword-tags", with_password, readPreferenceTags=5)
    yield from client("keyword-w-bool", with_password, w=True)
    yield from client("keyword-w-negative", with_password, w=-1)
    yield from client("keyword-w-float", with_password, w=1.5)
    yield from client("keyword-properties", with_password, authMechanismProperties=5)
    yield from client("keyword-server-selector", with_password, server_selector=PW_DECODED)
    # Options mongio refuses rather than ignores, next to a password (and as the secret itself).
    # The proxy options: what RFC 1929 cannot carry, and a socket no proxy reaches (the proxy password too).
    proxy = "/?proxyHost=p&proxyUsername=u"
    yield from client("proxy-password-not-ascii", f"mongodb://h{proxy}&proxyPassword={PW}%C3%A9")
    yield from client("proxy-password-too-long", f"mongodb://h{proxy}&proxyPassword={PW}{'x' * 250}")
    yield from client("proxy-username-not-ascii", f"{with_password}/?proxyHost=p&proxyUsername=%C3%BC&proxyPassword=x")
    yield from client("proxy-keyword-password", "mongodb://h", proxyHost="p", proxyUsername="u", proxyPassword=PW + "é")
    yield from client("proxy-unix-socket", f"mongodb://{AUTH}%2Ftmp%2Fm.sock{proxy}&proxyPassword={PW}")
    yield from client("proxy-password-alone-keyword", "mongodb://h", proxyPassword=PW_DECODED)
    yield from client("encryption-options-wrong-type", with_password, auto_encryption_opts={"key": PW_DECODED})
    yield from client("refused-try-once", f"{with_password}/?serverSelectionTryOnce=true")
    yield from client(
        "keyword-secret-type", "mongodb://h", tlsCertificateKeyFilePassword=PW_DECODED.encode() + b"\0", tls=1
    )
    # The PyMongo-shaped helpers.
    yield Case("pymongo-userinfo", lambda: compat.parse_userinfo(f"alice:{PW}%C3"))
    yield Case("pymongo-userinfo-at", lambda: compat.parse_userinfo(f"alice:{PW}@x"))
    yield Case("pymongo-ipv6", lambda: compat.parse_ipv6_literal_host(f"alice:{PW}@h", 27017), ValueError)
    yield Case("pymongo-host", lambda: compat.parse_host(f"alice:{PW}@h"))
    yield Case("pymongo-split-hosts", lambda: compat.split_hosts(f"alice:{CUT}@h"))
    yield Case("pymongo-srv", lambda: compat.parse_uri(f"mongodb+srv://{AUTH}{CLUSTER}"))
    yield Case("pymongo-split-options", lambda: compat.split_options(f"proxyHost=p&proxyPassword={PW}%C3"))
    yield Case("pymongo-raw-options", lambda: compat.parse_uri(f"mongodb://{AUTH}h/?a=%C3", validate=False))
    yield Case("pymongo-async-srv-port", _async_compat(f"mongodb+srv://{AUTH}{CLUSTER}:1"))
    # mongodb+srv resolution, with the password in the string.
    srv = f"mongodb+srv://{AUTH}{CLUSTER}"
    yield Case("srv-lookup-fails", _resolve(srv, FakeResolver(fail="SRV")))
    yield Case("srv-no-records", _resolve(srv, FakeResolver(srv=())))
    yield Case("txt-lookup-fails", _resolve(srv, FakeResolver(fail="TXT")))
    yield Case("txt-two-records", _resolve(srv, FakeResolver(txt=([b"replicaSet=a"], [b"replicaSet=b"]))))
    yield Case("txt-not-utf8", _resolve(srv, FakeResolver(txt=([b"\xff"],))))
    yield Case("txt-forbidden-option", _resolve(srv, FakeResolver(txt=([b"w=1"],))))
    yield Case("txt-bad-value", _resolve(srv, FakeResolver(txt=([b"authSource="],))))
    yield Case("srv-outside-domain", _resolve(srv, FakeResolver(srv=(("evil.example.org", 1),))))
    yield Case(
        "srv-resolved-direct",
        _resolve(srv + "/?loadBalanced=true", FakeResolver(srv=((f"a.{CLUSTER}", 1), (f"b.{CLUSTER}", 1)))),
    )
    yield from _gssapi_cases()


def _gssapi(
    *,
    username: str | None = "alice@EXAMPLE.COM",
    properties: dict[str, Any] | None = None,
    server: Callable[[], FakeGssapiServer] = FakeGssapiServer,
    kerberos: Callable[[], FakeKerberos] = FakeKerberos,
    timeout: float | None = None,
) -> Callable[[], object]:
    """A GSSAPI conversation against a fresh scripted server and Kerberos library each time it runs."""
    credential = MongoCredential(
        mechanism="GSSAPI",
        source="$external",
        username=username,
        password=PW_DECODED,
        mechanism_properties=properties or {},
    )

    async def conversation() -> None:
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        await authenticate_gssapi(credential, server(), "h", library=kerberos(), deadline=deadline)

    return lambda: asyncio.run(conversation())


def _gssapi_cases() -> Iterator[Case]:
    """GSSAPI authentication failing in each of its ways, with a password in the credential."""
    failed = AuthenticationFailed
    yield Case("gssapi-unnormalized-property", _gssapi(properties={"CANONICALIZE_HOST_NAME": "x"}))
    yield Case("gssapi-auth-no-username", _gssapi(username=None))
    for call in ("open", "step", "unwrap", "wrap"):
        yield Case(f"gssapi-kerberos-{call}", _gssapi(kerberos=partial(FakeKerberos, fail=call)), failed)
    for fault in ("refuse", "done-early", "no-payload", "not-done"):
        yield Case(f"gssapi-server-{fault}", _gssapi(server=partial(FakeGssapiServer, fault=fault)), failed)
    endless = _gssapi(server=partial(FakeGssapiServer, fault="endless"), kerberos=partial(FakeKerberos, steps=100))
    yield Case("gssapi-endless", endless, failed)
    yield Case("gssapi-deadline", _gssapi(kerberos=partial(FakeKerberos, slow=0.2), timeout=0.01), failed)
    for name, offer in (("size", b"\x01"), ("layers", b"\x04\0\0\0")):
        yield Case(f"gssapi-offer-{name}", _gssapi(server=partial(FakeGssapiServer, offer=offer)), failed)


CASES = list(_cases())


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every error chained to it, shown or suppressed."""
    pending: list[BaseException | None] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


def _shown(error: BaseException, records: Sequence[logging.LogRecord], caught: Sequence[Any]) -> list[str]:
    texts = ["".join(traceback.format_exception(error))]
    for item in _chain(error):
        texts += [str(item), repr(item), repr(item.args)]
    for record in records:
        texts += [record.getMessage(), repr(record.args), repr(record.exc_info)]
    texts += [str(warning.message) for warning in caught]
    return texts


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_no_password_in_what_a_malformed_connection_string_raises(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(case.error) as info:
            case.call()
    assert str(info.value), "the error names the problem"
    for text in _shown(info.value, caplog.records, caught):
        for marker in MARKERS:
            assert marker not in text, text


def test_enough_malformed_paths_are_tried() -> None:
    # The reported problem tried 26 malformed connection strings; every one of them is among these.
    assert len(CASES) >= 200
    assert len({case.id.rsplit("-", 1)[0] for case in CASES}) >= 100


def _raise_sites() -> dict[tuple[str, int], str]:
    """Every ``raise`` statement with an exception in ``RAISE_FILES``: (file, line) -> enclosing function."""
    sites: dict[tuple[str, int], str] = {}
    for path in RAISE_FILES:
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    # ast.walk meets outer functions first: the innermost one names the site last.
                    sites[(str(path), node.lineno)] = function.name
    return sites


def _trace_raises(call: Callable[[], object], files: set[str]) -> set[tuple[str, int]]:
    """Each (file, line) in ``files`` an exception ``call`` raises passes through: where it was raised, and
    where it was raised again (an outcome of a concurrent lookup re-raised by the function that awaited it)."""
    sites: set[tuple[str, int]] = set()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception":
            sites.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def start(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename in files else None

    previous = sys.gettrace()
    sys.settrace(start)
    try:
        call()
    except Exception:
        pass
    finally:
        sys.settrace(previous)
    return sites


def test_every_raise_site_is_reached_with_a_password() -> None:
    sites = _raise_sites()
    files = {str(path) for path in RAISE_FILES}
    reached: set[tuple[str, int]] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in CASES:
            reached |= _trace_raises(case.call, files)
    missing = [
        f"{Path(path).relative_to(SRC)}:{line} ({function})"
        for (path, line), function in sorted(sites.items())
        if (path, line) not in reached and (str(Path(path).relative_to(SRC)), function) not in UNREACHABLE
    ]
    assert not missing, f"raise sites no case reaches with a password (add a case to CASES): {missing}"
    assert len(sites) >= 100


# -- the redaction itself -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"mongodb://alice:{PW}@h", "mongodb://alice:***@h"),
        (f"mongodb+srv://alice:{PW}@h/db?w=1", "mongodb+srv://alice:***@h/db?w=1"),
        (f"mongodbx://alice:{PW}@h", "mongodbx://alice:***@h"),
        (f"alice:{PW}@h", "alice:***@h"),
        (
            f"mongodb:/alice:{PW}@h",
            "mongodb:***@h",
        ),  # which ":" starts the password is unclear: from the first
        (f"mongodb://alice:{CUT}@h/db", "mongodb://alice:***@h/db"),
        ("mongodb://alice:p@ss@h", "mongodb://alice:***@h"),
        (f"mongodb://alice:{PW}", "mongodb://alice:***"),
        ("mongodb://alice@h:27017", "mongodb://alice@h:27017"),
        ("mongodb://h:27017,i:27018/?w=1", "mongodb://h:27017,i:27018/?w=1"),
        ("mongodb://h/?readPreferenceTags=dc:ny", "mongodb://h/?readPreferenceTags=dc:ny"),
        (
            f"mongodb://h/?proxyHost=p&proxyPassword={PW}&w=1",
            "mongodb://h/?proxyHost=p&proxyPassword=***&w=1",
        ),
        (
            f"mongodb://h/?TLSCERTIFICATEKEYFILEPASSWORD={PW}",
            "mongodb://h/?TLSCERTIFICATEKEYFILEPASSWORD=***",
        ),
        (
            f"mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{PW}",
            "mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:***",
        ),
    ],
)
def test_redact_uri(text: str, shown: str) -> None:
    assert redact_uri(text) == shown


def test_password_span_is_none_without_a_password() -> None:
    for text in ("mongodb://h", "mongodb://alice@h", "mongodb://h:1", "mongodb://a:1,b:2/db?x=1:2", "h"):
        assert password_span(text) is None, text


def test_hide_leaves_the_words_of_a_message_alone() -> None:
    secrets = Secrets.of_uri("mongodb://u:p@h")
    assert secrets.hide("a password cannot be used") == "a password cannot be used"
    assert secrets.hide("host 'u:p@h'") == f"host 'u:{REDACTED}@h'"


def test_hide_covers_the_pieces_of_a_cut_password() -> None:
    secrets = Secrets.of_uri(f"mongodb://alice:{CUT}@h")
    assert secrets.hide("port 's3cr3t' of host 'alice:s3cr3t'") == "port '***' of host 'alice:***'"
    assert secrets.hide("database name 'PW0rd@h'") == "database name '***@h'"


def test_a_clean_error_is_raised_as_it_was() -> None:
    # No secret in it and nothing chained: the original error, traceback and all.
    with pytest.raises(ConfigurationError) as info:
        parse_uri(f"mongodb://{AUTH}h/?w=-1")
    assert "Invalid value for w: '-1'" in str(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_a_hidden_error_keeps_its_class_and_chains_nothing_secret() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_uri(f"mongodb://alice:{PW}%C3@h")
    assert type(info.value).__name__ == "InvalidURI"
    assert str(info.value) == "the password is not valid percent-encoded UTF-8"
    assert info.value.__context__ is None and info.value.__cause__ is None
    with pytest.raises(ConfigurationError) as info:
        ClientOptions.from_uri(f"alice:{PW}@h")
    assert str(info.value) == f"port '{REDACTED}@h' of host 'alice:{REDACTED}@h' is not a number"
    assert info.value.__context__ is None


def test_a_dns_cause_without_secret_is_kept() -> None:
    with pytest.raises(ConfigurationError) as info:
        _resolve(f"mongodb+srv://{AUTH}{CLUSTER}", FakeResolver(fail="SRV"))()
    assert isinstance(info.value.__cause__, OSError)


def test_warnings_hide_the_password() -> None:
    # The parse goes on, so the pieces of the cut password end up in warnings, not errors.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = parse_uri("mongodb://alice:12345/?s3cr3t=x@h")
        ClientOptions.from_uri("mongodb://alice:12345/?s3cr3t=x@h")
    shown = [str(item.message) for item in caught] + list(parsed.warnings)
    assert shown and all("s3cr3t" not in text for text in shown), shown


def test_reprs_hold_no_password() -> None:
    text = f"mongodb://{AUTH}h/?tls=true&{TLS_SECRET}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = ClientOptions.from_uri(text)
        parsed = parse_uri(text)
        mongo_client = MongoClient(text, connect=False, password="kw" + PW_DECODED)
    assert options.credential is not None and options.credential.password == PW_DECODED
    assert options.tls is not None and options.tls.certificate_key_file_password == PW_DECODED
    shown = [repr(options), repr(parsed), repr(options.credential), repr(options.options), repr(mongo_client)]
    with_keyword = ClientOptions.from_uri(text, password="kw" + PW_DECODED, tlsCertificateKeyFilePassword=PW_DECODED)
    shown += [repr(with_keyword), repr(with_keyword._sources)]
    for item in shown:
        for marker in MARKERS:
            assert marker not in item, item
