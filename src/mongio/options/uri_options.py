"""The table of client options: names, value types, validation, aliases and deprecations.

Every option a connection string or a ``MongoClient`` keyword may carry is described once here, under its
canonical camelCase name. Keys are matched case-insensitively (only ASCII ``A``-``Z`` are folded, as the
connection string specification asks).

Two kinds of problems are told apart, as the connection string specification does:

- a *warning* (:class:`ConfigurationWarning`): an unknown key, a repeated key, a deprecated key or an
  invalid value in the connection string. The option is ignored (left at its default) and parsing goes on.
- an *error* (:class:`~mongio.errors.ConfigurationError` or :class:`~mongio.errors.InvalidURI`): options that
  contradict each other, or values whose silent dropping would weaken security or correctness (an unknown
  ``authMechanism``, an empty ``authSource``, a negative ``w``).

Keyword arguments are held to a stricter standard than the connection string: any invalid value raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mongio.errors import ConfigurationError

__all__ = [
    "AUTH_MECHANISMS",
    "OPTIONS",
    "ConfigurationWarning",
    "FatalOptionError",
    "InvalidOptionValue",
    "OptionSpec",
    "URIOptions",
    "canonical_name",
    "check_combinations",
    "fold_case",
    "lookup",
]


class ConfigurationWarning(UserWarning):
    """An option was ignored or is deprecated: unknown or repeated keys, invalid values, renamed keys.

    The parse result carries the same messages in its ``warnings`` attribute.
    """


class InvalidOptionValue(ValueError):
    """A value the option does not accept; in a connection string the option is then ignored with a warning."""


class FatalOptionError(ValueError):
    """A value that must stop parsing even in a connection string (it is never silently ignored)."""


_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_case(key: str) -> str:
    """Lower-case the ASCII letters of ``key``, leaving every other character as it is."""
    return key.translate(_ASCII_FOLD)


Warn = Callable[[str], None]
Parser = Callable[[str, Warn], Any]
Coercer = Callable[[Any], Any]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_INT_TEXT = re.compile(r"-?[0-9]+")

AUTH_MECHANISMS = (
    "DEFAULT",
    "SCRAM-SHA-1",
    "SCRAM-SHA-256",
    "MONGODB-X509",
    "GSSAPI",
    "PLAIN",
    "MONGODB-AWS",
    "MONGODB-OIDC",
)
READ_PREFERENCE_MODES = ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")
SERVER_MONITORING_MODES = ("stream", "poll", "auto")
COMPRESSORS = ("snappy", "zlib", "zstd")
UUID_REPRESENTATIONS = ("unspecified", "standard", "pythonLegacy", "javaLegacy", "csharpLegacy")
_TRUE_ALTERNATIVES = ("1", "yes", "y", "t")
_FALSE_ALTERNATIVES = ("0", "-1", "no", "n", "f")


# -- value parsers: text from a connection string --------------------------------------------------------


def _parse_bool(text: str, warn: Warn, name: str = "") -> bool:
    lowered = fold_case(text)
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered in _TRUE_ALTERNATIVES or lowered in _FALSE_ALTERNATIVES:
        value = lowered in _TRUE_ALTERNATIVES
        warn(
            f'Deprecated boolean value for "{name}": {text!r}, please update to "{name}={str(value).lower()}"'
        )
        return value
    raise InvalidOptionValue('expected "true" or "false"')


def _parse_int_text(text: str, maximum: int) -> int:
    if not _INT_TEXT.fullmatch(text):
        raise InvalidOptionValue("expected an integer")
    value = int(text)
    if not -maximum - 1 <= value <= maximum:
        raise InvalidOptionValue("integer out of range")
    return value


def _int_parser(minimum: int, maximum: int = INT32_MAX, *, bits64: bool = False) -> Parser:
    limit = INT64_MAX if bits64 else INT32_MAX

    def parse(text: str, _warn: Warn) -> int:
        value = _parse_int_text(text, limit)
        if value < minimum or value > maximum:
            if maximum >= limit:
                raise InvalidOptionValue(f"must be at least {minimum}")
            raise InvalidOptionValue(f"must be between {minimum} and {maximum}")
        return value

    return parse


def _string_parser(*, allow_empty: bool = False, fatal_empty: bool = False) -> Parser:
    def parse(text: str, _warn: Warn) -> str:
        if not text and not allow_empty:
            if fatal_empty:
                raise FatalOptionError("must not be empty")
            raise InvalidOptionValue("must not be empty")
        return text

    return parse


def _choice_parser(choices: tuple[str, ...]) -> Parser:
    by_folded = {fold_case(choice): choice for choice in choices}

    def parse(text: str, _warn: Warn) -> str:
        try:
            return by_folded[fold_case(text)]
        except KeyError:
            raise InvalidOptionValue(f"must be one of {', '.join(choices)}") from None

    return parse


def _parse_appname(text: str, _warn: Warn) -> str:
    if len(text.encode("utf-8")) > 128:
        raise InvalidOptionValue("must be at most 128 bytes in UTF-8")
    return text


def _parse_auth_mechanism(text: str, _warn: Warn) -> str:
    upper = text.upper()
    if upper not in AUTH_MECHANISMS:
        raise FatalOptionError(
            f"unknown authentication mechanism; must be one of {', '.join(AUTH_MECHANISMS[1:])}"
        )
    return upper


# Mechanism property names, as the authentication specification spells them (matched case-insensitively).
MECHANISM_PROPERTIES = (
    "SERVICE_NAME",
    "CANONICALIZE_HOST_NAME",
    "SERVICE_REALM",
    "SERVICE_HOST",
    "AWS_SESSION_TOKEN",
    "AWS_CREDENTIAL_PROVIDER",
    "ENVIRONMENT",
    "TOKEN_RESOURCE",
    "OIDC_CALLBACK",
    "OIDC_HUMAN_CALLBACK",
    "ALLOWED_HOSTS",
)
# Properties that hold code or lists: they can only be given as keyword arguments.
_KEYWORD_ONLY_PROPERTIES = (
    "AWS_CREDENTIAL_PROVIDER",
    "OIDC_CALLBACK",
    "OIDC_HUMAN_CALLBACK",
    "ALLOWED_HOSTS",
)


def normalize_property_name(key: str) -> str:
    """The specification's spelling of a known mechanism property; unknown names are returned unchanged."""
    upper = key.upper()
    return upper if upper in MECHANISM_PROPERTIES else key


