"""A client's typed options, from a connection string plus keyword arguments.

Precedence, lowest first: defaults, a ``mongodb+srv`` name's DNS TXT record, the connection string, keyword
arguments. A keyword argument therefore wins over the connection string (``MongoClient(uri, maxPoolSize=5)``
uses 5 whatever the string says); a list option such as ``readPreferenceTags`` given as a keyword replaces the
whole list.

Keyword names are the ones PyMongo's ``MongoClient`` accepts, matched case-insensitively (``maxPoolSize`` and
``maxpoolsize`` are the same), plus PyMongo's keyword-only settings (``username``, ``password``,
``document_class``, ``tz_aware``, ``connect``, ``read_preference``, ...). An unknown keyword or an invalid
keyword value raises :class:`~mongio.errors.ConfigurationError`; the connection string's own problems are
warnings as the connection string specification asks (see :mod:`mongio.options.uri_parser`).

TLS is enabled by ``tls=true`` (or ``ssl=true``), by a ``mongodb+srv`` string unless ``tls=false``, and by
any other ``tls*`` option when ``tls`` is not given.
"""

from __future__ import annotations

import difflib
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mongio.connection.handshake import ClientMetadata
from mongio.encryption_options import AutoEncryptionOpts
from mongio.errors import ConfigurationError, InvalidOptionValueError, InvalidURI
from mongio.listener_registry import listed_by_kind
from mongio.options.client_pool_options import ClientPoolOptions
from mongio.options.credentials import MongoCredential, build_credential
from mongio.options.proxy_options import ProxyOptions, proxy_options_from
from mongio.options.read_concern import ReadConcern
from mongio.options.read_preference import (
    ReadPreferenceMode,
    as_read_preference,
    make_read_preference,
    read_pref_mode_from_name,
)
from mongio.options.secrets import Secrets, hiding_secrets
from mongio.options.tls_options import TLSOptions, tls_options_from
from mongio.options.uri_options import (
    ALIASES,
    DEPRECATED_ALIASES,
    IGNORED_WHEN_EMPTY,
    OPTIONS,
    ConfigurationWarning,
    FatalOptionError,
    InvalidOptionValue,
    URIOptions,
    check_combinations,
    fold_case,
)
from mongio.options.uri_parser import (
    DEFAULT_PORT,
    SCHEME,
    SRV_SCHEME,
    Address,
    ParsedURI,
    parse_host,
    parse_uri,
)
from mongio.options.write_concern import WriteConcern
from mongio.server_api import as_server_api

if TYPE_CHECKING:
    from mongio.options.srv import DnsResolver

__all__ = ["KEYWORD_ONLY", "ClientOptions"]

# PyMongo's keyword-only MongoClient settings (not connection string options), by case-folded name, and
# mongio's own ``tracing``. ``MongoClient`` reads each of them from :attr:`ClientOptions.extras`.
KEYWORD_ONLY = {
    fold_case(name): name
    for name in (
        "username",
        "password",
        "document_class",
        "tz_aware",
        "tzinfo",
        "connect",
        "type_registry",
        "datetime_conversion",
        "unicode_decode_error_handler",
        "event_listeners",
        "server_api",
        "driver",
        "auto_encryption_opts",
        "server_selector",
        "read_preference",
        "tracing",
    )
}

# The snake_case keyword names PyMongo also takes for these options (their connection string names work too).
_KEYWORD_SPELLINGS = {
    "max_adaptive_retries": "maxadaptiveretries",
    "enable_overload_retargeting": "enableoverloadretargeting",
}

DEFAULT_CONNECT_TIMEOUT = 20.0
DEFAULT_SERVER_SELECTION_TIMEOUT = 30.0
DEFAULT_HEARTBEAT_FREQUENCY = 10.0
DEFAULT_LOCAL_THRESHOLD_MS = 15.0
DEFAULT_MAX_POOL_SIZE = 100
DEFAULT_MAX_CONNECTING = 2
DEFAULT_MAX_ADAPTIVE_RETRIES = 2


