"""Checking a credential against its mechanism's rules before any connection is made.

Every mechanism of the authentication spec is checked here, including those whose conversations mongio does
not run yet (MONGODB-AWS, MONGODB-OIDC, GSSAPI): a bad credential is reported when the client is made, not
when the first connection is. Mechanism property names are case-insensitive; ``validate_credential`` returns
the properties under their canonical upper-case names, with the spec's defaults filled in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mongio.errors import ConfigurationError

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "MECHANISMS",
    "OIDC_ENVIRONMENTS",
    "validate_credential",
    "validate_mechanism_properties",
]

MECHANISMS = (
    "DEFAULT",
    "SCRAM-SHA-1",
    "SCRAM-SHA-256",
    "PLAIN",
    "MONGODB-X509",
    "GSSAPI",
    "MONGODB-AWS",
    "MONGODB-OIDC",
)
EXTERNAL = "$external"

OIDC_ENVIRONMENTS = ("test", "azure", "gcp", "k8s")
_OIDC_NEEDS_TOKEN_RESOURCE = ("azure", "gcp")
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
_CANONICALIZE_VALUES = ("none", "forward", "forwardAndReverse")

_PROPERTIES: dict[str, tuple[str, ...]] = {
    "GSSAPI": ("SERVICE_NAME", "CANONICALIZE_HOST_NAME", "SERVICE_REALM", "SERVICE_HOST"),
    "MONGODB-AWS": ("AWS_SESSION_TOKEN", "AWS_CREDENTIAL_PROVIDER"),
    "MONGODB-OIDC": (
        "ENVIRONMENT",
        "TOKEN_RESOURCE",
        "OIDC_CALLBACK",
        "OIDC_HUMAN_CALLBACK",
        "ALLOWED_HOSTS",
        "AWS_CREDENTIAL_PROVIDER",
    ),
}


def _canonical_properties(mechanism: str, properties: Mapping[str, Any] | None) -> dict[str, Any]:
    allowed = _PROPERTIES.get(mechanism, ())
    by_upper = {name.upper(): name for name in allowed}
    result: dict[str, Any] = {}
    for name, value in (properties or {}).items():
        canonical = by_upper.get(name.upper())
        if canonical is None:
            if not allowed:
                raise ConfigurationError(f"{mechanism} takes no mechanism properties, got {name!r}")
            raise ConfigurationError(
                f"{name!r} is not a mechanism property of {mechanism}; it takes {', '.join(allowed)}"
            )
        result[canonical] = value
    return result


def _need_username(mechanism: str, username: str | None) -> None:
    if not username:
        raise ConfigurationError(f"{mechanism} needs a username")


def _external_only(mechanism: str, source: str | None) -> None:
    if source is not None and source != EXTERNAL:
        raise ConfigurationError(f"{mechanism} authenticates against {EXTERNAL!r} only, not {source!r}")


def _gssapi(username: str | None, password: str | None, properties: dict[str, Any]) -> None:
    _need_username("GSSAPI", username)
    properties.setdefault("SERVICE_NAME", "mongodb")
    canonicalize = properties.get("CANONICALIZE_HOST_NAME")
    if canonicalize is None:
        return
    if isinstance(canonicalize, bool):
        return
    if isinstance(canonicalize, str) and canonicalize.lower() in ("true", "false"):
        properties["CANONICALIZE_HOST_NAME"] = canonicalize.lower() == "true"
        return
    if canonicalize not in _CANONICALIZE_VALUES:
        raise ConfigurationError(
            f"CANONICALIZE_HOST_NAME must be one of {', '.join(_CANONICALIZE_VALUES)}, true or false, "
            f"not {canonicalize!r}"
        )


def _aws(username: str | None, password: str | None, properties: dict[str, Any]) -> None:
    if bool(username) != bool(password):
        raise ConfigurationError(
            "MONGODB-AWS needs both an access key id (username) and a secret access key (password), or neither"
        )
    if "AWS_SESSION_TOKEN" in properties and not username:
        raise ConfigurationError("AWS_SESSION_TOKEN needs an access key id and a secret access key as well")


def _oidc(username: str | None, password: str | None, properties: dict[str, Any]) -> None:
    if password is not None:
        raise ConfigurationError("MONGODB-OIDC takes no password")
    environment = properties.get("ENVIRONMENT")
    callback = properties.get("OIDC_CALLBACK")
    human_callback = properties.get("OIDC_HUMAN_CALLBACK")
    if callback is not None and human_callback is not None:
        raise ConfigurationError("MONGODB-OIDC takes OIDC_CALLBACK or OIDC_HUMAN_CALLBACK, not both")
    if environment is not None:
        if environment not in OIDC_ENVIRONMENTS:
            raise ConfigurationError(
                f"MONGODB-OIDC ENVIRONMENT must be one of {', '.join(OIDC_ENVIRONMENTS)}, not {environment!r}"
            )
        if callback is not None or human_callback is not None:
            raise ConfigurationError("MONGODB-OIDC takes an ENVIRONMENT or a callback, not both")
        if environment in ("test", "k8s") and username:
            raise ConfigurationError(f"MONGODB-OIDC with ENVIRONMENT {environment!r} takes no username")
    elif callback is None and human_callback is None:
        raise ConfigurationError("MONGODB-OIDC needs an ENVIRONMENT, an OIDC_CALLBACK or an OIDC_HUMAN_CALLBACK")
    has_resource = "TOKEN_RESOURCE" in properties
    needs_resource = environment in _OIDC_NEEDS_TOKEN_RESOURCE
    if has_resource and not needs_resource:
        raise ConfigurationError("TOKEN_RESOURCE applies only to the azure and gcp environments")
    if needs_resource and not has_resource:
        raise ConfigurationError(f"MONGODB-OIDC with ENVIRONMENT {environment!r} needs a TOKEN_RESOURCE")
    for name in ("OIDC_CALLBACK", "OIDC_HUMAN_CALLBACK"):
        value = properties.get(name)
        if value is not None and not callable(value) and not callable(getattr(value, "fetch", None)):
            raise ConfigurationError(f"{name} must be a callable or an object with a fetch() method")
    allowed_hosts = properties.get("ALLOWED_HOSTS")
    if allowed_hosts is None:
        if human_callback is not None:
            properties["ALLOWED_HOSTS"] = list(DEFAULT_ALLOWED_HOSTS)
    elif isinstance(allowed_hosts, str) or not isinstance(allowed_hosts, Sequence) or not all(
        isinstance(host, str) for host in allowed_hosts
    ):
        raise ConfigurationError("ALLOWED_HOSTS must be a list of host names")


def _password_mechanism(mechanism: str) -> Callable[[str | None, str | None, dict[str, Any]], None]:
    def check(username: str | None, password: str | None, properties: dict[str, Any]) -> None:
        _need_username(mechanism, username)
        if password is None:
            raise ConfigurationError(f"{mechanism} needs a password")

    return check


def _x509(username: str | None, password: str | None, properties: dict[str, Any]) -> None:
    if password is not None:
        raise ConfigurationError("MONGODB-X509 takes no password: the client certificate is the proof")


_CHECKS: dict[str, Callable[[str | None, str | None, dict[str, Any]], None]] = {
    "DEFAULT": _password_mechanism("authentication"),
    "SCRAM-SHA-1": _password_mechanism("SCRAM-SHA-1"),
    "SCRAM-SHA-256": _password_mechanism("SCRAM-SHA-256"),
    "PLAIN": _password_mechanism("PLAIN"),
    "MONGODB-X509": _x509,
    "GSSAPI": _gssapi,
    "MONGODB-AWS": _aws,
    "MONGODB-OIDC": _oidc,
}
_EXTERNAL_ONLY = ("MONGODB-X509", "GSSAPI", "MONGODB-AWS", "MONGODB-OIDC")


def validate_mechanism_properties(mechanism: str, properties: Mapping[str, Any] | None) -> dict[str, Any]:
    """The properties under their canonical names; an error for a property the mechanism does not take."""
    return _canonical_properties(mechanism, properties)


def validate_credential(
    mechanism: str,
    *,
    username: str | None,
    password: str | None,
    source: str | None,
    properties: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Check a credential for ``mechanism`` (``"DEFAULT"`` when none was named) and return its mechanism
    properties, canonically named and with defaults. Raises ``ConfigurationError`` naming what is wrong
    (never the password itself).

    ``source`` is the explicit ``authSource`` (None when not given): the mechanisms that live in
    ``$external`` refuse any other.
    """
    if mechanism not in _CHECKS:
        raise ConfigurationError(
            f"unknown authentication mechanism {mechanism!r}; mongio knows {', '.join(MECHANISMS[1:])}"
        )
    if source == "":
        raise ConfigurationError("authSource must not be empty")
    canonical = _canonical_properties(mechanism, properties)
    if mechanism in _EXTERNAL_ONLY:
        _external_only(mechanism, source)
    _CHECKS[mechanism](username, password, canonical)
    return canonical
