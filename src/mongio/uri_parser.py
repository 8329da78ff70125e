"""PyMongo's ``pymongo.uri_parser`` functions, giving PyMongo's shapes: ``parse_uri`` returns the dict
PyMongo returns (``nodelist``, ``username``, ``password``, ``database``, ``collection``, ``options``,
``fqdn``), with the ``...MS`` timeouts in seconds as PyMongo gives them. mongio's own parser is
:func:`mongio.options.parse_uri`, which returns a typed :class:`~mongio.options.ParsedURI`.

A ``mongodb+srv://`` string needs DNS lookups, which this synchronous function does not make (they would
block the event loop): use ``await mongio.asynchronous.uri_parser.parse_uri(...)`` for those.
"""

from __future__ import annotations

from typing import Any

from mongio.errors import ConfigurationError, InvalidURI
from mongio.options.secrets import Secrets, hiding_secrets
from mongio.options.uri_options import URIOptions
from mongio.options.uri_parser import DEFAULT_PORT, ParsedURI, emit_warnings, percent_decode
from mongio.options.uri_parser import parse_host as _parse_host_spec
from mongio.options.uri_parser import parse_options as _parse_options
from mongio.options.uri_parser import parse_uri as _parse_uri

__all__ = [
    "parse_host",
    "parse_ipv6_literal_host",
    "parse_uri",
    "parse_userinfo",
    "split_hosts",
    "split_options",
    "validate_options",
]

# Options PyMongo gives in seconds (the connection string has milliseconds).
_SECONDS_OPTIONS = frozenset(
    (
        "connectTimeoutMS",
        "socketTimeoutMS",
        "serverSelectionTimeoutMS",
        "waitQueueTimeoutMS",
        "heartbeatFrequencyMS",
        "maxIdleTimeMS",
        "timeoutMS",
    )
)
_FLOAT_OPTIONS = frozenset(("localThresholdMS",))
_UNSUPPORTED = "Unsupported option"


def parse_userinfo(userinfo: str) -> tuple[str, str]:
    """``"user:password"`` (percent-encoded) as ``(user, password)``, both decoded."""
    if "@" in userinfo or userinfo.count(":") > 1 or not userinfo.partition(":")[0]:
        raise InvalidURI("the user information must be a percent-encoded non-empty user name and password")
    user, _, password = userinfo.partition(":")
    return percent_decode(user, "username"), percent_decode(password, "the password", secret=True)


def parse_host(entity: str, default_port: int | None = DEFAULT_PORT) -> tuple[str, int | None]:
    """One host as ``(host, port)``: host names lower-cased, ``default_port`` when none is given. An error
    hides what may be a password (``user:password@host`` given as a host)."""
    spec = hiding_secrets(Secrets.of_uri(entity), _parse_host_spec, entity)
    host = spec.host.lower() if spec.type == "hostname" else spec.host
    return host, spec.port if spec.port is not None else default_port


def parse_ipv6_literal_host(entity: str, default_port: int | None) -> tuple[str, int | None]:
    """``[address]:port`` as ``(address, port)``."""
    if not entity.startswith("["):
        raise ValueError("an IPv6 literal must be enclosed in '[' and ']'")  # the entity may hold a password
    return parse_host(entity, default_port)


def split_hosts(hosts: str, default_port: int | None = DEFAULT_PORT) -> list[tuple[str, int | None]]:
    """A comma-separated host list as ``(host, port)`` pairs."""
    return [parse_host(entity, default_port) for entity in hosts.split(",") if entity]


def pymongo_option_values(options: dict[str, Any]) -> URIOptions:
    converted: dict[str, Any] = {}
    for name, value in options.items():
        if name in _SECONDS_OPTIONS and isinstance(value, int | float) and not isinstance(value, bool):
            value = value / 1000.0
        elif name in _FLOAT_OPTIONS and isinstance(value, int | float):
            value = float(value)
        converted[name] = value
    return URIOptions(converted)


def _raw_options(text: str) -> URIOptions:
    pairs = [segment.partition("=") for segment in text.split("&") if segment]
    return URIOptions({percent_decode(key, "option name"): percent_decode(value, "value") for key, _, value in pairs})


def split_options(opts: str, validate: bool = True, warn: bool = False, normalize: bool = True) -> URIOptions:
    """The ``key=value&...`` option text as a case-insensitive mapping: validated (``warn=False``: an unknown
    option or a bad value raises) or, with ``validate=False``, as the strings written."""
    return hiding_secrets(Secrets.of_options(opts), _split_options, opts, validate, warn)


def _split_options(opts: str, validate: bool, warn: bool) -> URIOptions:
    if not validate:
        return _raw_options(opts)
    found: list[str] = []
    options = _parse_options(opts, found.append, strict=not warn, error=ConfigurationError)
    _report(found, warn)
    return pymongo_option_values(options)


def validate_options(opts: dict[str, Any], warn: bool = False) -> URIOptions:
    """Validate option values given as strings (or already typed), as :func:`split_options` does."""
    text = "&".join(f"{key}={_as_text(value)}" for key, value in opts.items())
    return split_options(text, validate=True, warn=warn)


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _report(found: list[str], warn: bool) -> None:
    if not warn:
        unknown = [message for message in found if message.startswith(_UNSUPPORTED)]
        if unknown:
            raise ConfigurationError(unknown[0])
    emit_warnings(found, stacklevel=4)


def as_pymongo_dict(parsed: ParsedURI, options: URIOptions, default_port: int | None) -> dict[str, Any]:
    """A parsed connection string in PyMongo's ``parse_uri`` shape."""
    nodes = [] if parsed.is_srv else [(h.address[0], h.port if h.port is not None else default_port) for h in parsed.hosts]
    return {
        "nodelist": nodes,
        "username": parsed.username,
        "password": parsed.password if parsed.password is not None or parsed.username is None else "",
        "database": parsed.default_database,
        "collection": parsed.collection,
        "options": options,
        "fqdn": parsed.srv_host,
    }


def parse_uri(
    uri: str,
    default_port: int | None = DEFAULT_PORT,
    validate: bool = True,
    warn: bool = False,
    normalize: bool = True,
    connect_timeout: float | None = None,
    srv_service_name: str | None = None,
    srv_max_hosts: int | None = None,
) -> dict[str, Any]:
    """Parse a ``mongodb://`` connection string into PyMongo's dict. ``warn=False`` (PyMongo's default)
    raises :class:`~mongio.errors.ConfigurationError` for an unknown option or a bad value; ``warn=True``
    warns and leaves it out; ``validate=False`` keeps every option as the string written. No error shows
    the password."""
    return hiding_secrets(Secrets.of_uri(uri), _parse_uri_dict, uri, default_port, validate, warn)


def _parse_uri_dict(uri: str, default_port: int | None, validate: bool, warn: bool) -> dict[str, Any]:
    if isinstance(uri, str) and uri.startswith("mongodb+srv://"):
        raise ConfigurationError(
            "mongio.uri_parser.parse_uri does not look up mongodb+srv:// names (the DNS lookups would block): "
            "use 'await mongio.asynchronous.uri_parser.parse_uri(uri)'"
        )
    found: list[str] = []
    parsed = _parse_uri(uri, strict=validate and not warn, warn=False)
    found.extend(parsed.warnings)
    if validate:
        _report(found, warn)
        options = pymongo_option_values(dict(parsed.options))
    else:
        options = _raw_options(uri.partition("?")[2])
    return as_pymongo_dict(parsed, options, default_port)