@dataclass(frozen=True)
class _Sources:
    """Where the options came from, kept so a ``mongodb+srv`` client can be rebuilt with its DNS results."""

    is_srv: bool
    srv_host: str | None
    seeds: tuple[Address, ...]
    uri_username: str | None
    uri_password: str | None = field(repr=False)
    database: str | None
    userinfo_given: bool
    # Not in repr: they may hold passwords (proxyPassword, tlsCertificateKeyFilePassword, the password keyword).
    uri_options: Mapping[str, Any] = field(repr=False)
    keyword_options: Mapping[str, Any] = field(repr=False)
    extras: Mapping[str, Any] = field(repr=False)
    txt_options: Mapping[str, Any] = field(default_factory=dict)

    def secrets(self) -> Secrets:
        """The passwords these options hold, for hiding them in errors."""
        return (
            Secrets.of_values([self.uri_password])
            | Secrets.of_keywords(self.uri_options)
            | Secrets.of_keywords(self.keyword_options)
            | Secrets.of_keywords(self.extras)
        )


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _seconds_or_none(ms: float | None, default: float | None) -> float | None:
    """Milliseconds where 0 (or an explicit None) means "no limit", as seconds (None for no limit)."""
    if ms is None:
        return default
    return None if ms == 0 else ms / 1000.0


