"""The initial DNS seedlist discovery specification's tests, resolved through an in-memory DNS.

Only loopback traffic is possible here, so the SRV and TXT records the tests expect (listed in the suite's
``tests/README.md``) are served by :class:`ReadmeRecords`, a resolver for :mod:`mongio.options.srv`. Each
file gives two cases:

- ``seedlist: ...`` builds the client's options from the URI and resolves them, then checks what needs no
  server: the seeds (``seeds``, ``numSeeds``), the URI options including those from the TXT record and the
  implicit TLS (``options``), the other parsed parts (``parsed_options``), or that an ``error`` is raised as
  a :class:`~mongio.errors.ConfigurationError`;
- ``deployment: ...`` is what a client finds by monitoring the deployment behind those records
  (``hosts``, ``numHosts``) and the ``ping``; it needs that deployment and is in the skip list.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from spec_runner.model import RunContext, SpecCase, Suite, relative_file

NAME = "initial-dns-seedlist-discovery"
SUBDIRECTORIES = ("replica-set", "load-balanced", "sharded")

TTL = 86400.0

# The README's record table. SRV: name -> (port, target) in the README's order.
SRV_RECORDS: dict[str, tuple[tuple[int, str], ...]] = {
    "_mongodb._tcp.test1.test.build.10gen.cc": (
        (27017, "localhost.test.build.10gen.cc"),
        (27018, "localhost.test.build.10gen.cc"),
    ),
    "_mongodb._tcp.test2.test.build.10gen.cc": (
        (27018, "localhost.test.build.10gen.cc"),
        (27019, "localhost.test.build.10gen.cc"),
    ),
    "_mongodb._tcp.test3.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test5.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test6.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test7.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test8.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test10.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test11.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    # The missing "test." label is deliberate (the target lies outside the name's domain).
    "_mongodb._tcp.test12.test.build.10gen.cc": ((27017, "localhost.build.10gen.cc"),),
    "_mongodb._tcp.test13.test.build.10gen.cc": ((27017, "test.build.10gen.cc"),),
    "_mongodb._tcp.test14.test.build.10gen.cc": ((27017, "localhost.not-test.build.10gen.cc"),),
    "_mongodb._tcp.test15.test.build.10gen.cc": ((27017, "localhost.test.not-build.10gen.cc"),),
    "_mongodb._tcp.test16.test.build.10gen.cc": ((27017, "localhost.test.build.not-10gen.cc"),),
    "_mongodb._tcp.test17.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.not-cc"),),
    "_mongodb._tcp.test18.test.build.10gen.cc": ((27017, "localhost.sub.test.build.10gen.cc"),),
    "_mongodb._tcp.test19.test.build.10gen.cc": (
        (27017, "localhost.evil.build.10gen.cc"),
        (27017, "localhost.test.build.10gen.cc"),
    ),
    "_mongodb._tcp.test20.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test21.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    "_customname._tcp.test22.test.build.10gen.cc": ((27017, "localhost.test.build.10gen.cc"),),
    # test23 and test24 point at the load balancer's port.
    "_mongodb._tcp.test23.test.build.10gen.cc": ((8000, "localhost.test.build.10gen.cc"),),
    "_mongodb._tcp.test24.test.build.10gen.cc": ((8000, "localhost.test.build.10gen.cc"),),
}

# TXT: name -> its records, each as its character strings.
TXT_RECORDS: dict[str, tuple[tuple[bytes, ...], ...]] = {
    "test5.test.build.10gen.cc": ((b"replicaSet=repl0&authSource=thisDB",),),
    "test6.test.build.10gen.cc": ((b"replicaSet=repl0",), (b"authSource=otherDB",)),
    "test7.test.build.10gen.cc": ((b"ssl=false",),),
    "test8.test.build.10gen.cc": ((b"authSource",),),
    "test10.test.build.10gen.cc": ((b"socketTimeoutMS=500",),),
    "test11.test.build.10gen.cc": ((b"replicaS", b"et=rep", b"l0"),),
    "test20.test.build.10gen.cc": ((b"loadBalanced=true",),),
    "test21.test.build.10gen.cc": ((b"loadBalanced=false",),),
    "test24.test.build.10gen.cc": ((b"loadBalanced=true",),),
}

# Names with no records at all, so every lookup of them finds nothing (NXDOMAIN): test4 is left out on
# purpose to test a name without SRV records, test9 was deleted upstream.
ABSENT = ("test4.test.build.10gen.cc", "test9.test.build.10gen.cc")


def _name(query: str) -> str:
    return query.lower().rstrip(".")


class ReadmeRecords:
    """A :class:`mongio.options.srv.DnsResolver` serving the README's records and nothing else.

    Any other name answers as NXDOMAIN does (no records). Every query is remembered, so a case can check
    which names the driver looked up.
    """

    def __init__(
        self,
        srv: Mapping[str, Sequence[tuple[int, str]]] = SRV_RECORDS,
        txt: Mapping[str, Sequence[Sequence[bytes]]] = TXT_RECORDS,
    ) -> None:
        self._srv = {_name(key): tuple(value) for key, value in srv.items()}
        self._txt = {_name(key): tuple(tuple(record) for record in value) for key, value in txt.items()}
        self.srv_queries: list[str] = []
        self.txt_queries: list[str] = []

    async def resolve_srv(self, name: str, lifetime: float) -> Sequence[Any]:
        from mongio.options.srv import SrvRecord

        self.srv_queries.append(name)
        return [SrvRecord(target, port, TTL) for port, target in self._srv.get(_name(name), ())]

    async def resolve_txt(self, name: str, lifetime: float) -> Sequence[Sequence[bytes]]:
        self.txt_queries.append(name)
        return [list(record) for record in self._txt.get(_name(name), ())]

    def targets(self, query: str) -> set[str]:
        """The ``host:port`` of every SRV record at ``query``."""
        return {f"{target}:{port}" for port, target in self._srv.get(_name(query), ())}


# -- options -------------------------------------------------------------------------------------------------


def _tls_enabled(options: Any) -> bool:
    return options.tls is not None


def _auth_source(options: Any) -> Any:
    if options.credential is not None:
        return options.credential.source
    return options.options.get("authSource")


# What each expected option is on the client's options; others are looked up in the merged option map.
OPTION_GETTERS: dict[str, Callable[[Any], Any]] = {
    "ssl": _tls_enabled,
    "tls": _tls_enabled,
    "loadBalanced": lambda options: options.load_balanced,
    "directConnection": lambda options: options.direct_connection,
    "replicaSet": lambda options: options.replica_set,
    "srvMaxHosts": lambda options: options.srv_max_hosts,
    "srvServiceName": lambda options: options.srv_service_name,
    "authSource": _auth_source,
}


def _credential_field(name: str) -> Callable[[Any], Any]:
    def get(options: Any) -> Any:
        if options.credential is None:
            raise AssertionError(f"no credential was built, so there is no {name}")
        return getattr(options.credential, name)

    return get


PARSED_OPTION_GETTERS: dict[str, Callable[[Any], Any]] = {
    "user": _credential_field("username"),
    "password": _credential_field("password"),
    # The connection string's "Auth database" component: the database in the path.
    "auth_database": lambda options: options.database,
    "db": lambda options: options.database,
    "defaultDatabase": lambda options: options.database,
}


def _same(got: Any, want: Any) -> bool:
    # Strict on type so that True never stands in for 1, nor 0 for False.
    return bool(got == want) and type(got) is type(want)


def _check_values(
    uri: str,
    what: str,
    expected: Mapping[str, Any],
    getters: Mapping[str, Callable[[Any], Any]],
    options: Any,
    fallback: Callable[[str], Any] | None,
) -> None:
    for key, want in expected.items():
        getter = getters.get(key)
        if getter is not None:
            got = getter(options)
        elif fallback is not None:
            got = fallback(key)
        else:
            raise AssertionError(f"{uri!r}: no check is known for {what} {key!r}")
        if not _same(got, want):
            raise AssertionError(f"{uri!r}: {what} {key!r} is {got!r}, expected {want!r}")


# -- the cases ---------------------------------------------------------------------------------------------


async def _resolve(uri: str, resolver: ReadmeRecords) -> Any:
    from mongio.options import ClientOptions

    # Ignored options are warned about; these tests state nothing about warnings.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = ClientOptions.from_uri(uri)
        return await options.resolve(resolver)


async def _expect_error(test: Mapping[str, Any]) -> None:
    from mongio.errors import ConfigurationError

    uri = test["uri"]
    resolver = ReadmeRecords()
    try:
        options = await _resolve(uri, resolver)
    except ConfigurationError as exc:
        message = str(exc)
        if len(message.split()) < 3:
            raise AssertionError(
                f"{uri!r}: the error {type(exc).__name__}({message!r}) explains nothing"
            ) from exc
        return
    raise AssertionError(
        f"{uri!r} should fail ({test.get('comment', 'error: true')}), but resolved to seeds {options.seeds!r} "
        f"with options {dict(options.options)!r}"
    )


async def _check_seedlist(test: Mapping[str, Any]) -> None:
    uri = test["uri"]
    resolver = ReadmeRecords()
    options = await _resolve(uri, resolver)

    expected_service = (test.get("options") or {}).get("srvServiceName", "mongodb")
    srv_query = f"_{expected_service}._tcp.{options.srv_host}"
    if resolver.srv_queries != [srv_query] or resolver.txt_queries != [options.srv_host]:
        raise AssertionError(
            f"{uri!r}: expected one SRV lookup of {srv_query!r} and one TXT lookup of {options.srv_host!r}, "
            f"got SRV {resolver.srv_queries!r} and TXT {resolver.txt_queries!r}"
        )

    seeds = [f"{host}:{port}" for host, port in options.seeds]
    if len(set(seeds)) != len(seeds):
        raise AssertionError(f"{uri!r}: the seed list repeats a host: {seeds!r}")
    served = resolver.targets(srv_query)
    if not set(seeds) <= served:
        raise AssertionError(
            f"{uri!r}: seeds {seeds!r} include hosts no SRV record gave ({sorted(served)!r})"
        )
    if "seeds" in test and set(seeds) != set(test["seeds"]):
        raise AssertionError(f"{uri!r}: seeds are {sorted(seeds)!r}, expected {sorted(test['seeds'])!r}")
    if "numSeeds" in test and len(seeds) != test["numSeeds"]:
        raise AssertionError(f"{uri!r}: {len(seeds)} seeds ({seeds!r}), expected {test['numSeeds']}")

    def from_option_map(key: str) -> Any:
        if key not in options.options:
            raise AssertionError(f"{uri!r}: option {key!r} missing; options {dict(options.options)!r}")
        return options.options[key]

    _check_values(uri, "option", test.get("options") or {}, OPTION_GETTERS, options, from_option_map)
    _check_values(
        uri, "parsed option", test.get("parsed_options") or {}, PARSED_OPTION_GETTERS, options, None
    )


def _needs_deployment(test: Mapping[str, Any]) -> Callable[[RunContext], None]:
    def run(_context: RunContext) -> None:
        wanted = {key: test[key] for key in ("hosts", "numHosts", "ping") if key in test}
        raise AssertionError(
            f"{test['uri']!r}: checking {wanted!r} means connecting to the deployment behind the README's DNS "
            "records and waiting for discovery; this suite has no such deployment to reach"
        )

    return run


def _seedlist_name(test: Mapping[str, Any]) -> str:
    if test.get("error"):
        return f"seedlist: error ({test.get('comment', 'no comment')})"
    checked = [key for key in ("seeds", "numSeeds", "options", "parsed_options") if key in test]
    return "seedlist: " + ", ".join(checked)


def _deployment_name(test: Mapping[str, Any]) -> str | None:
    """The name of the part that needs the deployment, or ``None`` when the file expects none."""
    if test.get("error"):
        return None  # the error is raised before any connection; "hosts" is then empty by definition
    found = [key for key in ("hosts", "numHosts") if key in test]
    ping = test.get("ping", True) is not False
    if not found and not ping:
        return None
    parts = ["discovered " + " and ".join(found)] if found else []
    if ping:
        parts.append("ping")
    return "deployment: " + ", then ".join(parts)


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    for subdirectory in SUBDIRECTORIES:
        for path in sorted((tests_dir / subdirectory).glob("*.json")):
            test = json.loads(path.read_text(encoding="utf-8"))
            file = relative_file(tests_dir, path)
            check = _expect_error if test.get("error") else _check_seedlist
            yield SpecCase(suite=NAME, file=file, name=_seedlist_name(test), run=_bind(check, test))
            deployment = _deployment_name(test)
            if deployment is not None:
                # Not marked needs_server: the runner's test server is not that deployment.
                yield SpecCase(suite=NAME, file=file, name=deployment, run=_needs_deployment(test))


def _bind(check: Callable[[Mapping[str, Any]], Any], test: Mapping[str, Any]) -> Callable[[RunContext], Any]:
    return lambda _context: check(test)


SUITE = Suite(name=NAME, collect=collect)
