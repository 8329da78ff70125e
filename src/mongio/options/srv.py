"""``mongodb+srv`` resolution: SRV and TXT lookups and the seedlist discovery specification's checks.

The lookups go through a :class:`DnsResolver`; the default one uses dnspython's asyncio resolver, and tests
pass their own to serve records without DNS. Both records are looked up concurrently.

Rules applied (initial DNS seedlist discovery specification):

- SRV records are looked up at ``_{srvServiceName}._tcp.{hostname}``; none, or a DNS error, is an error.
- Every returned host must lie under the SRV name's domain: the name without its first label when it has
  three or more labels, else the whole name, and with at least one more label than that domain.
- ``srvMaxHosts`` > 0 keeps that many hosts, chosen at random (a Fisher-Yates shuffle).
- At most one TXT record; its strings are concatenated; it may only give ``authSource``, ``replicaSet`` and
  ``loadBalanced``.

:func:`rescan` is the polling variant (SRV polling specification): non-compliant hosts are dropped, and
:func:`apply_srv_max_hosts` keeps the current hosts that are still returned before adding new ones.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mongio.backend import gather
from mongio.errors import ConfigurationError, InvalidURI
from mongio.options.uri_options import TXT_ALLOWED, fold_case
from mongio.options.uri_parser import Address, parse_options

__all__ = [
    "MIN_RESCAN_INTERVAL",
    "DnsLookupError",
    "DnsResolver",
    "DnspythonResolver",
    "SrvRecord",
    "SrvRescan",
    "SrvResolution",
    "apply_srv_max_hosts",
    "rescan",
    "resolve_seedlist",
    "srv_domain",
    "validate_srv_target",
]

_log = logging.getLogger("mongio.srv")

MIN_RESCAN_INTERVAL = 60.0
"""Seconds: the SRV polling interval never goes below this, whatever the records' TTL."""

DEFAULT_LIFETIME = 20.0


class DnsLookupError(ConfigurationError):
    """A ``mongodb+srv`` name could not be resolved, or its records break the seedlist rules."""


@dataclass(frozen=True)
class SrvRecord:
    """One SRV answer: the target host (no trailing dot), its port, and the record's TTL in seconds."""

    target: str
    port: int
    ttl: float | None = None


class DnsResolver(Protocol):
    """What resolution needs from DNS. Return empty results for "no such records"; raise on DNS failures."""

    async def resolve_srv(self, name: str, lifetime: float) -> Sequence[SrvRecord]:
        """The SRV records at ``name``."""
        ...

    async def resolve_txt(self, name: str, lifetime: float) -> Sequence[Sequence[bytes]]:
        """The TXT records at ``name``, each as its list of character strings."""
        ...


class DnspythonResolver:
    """The default resolver, on :mod:`dns.asyncresolver` (no thread, no blocking call on the loop).

    dnspython is imported on first use, so clients that never see a ``mongodb+srv`` string skip its import.
    """

    async def resolve_srv(self, name: str, lifetime: float) -> Sequence[SrvRecord]:
        import dns.asyncresolver
        import dns.resolver

        try:
            answer = await dns.asyncresolver.resolve(name, "SRV", lifetime=lifetime)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        ttl = float(answer.rrset.ttl) if answer.rrset is not None else None
        return [SrvRecord(str(item.target).rstrip("."), int(item.port), ttl) for item in answer]

    async def resolve_txt(self, name: str, lifetime: float) -> Sequence[Sequence[bytes]]:
        import dns.asyncresolver
        import dns.resolver

        try:
            answer = await dns.asyncresolver.resolve(name, "TXT", lifetime=lifetime)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        return [list(item.strings) for item in answer]


def srv_domain(hostname: str) -> str:
    """The part of a SRV host name that returned hosts must share: all but the first label when there are
    three or more labels, else the whole name."""
    labels = hostname.lower().rstrip(".").split(".")
    return ".".join(labels[1:]) if len(labels) >= 3 else ".".join(labels)


def validate_srv_target(hostname: str, target: str) -> str | None:
    """Why ``target`` may not be used for ``hostname``'s SRV record, or ``None`` when it may."""
    domain = srv_domain(hostname)
    host = target.lower().rstrip(".")
    if not host.endswith("." + domain):
        return f"host {target!r} returned for {hostname!r} is not under the domain {domain!r}"
    return None


@dataclass(frozen=True)
class SrvResolution:
    """The result of looking up a ``mongodb+srv`` name.

    ``seeds`` are the hosts to start from (after ``srvMaxHosts``), ``hosts`` every valid host returned,
    ``txt_options`` the TXT record's options (canonical names), ``ttl`` the lowest SRV TTL in seconds.
    """

    seeds: tuple[Address, ...]
    hosts: tuple[Address, ...]
    txt_options: dict[str, Any] = field(default_factory=dict)
    ttl: float | None = None

    @property
    def rescan_interval(self) -> float:
        """When to look again: the lowest TTL, but never sooner than 60 seconds."""
        return max(MIN_RESCAN_INTERVAL, self.ttl or 0.0)


def _shuffled_choice(hosts: Sequence[Address], count: int, rng: random.Random | None) -> list[Address]:
    chosen = list(hosts)
    (rng or random.Random()).shuffle(chosen)  # Fisher-Yates
    return chosen[:count]


