"""Parsing ``mongodb://`` and ``mongodb+srv://`` connection strings into their parts.

The parse is pure: no DNS, no files, no sockets. A ``mongodb+srv`` string is checked for what can be checked
before DNS (one host name, no port) and its lookups are left to :mod:`mongio.options.srv`.

Percent-decoding follows the connection string specification: user information, hosts, the auth database and
every option value are decoded; ``+`` is not turned into a space.
"""

from __future__ import annotations

import ipaddress
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import unquote

from mongio.errors import ConfigurationError, InvalidURI, PortOutOfRangeError
from mongio.options.secrets import Secrets, hiding_secrets, redact_uri
from mongio.options.uri_options import (
    DEPRECATED_ALIASES,
    IGNORED_WHEN_EMPTY,
    NO_REPEAT,
    OPTIONS,
    ConfigurationWarning,
    FatalOptionError,
    InvalidOptionValue,
    URIOptions,
    check_combinations,
    fold_case,
    lookup,
)

__all__ = [
    "DEFAULT_PORT",
    "SCHEME",
    "SRV_SCHEME",
    "Address",
    "HostSpec",
    "HostType",
    "ParsedURI",
    "emit_warnings",
    "parse_host",
    "parse_options",
    "parse_uri",
    "percent_decode",
]

SCHEME = "mongodb://"
SRV_SCHEME = "mongodb+srv://"
DEFAULT_PORT = 27017

Address = tuple[str, int | None]
"""``(host, port)``; a Unix domain socket is ``(path, None)``."""

HostType = Literal["ipv4", "ip_literal", "hostname", "unix"]

_PERCENT_OK = re.compile(r"%(?![0-9A-Fa-f]{2})")
# Characters RFC 3986 forbids in user information (besides "%" misuse and extra ":"), that would make the
# string ambiguous if left unencoded.
_USERINFO_FORBIDDEN = frozenset("@/?#[] ")
_DATABASE_FORBIDDEN = frozenset('/\\ "$')
_HOST_FORBIDDEN = frozenset(" /\\?#@[]")


