"""Connection strings, client options, credentials, read/write concerns, read preferences and ``mongodb+srv``.

``ClientOptions.from_uri(uri, **kwargs)`` is the entry point a client uses; :func:`parse_uri` exposes the
connection string parser alone.
"""

from mongio.options.client_options import ClientOptions
from mongio.options.credentials import MongoCredential, build_credential
from mongio.options.read_concern import DEFAULT_READ_CONCERN, ReadConcern
from mongio.options.read_preference import (
    Nearest,
    Primary,
    PrimaryPreferred,
    ReadPreference,
    Secondary,
    SecondaryPreferred,
)
from mongio.options.tls_options import TLSOptions
from mongio.options.uri_options import ConfigurationWarning, URIOptions
from mongio.options.uri_parser import HostSpec, ParsedURI, parse_uri
from mongio.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern

__all__ = [
    "DEFAULT_READ_CONCERN",
    "DEFAULT_WRITE_CONCERN",
    "ClientOptions",
    "ConfigurationWarning",
    "HostSpec",
    "MongoCredential",
    "Nearest",
    "ParsedURI",
    "Primary",
    "PrimaryPreferred",
    "ReadConcern",
    "ReadPreference",
    "Secondary",
    "SecondaryPreferred",
    "TLSOptions",
    "URIOptions",
    "WriteConcern",
    "build_credential",
    "parse_uri",
]