def _parse_mechanism_properties(text: str, warn: Warn) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for item in text.split(","):
        if not item:
            continue
        key, colon, value = item.partition(":")
        if not colon or not key:
            # A comma inside a value (e.g. in TOKEN_RESOURCE) splits it; the fragment is ignored, not guessed at.
            warn(
                f"authMechanismProperties item {item!r} is not a KEY:value pair and is ignored "
                "(a value holding a comma must be given as a keyword argument)"
            )
            continue
        name = normalize_property_name(key)
        if name in _KEYWORD_ONLY_PROPERTIES:
            raise FatalOptionError(
                f"{name} cannot be given in a connection string, only as a keyword argument"
            )
        properties[name] = value
    return properties


def _parse_compressors(text: str, warn: Warn) -> list[str]:
    chosen: list[str] = []
    for item in text.split(","):
        name = fold_case(item.strip())
        if not name:
            continue
        if name not in COMPRESSORS:
            warn(
                f"Unsupported compressor {item!r} in compressors is ignored; supported: {', '.join(COMPRESSORS)}"
            )
            continue
        if name not in chosen:
            chosen.append(name)
    return chosen


def _parse_tag_set(text: str, _warn: Warn) -> dict[str, str]:
    tags: dict[str, str] = {}
    if not text:
        return tags  # an empty value is the empty tag set, which matches any server
    for item in text.split(","):
        key, colon, value = item.partition(":")
        if not colon or not key:
            raise InvalidOptionValue("a tag set must be comma separated key:value pairs")
        tags[key] = value
    return tags