def percent_decode(text: str, what: str, *, secret: bool = False) -> str:
    """Decode ``%XX`` escapes (as UTF-8); ``what`` names the part in the error message, which quotes
    ``text`` and the decoding problem unless it is ``secret``."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        problem = f"{what} is not valid percent-encoded UTF-8" if secret else (
            f"{what} {text!r} is not valid percent-encoded UTF-8: {exc}"
        )
    raise InvalidURI(problem)  # outside the handler: the decoding error, which holds the bytes, is not chained


@dataclass(frozen=True)
class HostSpec:
    """One host of the connection string, as written (decoded), with its kind."""

    host: str
    port: int | None
    type: HostType

    @property
    def address(self) -> Address:
        """The server address: host names lower-cased, the default port filled in, sockets as ``(path, None)``."""
        if self.type == "unix":
            return (self.host, None)
        host = self.host.lower() if self.type == "hostname" else self.host
        return (host, self.port if self.port is not None else DEFAULT_PORT)


def _parse_port(text: str, entry: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise InvalidURI(f"port {text!r} of host {entry!r} is not a number")
    port = int(text)
    if not 1 <= port <= 65535:
        raise PortOutOfRangeError(f"port {port} of host {entry!r} is not between 1 and 65535")
    return port


def parse_host(entry: str) -> HostSpec:
    """Parse one (still percent-encoded) host identifier: ``host``, ``host:port``, ``[v6]:port`` or a socket path."""
    if not entry:
        raise InvalidURI("empty host in the host list")
    decoded = percent_decode(entry, "host")
    if "/" in decoded:
        if decoded.endswith(".sock"):
            return HostSpec(decoded, None, "unix")
        raise InvalidURI(
            f"unsupported host {decoded!r}: a Unix domain socket path must end in '.sock' and be percent-encoded"
        )
    if decoded.startswith("["):
        literal, bracket, rest = decoded[1:].partition("]")
        if not bracket:
            raise InvalidURI(f"IP literal host {decoded!r} has no closing ']'")
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            raise InvalidURI(f"host {decoded!r} is not a valid IPv6 literal") from None
        port: int | None = None
        if rest:
            if not rest.startswith(":"):
                raise InvalidURI(f"unexpected {rest!r} after the IP literal in host {decoded!r}")
            port = _parse_port(rest[1:], decoded)
        return HostSpec(literal, port, "ip_literal")
    host, colon, port_text = decoded.rpartition(":")
    if not colon:
        host, port = decoded, None
    else:
        port = _parse_port(port_text, decoded)
    if not host:
        raise InvalidURI(f"host {decoded!r} has no host name")
    if ":" in host:
        raise InvalidURI(
            f"host {decoded!r} has more than one ':'; an IPv6 address must be written in [brackets]"
        )
    bad = _HOST_FORBIDDEN.intersection(host)
    if bad:
        raise InvalidURI(f"host {host!r} contains {''.join(sorted(bad))!r}")
    try:
        ipaddress.IPv4Address(host)
        kind: HostType = "ipv4"
    except ValueError:
        kind = "hostname"
    return HostSpec(host, port, kind)


def _split_userinfo(userinfo: str) -> tuple[str, str | None]:
    bad = _USERINFO_FORBIDDEN.intersection(userinfo)
    if bad:
        raise InvalidURI(
            f"the user information contains {''.join(sorted(bad))!r}: "
            "the username and password must be percent-encoded"
        )
    if userinfo.count(":") > 1:
        raise InvalidURI(
            "the user information contains more than one ':': the password must be percent-encoded"
        )
    if _PERCENT_OK.search(userinfo):
        raise InvalidURI(
            "the user information contains a '%' that starts no %XX escape: "
            "the username and password must be percent-encoded"
        )
    user, colon, password = userinfo.partition(":")
    username = percent_decode(user, "username")
    if not username:
        raise InvalidURI("the user information before '@' gives an empty username")
    return username, (percent_decode(password, "the password", secret=True) if colon else None)


def _check_database(database: str) -> None:
    bad = _DATABASE_FORBIDDEN.intersection(database)
    if bad:
        raise InvalidURI(f"database name {database!r} contains {''.join(sorted(bad))!r}")


def parse_options(
    text: str,
    warn: Callable[[str], None],
    *,
    strict: bool = False,
    error: type[ConfigurationError] = InvalidURI,
    source: str = "connection string",
) -> dict[str, Any]:
    """Parse ``key=value&key=value`` into ``{canonical name: value}``, reporting through ``warn``.

    Unknown keys, repeated keys, deprecated keys and invalid values warn and are left out. With ``strict``,
    an invalid value raises ``error`` instead. Conflicting ``tls``/``ssl`` values, a repeated SOCKS5 option,
    a pair without ``=`` and values that must never be dropped raise ``error``.
    """
    occurrences = _occurrences(text, error, source)
    reader = _OptionReader(warn, strict, error, source)
    result: dict[str, Any] = {}
    tls_values: list[tuple[str, bool]] = []
    for folded, items in occurrences.items():
        if folded in ("tls", "ssl"):
            tls_values += reader.tls_values(items)
        elif folded == "j" and "journal" in occurrences:
            warn("Both journal and j are given; journal is used")
        elif folded not in DEPRECATED_ALIASES:  # those wait until the replacement's presence is known
            reader.read("journal" if folded == "j" else folded, items, result)
    if tls_values:
        distinct = {value for _, value in tls_values}
        if len(distinct) > 1:
            shown = ", ".join(f"{key}={str(value).lower()}" for key, value in tls_values)
            raise error(f"tls and ssl must agree when both are given, not {shown}")
        result["tls"] = tls_values[0][1]
    _apply_deprecated(occurrences, result, warn, reader.convert)
    return result


def _occurrences(text: str, error: type[ConfigurationError], source: str) -> dict[str, list[tuple[str, str]]]:
    """Each option's (key as written, value) pairs, by case-folded key, percent-decoded."""
    occurrences: dict[str, list[tuple[str, str]]] = {}
    for segment in text.split("&"):
        if not segment:
            continue
        raw_key, equals, raw_value = segment.partition("=")
        if not equals:
            raise error(f"option {segment!r} in the {source} is not a key=value pair")
        key = percent_decode(raw_key, "option name")
        value = percent_decode(raw_value, f"value of option {key!r}")
        occurrences.setdefault(fold_case(key), []).append((key, value))
    return occurrences


