"""``mongodb+srv`` resolution against a resolver that serves records from memory (no DNS)."""

from __future__ import annotations

import asyncio
import random
import warnings
from collections.abc import Sequence

import pytest

from mongio.errors import ConfigurationError
from mongio.options import ClientOptions, ConfigurationWarning
from mongio.options.srv import (
    DnsLookupError,
    SrvRecord,
    apply_srv_max_hosts,
    rescan,
    resolve_seedlist,
    srv_domain,
    validate_srv_target,
)


class FakeResolver:
    """Serves SRV and TXT records from dictionaries; ``fail`` makes a name's lookup raise."""

    def __init__(
        self,
        srv: dict[str, list[tuple[str, int]]] | None = None,
        txt: dict[str, list[list[bytes]]] | None = None,
        ttl: float | None = 300.0,
    ) -> None:
        self.srv = srv or {}
        self.txt = txt or {}
        self.ttl = ttl
        self.fail: set[str] = set()
        self.queries: list[tuple[str, str]] = []

    async def resolve_srv(self, name: str, lifetime: float) -> Sequence[SrvRecord]:
        self.queries.append(("SRV", name))
        await asyncio.sleep(0)
        if name in self.fail:
            raise OSError(f"DNS server failure for {name}")
        return [SrvRecord(target + ".", port, self.ttl) for target, port in self.srv.get(name, [])]

    async def resolve_txt(self, name: str, lifetime: float) -> Sequence[Sequence[bytes]]:
        self.queries.append(("TXT", name))
        await asyncio.sleep(0)
        if name in self.fail:
            raise OSError(f"DNS server failure for {name}")
        return self.txt.get(name, [])


CLUSTER = "cluster0.example.com"
SRV_NAME = f"_mongodb._tcp.{CLUSTER}"


def three_hosts() -> FakeResolver:
    return FakeResolver(
        srv={SRV_NAME: [("a.example.com", 27017), ("B.Example.com", 27018), ("c.sub.example.com", 27019)]}
    )


async def test_seeds_from_srv_records() -> None:
    resolver = three_hosts()
    result = await resolve_seedlist(CLUSTER, resolver=resolver)
    assert result.seeds == (("a.example.com", 27017), ("b.example.com", 27018), ("c.sub.example.com", 27019))
    assert result.txt_options == {}
    assert result.rescan_interval == 300.0
    assert ("SRV", SRV_NAME) in resolver.queries and ("TXT", CLUSTER) in resolver.queries


async def test_custom_service_name() -> None:
    resolver = FakeResolver(srv={f"_customname._tcp.{CLUSTER}": [("a.example.com", 27017)]})
    result = await resolve_seedlist(CLUSTER, service_name="customname", resolver=resolver)
    assert result.seeds == (("a.example.com", 27017),)


def test_short_names_are_their_own_domain() -> None:
    assert srv_domain("localhost") == "localhost"
    assert srv_domain("mongo.local") == "mongo.local"
    assert srv_domain("blogs.mongodb.com") == "mongodb.com"


@pytest.mark.parametrize(
    ("hostname", "target"),
    [
        ("localhost", "localhost.mongodb"),
        ("mongo.local", "test_1.evil.local"),
        ("blogs.mongodb.com", "blogs.evil.com"),
        ("localhost", "localhost"),
        ("mongo.local", "mongo.local"),
        ("localhost", "test_1.cluster_1localhost"),
        ("mongo.local", "test_1.my_hostmongo.local"),
        ("blogs.mongodb.com", "cluster.testmongodb.com"),
        ("test13.test.build.example", "test.build.example"),
    ],
)
async def test_hosts_outside_the_domain_are_refused(hostname: str, target: str) -> None:
    assert validate_srv_target(hostname, target) is not None
    resolver = FakeResolver(srv={f"_mongodb._tcp.{hostname}": [(target, 27017)]})
    with pytest.raises(DnsLookupError, match="is not under the domain"):
        await resolve_seedlist(hostname, resolver=resolver)


@pytest.mark.parametrize(
    ("hostname", "target"),
    [
        ("localhost", "a.localhost"),
        ("mongo.local", "x.y.mongo.local"),
        ("blogs.mongodb.com", "x.mongodb.com"),
    ],
)
def test_hosts_inside_the_domain_are_accepted(hostname: str, target: str) -> None:
    assert validate_srv_target(hostname, target) is None


async def test_no_records_or_dns_failure_is_an_error() -> None:
    with pytest.raises(DnsLookupError, match="no SRV records"):
        await resolve_seedlist(CLUSTER, resolver=FakeResolver())
    resolver = three_hosts()
    resolver.fail.add(SRV_NAME)
    with pytest.raises(DnsLookupError, match="DNS server failure"):
        await resolve_seedlist(CLUSTER, resolver=resolver)