def apply_srv_max_hosts(
    current: Sequence[Address],
    returned: Sequence[Address],
    srv_max_hosts: int,
    rng: random.Random | None = None,
) -> tuple[Address, ...]:
    """The hosts a topology keeps after a rescan: current hosts still returned stay; new ones are added
    (at random when ``srv_max_hosts`` limits them) until the limit is reached."""
    fresh = list(dict.fromkeys(returned))
    kept = [address for address in current if address in fresh]
    new = [address for address in fresh if address not in kept]
    if srv_max_hosts <= 0 or len(fresh) <= srv_max_hosts:
        return tuple(kept + new)
    room = max(0, srv_max_hosts - len(kept))
    return tuple(kept[:srv_max_hosts] + _shuffled_choice(new, room, rng))


async def _lookup_srv(
    hostname: str, service_name: str, resolver: DnsResolver, lifetime: float
) -> Sequence[SrvRecord]:
    query = f"_{service_name}._tcp.{hostname}"
    try:
        records = await resolver.resolve_srv(query, lifetime)
    except Exception as exc:
        raise DnsLookupError(f"DNS lookup of the SRV records {query!r} failed: {exc!r}") from exc
    if not records:
        raise DnsLookupError(f"no SRV records at {query!r}: no hosts found for mongodb+srv://{hostname}")
    return records


async def _lookup_txt(
    hostname: str, resolver: DnsResolver, lifetime: float, warn: Callable[[str], None]
) -> dict[str, Any]:
    try:
        records = await resolver.resolve_txt(hostname, lifetime)
    except Exception as exc:
        raise DnsLookupError(f"DNS lookup of the TXT record {hostname!r} failed: {exc!r}") from exc
    if not records:
        return {}
    if len(records) > 1:
        raise DnsLookupError(f"{hostname!r} has {len(records)} TXT records; at most one is allowed")
    try:
        text = b"".join(records[0]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DnsLookupError(f"the TXT record of {hostname!r} is not UTF-8: {exc}") from None
    for segment in text.split("&"):
        key = fold_case(segment.partition("=")[0])
        if segment and key not in TXT_ALLOWED:
            raise DnsLookupError(
                f"the TXT record of {hostname!r} gives {segment.partition('=')[0]!r}; "
                "only authSource, replicaSet and loadBalanced are allowed there"
            )
    try:
        return parse_options(text, warn, error=InvalidURI, source=f"TXT record of {hostname}")
    except InvalidURI as exc:
        raise DnsLookupError(str(exc)) from None


async def resolve_seedlist(
    hostname: str,
    *,
    service_name: str = "mongodb",
    srv_max_hosts: int = 0,
    resolver: DnsResolver | None = None,
    lifetime: float | None = None,
    rng: random.Random | None = None,
    warn: Callable[[str], None] | None = None,
) -> SrvResolution:
    """Look up ``hostname``'s SRV and TXT records and check them (initial seedlist discovery).

    Raises :class:`DnsLookupError` when nothing is found, DNS fails, a host lies outside the name's domain,
    or the TXT record is not acceptable. ``lifetime`` bounds each lookup (seconds; default 20).
    """
    dns = resolver if resolver is not None else DnspythonResolver()
    limit = lifetime if lifetime else DEFAULT_LIFETIME
    report = warn if warn is not None else (lambda message: _log.warning("%s", message))
    srv_task = _lookup_srv(hostname, service_name, dns, limit)
    txt_task = _lookup_txt(hostname, dns, limit, report)
    records, txt_options = await gather(srv_task, txt_task)
    for outcome in (records, txt_options):
        if isinstance(outcome, BaseException):
            raise outcome
    hosts: list[Address] = []
    for record in records:
        problem = validate_srv_target(hostname, record.target)
        if problem is not None:
            raise DnsLookupError(problem)
        hosts.append((record.target.lower().rstrip("."), record.port))
    unique = tuple(dict.fromkeys(hosts))
    seeds = unique
    if 0 < srv_max_hosts < len(unique):
        seeds = tuple(_shuffled_choice(unique, srv_max_hosts, rng))
    ttls = [record.ttl for record in records if record.ttl is not None]
    return SrvResolution(seeds=seeds, hosts=unique, txt_options=txt_options, ttl=min(ttls) if ttls else None)


@dataclass(frozen=True)
class SrvRescan:
    """A polling result: the valid hosts returned, the names rejected, and the lowest TTL."""

    hosts: tuple[Address, ...]
    rejected: tuple[str, ...]
    ttl: float | None

    @property
    def rescan_interval(self) -> float:
        return max(MIN_RESCAN_INTERVAL, self.ttl or 0.0)


async def rescan(
    hostname: str,
    *,
    service_name: str = "mongodb",
    resolver: DnsResolver | None = None,
    lifetime: float | None = None,
) -> SrvRescan:
    """Look the SRV records up again for polling. Hosts outside the domain are dropped (and logged), not
    fatal; a DNS failure, no records, or no valid host raises :class:`DnsLookupError` and the caller keeps
    its topology as it is."""
    dns = resolver if resolver is not None else DnspythonResolver()
    records = await _lookup_srv(hostname, service_name, dns, lifetime or DEFAULT_LIFETIME)
    hosts: list[Address] = []
    rejected: list[str] = []
    for record in records:
        problem = validate_srv_target(hostname, record.target)
        if problem is not None:
            _log.warning("SRV polling: %s; the host is ignored", problem)
            rejected.append(record.target.rstrip("."))
            continue
        hosts.append((record.target.lower().rstrip("."), record.port))
    if not hosts:
        raise DnsLookupError(f"SRV polling found no valid host for {hostname!r} (rejected: {rejected})")
    ttls = [record.ttl for record in records if record.ttl is not None]
    return SrvRescan(tuple(dict.fromkeys(hosts)), tuple(rejected), min(ttls) if ttls else None)