class _OptionReader:
    """Converts option values for :func:`parse_options`: an invalid value warns and is left out (raises
    ``error`` when ``strict``); a value that must never be dropped raises ``error``."""

    def __init__(self, warn: Callable[[str], None], strict: bool, error: type[ConfigurationError], source: str) -> None:
        self.warn = warn
        self.strict = strict
        self.error = error
        self.source = source

    def invalid(self, name: str, value: str, reason: str) -> None:
        message = f"Invalid value for {name}: {value!r} ({reason})"
        if self.strict:
            raise self.error(message)
        self.warn(f"{message}; the option is ignored")

    def convert(self, name: str, value: str) -> tuple[bool, Any]:
        """Whether ``value`` is valid for option ``name``, and its parsed value."""
        spec = lookup(name)
        try:
            return True, spec.parse(value, self.warn)
        except FatalOptionError as exc:
            raise self.error(f"Invalid value for {spec.name}: {value!r} ({exc})") from None
        except InvalidOptionValue as exc:
            self.invalid(spec.name, value, str(exc))
            return False, None

    def tls_values(self, items: list[tuple[str, str]]) -> list[tuple[str, bool]]:
        """The valid ``tls``/``ssl`` values, with the key each was given as."""
        values = []
        for key, value in items:
            ok, parsed = self.convert("tls", value)
            if ok:
                values.append((key, parsed))
        return values

    def read(self, folded: str, items: list[tuple[str, str]], result: dict[str, Any]) -> None:
        """Put option ``folded``'s value in ``result`` (every value for a repeatable option, else the last)."""
        spec = OPTIONS.get(folded)
        if spec is None:
            for key, _ in items:
                self.warn(f"Unsupported option {key!r} in the {self.source} is ignored")
            return
        if spec.repeatable:
            values: list[Any] = []
            for _, value in items:
                ok, parsed = self.convert(spec.name, value)
                if not ok:
                    return  # one invalid value drops the option altogether
                values.append(parsed)
            if values:
                result[spec.name] = values
            return
        if len(items) > 1:
            if folded in NO_REPEAT:
                raise self.error(f"{spec.name} is given {len(items)} times in the {self.source}")
            self.warn(f"{spec.name} is given {len(items)} times in the {self.source}; the last value is used")
        value = items[-1][1]
        if spec.name in IGNORED_WHEN_EMPTY and not value:
            return  # the SOCKS5 specification says to ignore empty credentials
        ok, parsed = self.convert(spec.name, value)
        if ok:
            result[spec.name] = parsed


def _apply_deprecated(
    occurrences: Mapping[str, list[tuple[str, str]]],
    result: dict[str, Any],
    warn: Callable[[str], None],
    convert: Callable[[str, str], tuple[bool, Any]],
) -> None:
    for old, items in occurrences.items():
        if old not in DEPRECATED_ALIASES:
            continue
        key, value = items[-1]
        if old == "gssapiservicename":
            properties = result.get("authMechanismProperties") or {}
            if "SERVICE_NAME" in properties:
                warn(
                    f"Deprecated key {key!r} present and ignored as found replacement authMechanismProperties=SERVICE_NAME"
                )
            else:
                warn(
                    f"Deprecated key {key!r} has been replaced with authMechanismProperties=SERVICE_NAME:<name>"
                )
                result["authMechanismProperties"] = {**properties, "SERVICE_NAME": value}
            continue
        new = DEPRECATED_ALIASES[old]
        if fold_case(new) in occurrences:
            warn(f"Deprecated key {key!r} present and ignored as found replacement {new!r}")
            continue
        warn(f"Deprecated key {key!r} has been replaced with {new!r}")
        ok, parsed = convert(new, value)
        if ok:
            result[new] = parsed