@dataclass(frozen=True)
class ClientOptions:
    """Everything a client is configured with, typed. Times are in seconds unless the name ends in ``_ms``.

    Build it with :meth:`from_uri`; for a ``mongodb+srv`` string, ``seeds`` stays empty until
    :meth:`resolve` has looked the name up in DNS. ``options`` holds every option given explicitly (TXT
    record, connection string and keywords merged) under its canonical name; ``warnings`` lists what was
    ignored or is deprecated.
    """

    seeds: tuple[Address, ...]
    srv_host: str | None
    srv_service_name: str
    srv_max_hosts: int
    database: str | None
    credential: MongoCredential | None
    replica_set: str | None
    direct_connection: bool | None
    load_balanced: bool
    tls: TLSOptions | None
    proxy: ProxyOptions | None
    appname: str | None
    compressors: tuple[str, ...]
    zlib_compression_level: int
    connect_timeout: float | None
    socket_timeout: float | None
    server_selection_timeout: float
    heartbeat_frequency: float
    local_threshold_ms: float
    max_pool_size: int | None
    min_pool_size: int
    max_idle_time: float | None
    max_connecting: int
    wait_queue_timeout: float | None
    timeout_ms: int | None
    retry_reads: bool
    retry_writes: bool
    read_preference: ReadPreferenceMode
    read_concern: ReadConcern
    write_concern: WriteConcern
    server_monitoring_mode: str
    max_adaptive_retries: int
    enable_overload_retargeting: bool
    adaptive_retries: bool
    pymongo_types: bool
    uuid_representation: str | None
    connect: bool | None
    extras: Mapping[str, Any]
    options: URIOptions
    warnings: tuple[str, ...] = ()
    _sources: _Sources | None = field(default=None, repr=False, compare=False)
    _listeners: tuple[object, ...] = field(default=(), repr=False, compare=False)
    # The handshake's client document: the client appends to it (append_metadata); kept through resolve().
    _metadata: ClientMetadata | None = field(default=None, repr=False, compare=False)

    @property
    def client_metadata(self) -> ClientMetadata:
        """The ``client`` document of the handshakes (from ``appname`` and ``driver``), which
        :meth:`MongoClient.append_metadata <mongio.client.MongoClient.append_metadata>` extends."""
        assert self._metadata is not None  # every ClientOptions is built with one
        return self._metadata

    @property
    def pool_options(self) -> ClientPoolOptions:
        """The settings each connection pool is made with, as PyMongo's ``client.options.pool_options``
        gives them (``max_pool_size``, ``connect_timeout``, ``metadata``...)."""
        return ClientPoolOptions(self, self.client_metadata)

    @property
    def event_listeners(self) -> list[object]:
        """The client's event listeners as PyMongo's ``client.options.event_listeners`` lists them: those
        registered (``monitoring.register``) when the client was made, then those given, by kind (command,
        heartbeat, server, topology, pool), an object once for each kind it is. These are the objects given,
        whatever the client delivers events through."""
        return list(self._listeners)

    @property
    def is_srv(self) -> bool:
        return self.srv_host is not None

    @property
    def needs_resolution(self) -> bool:
        """True for a ``mongodb+srv`` client whose seeds are not looked up yet."""
        return self.is_srv and not self.seeds

    @classmethod
    def from_uri(
        cls,
        host: str | Sequence[str] | None = None,
        port: int | None = None,
        **kwargs: Any,
    ) -> ClientOptions:
        """Build the options of ``MongoClient(host, port, **kwargs)``.

        ``host`` is a connection string, a ``host[:port]`` (``"localhost"`` when omitted), or a list of
        either; ``port`` is the port of entries that give none. Raises
        :class:`~mongio.errors.ConfigurationError` (or its subclass :class:`~mongio.errors.InvalidURI`) for
        invalid settings; ignored ones are issued as :class:`~mongio.options.ConfigurationWarning`. No error
        or warning shows a password (see :mod:`mongio.options.secrets`).
        """
        if host is not None and not isinstance(host, str | Sequence):
            raise TypeError(f"host must be a str or a list of str, not {host!r}")
        entries = [host] if isinstance(host, str) else list(host or [])
        secrets = Secrets.of_keywords(kwargs)
        for entry in entries:
            secrets |= Secrets.of_uri(entry)
        found: list[str] = []
        sources = hiding_secrets(secrets, _collect_sources, host, port, kwargs, found)
        shown = tuple(secrets.hide(message) for message in found)
        options = hiding_secrets(secrets, _build, sources, shown)
        for message in options.warnings:
            warnings.warn(message, ConfigurationWarning, stacklevel=2)
        return options

    async def resolve(
        self, resolver: DnsResolver | None = None, *, rng: random.Random | None = None
    ) -> ClientOptions:
        """For a ``mongodb+srv`` client, look up its SRV and TXT records and return the complete options.

        The TXT record's options rank below the connection string and keywords; the combination checks run
        again with the real host list. Other clients are returned unchanged.
        """
        if not self.needs_resolution or self._sources is None or self.srv_host is None:
            return self
        from mongio.options.srv import resolve_seedlist  # only mongodb+srv clients resolve

        found: list[str] = []
        result = await resolve_seedlist(
            self.srv_host,
            service_name=self.srv_service_name,
            srv_max_hosts=self.srv_max_hosts,
            resolver=resolver,
            lifetime=self.connect_timeout,
            rng=rng,
            warn=found.append,
        )
        sources = replace(self._sources, seeds=result.seeds, txt_options=result.txt_options)
        options = hiding_secrets(sources.secrets(), _build, sources, self.warnings + tuple(found), self._metadata)
        for message in found:
            warnings.warn(message, ConfigurationWarning, stacklevel=2)
        return options