async def test_txt_record_strings_are_concatenated() -> None:
    resolver = three_hosts()
    resolver.txt[CLUSTER] = [[b"replicaS", b"et=rep", b"l0&authSource=thisDB"]]
    result = await resolve_seedlist(CLUSTER, resolver=resolver)
    assert result.txt_options == {"replicaSet": "repl0", "authSource": "thisDB"}


@pytest.mark.parametrize(
    ("records", "fragment"),
    [
        ([[b"replicaSet=repl0"], [b"authSource=otherDB"]], "2 TXT records"),
        ([[b"ssl=false"]], "'ssl'"),
        ([[b"socketTimeoutMS=500"]], "'socketTimeoutMS'"),
        ([[b"authSource"]], "not a key=value pair"),
    ],
)
async def test_txt_rules(records: list[list[bytes]], fragment: str) -> None:
    resolver = three_hosts()
    resolver.txt[CLUSTER] = records
    with pytest.raises(DnsLookupError) as info:
        await resolve_seedlist(CLUSTER, resolver=resolver)
    assert fragment in str(info.value)


async def test_srv_max_hosts_picks_at_random() -> None:
    resolver = three_hosts()
    picks = set()
    for seed in range(20):
        result = await resolve_seedlist(CLUSTER, srv_max_hosts=2, resolver=resolver, rng=random.Random(seed))
        assert len(result.seeds) == 2 and set(result.seeds) <= set(result.hosts)
        picks.add(result.seeds)
    assert len(picks) > 1  # not always the same two
    everything = await resolve_seedlist(CLUSTER, srv_max_hosts=3, resolver=resolver)
    assert len(everything.seeds) == 3


def test_rescan_keeps_current_hosts_and_fills_up_to_the_limit() -> None:
    a, b, c, d = (("a.example.com", 1), ("b.example.com", 1), ("c.example.com", 1), ("d.example.com", 1))
    # b was removed from DNS, c and d were added: a stays, one of the new ones joins.
    kept = apply_srv_max_hosts([a, b], [a, c, d], 2, random.Random(1))
    assert kept[0] == a and len(kept) == 2 and kept[1] in (c, d)
    # Without a limit every returned host is used and removed ones go.
    assert apply_srv_max_hosts([a, b], [a, c, d], 0) == (a, c, d)
    # Nothing new and nothing removed: unchanged.
    assert apply_srv_max_hosts([a, b], [b, a], 2) == (a, b)


async def test_rescan_drops_bad_hosts_without_failing() -> None:
    resolver = three_hosts()
    resolver.srv[SRV_NAME].append(("evil.attacker.net", 27017))
    result = await rescan(CLUSTER, resolver=resolver)
    assert ("evil.attacker.net", 27017) not in result.hosts
    assert result.rejected == ("evil.attacker.net",)
    assert len(result.hosts) == 3
    resolver.srv[SRV_NAME] = [("evil.attacker.net", 27017)]
    with pytest.raises(DnsLookupError, match="no valid host"):
        await rescan(CLUSTER, resolver=resolver)


async def test_rescan_sees_records_added_and_removed() -> None:
    resolver = three_hosts()
    first = await rescan(CLUSTER, resolver=resolver)
    resolver.srv[SRV_NAME] = [("a.example.com", 27017), ("d.example.com", 27017)]
    second = await rescan(CLUSTER, resolver=resolver)
    assert set(first.hosts) - set(second.hosts) == {("b.example.com", 27018), ("c.sub.example.com", 27019)}
    assert set(second.hosts) - set(first.hosts) == {("d.example.com", 27017)}


def client(uri: str, **kwargs: object) -> ClientOptions:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigurationWarning)
        return ClientOptions.from_uri(uri, **kwargs)  # type: ignore[arg-type]


async def test_client_options_resolution_merges_txt_below_uri_and_keywords() -> None:
    resolver = three_hosts()
    resolver.txt[CLUSTER] = [[b"replicaSet=repl0&authSource=thisDB"]]
    options = client(f"mongodb+srv://user:pw@{CLUSTER}/?authSource=uriDB", replicaSet="kwRS")
    assert options.needs_resolution
    resolved = await options.resolve(resolver)
    assert len(resolved.seeds) == 3 and not resolved.needs_resolution
    assert resolved.replica_set == "kwRS"
    assert resolved.credential is not None and resolved.credential.source == "uriDB"
    assert resolved.tls is not None
    plain = await client(f"mongodb+srv://user:pw@{CLUSTER}/", tls=False).resolve(resolver)
    assert plain.replica_set == "repl0" and plain.credential is not None
    assert plain.credential.source == "thisDB"
    assert plain.tls is None