def _parse_w(text: str, _warn: Warn) -> int | str:
    if not text:
        raise InvalidOptionValue("must not be empty")
    if _INT_TEXT.fullmatch(text):
        value = int(text)
        if value < 0:
            raise FatalOptionError("a numeric w must be zero or positive")
        if value > INT32_MAX:
            raise InvalidOptionValue("integer out of range")
        return value
    return text


def _parse_max_staleness(text: str, _warn: Warn) -> int:
    value = _parse_int_text(text, INT32_MAX)
    if value == -1 or value > 0:
        return value
    raise InvalidOptionValue("must be -1 (no maximum) or a positive number of seconds")


_SRV_SERVICE_NAME = re.compile(r"(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9]|-(?!-))*(?<!-)")


def _parse_srv_service_name(text: str, _warn: Warn) -> str:
    # RFC 6335 section 5.1, except that the 15 character limit is relaxed up to the DNS label limit.
    if len(text) > 62 or not _SRV_SERVICE_NAME.fullmatch(text):
        raise InvalidOptionValue(
            "must be letters, digits and single inner hyphens, with at least one letter (RFC 6335)"
        )
    return text


def _parse_proxy_port(text: str, _warn: Warn) -> int:
    value = _parse_int_text(text, INT32_MAX)
    if not 0 <= value <= 65535:
        raise InvalidOptionValue("must be between 0 and 65535")
    return value


# -- keyword coercion: Python values given to the client ----------------------------------------------------


def _coerce_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    raise InvalidOptionValue("expected True or False")


def _int_coercer(parse: Parser, *, allow_float: bool = False) -> Coercer:
    def coerce(value: Any) -> Any:
        if isinstance(value, bool):
            raise InvalidOptionValue("expected a number, not a boolean")
        if isinstance(value, int):
            return parse(str(value), _no_warn)
        if allow_float and isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidOptionValue("must be finite")
            whole = parse(str(math.floor(value)), _no_warn)  # range check on the whole part
            return value if value != whole else whole
        raise InvalidOptionValue("expected an integer")

    return coerce


def _no_warn(_message: str) -> None:
    return None


def _coerce_str(value: Any) -> Any:
    if isinstance(value, str):
        return value
    raise InvalidOptionValue("expected a string")


def _coerce_compressors(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return ",".join(value)
    raise InvalidOptionValue("expected a comma separated string or a list of strings")


def _coerce_tag_sets(value: Any) -> Any:
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, (list, tuple)) and all(isinstance(item, Mapping) for item in value):
        return [dict(item) for item in value]
    raise InvalidOptionValue("expected a list of tag set dictionaries")


def _coerce_w(value: Any) -> Any:
    if isinstance(value, bool):
        raise InvalidOptionValue("expected an integer or a string")
    if isinstance(value, int):
        if value < 0:
            raise FatalOptionError("a numeric w must be zero or positive")
        return value
    if isinstance(value, str) and value:
        return value
    raise InvalidOptionValue("expected a non-negative integer or a non-empty string")