def _keyword_options(
    kwargs: Mapping[str, Any], warn: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    options: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    tls_given: dict[str, bool] = {}
    for key, value in kwargs.items():
        folded = fold_case(key)
        if folded in KEYWORD_ONLY:
            extras[KEYWORD_ONLY[folded]] = value
            continue
        if folded in DEPRECATED_ALIASES and folded != "gssapiservicename":
            replacement = DEPRECATED_ALIASES[folded]
            warn(f"Deprecated keyword {key!r} has been replaced with {replacement!r}")
            folded = fold_case(replacement)
        folded = ALIASES.get(folded, _KEYWORD_SPELLINGS.get(folded, folded))
        spec = OPTIONS.get(folded)
        if spec is None:
            raise ConfigurationError(_unknown_option_message(key))
        if value is None or (spec.name in IGNORED_WHEN_EMPTY and value == ""):
            if value is None and spec.none_means_unlimited:
                options[spec.name] = spec.unlimited_value
            continue
        try:
            if isinstance(value, str):
                converted = spec.parse(value, warn)
                if spec.repeatable:
                    converted = [converted]
            else:
                converted = spec.coerce(value)
                if isinstance(converted, str):
                    converted = spec.parse(converted, warn)
        except (InvalidOptionValue, FatalOptionError) as exc:
            raise InvalidOptionValueError(f"Invalid value for {spec.name}: {value!r} ({exc})") from None
        if spec.name == "tls":
            tls_given[key] = converted
        options[spec.name] = converted
    if len(set(tls_given.values())) > 1:
        shown = ", ".join(f"{key}={value}" for key, value in tls_given.items())
        raise InvalidURI(f"tls and ssl must agree when both are given, not {shown}")
    for name in ("username", "password"):
        if extras.get(name) is not None and not isinstance(extras[name], str):
            raise ConfigurationError(f"{name} must be a str, not {type(extras[name]).__name__}")
    if extras.get("tz_aware") is not None:
        extras["tz_aware"] = _boolean_keyword("tz_aware", extras["tz_aware"])
    selector = extras.get("server_selector")
    if selector is not None and not callable(selector):
        raise ConfigurationError(
            f"server_selector must be a callable taking and returning a list of server descriptions, "
            f"not {selector!r}"
        )
    if extras.get("server_api") is not None:
        extras["server_api"] = as_server_api(extras["server_api"])
    encryption = extras.get("auto_encryption_opts")
    if encryption is not None and not isinstance(encryption, AutoEncryptionOpts):
        raise ConfigurationError(
            f"auto_encryption_opts must be a mongio.encryption.AutoEncryptionOpts, not {type(encryption).__name__}"
        )
    return options, extras


def _unknown_option_message(key: str) -> str:
    """Name the unknown keyword (never its value, which may be a mistyped password) and the nearest option
    names, in PyMongo's wording so that code matching its message keeps working."""
    known = [*OPTIONS, *KEYWORD_ONLY, *ALIASES, *_KEYWORD_SPELLINGS]
    nearest = difflib.get_close_matches(fold_case(key), known, cutoff=0.2)
    message = f"Unknown option: {key}."
    if nearest:
        message += f" Did you mean one of ({', '.join(nearest)}) or maybe a camelCase version of one? Refer to docstring."
    return message


def _boolean_keyword(name: str, value: Any) -> bool:
    """A boolean keyword given as a bool or as the string "true" / "false" (as PyMongo takes them)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidOptionValueError(f"{name} must be True or False, not {value!r}")


def _collect_sources(
    host: str | Sequence[str] | None, port: int | None, kwargs: Mapping[str, Any], found: list[str]
) -> _Sources:
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise TypeError(f"port must be an integer between 1 and 65535, not {port!r}")
    if port is not None and not 1 <= port <= 65535:
        raise InvalidOptionValueError(f"port must be an integer between 1 and 65535, not {port!r}")
    if host is not None and not isinstance(host, str) and not host:
        raise ConfigurationError("host is an empty list: give at least one host (or None for localhost)")
    entries = [host] if isinstance(host, str) else list(host or ["localhost"])
    seeds: list[Address] = []
    uri_options: dict[str, Any] = {}
    parsed_uris: list[ParsedURI] = []
    for entry in entries:
        if not isinstance(entry, str):
            raise TypeError(f"host must be a str or a list of str, not {entry!r}")
        if entry.startswith((SCHEME, SRV_SCHEME)):
            parsed = parse_uri(entry, warn=False)
            found.extend(parsed.warnings)
            parsed_uris.append(parsed)
            uri_options.update(parsed.options)
            for spec in parsed.hosts:
                address = spec.address
                if spec.port is None and spec.type != "unix" and port is not None:
                    address = (address[0], port)
                seeds.append(address)
        elif "://" in entry:
            raise InvalidURI(f"invalid connection string scheme in {entry!r}; use {SCHEME} or {SRV_SCHEME}")
        else:
            for item in entry.split(","):
                spec = parse_host(item)
                address = spec.address
                if spec.port is None and spec.type != "unix":
                    address = (address[0], port if port is not None else DEFAULT_PORT)
                seeds.append(address)
    srv = [parsed for parsed in parsed_uris if parsed.is_srv]
    if srv and len(entries) > 1:
        raise ConfigurationError("a mongodb+srv:// connection string cannot be combined with other hosts")
    keyword_options, extras = _keyword_options(kwargs, found.append)
    first = parsed_uris[-1] if parsed_uris else None
    return _Sources(
        is_srv=bool(srv),
        srv_host=srv[0].srv_host if srv else None,
        seeds=() if srv else tuple(dict.fromkeys(seeds)),
        uri_username=first.username if first else None,
        uri_password=first.password if first else None,
        database=first.default_database if first else None,
        userinfo_given=bool(first and first.userinfo_given),
        uri_options=uri_options,
        keyword_options=keyword_options,
        extras=extras,
    )


def _credential(sources: _Sources, extras: dict[str, Any], get: Callable[..., Any]) -> MongoCredential | None:
    """The credential from the merged options; keyword ``username``/``password`` win over the URI's."""
    username = extras.pop("username", None)
    password = extras.pop("password", None)
    return build_credential(
        mechanism=get("authMechanism"),
        username=username if username is not None else sources.uri_username,
        password=password if password is not None else sources.uri_password,
        auth_source=get("authSource"),
        database=sources.database,
        mechanism_properties=get("authMechanismProperties"),
        userinfo_given=sources.userinfo_given,
    )


def _read_preference(explicit: Any, get: Callable[..., Any]) -> Any:
    """The ``read_preference`` keyword's (a mongio or PyMongo read preference), else the URI options'."""
    if explicit is not None:
        try:
            return as_read_preference(explicit)
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None
    mode = read_pref_mode_from_name(get("readPreference", "primary"))
    return make_read_preference(mode, get("readPreferenceTags"), get("maxStalenessSeconds", -1))


def _refuse_unsupported(options: URIOptions) -> None:
    """Raise ``ConfigurationError`` for an option value mongio cannot honour rather than ignore it.

    ``serverSelectionTryOnce=true`` asks for the single-threaded drivers' selection (one scan, then fail at
    once); mongio always waits for a suitable server up to ``serverSelectionTimeoutMS``, which is what
    ``serverSelectionTryOnce=false`` asks for, so only ``false`` is accepted.
    """
    if options.get("serverSelectionTryOnce") is True:
        raise ConfigurationError(
            "serverSelectionTryOnce=true is not supported: it is a single-threaded driver's mode; mongio's "
            "server selection always waits for a suitable server up to serverSelectionTimeoutMS (the "
            "behaviour of serverSelectionTryOnce=false)"
        )


def _client_metadata(appname: str | None, driver: Any) -> ClientMetadata:
    """The handshake's client document for ``appname`` and the ``driver`` keyword (mongio's DriverInfo or
    another library's namesake)."""
    if driver is not None and not all(hasattr(driver, name) for name in ("name", "version", "platform")):
        raise TypeError(f"driver info must be a DriverInfo, not {type(driver).__name__}")
    return ClientMetadata(appname, driver)


def _refuse_tls_override(sources: _Sources) -> None:
    """A keyword ``tls`` (or ``ssl``) contradicting the connection string's is refused rather than winning
    silently, as for no other option: it would turn TLS off (or on) against what the string says."""
    in_uri, as_keyword = sources.uri_options.get("tls"), sources.keyword_options.get("tls")
    if in_uri is not None and as_keyword is not None and in_uri != as_keyword:
        raise InvalidURI(
            f"the connection string says tls={str(in_uri).lower()} but the tls (or ssl) keyword says "
            f"{as_keyword}: give one of them"
        )


def _build(sources: _Sources, found: tuple[str, ...], metadata: ClientMetadata | None = None) -> ClientOptions:
    _refuse_tls_override(sources)
    merged = URIOptions(sources.txt_options).merged(sources.uri_options).merged(sources.keyword_options)
    resolved = not sources.is_srv or bool(sources.seeds)
    check_combinations(
        merged, is_srv=sources.is_srv, host_count=len(sources.seeds) if resolved else None, error=InvalidURI
    )
    _refuse_unsupported(merged)
    get = merged.get
    extras = dict(sources.extras)

    credential = _credential(sources, extras, get)
    read_preference = _read_preference(extras.pop("read_preference", None), get)
    write_concern = WriteConcern(w=get("w"), wtimeout=get("wTimeoutMS"), j=get("journal"), fsync=get("fsync"))
    max_pool_size = get("maxPoolSize", DEFAULT_MAX_POOL_SIZE)
    connect = extras.pop("connect", None)
    if connect is not None and not isinstance(connect, bool):
        raise ConfigurationError(f"connect must be True or False, not {connect!r}")
    return ClientOptions(
        seeds=sources.seeds,
        srv_host=sources.srv_host,
        srv_service_name=get("srvServiceName", "mongodb"),
        srv_max_hosts=get("srvMaxHosts", 0),
        database=sources.database,
        credential=credential,
        replica_set=get("replicaSet"),
        direct_connection=get("directConnection"),
        load_balanced=bool(get("loadBalanced", False)),
        tls=tls_options_from(merged, is_srv=sources.is_srv),
        proxy=proxy_options_from(merged, sources.seeds),
        appname=get("appname"),
        compressors=tuple(get("compressors", ())),
        zlib_compression_level=get("zlibCompressionLevel", -1),
        connect_timeout=_seconds_or_none(get("connectTimeoutMS"), DEFAULT_CONNECT_TIMEOUT),
        socket_timeout=_seconds_or_none(get("socketTimeoutMS"), None),
        server_selection_timeout=_seconds(get("serverSelectionTimeoutMS"))
        or DEFAULT_SERVER_SELECTION_TIMEOUT,
        heartbeat_frequency=_seconds(get("heartbeatFrequencyMS")) or DEFAULT_HEARTBEAT_FREQUENCY,
        local_threshold_ms=float(get("localThresholdMS", DEFAULT_LOCAL_THRESHOLD_MS)),
        max_pool_size=max_pool_size or None,
        min_pool_size=get("minPoolSize", 0),
        max_idle_time=_seconds_or_none(get("maxIdleTimeMS"), None),
        max_connecting=get("maxConnecting", DEFAULT_MAX_CONNECTING),
        wait_queue_timeout=_seconds(get("waitQueueTimeoutMS")),
        timeout_ms=get("timeoutMS"),
        retry_reads=bool(get("retryReads", True)),
        retry_writes=bool(get("retryWrites", True)),
        read_preference=read_preference,
        read_concern=ReadConcern(get("readConcernLevel")),
        write_concern=write_concern,
        server_monitoring_mode=get("serverMonitoringMode", "auto"),
        max_adaptive_retries=get("maxAdaptiveRetries", DEFAULT_MAX_ADAPTIVE_RETRIES),
        enable_overload_retargeting=bool(get("enableOverloadRetargeting", False)),
        adaptive_retries=bool(get("adaptiveRetries", False)),
        pymongo_types=bool(get("pymongoTypes", False)),
        uuid_representation=get("uuidRepresentation"),
        connect=connect,
        extras=extras,
        options=merged,
        warnings=found,
        _sources=sources,
        _listeners=listed_by_kind(extras.get("event_listeners") or ()),
        _metadata=metadata or _client_metadata(get("appname"), extras.get("driver")),
    )
