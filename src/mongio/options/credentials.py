"""The client's credential and the authentication specification's rules for building it.

A credential exists only when the application asked for authentication: a username (an ``@`` in the
connection string, even with an empty password, or the ``username`` keyword) or an ``authMechanism``.
An ``authSource`` or a database in the path alone never creates one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mongio.errors import ConfigurationError

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "MongoCredential",
    "build_credential",
]

DEFAULT_ALLOWED_HOSTS = (
    "*.mongodb.net",
    "*.mongodb-qa.net",
    "*.mongodb-dev.net",
    "*.mongodbgov.net",
    "localhost",
    "127.0.0.1",
    "::1",
    "*.mongo.com",
)
"""Where the OIDC human flow may send tokens unless ``ALLOWED_HOSTS`` says otherwise."""

_EXTERNAL = "$external"
_OIDC_ENVIRONMENTS = ("test", "azure", "gcp", "k8s")
_CANONICALIZE_VALUES = ("none", "forward", "forwardAndReverse")
_SECRET_PROPERTIES = ("AWS_SESSION_TOKEN",)

# Which mechanism properties each mechanism accepts.
_PROPERTIES: dict[str, frozenset[str]] = {
    "DEFAULT": frozenset(),
    "SCRAM-SHA-1": frozenset(),
    "SCRAM-SHA-256": frozenset(),
    "PLAIN": frozenset(),
    "MONGODB-X509": frozenset(),
    "GSSAPI": frozenset({"SERVICE_NAME", "CANONICALIZE_HOST_NAME", "SERVICE_REALM", "SERVICE_HOST"}),
    "MONGODB-AWS": frozenset({"AWS_CREDENTIAL_PROVIDER"}),
    "MONGODB-OIDC": frozenset(
        {"ENVIRONMENT", "TOKEN_RESOURCE", "OIDC_CALLBACK", "OIDC_HUMAN_CALLBACK", "ALLOWED_HOSTS"}
    ),
}


@dataclass(frozen=True)
class MongoCredential:
    """What a connection authenticates with.

    ``mechanism`` is ``"DEFAULT"`` when none was given: the handshake then picks SCRAM-SHA-256 or SCRAM-SHA-1
    from the server's ``saslSupportedMechs``. ``source`` is the database the authentication commands go to.
    ``mechanism_properties`` uses the specification's names (``SERVICE_NAME``, ``CANONICALIZE_HOST_NAME``,
    ``AWS_SESSION_TOKEN``, ``ENVIRONMENT``, ``TOKEN_RESOURCE``, ``ALLOWED_HOSTS``, ...).
    """

    mechanism: str
    source: str
    username: str | None
    password: str | None = field(repr=False)
    mechanism_properties: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        shown = {
            key: ("<hidden>" if key in _SECRET_PROPERTIES else value)
            for key, value in self.mechanism_properties.items()
        }
        password = None if self.password is None else "<hidden>"
        return (
            f"MongoCredential(mechanism={self.mechanism!r}, source={self.source!r}, username={self.username!r}, "
            f"password={password}, mechanism_properties={shown!r})"
        )


def _fail(mechanism: str, message: str) -> ConfigurationError:
    return ConfigurationError(f"{mechanism}: {message}")


def _normalize_canonicalize(mechanism: str, value: Any) -> str:
    if isinstance(value, bool):
        return "forwardAndReverse" if value else "none"
    if isinstance(value, str):
        lowered = value.lower()
        if lowered == "true":
            return "forwardAndReverse"
        if lowered == "false":
            return "none"
        for choice in _CANONICALIZE_VALUES:
            if lowered == choice.lower():
                return choice
    raise _fail(
        mechanism,
        f"CANONICALIZE_HOST_NAME {value!r} is invalid; use none, forward, forwardAndReverse, true or false",
    )


def build_credential(
    *,
    mechanism: str | None,
    username: str | None,
    password: str | None,
    auth_source: str | None,
    database: str | None,
    mechanism_properties: Mapping[str, Any] | None,
    userinfo_given: bool = False,
) -> MongoCredential | None:
    """Build the credential the options ask for, or ``None`` when they ask for no authentication.

    ``database`` is the connection string's database (the default source of some mechanisms). Raises
    :class:`~mongio.errors.ConfigurationError` naming the mechanism and the offending value when a required
    part is missing, a forbidden part is given, or a property does not apply.
    """
    if mechanism is None and username is None and not userinfo_given:
        if password is not None:
            raise ConfigurationError("a password is given without a username")
        if mechanism_properties:
            raise ConfigurationError(
                f"authMechanismProperties {sorted(mechanism_properties)} are given without authMechanism"
            )
        return None
    mech = mechanism or "DEFAULT"
    if mech not in _PROPERTIES:
        raise ConfigurationError(
            f"authMechanism {mech!r} is not supported; use one of {', '.join(_PROPERTIES)}"
        )
    properties: dict[str, Any] = dict(mechanism_properties or {})
    allowed = _PROPERTIES[mech]
    for key in properties:
        if key not in allowed:
            if allowed:
                raise _fail(
                    mech,
                    f"mechanism property {key!r} is not supported; supported: {', '.join(sorted(allowed))}",
                )
            raise _fail(mech, f"takes no mechanism properties, got {key!r}")

    source = _source(mech, username, password, auth_source, database, properties)
    return MongoCredential(
        mechanism=mech,
        source=source,
        username=username,
        password=password,
        mechanism_properties=MappingProxyType(properties),
    )


def _source(
    mech: str,
    username: str | None,
    password: str | None,
    auth_source: str | None,
    database: str | None,
    properties: dict[str, Any],
) -> str:
    """The authentication database mechanism ``mech`` uses, once its required and forbidden parts are checked
    (``properties`` gets the mechanism's defaults)."""

    def source_must_be_external() -> str:
        if auth_source is not None and auth_source != _EXTERNAL:
            raise _fail(mech, f"authSource must be $external, not {auth_source!r}")
        return _EXTERNAL

    if mech in ("DEFAULT", "SCRAM-SHA-1", "SCRAM-SHA-256", "PLAIN"):
        if not username:
            raise _fail(mech, f"a non-empty username is required, got {username!r}")
        if password is None:
            raise _fail(mech, f"a password is required for user {username!r}")
        fallback = _EXTERNAL if mech == "PLAIN" else "admin"
        return auth_source or database or fallback
    if mech == "MONGODB-X509":
        if password is not None:
            raise _fail(mech, "a password cannot be used (the client certificate authenticates)")
        return source_must_be_external()
    if mech == "GSSAPI":
        if not username:
            raise _fail(mech, f"a non-empty username (the Kerberos principal) is required, got {username!r}")
        source = source_must_be_external()
        properties.setdefault("SERVICE_NAME", "mongodb")
        properties["CANONICALIZE_HOST_NAME"] = _normalize_canonicalize(
            mech, properties.get("CANONICALIZE_HOST_NAME", "none")
        )
        return source
    source = source_must_be_external()
    if mech == "MONGODB-AWS":
        # The specification (2025-09-30) takes AWS credentials only from the environment, the AWS SDK or an
        # AWS_CREDENTIAL_PROVIDER: keys in the connection string or the client's options are refused.
        if username is not None or password is not None:
            given = (
                "username and password"
                if username is not None and password is not None
                else ("username" if username is not None else "password")
            )
            raise _fail(
                mech,
                f"a {given} cannot be given: AWS credentials come from the environment, the AWS SDK "
                "or an AWS_CREDENTIAL_PROVIDER mechanism property",
            )
        provider = properties.get("AWS_CREDENTIAL_PROVIDER")
        if provider is not None and not callable(provider):
            raise _fail(
                mech,
                f"AWS_CREDENTIAL_PROVIDER must be a function or coroutine function returning credentials, "
                f"got {type(provider).__name__}",
            )
    else:  # MONGODB-OIDC
        _check_oidc(username, password, properties)
    return source


def _check_oidc(username: str | None, password: str | None, properties: dict[str, Any]) -> None:
    mech = "MONGODB-OIDC"
    if password is not None:
        raise _fail(mech, "a password cannot be used")
    environment = properties.get("ENVIRONMENT")
    callbacks = [
        name for name in ("OIDC_CALLBACK", "OIDC_HUMAN_CALLBACK") if properties.get(name) is not None
    ]
    if len(callbacks) > 1:
        raise _fail(mech, "OIDC_CALLBACK and OIDC_HUMAN_CALLBACK cannot both be given")
    if environment is not None:
        if environment not in _OIDC_ENVIRONMENTS:
            raise _fail(
                mech,
                f"ENVIRONMENT {environment!r} is not supported; use one of {', '.join(_OIDC_ENVIRONMENTS)}",
            )
        if callbacks:
            raise _fail(mech, f"ENVIRONMENT={environment} cannot be used with {callbacks[0]}")
        needs_resource = environment in ("azure", "gcp")
        if needs_resource and not properties.get("TOKEN_RESOURCE"):
            raise _fail(mech, f"ENVIRONMENT={environment} requires TOKEN_RESOURCE")
        if not needs_resource and "TOKEN_RESOURCE" in properties:
            raise _fail(mech, f"TOKEN_RESOURCE cannot be used with ENVIRONMENT={environment}")
        if username is not None and environment != "azure":
            # Only Azure's managed identities take a client id as the username.
            raise _fail(mech, f"a username ({username!r}) cannot be used with ENVIRONMENT={environment}")
    else:
        if not callbacks:
            raise _fail(mech, "either ENVIRONMENT or an OIDC_CALLBACK / OIDC_HUMAN_CALLBACK is required")
        if "TOKEN_RESOURCE" in properties:
            raise _fail(mech, "TOKEN_RESOURCE requires ENVIRONMENT azure or gcp")
    if "ALLOWED_HOSTS" in properties:
        hosts = properties["ALLOWED_HOSTS"]
        if not isinstance(hosts, (list, tuple)) or not all(isinstance(host, str) for host in hosts):
            raise _fail(mech, f"ALLOWED_HOSTS must be a list of host names, not {hosts!r}")
        properties["ALLOWED_HOSTS"] = tuple(hosts)
    elif "OIDC_HUMAN_CALLBACK" in callbacks:
        properties["ALLOWED_HOSTS"] = DEFAULT_ALLOWED_HOSTS
