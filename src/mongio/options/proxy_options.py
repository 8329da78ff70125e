"""The client's SOCKS5 proxy settings, typed, from the ``proxy*`` options (SOCKS5 Support specification).

The options given together are checked before this (``check_combinations``): a ``proxyPort``,
``proxyUsername`` or ``proxyPassword`` without ``proxyHost`` is an error, and so is a username without a
password or the reverse. Empty ``proxyUsername``/``proxyPassword`` values are ignored, as the specification
asks, before they get here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mongio.errors import ConfigurationError
from mongio.options.uri_parser import Address

__all__ = ["DEFAULT_PROXY_PORT", "ProxyOptions", "proxy_options_from"]

DEFAULT_PROXY_PORT = 1080
# RFC 1929 sends the username and the password each behind a one-byte length.
_MAX_CREDENTIAL_BYTES = 255


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    """Where the SOCKS5 proxy listens, and the RFC 1929 username and password to give it (both or neither)."""

    host: str
    """``proxyHost``: a domain name, IPv4 or IPv6 address (an IPv6 address without brackets)."""
    port: int = DEFAULT_PROXY_PORT
    """``proxyPort``."""
    username: str | None = None
    """``proxyUsername``."""
    password: str | None = field(default=None, repr=False)
    """``proxyPassword``."""


def proxy_options_from(options: Mapping[str, Any], seeds: Sequence[Address]) -> ProxyOptions | None:
    """The proxy ``options`` ask for (``None`` without ``proxyHost``).

    Raises ``ConfigurationError`` for a username or password RFC 1929 cannot carry (the SOCKS5 library sends
    them as ASCII, each at most 255 bytes), and for a Unix domain socket host, which no SOCKS5 proxy can reach:
    connecting to it directly would ignore ``proxyHost``.
    """
    host = options.get("proxyHost")
    if host is None:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 literal written as in a connection string's host list
    sockets = [address[0] for address in seeds if address[1] is None]
    if sockets:
        raise ConfigurationError(
            f"proxyHost cannot be used with the Unix domain socket {sockets[0]!r}: a SOCKS5 proxy connects to "
            "TCP hosts only"
        )
    username = options.get("proxyUsername") or None
    password = options.get("proxyPassword") or None
    for name, value in (("proxyUsername", username), ("proxyPassword", password)):
        if value is not None and not (value.isascii() and len(value) <= _MAX_CREDENTIAL_BYTES):
            # Not the value: it may be the password.
            raise ConfigurationError(
                f"{name} must be at most {_MAX_CREDENTIAL_BYTES} ASCII characters (RFC 1929 username and password "
                "authentication, as mongio's SOCKS5 library sends them)"
            )
    return ProxyOptions(host, options.get("proxyPort", DEFAULT_PROXY_PORT), username, password)