@dataclass(frozen=True)
class ParsedURI:
    """The parts of a connection string.

    ``options`` holds the options the string gives (canonical names, case-insensitive lookup); defaults are
    not filled in. ``warnings`` lists what was ignored or is deprecated. ``userinfo_given`` is true when an
    ``@`` was present, which asks for authentication even with an empty password.
    """

    scheme: Literal["mongodb", "mongodb+srv"]
    hosts: tuple[HostSpec, ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None
    options: URIOptions = field(default_factory=URIOptions)
    warnings: tuple[str, ...] = ()
    userinfo_given: bool = False

    @property
    def is_srv(self) -> bool:
        return self.scheme == "mongodb+srv"

    @property
    def srv_host(self) -> str | None:
        """The name to look up for a ``mongodb+srv`` string (lower-cased), else ``None``."""
        return self.hosts[0].host.lower() if self.is_srv else None

    @property
    def seeds(self) -> tuple[Address, ...]:
        """The hosts as addresses; empty for ``mongodb+srv`` (the seeds come from DNS)."""
        return () if self.is_srv else tuple(host.address for host in self.hosts)

    @property
    def default_database(self) -> str | None:
        """The database part of the path (``db`` of ``db.collection``)."""
        return self.database.split(".", 1)[0] if self.database else None

    @property
    def collection(self) -> str | None:
        """The collection part of a ``db.collection`` path, if any."""
        if self.database and "." in self.database:
            return self.database.split(".", 1)[1]
        return None


def emit_warnings(messages: tuple[str, ...] | list[str], stacklevel: int = 3) -> None:
    """Issue each message as a :class:`ConfigurationWarning`."""
    for message in messages:
        warnings.warn(message, ConfigurationWarning, stacklevel=stacklevel)


def _parse(uri: str, strict: bool) -> ParsedURI:
    if not isinstance(uri, str):
        raise InvalidURI(f"a connection string must be a str, not {type(uri).__name__}")
    if uri.startswith(SRV_SCHEME):
        scheme: Literal["mongodb", "mongodb+srv"] = "mongodb+srv"
        rest = uri[len(SRV_SCHEME) :]
    elif uri.startswith(SCHEME):
        scheme = "mongodb"
        rest = uri[len(SCHEME) :]
    else:
        shown = uri.split("://", 1)[0] + "://" if "://" in uri else repr(redact_uri(uri))
        raise InvalidURI(
            f"invalid connection string scheme {shown}: it must begin with {SCHEME} or {SRV_SCHEME}"
        )

    # Host information ends at the first "/" or "?" (neither may appear unencoded in it).
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    host_info, tail = rest[:cut], rest[cut:]
    database: str | None = None
    option_text = ""
    if tail.startswith("/"):
        path, _, option_text = tail[1:].partition("?")
        if path:
            database = percent_decode(path, "database name")
            _check_database(database)
    elif tail.startswith("?"):
        option_text = tail[1:]

    userinfo, at, host_list = host_info.rpartition("@")
    username: str | None = None
    password: str | None = None
    if at:
        username, password = _split_userinfo(userinfo)
    if not host_list:
        raise InvalidURI("the connection string gives no host")
    hosts = tuple(parse_host(entry) for entry in host_list.split(","))

    if scheme == "mongodb+srv":
        if len(hosts) != 1:
            raise InvalidURI(
                f"a mongodb+srv:// connection string takes exactly one host name, not {len(hosts)}"
            )
        if hosts[0].port is not None:
            raise InvalidURI("a mongodb+srv:// connection string cannot give a port")
        if hosts[0].type != "hostname":
            raise InvalidURI(f"a mongodb+srv:// connection string needs a host name, not {hosts[0].host!r}")

    found: list[str] = []
    options = parse_options(option_text, found.append, strict=strict)
    check_combinations(options, is_srv=scheme == "mongodb+srv", host_count=len(hosts), error=InvalidURI)
    return ParsedURI(
        scheme=scheme,
        hosts=hosts,
        username=username,
        password=password,
        database=database,
        options=URIOptions(options),
        warnings=tuple(found),
        userinfo_given=bool(at),
    )


def parse_uri(uri: str, *, strict: bool = False, warn: bool = True) -> ParsedURI:
    """Parse a ``mongodb://`` or ``mongodb+srv://`` connection string.

    Raises :class:`~mongio.errors.InvalidURI` for a malformed string or options that contradict each other.
    Ignored options are listed in the result's ``warnings`` and, unless ``warn`` is false, also issued as
    :class:`~mongio.options.ConfigurationWarning`. With ``strict``, an invalid option value raises instead
    of being ignored. Credentials are not checked here (a password may still come from a keyword argument):
    :func:`mongio.options.client_options.ClientOptions.from_uri` does that.

    No error or warning shows the password, even of a string too malformed to tell where the password is
    (see :mod:`mongio.options.secrets`).
    """
    secrets = Secrets.of_uri(uri)
    parsed = hiding_secrets(secrets, _parse, uri, strict)
    if secrets:
        parsed = replace(parsed, warnings=tuple(secrets.hide(message) for message in parsed.warnings))
    if warn:
        emit_warnings(parsed.warnings)
    return parsed
