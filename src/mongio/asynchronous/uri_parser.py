"""``pymongo.asynchronous.uri_parser``: ``await parse_uri(uri)`` in PyMongo's dict shape, looking up a
``mongodb+srv://`` name's SRV and TXT records (the TXT options rank below the connection string's)."""

from __future__ import annotations

from typing import Any

from mongio import uri_parser as _sync
from mongio.errors import ConfigurationError
from mongio.options.srv import resolve_seedlist
from mongio.options.uri_options import URIOptions
from mongio.options.uri_parser import DEFAULT_PORT

__all__ = ["parse_uri"]


async def parse_uri(
    uri: str,
    default_port: int | None = DEFAULT_PORT,
    validate: bool = True,
    warn: bool = False,
    normalize: bool = True,
    connect_timeout: float | None = None,
    srv_service_name: str | None = None,
    srv_max_hosts: int | None = None,
) -> dict[str, Any]:
    """As :func:`mongio.uri_parser.parse_uri`, plus ``mongodb+srv://`` names (``nodelist`` holds the hosts
    DNS gave; ``srv_service_name`` and ``srv_max_hosts`` as in the connection string)."""
    if not uri.startswith("mongodb+srv://"):
        return _sync.parse_uri(uri, default_port, validate, warn, normalize)
    plain = "mongodb://" + uri[len("mongodb+srv://") :]
    parsed = _sync.parse_uri(plain, None, validate, warn, normalize)
    fqdn = parsed["nodelist"][0][0] if len(parsed["nodelist"]) == 1 else None
    if fqdn is None or parsed["nodelist"][0][1] is not None:
        raise ConfigurationError("a mongodb+srv:// connection string takes one host name and no port")
    options = parsed["options"]
    service = srv_service_name or options.get("srvServiceName") or "mongodb"
    max_hosts = srv_max_hosts if srv_max_hosts is not None else int(options.get("srvMaxHosts") or 0)
    found = await resolve_seedlist(fqdn, service_name=service, srv_max_hosts=max_hosts, lifetime=connect_timeout)
    merged = dict(_sync.pymongo_option_values(found.txt_options))
    merged.update(options)
    merged.setdefault("tls", True)
    parsed["options"] = URIOptions(merged)
    parsed["nodelist"] = list(found.seeds)
    parsed["fqdn"] = fqdn
    return parsed