def _coerce_mechanism_properties(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {normalize_property_name(str(key)): item for key, item in value.items()}
    raise InvalidOptionValue("expected a dictionary or a KEY:value,KEY:value string")


# -- the table ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionSpec:
    """How one option is read from text (``parse``) and from a keyword argument (``coerce``).

    ``coerce`` may return a string, which is then given to ``parse``. ``none_means_unlimited`` marks the
    timeouts and limits whose keyword value ``None`` means "no limit" (otherwise ``None`` means "not given").
    """

    name: str
    parse: Parser
    coerce: Coercer = _coerce_str
    repeatable: bool = False
    none_means_unlimited: bool = False
    unlimited_value: Any = 0


def _bool(name: str) -> OptionSpec:
    return OptionSpec(name, lambda text, warn: _parse_bool(text, warn, name), _coerce_bool)


def _int(name: str, minimum: int, maximum: int = INT32_MAX, **kw: Any) -> OptionSpec:
    bits64 = kw.pop("bits64", False)
    allow_float = kw.pop("allow_float", False)
    parse = _int_parser(minimum, maximum, bits64=bits64)
    return OptionSpec(name, parse, _int_coercer(parse, allow_float=allow_float), **kw)


def _ms(name: str, minimum: int, **kw: Any) -> OptionSpec:
    return _int(name, minimum, allow_float=True, **kw)


_SPECS = [
    OptionSpec("appname", _parse_appname),
    OptionSpec("authMechanism", _parse_auth_mechanism),
    OptionSpec("authMechanismProperties", _parse_mechanism_properties, _coerce_mechanism_properties),
    OptionSpec("authSource", _string_parser(fatal_empty=True)),
    OptionSpec("compressors", _parse_compressors, _coerce_compressors),
    _ms("connectTimeoutMS", 0, none_means_unlimited=True),
    _bool("directConnection"),
    _ms("heartbeatFrequencyMS", 500),
    _bool("journal"),
    _bool("loadBalanced"),
    _ms("localThresholdMS", 0),
    _ms("maxIdleTimeMS", 0, none_means_unlimited=True),
    _int("maxPoolSize", 0, none_means_unlimited=True),
    _int("maxConnecting", 1),
    OptionSpec(
        "maxStalenessSeconds",
        _parse_max_staleness,
        _int_coercer(_parse_max_staleness),
        none_means_unlimited=True,
        unlimited_value=-1,
    ),
    _int("minPoolSize", 0),
    OptionSpec("proxyHost", _string_parser()),
    OptionSpec("proxyPort", _parse_proxy_port, _int_coercer(_parse_proxy_port)),
    OptionSpec("proxyUsername", _string_parser(allow_empty=True)),
    OptionSpec("proxyPassword", _string_parser(allow_empty=True)),
    OptionSpec("readConcernLevel", _string_parser()),
    OptionSpec("readPreference", _choice_parser(READ_PREFERENCE_MODES)),
    OptionSpec("readPreferenceTags", _parse_tag_set, _coerce_tag_sets, repeatable=True),
    OptionSpec("replicaSet", _string_parser()),
    _bool("retryReads"),
    _bool("retryWrites"),
    OptionSpec("serverMonitoringMode", _choice_parser(SERVER_MONITORING_MODES)),
    _ms("serverSelectionTimeoutMS", 1),
    _bool("serverSelectionTryOnce"),
    _ms("socketTimeoutMS", 0, none_means_unlimited=True),
    _int("srvMaxHosts", 0),
    OptionSpec("srvServiceName", _parse_srv_service_name),
    _bool("tls"),
    _bool("tlsAllowInvalidCertificates"),
    _bool("tlsAllowInvalidHostnames"),
    OptionSpec("tlsCAFile", _string_parser()),
    OptionSpec("tlsCertificateKeyFile", _string_parser()),
    OptionSpec("tlsCertificateKeyFilePassword", _string_parser(allow_empty=True)),
    OptionSpec("tlsCRLFile", _string_parser()),
    _bool("tlsDisableCertificateRevocationCheck"),
    _bool("tlsDisableOCSPEndpointCheck"),
    _bool("tlsInsecure"),
    OptionSpec("w", _parse_w, _coerce_w),
    _ms("waitQueueTimeoutMS", 1, none_means_unlimited=True, unlimited_value=None),
    _int("wTimeoutMS", 0, INT64_MAX, bits64=True, allow_float=False),
    _int("zlibCompressionLevel", -1, 9),
    _int("timeoutMS", 0, INT64_MAX, bits64=True),
    _int("maxAdaptiveRetries", 0),
    _bool("enableOverloadRetargeting"),
    _bool("adaptiveRetries"),
    # mongio's own: decode to PyMongo's bson classes (mongio.pymongo_types), so code typed against PyMongo
    # can turn the mode on from its connection string.
    _bool("pymongoTypes"),
    _bool("fsync"),
    OptionSpec("uuidRepresentation", _choice_parser(UUID_REPRESENTATIONS)),
]

OPTIONS: dict[str, OptionSpec] = {fold_case(spec.name): spec for spec in _SPECS}
"""Every option, keyed by its case-folded canonical name."""

# Other spellings that mean the same option. ``ssl`` and ``j`` are plain aliases; the deprecated ones warn.
ALIASES: dict[str, str] = {"ssl": "tls", "j": "journal", "pymongo_types": "pymongotypes"}
DEPRECATED_ALIASES: dict[str, str] = {
    "wtimeout": "wTimeoutMS",
    "gssapiservicename": "authMechanismProperties",
}

# Options whose repetition in a connection string is an error rather than a warning (the SOCKS5 options).
NO_REPEAT = frozenset(
    fold_case(name) for name in ("proxyHost", "proxyPort", "proxyUsername", "proxyPassword")
)

# Options whose empty value is ignored, in a connection string or as a keyword (the SOCKS5 specification's
# credentials).
IGNORED_WHEN_EMPTY = frozenset(("proxyUsername", "proxyPassword"))

# Options that only make sense for a ``mongodb+srv://`` connection string.
SRV_ONLY = ("srvServiceName", "srvMaxHosts")

# The only options a DNS TXT record may carry.
TXT_ALLOWED = frozenset(fold_case(name) for name in ("authSource", "replicaSet", "loadBalanced"))


def canonical_name(key: str) -> str | None:
    """The canonical name for ``key`` (any case, aliases included), or ``None`` for an unknown key."""
    folded = fold_case(key)
    folded = ALIASES.get(folded, folded)
    if folded in DEPRECATED_ALIASES:
        return DEPRECATED_ALIASES[folded]
    spec = OPTIONS.get(folded)
    return spec.name if spec is not None else None


def lookup(name: str) -> OptionSpec:
    """The spec of a canonical (or any-case) option name; ``KeyError`` when unknown."""
    folded = fold_case(name)
    return OPTIONS[ALIASES.get(folded, folded)]


class URIOptions(Mapping[str, Any]):
    """The options given explicitly, by canonical name, looked up case-insensitively (aliases too).

    ``options["ssl"]``, ``options["TLS"]`` and ``options["tls"]`` are the same entry; iteration yields the
    canonical camelCase names.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {}
        for key, value in (values or {}).items():
            self._values[self._key(key)] = value

    @staticmethod
    def _key(key: str) -> str:
        folded = fold_case(key)
        folded = ALIASES.get(folded, folded)
        if folded in DEPRECATED_ALIASES:
            folded = fold_case(DEPRECATED_ALIASES[folded])
        spec = OPTIONS.get(folded)
        return spec.name if spec is not None else key

    def __getitem__(self, key: str) -> Any:
        return self._values[self._key(key)]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._key(key) in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {key: ("<hidden>" if _is_secret(key) else value) for key, value in self._values.items()}
        return f"URIOptions({shown!r})"

    def merged(self, overrides: Mapping[str, Any]) -> URIOptions:
        """A copy with ``overrides`` (canonical names) taking precedence."""
        # Each entry is set under its canonical name in order, so an override replaces the entry it names
        # whatever spelling (alias, case) it uses.
        return URIOptions({**self._values, **overrides})


def _is_secret(name: str) -> bool:
    return name in ("tlsCertificateKeyFilePassword", "proxyPassword", "authMechanismProperties")


# -- combinations ----------------------------------------------------------------------------------------

_TLS_CONFLICTS = (
    ("tlsInsecure", "tlsAllowInvalidCertificates"),
    ("tlsInsecure", "tlsAllowInvalidHostnames"),
    ("tlsInsecure", "tlsDisableOCSPEndpointCheck"),
    ("tlsInsecure", "tlsDisableCertificateRevocationCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableCertificateRevocationCheck"),
    ("tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck"),
)


def check_combinations(
    options: Mapping[str, Any],
    *,
    is_srv: bool,
    host_count: int | None,
    error: type[ConfigurationError] = ConfigurationError,
) -> None:
    """Raise ``error`` for options that cannot be used together.

    ``host_count`` is the number of seeds, or ``None`` while a ``mongodb+srv`` name is not yet resolved
    (the checks that need the real host list then wait for the resolution).
    """
    get = options.get
    for first, second in _TLS_CONFLICTS:
        if first in options and second in options:
            raise error(
                f"{first} and {second} cannot both be given ({first}={get(first)}, {second}={get(second)})"
            )
    if get("tls") is False:
        tls_given = sorted(name for name in options if name.startswith("tls") and name != "tls")
        if tls_given:
            raise error(f"tls=false, yet TLS options are given: {', '.join(tls_given)}")
    if get("directConnection") is True:
        if is_srv:
            raise error("directConnection=true cannot be used with a mongodb+srv:// connection string")
        if host_count is not None and host_count > 1:
            raise error(f"directConnection=true cannot be used with {host_count} hosts; give a single host")
    if not is_srv:
        for name in SRV_ONLY:
            if name in options:
                raise error(f"{name}={get(name)!r} can only be used with a mongodb+srv:// connection string")
    srv_max_hosts = get("srvMaxHosts") or 0
    if srv_max_hosts > 0:
        if "replicaSet" in options:
            raise error(f"srvMaxHosts={srv_max_hosts} cannot be used with replicaSet={get('replicaSet')!r}")
        if get("loadBalanced") is True:
            raise error(f"srvMaxHosts={srv_max_hosts} cannot be used with loadBalanced=true")
    if get("loadBalanced") is True:
        if host_count is not None and host_count > 1:
            raise error(
                f"loadBalanced=true cannot be used with {host_count} hosts; give the load balancer only"
            )
        if "replicaSet" in options:
            raise error(f"loadBalanced=true cannot be used with replicaSet={get('replicaSet')!r}")
        if get("directConnection") is True:
            raise error("loadBalanced=true cannot be used with directConnection=true")
    if "proxyHost" not in options:
        for name in ("proxyPort", "proxyUsername", "proxyPassword"):
            if name in options:
                shown = f"={get(name)!r}" if name == "proxyPort" else ""
                raise error(f"{name}{shown} is given without proxyHost")
    if ("proxyUsername" in options) != ("proxyPassword" in options):
        given, missing = ("proxyUsername", "proxyPassword")[:: 1 if "proxyUsername" in options else -1]
        raise error(f"{given} is given without {missing}")
    if get("w") == 0 and (get("journal") is True or get("fsync") is True):
        which = "journal" if get("journal") is True else "fsync"
        raise error(f"w=0 (unacknowledged) cannot be used with {which}=true")
    max_pool = get("maxPoolSize")
    min_pool = get("minPoolSize")
    if isinstance(max_pool, int) and max_pool > 0 and isinstance(min_pool, int) and min_pool > max_pool:
        raise error(f"minPoolSize={min_pool} cannot be greater than maxPoolSize={max_pool}")
    mode = get("readPreference", "primary")
    if mode == "primary":
        staleness = get("maxStalenessSeconds")
        if isinstance(staleness, int) and staleness > 0:
            raise error(f"maxStalenessSeconds={staleness} cannot be used with read preference mode primary")
        tags = get("readPreferenceTags")
        if tags and any(tags):
            raise error(f"readPreferenceTags={tags!r} cannot be used with read preference mode primary")