async def test_txt_options_are_validated_with_the_real_hosts() -> None:
    resolver = three_hosts()
    resolver.txt[CLUSTER] = [[b"loadBalanced=true"]]
    with pytest.raises(ConfigurationError, match="loadBalanced=true cannot be used with 3 hosts"):
        await client(f"mongodb+srv://{CLUSTER}/").resolve(resolver)
    resolver.txt[CLUSTER] = [[b"replicaSet=repl0"]]
    with pytest.raises(ConfigurationError, match="srvMaxHosts=1 cannot be used with replicaSet"):
        await client(f"mongodb+srv://{CLUSTER}/?srvMaxHosts=1").resolve(resolver)


async def test_srv_max_hosts_applies_to_client_seeds() -> None:
    options = await client(f"mongodb+srv://{CLUSTER}/?srvMaxHosts=2").resolve(
        three_hosts(), rng=random.Random(3)
    )
    assert len(options.seeds) == 2


async def test_invalid_txt_value_is_a_warning_like_in_the_uri() -> None:
    resolver = three_hosts()
    resolver.txt[CLUSTER] = [[b"loadBalanced=perhaps"]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolved = await client(f"mongodb+srv://{CLUSTER}/").resolve(resolver)
    assert not resolved.load_balanced
    assert any(
        "loadBalanced" in str(w.message) for w in caught if issubclass(w.category, ConfigurationWarning)
    )


async def test_srv_and_txt_are_looked_up_concurrently() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    class Gated(FakeResolver):
        async def resolve_srv(self, name: str, lifetime: float) -> Sequence[SrvRecord]:
            started.append("SRV")
            await gate.wait()
            return await super().resolve_srv(name, lifetime)

        async def resolve_txt(self, name: str, lifetime: float) -> Sequence[Sequence[bytes]]:
            started.append("TXT")
            gate.set()  # the SRV lookup can only finish once the TXT lookup has started
            return await super().resolve_txt(name, lifetime)

    resolver = Gated(srv={SRV_NAME: [("a.example.com", 27017)]})
    result = await asyncio.wait_for(resolve_seedlist(CLUSTER, resolver=resolver), 5)
    assert sorted(started) == ["SRV", "TXT"] and result.seeds == (("a.example.com", 27017),)


async def test_dnspython_resolver_reads_answers_and_treats_nxdomain_as_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dns.asyncresolver
    import dns.name
    import dns.resolver

    from mongio.options.srv import DnspythonResolver

    class Answer(list):  # type: ignore[type-arg]
        def __init__(self, items: list[object], ttl: int) -> None:
            super().__init__(items)
            self.rrset = type("RRset", (), {"ttl": ttl})()

    class Srv:
        def __init__(self, target: str, port: int) -> None:
            self.target = dns.name.from_text(target)
            self.port = port

    class Txt:
        def __init__(self, *strings: bytes) -> None:
            self.strings = strings

    calls: list[tuple[str, str, float]] = []

    async def fake_resolve(name: str, rdtype: str, lifetime: float) -> Answer:
        calls.append((name, rdtype, lifetime))
        if name == "missing.example.com":
            raise dns.resolver.NXDOMAIN
        if rdtype == "SRV":
            return Answer([Srv("a.example.com.", 27017)], 120)
        return Answer([Txt(b"replicaSet=", b"rs0")], 120)

    monkeypatch.setattr(dns.asyncresolver, "resolve", fake_resolve)
    resolver = DnspythonResolver()
    assert await resolver.resolve_srv("_mongodb._tcp.c.example.com", 7.0) == [
        SrvRecord("a.example.com", 27017, 120.0)
    ]
    assert await resolver.resolve_txt("c.example.com", 7.0) == [[b"replicaSet=", b"rs0"]]
    assert await resolver.resolve_txt("missing.example.com", 7.0) == []
    assert calls[0] == ("_mongodb._tcp.c.example.com", "SRV", 7.0)
    result = await resolve_seedlist("c.example.com", resolver=resolver)
    assert result.seeds == (("a.example.com", 27017),) and result.txt_options == {"replicaSet": "rs0"}


async def test_srv_service_name_names_the_records_looked_up() -> None:
    resolver = FakeResolver(srv={f"_customname._tcp.{CLUSTER}": [("a.example.com", 27017)]})
    options = await client(f"mongodb+srv://{CLUSTER}/?srvServiceName=customname").resolve(resolver)
    assert options.seeds == (("a.example.com", 27017),)
    assert ("SRV", f"_customname._tcp.{CLUSTER}") in resolver.queries
    assert ("SRV", SRV_NAME) not in resolver.queries
